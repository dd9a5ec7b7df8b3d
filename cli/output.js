'use strict'
// What the commands print: colour only on a terminal (NO_COLOR and FORCE_COLOR respected), JSON
// for scripts, tables, and one-line errors with their code.

const pc = require('picocolors')
const stringWidth = require('string-width')

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

/**
 * Rows in aligned columns (two spaces apart), the header in bold. Widths are display widths
 * (string-width: colour codes count nothing, CJK characters two), so colour and wide text line up;
 * linear in the rows, so ten thousand sessions print at once.
 */
function table(head, rows, c) {
  const all = [head.map((h) => c.bold(h)), ...rows]
  const widths = head.map((_, i) => Math.max(...all.map((r) => stringWidth(String(r[i] ?? '')))))
  return all
    .map((r) => r.map((cell, i) => (i === r.length - 1 ? String(cell) : String(cell) + ' '.repeat(widths[i] - stringWidth(String(cell))))).join('  ').trimEnd())
    .join('\n')
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
