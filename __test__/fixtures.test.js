'use strict'
// Real Claude Code session files (fixtures/claude-code): every record appended as it
// is, read back by a new process, compared with the raw JSONL; turns and token counts compared
// with counts computed here from the raw JSONL, independently of the library.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const {
  lib, tmpDir, readInNewProcess, assertSameJson, normalizeMessage, jsonClone, readJsonl,
  UUID_V7_RE, ISO_RE, isPrompt,
} = require('./helpers/util')

const { Store } = lib

const FILES = [
  { name: 'short.jsonl', lines: 15 },
  { name: 'tool_heavy.jsonl', lines: 39 },
  { name: 'compacted-session.jsonl', lines: 1512 },
]
const FILLED = ['type', 'uuid', 'parentUuid', 'sessionId', 'seq', 'timestamp']
const TOOL_CALLS = new Set(['tool_use', 'server_tool_use', 'mcp_tool_use'])
const ZERO = () => ({ input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 })

// What `messages` shows: the messages after the latest compact_boundary (Claude Code's summary
// message comes right after it), all of them when there is none.
function contextView(raw) {
  const boundary = raw.findLastIndex((r) => r.type === 'system' && r.subtype === 'compact_boundary')
  return raw.slice(boundary + 1).filter((r) => r.message).map((r) => normalizeMessage(r.message))
}

function blocksOf(m) {
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content
}

function addUsage(sum, u) {
  sum.input_tokens += u.input_tokens || 0
  sum.output_tokens += u.output_tokens || 0
  sum.cache_read_input_tokens += u.cache_read_input_tokens || 0
  sum.cache_creation_input_tokens += u.cache_creation_input_tokens || 0
}

// Usage per response, counting each message.id once (its latest recorded usage).
function usageByResponse(records) {
  const latest = new Map()
  for (const r of records) {
    const m = r.message
    if (!m || !m.usage) continue
    assert.ok(typeof m.id === 'string', 'fixture responses with usage carry message.id')
    latest.set(m.id, m.usage)
  }
  const sum = ZERO()
  for (const u of latest.values()) addUsage(sum, u)
  return sum
}

// Turns from the raw records, by the contract's rule: a turn starts at the first message or at a
// human prompt (isPrompt in helpers/util.js).
function computeTurns(records) {
  const msgs = records.filter((r) => r.message && r.includeInContext !== false)
  const turns = []
  msgs.forEach((r, i) => {
    const m = r.message
    const prompt = isPrompt(m, r)
    if (i === 0 || prompt) turns.push({ start: i, records: [] })
    turns[turns.length - 1].records.push(r)
  })
  return turns.map((t, index) => {
    const rs = t.records
    const uses = new Set()
    const results = new Set()
    let toolUseCount = 0
    for (const r of rs) {
      for (const b of blocksOf(r.message)) {
        if (TOOL_CALLS.has(b.type)) toolUseCount++
        if (b.type === 'tool_use' && r.message.role === 'assistant') uses.add(b.id)
        if (b.type === 'tool_result') results.add(b.tool_use_id)
      }
    }
    const pending = [...uses].filter((id) => !results.has(id))
    const last = rs[rs.length - 1].message
    return {
      index,
      startIndex: t.start,
      endIndex: t.start + rs.length - 1,
      startUuid: rs[0].uuid,
      endUuid: rs[rs.length - 1].uuid,
      messageCount: rs.length,
      toolUseCount,
      usage: usageByResponse(rs),
      status: pending.length > 0 ? 'awaiting_tool_results' : last.role === 'assistant' ? 'complete' : 'awaiting_response',
    }
  })
}

// The token tracker from the raw records: latest usage, cumulative over distinct responses, and
// the context estimate (latest usage total + ceil(bytes of the message JSON after it / 4)).
function computeTracker(records) {
  const msgs = records.filter((r) => r.message && r.includeInContext !== false)
  let latest = ZERO()
  let after = []
  for (const r of msgs) {
    if (r.message.usage) {
      latest = { ...ZERO(), ...r.message.usage }
      after = []
    } else {
      after.push(JSON.stringify(normalizeMessage(r.message)))
    }
  }
  // the fixtures' messages after the last usage are ASCII: bytes == characters, however the
  // library spells non-ASCII characters in its JSON
  for (const text of after) assert.ok(/^[\x20-\x7e]*$/.test(text), 'trailing message is plain ASCII JSON')
  const bytesAfter = after.reduce((n, text) => n + Buffer.byteLength(text), 0)
  const cum = usageByResponse(msgs)
  return {
    inputTokens: latest.input_tokens,
    outputTokens: latest.output_tokens,
    cacheReadInputTokens: latest.cache_read_input_tokens,
    cacheCreationInputTokens: latest.cache_creation_input_tokens,
    contextTokens: latest.input_tokens + latest.output_tokens + latest.cache_read_input_tokens +
      latest.cache_creation_input_tokens + Math.ceil(bytesAfter / 4),
    cumulativeInputTokens: cum.input_tokens,
    cumulativeOutputTokens: cum.output_tokens,
    cumulativeCacheReadTokens: cum.cache_read_input_tokens,
    cumulativeCacheCreationTokens: cum.cache_creation_input_tokens,
  }
}

// The envelope a raw record must come back as: content string -> text block, seq added, and
// uuid/parentUuid/sessionId/type/timestamp added (after the given keys) where the record lacks them.
function expectedEnvelope(raw, i, actual, prevUuid, sessionId) {
  const env = { ...raw }
  if (env.message) env.message = normalizeMessage(env.message)
  const defaults = { type: undefined, uuid: actual.uuid, parentUuid: prevUuid, sessionId, seq: i, timestamp: actual.timestamp }
  for (const k of FILLED) if (!(k in env)) env[k] = defaults[k]
  env.seq = i
  return jsonClone(env)
}

for (const { name, lines: lineCount } of FILES) {
  describe(`Claude Code fixture ${name}`, () => {
    const lines = readJsonl(name)
    const raw = lines.map((l) => JSON.parse(l))

    test('every record appended comes back from a new process as given (bar the allowed additions)', (t) => {
      assert.equal(lines.length, lineCount, 'the fixture is the one the README describes')
      const dir = tmpDir(t)
      const file = path.join(dir, 'cc.db')
      const store = Store.open(file)
      const session = store.createSession({ id: `cc-${name}` })
      const returned = raw.map((r) => session.append(JSON.parse(JSON.stringify(r))))
      store.close()

      const back = readInNewProcess(file, `cc-${name}`)
      assert.equal(back.envelopes.length, raw.length)
      const seen = new Set()
      let prevUuid = null
      raw.forEach((r, i) => {
        const a = back.envelopes[i]
        if (!('uuid' in r)) assert.match(a.uuid, UUID_V7_RE, `record ${i}: generated uuid`)
        if (!('timestamp' in r)) assert.match(a.timestamp, ISO_RE, `record ${i}: generated timestamp`)
        assert.ok(!seen.has(a.uuid), `record ${i}: uuid ${a.uuid} is unique`)
        seen.add(a.uuid)
        assertSameJson(a, expectedEnvelope(r, i, a, prevUuid, `cc-${name}`), `record ${i} (${r.type})`)
        assertSameJson(a, jsonClone(returned[i]), `record ${i}: read back vs returned by append`)
        prevUuid = a.uuid
      })

      const expectedMessages = raw.filter((r) => r.message).map((r) => normalizeMessage(r.message))
      assertSameJson(back.allMessages, jsonClone(expectedMessages), 'allMessages')
      assertSameJson(back.messages, jsonClone(contextView(raw)), 'messages: the view from the latest compact_boundary')
      assert.equal(back.info.messageCount, expectedMessages.length)

      assert.deepStrictEqual(back.turns, computeTurns(raw))
      assert.deepStrictEqual(back.tokenTracker, computeTracker(raw))
    })

    test('restoreMessages of the raw JSONL lines gives the same messages, turns and tokens', (t) => {
      const dir = tmpDir(t)
      const file = path.join(dir, 'restore.db')
      const store = Store.open(file)
      const session = store.createSession({ id: 'restored' })
      const report = session.restoreMessages(lines)
      const expectedMessages = jsonClone(raw.filter((r) => r.message).map((r) => normalizeMessage(r.message)))
      const turns = computeTurns(raw)
      assert.deepStrictEqual(report, { messageCount: expectedMessages.length, turnCount: turns.length, skipped: [] })
      assertSameJson(session.allMessages, expectedMessages, 'allMessages (same process)')
      assertSameJson(session.messages, jsonClone(contextView(raw)), 'messages (same process)')
      store.close()

      const back = readInNewProcess(file, 'restored')
      assertSameJson(back.allMessages, expectedMessages, 'allMessages (new process)')
      assertSameJson(back.messages, jsonClone(contextView(raw)), 'messages (new process)')
      assert.equal(back.envelopes.length, raw.length)
      back.envelopes.forEach((e, i) => assert.equal(e.seq, i))
      assert.deepStrictEqual(back.turns, turns)
      assert.deepStrictEqual(back.tokenTracker, computeTracker(raw))
    })
  })
}

// Read off the files by a person: the prompts someone typed. Interruptions, the /mcp command with
// its caveat and output, the background task's notification and the compaction summary are not
// prompts; they belong to the turn they occur in.
const HUMAN_PROMPTS = {
  'short.jsonl': ['mix phx.server doesnt seem to start'],
  'tool_heavy.jsonl': ['start phoenix in background', 'scrolling back in xterm.js still does not work'],
  'compacted-session.jsonl': ['Work on bead spotter-dov.', 'continue'],
}

test('every real fixture: one turn per human prompt, starting at that prompt', () => {
  for (const [name, prompts] of Object.entries(HUMAN_PROMPTS)) {
    const session = new lib.Session()
    const report = session.restoreMessages(readJsonl(name))
    assert.equal(report.turnCount, prompts.length, `${name}: turnCount`)
    assert.equal(session.turns.length, prompts.length, `${name}: turns`)
    session.turns.forEach((turn, i) => {
      const first = session.allMessages[turn.startIndex]
      assert.ok(first.content[0].text.startsWith(prompts[i]), `${name}: turn ${i} starts at ${JSON.stringify(prompts[i])}`)
    })
    const last = session.turns[session.turns.length - 1]
    assert.equal(last.endIndex, session.allMessages.length - 1, `${name}: the last turn runs to the end`)
  }
})
