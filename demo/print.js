// @ts-check
'use strict'
// Terminal output helpers for the demo: colours when stdout is a terminal (and NO_COLOR is not
// set), synchronous writes (a process that kills itself must not leave output buffered), and
// short previews of message content.

const fs = require('node:fs')

const tty = process.stdout.isTTY === true
const colour = tty && !process.env.NO_COLOR

/** @param {string} code */
const paint = (code) => (/** @type {unknown} */ s) => (colour ? `\u001b[${code}m${s}\u001b[0m` : String(s))
const c = {
  bold: paint('1'), dim: paint('2'), red: paint('31'), green: paint('32'), yellow: paint('33'),
  blue: paint('34'), magenta: paint('35'), cyan: paint('36'),
}

let closed = false
/** @param {string} s */
function write(s) {
  if (closed) return
  try {
    fs.writeSync(1, s)
  } catch (err) {
    // The reader went away (e.g. `| head`): stop writing, keep running (and cleaning up).
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'EPIPE') closed = true
    else throw err
  }
}
function line(s = '') {
  write(`${s}\n`)
}

/** Sleeps synchronously (only when watched on a terminal, so piped runs stay fast). @param {number} ms */
function pause(ms) {
  if (tty) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** Writes `s` a few characters at a time, like tokens arriving from a stream. @param {string} s */
function stream(s, stepMs = 12) {
  for (let i = 0; i < s.length; i += 3) {
    write(s.slice(i, i + 3))
    pause(stepMs)
  }
}

/** One line, at most `max` characters. @param {unknown} s */
function preview(s, max = 48) {
  const flat = String(s).replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/** @param {number} n */
const num = (n) => n.toLocaleString('en-US')
/** @param {'user' | 'assistant' | 'system'} r */
const role = (r) => (r === 'assistant' ? c.magenta('assistant') : r === 'system' ? c.dim('system   ') : c.cyan('user     '))
/** @param {string} s */
const lines = (s) => (s ? s.split('\n').length : 0)

module.exports = { c, write, line, pause, stream, preview, num, role, lines }
