'use strict'
// What the commands print: colour only on a terminal (NO_COLOR and FORCE_COLOR respected), JSON
// for scripts, tables, and one-line errors with their code. Text from the store (and from the
// files an import read) is other programs' data: a control character in it is shown as text, so
// it cannot move the cursor, clear the screen, set the window title or write the clipboard.

const pc = require('picocolors')
const stringWidth = require('string-width')

/** Colours for a stream: on when it is a TTY, unless NO_COLOR; FORCE_COLOR forces them. */
function colours(stream) {
  const env = process.env
  const on = 'FORCE_COLOR' in env ? env.FORCE_COLOR !== '0' : Boolean(stream.isTTY) && !('NO_COLOR' in env)
  return pc.createColors(on)
}

// What a terminal acts on rather than shows: C0 controls, DEL, C1 controls (U+009B is CSI in
// some terminals) and the bidi overrides and isolates that reorder what is shown.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g
const NAMED = { '\n': '\\n', '\r': '\\r', '\t': '\\t' }

/** A control character as text: `\n`, `\x1b`, `\u202e`. */
function visible(ch) {
  const n = ch.charCodeAt(0)
  return NAMED[ch] ?? (n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`)
}

/** A one-line field from data (an id, a name, a path, an error): every control character as text. */
function field(value) {
  return String(value ?? '').replace(CONTROL, visible)
}

// In text, a line break (LF or CRLF) and a tab are kept; a lone CR (which would let a line be
// overwritten) is not.
const TEXT_CONTROL = /\r\n|[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

/** Text from data on several lines (a message, a tool result): control characters as text but line breaks and tabs. */
function text(value) {
  return String(value ?? '').replace(TEXT_CONTROL, (c) => (c === '\r\n' ? '\n' : visible(c)))
}

// What a command writes, as a last guard: colour (SGR, `ESC [ ... m`) passes when the stream has
// colour on, every other control character but line breaks and tabs is shown as text. The data
// in it went through text(), field() or oneLine() before it was coloured, so none of it is SGR.
const OUTPUT_CONTROL = /\x1b\[[0-9;]*m|\r\n|[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

/** The error that ended writing to a stream (EPIPE, ENOSPC, EBADF), once it happened. */
const failures = new Map()

/**
 * Writes `value` to `stream` (standard output by default) through the guard; nothing once the
 * stream failed. `raw` writes a document (an export to a file or a pipe) as it is.
 */
function print(value, { stream = process.stdout, raw = false } = {}) {
  if (failures.has(stream) || stream.destroyed) return
  if (raw) {
    stream.write(value)
    return
  }
  const sgr = colours(stream).isColorSupported
  const guard = (c) => {
    if (c === '\r\n') return '\n'
    if (c.length === 1) return visible(c)
    return sgr ? c : visible(c[0]) + c.slice(1)
  }
  stream.write(value.replace(OUTPUT_CONTROL, guard))
}

// JSON.stringify escapes C0 controls; DEL, C1 controls and bidi overrides are written raw, and
// they can only stand inside strings, so they become \u escapes: the same JSON, read back equal.
const JSON_RAW = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

/** `value` as JSON text that a terminal shows as it is. */
function jsonText(value, indent) {
  return JSON.stringify(value, null, indent).replace(JSON_RAW, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/** @param {unknown} value */
function printJson(value) {
  print(`${jsonText(value, 2)}\n`)
}

/**
 * Watches standard output and error: a write error ends the command with one line on standard
 * error and exit 1, never a stack trace, and later writes are dropped. A reader that stops early
 * (`threadline show ID | head`, EPIPE) has what it wanted: that ends it quietly, as Unix tools
 * do. A failing standard error is ignored (the exit code still says it). Returns the exit code
 * to use instead of the command's, or null.
 */
function watchStreams() {
  process.stdout.on('error', (e) => {
    if (failures.has(process.stdout)) return
    failures.set(process.stdout, e)
    if (e.code === 'EPIPE') return
    const why = String(e.message).replace(/^[A-Z]+: /, '').replace(/, write$/, '')
    print(`threadline: ${e.code ?? 'EIO'}: cannot write to standard output: ${why}\n`, { stream: process.stderr })
    process.exitCode = EXIT.error
  })
  process.stderr.on('error', (e) => {
    failures.set(process.stderr, e)
  })
  return () => {
    const e = failures.get(process.stdout)
    return e && e.code !== 'EPIPE' ? EXIT.error : null
  }
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

/** Text from data on one line (runs of white space as one space), control characters as text, cut to `n` characters. */
function oneLine(value, n = Infinity) {
  let s = ''
  // word by word up to the cut: a long text (a tool result) costs its first words only
  for (const [word] of String(value ?? '').matchAll(/\S+/g)) {
    s += s ? ` ${word}` : word
    if (s.length > n) break
  }
  s = field(s)
  return s.length > n ? `${s.slice(0, n - 1)}…` : s
}

/** A time as local `YYYY-MM-DD HH:MM`. */
function when(iso) {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return field(iso)
  const p = (x) => String(x).padStart(2, '0')
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`
}

/** A count for people: `1,234,567`. */
function num(n) {
  return Number(n).toLocaleString('en-US')
}

class UsageError extends Error {}

/** Exit codes: docs/cli.md. */
const EXIT = { ok: 0, error: 1, usage: 2, problems: 3 }

/** An error's code and first line: `USAGE` for bad usage, else its own code (`NOT_FOUND`, `ENOSPC`), else `ERROR`. */
function errorParts(e) {
  if (e instanceof UsageError) return { code: 'USAGE', message: e.message.split('\n')[0] }
  if (e && e.code && typeof e.message === 'string') {
    // a system error's message starts with its code: 'ENOSPC: no space left on device, write'
    const message = e.message.split('\n')[0].replace(new RegExp(`^${String(e.code).replace(/\W/g, '')}: `), '')
    return { code: String(e.code), message }
  }
  return { code: 'ERROR', message: e && e.message ? e.message.split('\n')[0] : String(e) }
}

/**
 * The one line an error prints: `threadline: CODE: message`. A message quotes data (ids, paths,
 * a record's fields): its control characters are shown as text, its first line only.
 */
function errorLine(e) {
  const { code, message } = errorParts(e)
  return code === 'ERROR' ? `threadline: ${field(message)}` : `threadline: ${field(code)}: ${field(message)}`
}

/** An error under --json: `{ "error": { "code", "message" } }`, for a script reading standard output. */
function errorJson(e) {
  return `${jsonText({ error: errorParts(e) }, 2)}\n`
}

module.exports = { colours, print, printJson, jsonText, field, text, table, oneLine, when, num, UsageError, EXIT, errorLine, errorJson, watchStreams }
