'use strict'
// Builds the crash states that bench/recovery.js recovers, then waits to be killed with SIGKILL
// (a real crash: the sessions stay 'active', owned by a process that is gone):
//
//   node bench/recovery-build.js <dir> <messages>...
//
// For each size n, two stores in <dir>:
//   recover-<n>-tools.db   n messages; the last one an assistant response with four tool calls and
//                          no results: Read started with its outcome recorded (-> backfill), Bash
//                          and Edit started with no outcome (-> unknown_outcome), Grep never
//                          started (-> never_started)
//   recover-<n>-stream.db  n - 1 messages, then a response cut off mid-stream (Anthropic raw
//                          events: thinking, text and a Read call persisted at their block
//                          boundaries, a Bash call half-streamed and never flushed)
//   recover-<n>-tools.jsonl the records of the tools store (session.envelopes()) as JSON lines:
//                          the JSONL baseline, a file a JSONL store would read to find the calls
// The history is the real Claude Code session fixtures/claude-code/tool_heavy.jsonl
// (39 records, 22 messages, 6 tool calls) repeated through restoreMessages with fresh ids
// (uuids, toolu_, msg_ and req_ ids rewritten per copy), then a prefix of one more copy to reach n.
// Prints one JSON line describing the files once everything is committed.

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { THREADLINE_DIR } = require('./engines.js')
const { Store } = require(THREADLINE_DIR)

const FIXTURE = path.resolve(__dirname, '../fixtures/claude-code/tool_heavy.jsonl')
const MODEL = 'claude-sonnet-4-5-20250929'

const ID_RE = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|toolu_[A-Za-z0-9]+|msg_[A-Za-z0-9]+|req_[A-Za-z0-9]+/g

function freshId(id, copy) {
  const h = crypto.createHash('sha256').update(`${copy}:${id}`).digest('hex')
  if (id.startsWith('toolu_') || id.startsWith('msg_') || id.startsWith('req_')) {
    const prefix = id.slice(0, id.indexOf('_') + 1)
    return prefix + Buffer.from(h, 'hex').toString('base64').replace(/[^A-Za-z0-9]/g, '').slice(0, id.length - prefix.length)
  }
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`
}

const fixtureLines = fs.readFileSync(FIXTURE, 'utf8').split('\n').filter(Boolean)
const isMessage = (line) => { const r = JSON.parse(line); return !!(r.message && (r.message.role === 'user' || r.message.role === 'assistant')) }
const fixtureMessages = fixtureLines.filter(isMessage).length // 22

// The JSON lines of a history of `count` messages: whole copies of the fixture, then a prefix.
function history(count) {
  const out = []
  let have = 0
  for (let copy = 0; have < count; copy++) {
    for (const line of fixtureLines) {
      if (have >= count) break
      out.push(line.replace(ID_RE, (id) => freshId(id, copy)))
      if (isMessage(line)) have++
    }
  }
  return out
}

function withHistory(store, count) {
  const s = store.createSession({ project: 'bench-recovery', model: MODEL, contextWindow: 200000 })
  const r = s.restoreMessages(history(count))
  if (r.skipped.length || r.messageCount !== count) throw new Error(`restore: ${JSON.stringify(r).slice(0, 300)}`)
  const pending = s.pendingRepairs()
  if (pending.length) throw new Error(`history not clean: ${JSON.stringify(pending)}`)
  return s
}

const usage = { input_tokens: 4, cache_creation_input_tokens: 1822, cache_read_input_tokens: 41230, output_tokens: 412, service_tier: 'standard' }
const PROMPT = 'The session list flickers when a tool result arrives; find where it re-renders and fix it.'
const READ_OUTPUT = Array.from({ length: 60 }, (_, i) => `${String(i + 1).padStart(5)}→  const row${i} = render(session.messages[${i}])`).join('\n')

function toolsCase(store, n) {
  const s = withHistory(store, n - 2)
  s.append(PROMPT)
  const ids = { Read: 'toolu_01TailRead000000000000', Bash: 'toolu_01TailBash000000000000', Edit: 'toolu_01TailEdit000000000000', Grep: 'toolu_01TailGrep000000000000' }
  s.append({
    id: 'msg_01TailResponse0000000000', type: 'message', role: 'assistant', model: MODEL,
    content: [
      { type: 'text', text: "I'll read the component, run its tests, patch the render path and look for other callers." },
      { type: 'tool_use', id: ids.Read, name: 'Read', input: { file_path: '/home/USER/projects/spotter/lib/spotter_web/live/session_live.ex' } },
      { type: 'tool_use', id: ids.Bash, name: 'Bash', input: { command: 'mix test test/spotter_web/live/session_live_test.exs', description: 'Run the session view tests' } },
      { type: 'tool_use', id: ids.Edit, name: 'Edit', input: { file_path: '/home/USER/projects/spotter/lib/spotter_web/live/session_live.ex', old_string: 'stream(socket, :messages, messages, reset: true)', new_string: 'stream_insert(socket, :messages, message)' } },
      { type: 'tool_use', id: ids.Grep, name: 'Grep', input: { pattern: 'stream\\(socket, :messages', path: 'lib', output_mode: 'content' } },
    ],
    stop_reason: 'tool_use', stop_sequence: null, usage,
  }, { requestId: 'req_01TailRequest00000000000' })
  s.toolCallStarted(ids.Read)
  s.recordToolOutcome(ids.Read, { content: READ_OUTPUT })
  s.toolCallStarted(ids.Bash)
  s.toolCallStarted(ids.Edit)
  const messages = s.messages.length
  if (messages !== n) throw new Error(`tools case: ${messages} messages, expected ${n}`)
  return { s, messages, expect: { backfill: 1, unknown_outcome: 2, never_started: 1 } }
}

// An interrupted streamed response: pushed as fast as possible, so the writer persists at the
// block boundaries (content_block_stop) only; the half-streamed Bash call is still buffered.
function streamEvents() {
  const ev = []
  const delta = (index, d) => ev.push({ type: 'content_block_delta', index, delta: d })
  ev.push({ type: 'message_start', message: { id: 'msg_01TailStream00000000000', type: 'message', role: 'assistant', model: MODEL, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 3 } } })
  ev.push({ type: 'ping' })
  ev.push({ type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } })
  for (let i = 0; i < 30; i++) delta(0, { type: 'thinking_delta', thinking: `step ${i}: the list re-renders ` })
  delta(0, { type: 'signature_delta', signature: crypto.createHash('sha512').update('sig').digest('base64').repeat(4) })
  ev.push({ type: 'content_block_stop', index: 0 })
  ev.push({ type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } })
  for (let i = 0; i < 60; i++) delta(1, { type: 'text_delta', text: `the stream resets ${i} ` })
  ev.push({ type: 'content_block_stop', index: 1 })
  const tool = (index, id, name, input, stop) => {
    ev.push({ type: 'content_block_start', index, content_block: { type: 'tool_use', id, name, input: {} } })
    const json = JSON.stringify(input)
    const cut = stop ? json.length : json.length >> 1
    for (let i = 0; i < cut; i += 20) delta(index, { type: 'input_json_delta', partial_json: json.slice(i, Math.min(cut, i + 20)) })
    if (stop) ev.push({ type: 'content_block_stop', index })
  }
  tool(2, 'toolu_01StreamRead0000000000', 'Read', { file_path: '/home/USER/projects/spotter/lib/spotter_web/live/session_live.ex' }, true)
  tool(3, 'toolu_01StreamBash0000000000', 'Bash', { command: 'mix test test/spotter_web/live/session_live_test.exs --trace', description: 'Run the session view tests' }, false)
  return ev
}

function streamCase(store, n) {
  const s = withHistory(store, n - 2)
  s.append(PROMPT)
  const w = s.beginResponse({ requestId: 'req_01TailStreamRequest0000000' })
  for (const e of streamEvents()) w.push(e)
  // killed before finish(): recovery turns the persisted blocks (thinking, text, Read) into an
  // interrupted assistant record (message n) and answers the Read call as never started
  return { s, messages: s.messages.length, expect: { close_stream: 1, never_started: 1 } }
}

function main() {
  const [dir, ...sizes] = process.argv.slice(2)
  const out = []
  for (const n of sizes.map(Number)) {
    for (const variant of ['tools', 'stream']) {
      const file = path.join(dir, `recover-${n}-${variant}.db`)
      const store = Store.open(file)
      const t0 = process.hrtime.bigint()
      const c = variant === 'tools' ? toolsCase(store, n) : streamCase(store, n)
      const buildMs = Number(process.hrtime.bigint() - t0) / 1e6
      const entry = { n, variant, file, sessionId: c.s.id, messages: c.messages, expect: c.expect, buildMs }
      if (variant === 'tools') {
        entry.jsonl = path.join(dir, `recover-${n}-tools.jsonl`)
        const envs = c.s.envelopes()
        fs.writeFileSync(entry.jsonl, envs.map((e) => JSON.stringify(e)).join('\n') + '\n')
        entry.records = envs.length
        entry.jsonlBytes = fs.statSync(entry.jsonl).size
      }
      out.push(entry) // the store is left open: the process is killed holding it
    }
  }
  process.stdout.write(JSON.stringify({ fixtureMessages, cases: out }) + '\n')
  setInterval(() => {}, 1 << 30) // wait for SIGKILL
}

main()
