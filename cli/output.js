'use strict'
// What the commands print: colour only on a terminal (NO_COLOR and FORCE_COLOR respected), JSON
// for scripts, tables, and one-line errors with their code.

const pc = require('picocolors')
const Table = require('cli-table3')

/** Colours for a stream: on when it is a TTY, unless NO_COLOR; FORCE_COLOR forces them. */
function colours(stream) {
  const env = process.env
  const on = 'FORCE_COLOR' in env ? env.FORCE_COLOR !== '0' : Boolean(stream.isTTY) && !('NO_COLOR' in env)
  return pc.createColors(on)
}

/** @param {unknown} value */
function printJson(value) {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
}

/** A table sized to the terminal; plain when not on one. */
function table(head, rows, c) {
  const t = new Table({
    head: head.map((h) => c.bold(h)),
    style: { head: [], border: [], compact: true },
    chars: { top: '', 'top-mid': '', 'top-left': '', 'top-right': '', bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '', left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '  ' },
  })
  for (const r of rows) t.push(r)
  return t.toString().split('\n').map((l) => l.trimEnd()).join('\n')
}

/** Text cut to `n` characters on one line. */
function oneLine(text, n) {
  const s = String(text ?? '').replace(/\s+/g, ' ').trim()
  return s.length > n ? `${s.slice(0, n - 1)}…` : s
}

/** A time as local `YYYY-MM-DD HH:MM`. */
function when(iso) {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return String(iso ?? '')
  const p = (x) => String(x).padStart(2, '0')
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`
}

class UsageError extends Error {}

/** Exit codes: docs/cli.md. */
const EXIT = { ok: 0, error: 1, usage: 2, problems: 3 }

/** The one line an error prints: `threadline: CODE: message`. */
function errorLine(e) {
  if (e instanceof UsageError) return `threadline: USAGE: ${e.message}`
  if (e && e.code && typeof e.message === 'string') return `threadline: ${e.code}: ${e.message.split('\n')[0]}`
  return `threadline: ${e && e.message ? e.message.split('\n')[0] : String(e)}`
}

module.exports = { colours, printJson, table, oneLine, when, UsageError, EXIT, errorLine }
