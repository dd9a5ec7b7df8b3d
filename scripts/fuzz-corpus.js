#!/usr/bin/env node
// Seeds the fuzz corpora (crates/threadline/fuzz/corpus/<target>/) from the real fixtures:
// lines and windows of the Claude Code sessions in fixtures/claude-code/, the stream cases in
// __test__/fixtures/, snapshots of sessions restored from them, and their messages converted to
// each provider's shape. Deterministic: the same fixtures give the same files (named by hash).
// Needs the built addon (npx napi build ...). Usage: node scripts/fuzz-corpus.js
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const tl = require('..')

const root = path.join(__dirname, '..')
const out = path.join(root, 'crates/threadline/fuzz/corpus')
const MAX = 64 * 1024   // libFuzzer's -max_len in fuzz-smoke.sh: longer seeds would be cut
const counts = {}

function put(target, text) {
  const buf = Buffer.from(text)
  if (buf.length === 0 || buf.length > MAX) return
  const dir = path.join(out, target)
  fs.mkdirSync(dir, { recursive: true })
  const name = crypto.createHash('sha1').update(buf).digest('hex')
  fs.writeFileSync(path.join(dir, name), buf)
  counts[target] = (counts[target] ?? 0) + 1
}

const sessions = ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl'].map((f) =>
  fs.readFileSync(path.join(root, 'fixtures/claude-code', f), 'utf8').split('\n').filter((l) => l.trim()))
const streams = ['anthropic-stream-events.json', 'simple-stream-chunks.json'].map((f) =>
  JSON.parse(fs.readFileSync(path.join(root, '__test__/fixtures', f), 'utf8')))

// Windows of consecutive lines that fit MAX (the start moves by `step`).
function windows(lines, size, step) {
  const all = []
  for (let i = 0; i < lines.length; i += step) {
    let w = lines.slice(i, i + size)
    while (w.length > 1 && Buffer.byteLength(w.join('\n')) > MAX) w = w.slice(0, -1)
    all.push(w)
  }
  return all
}

// json_parse: every line, every stream chunk, and a few broken lines (cut, lone surrogate).
// (Lines of the long session: one in 8, and only the shorter ones, to keep the corpus small.)
for (const lines of sessions) {
  const sample = lines.length > 100 ? lines.filter((l, i) => i % 8 === 0 && l.length < 8192) : lines
  for (const l of sample) {
    put('json_parse', l)
    put('json_parse', l.slice(0, Math.floor(l.length / 2)))
  }
}
put('json_parse', '{"a":"\\ud800"}')
put('json_parse', '['.repeat(200))
put('json_parse', '{"n":1.0000000000000000000001e400,"m":-0}')

// restore_lines: windows of each session, and windows that start with an assistant record.
for (const lines of sessions) {
  for (const w of windows(lines, 12, lines.length > 100 ? 15 : 3)) put('restore_lines', w.join('\n'))
  const assistants = lines.map((l, i) => [l, i]).filter(([l]) => l.includes('"type":"assistant"'))
  for (const [, i] of assistants.filter((_, k) => k % 7 === 0)) put('restore_lines', lines.slice(i, i + 8).join('\n'))
}

// stream_assembler: each case as one chunk a line, whole and cut short.
for (const file of streams) {
  for (const c of file.cases) {
    const chunks = (c.events ?? c.chunks).map((e) => JSON.stringify(e))
    put('stream_assembler', chunks.join('\n'))
    put('stream_assembler', chunks.slice(0, Math.ceil(chunks.length / 2)).join('\n'))
    for (const e of chunks) put('json_parse', e)
  }
}

// convert and snapshot_import: sessions restored from windows, their messages as each provider
// takes them, and their snapshots.
for (const lines of sessions) {
  for (const w of windows(lines, 30, 25)) {
    const s = new tl.Session()
    s.restoreMessages(w)
    const messages = s.allMessages
    if (messages.length === 0) continue
    put('convert', JSON.stringify(messages))
    for (const target of ['anthropic', 'openai-chat', 'openai-responses']) {
      put('convert', JSON.stringify(s.buildContext({ target }).messages))
    }
    put('convert', JSON.stringify(tl.toOpenAIChat(messages).messages))
    put('convert', JSON.stringify(tl.toOpenAIResponses(messages).messages))
    const store = tl.Store.open(':memory:')
    const stored = store.createSession()
    stored.restoreMessages(w)
    put('snapshot_import', stored.snapshot())
    store.close()
  }
}

for (const [t, n] of Object.entries(counts).sort()) console.log(`${t}: ${n} seeds`)
