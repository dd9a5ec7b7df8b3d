'use strict'
// What the fault test writes and how a read is summarized, shared by the workers, the readers
// and the checker. Every record the test appends carries a tag, `tl|<session>|<incarnation>|
// <writer>|<op>|<part>`: in its metadata (`t`), as the requestId of a streamed response (and of
// its `stream` records), and at the start of its text. The text is a function of the tag alone,
// so any reader can tell whether a record's content is what was appended.

// The tag of part `part` of op `op`, appended by `writer` to incarnation `inc` of session `sid`.
function tag(sid, inc, writer, op, part) {
  return `tl|${sid}|${inc}|${writer}|${op}|${part}`
}

function parseTag(t) {
  if (typeof t !== 'string' || !t.startsWith('tl|')) return null
  const [, sid, inc, writer, op, part] = t.split('|')
  return { sid, inc: Number(inc), writer, op: Number(op), part: Number(part), key: `${sid}/${inc}` }
}

// A word that the search index keeps whole (letters only): `kw` + op + `q` + part, digits as a-j.
function token(op, part) {
  const letters = (n) => String(n).replace(/\d/g, (d) => String.fromCharCode(97 + Number(d)))
  return `kw${letters(op)}q${letters(part)}`
}

// One op in twenty writes a long text (over the 10 KiB blob threshold: stored once, by hash).
function isBig(op) {
  return Math.imul(op, 2654435761) >>> 0 < 4294967296 / 20
}

function text(t) {
  const p = parseTag(t)
  const filler = isBig(p.op) ? `long ${p.op} `.repeat(1400) : `short ${p.op}`
  return `${t}| ${token(p.op, p.part)} ${filler}`
}

// The tag a record carries, or null for a record the test did not write (a rewind mark).
function tagOf(env) {
  if (env.metadata && typeof env.metadata.t === 'string') return env.metadata.t
  if (typeof env.requestId === 'string' && env.requestId.startsWith('tl|')) return env.requestId
  return null
}

function textOf(message) {
  if (!message || !Array.isArray(message.content)) return null
  const block = message.content.find((b) => b.type === 'text')
  return block ? block.text : null
}

// A read record as the checker needs it: uuid, seq, parent, type, tag, and whether the content is
// the tag's (a stream record holds chunks, not the message: its content is not checked).
function summarize(env) {
  const t = tagOf(env)
  const s = { u: env.uuid, s: env.seq, p: env.parentUuid ?? null, ty: env.type, t }
  if (env.type === 'rewind') s.to = env.rewind && env.rewind.toUuid
  else if (env.type !== 'stream') s.ok = t !== null && textOf(env.message) === text(t)
  return s
}

// A message of `session.messages`: its tag is at the start of its text.
function summarizeMessage(m) {
  const x = textOf(m)
  const t = x && x.startsWith('tl|') ? x.split('|').slice(0, 6).join('|') : null
  return { t, ok: t !== null && x === text(t) }
}

module.exports = { tag, parseTag, token, text, tagOf, summarize, summarizeMessage }
