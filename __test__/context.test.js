'use strict'
// Context (issue 4): building the next request from a session, previews of long tool output,
// reasoning across a provider/model switch, compaction, rewind and branches, forks.
//
// Every buildContext output goes through build() below, which checks it with validateMessages.
// Expected values are derived here from what the test appended (or from the raw Claude Code
// JSONL), never copied from the library's own output.

const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')

const { lib, tmpDir, readJsonl, expectError, assertSameJson, isPrompt: isPromptMessage } = require('./helpers/util')

const { Store, Session, validateMessages } = lib

// The targets the target-independent checks run for. The checks of the Anthropic wire shape
// (tool_use/tool_result pairing in the neutral messages) use ANTHROPIC.
const ANTHROPIC = 'anthropic'
const TARGETS = [ANTHROPIC, 'openai-chat', 'openai-responses']

const FIXTURES = ['tool_heavy.jsonl', 'short.jsonl', 'compacted-session.jsonl']
const MODEL_A = 'claude-sonnet-4-5-20250929'
const MODEL_B = 'claude-opus-4-1-20250805'

// ---------------------------------------------------------------------------------------------
// helpers

// buildContext, and the checks every output must pass: a valid request, stats.messages right.
function build(session, options) {
  const c = session.buildContext(options)
  assert.ok(Array.isArray(c.messages), 'messages is an array')
  assert.deepEqual(validateMessages(c.messages, { target: options.target }), [], `buildContext(${JSON.stringify(options)}) is not a valid request`)
  assert.equal(c.stats.messages, c.messages.length, 'stats.messages counts the messages sent')
  return c
}

function restored(name) {
  const s = new Session()
  const report = s.restoreMessages(readJsonl(name))
  assert.deepEqual(report.skipped, [], `${name}: nothing skipped`)
  return s
}

const isPrompt = (m) => isPromptMessage(m)
const withoutResults = (m) => ({ ...m, content: m.content.filter((b) => b.type !== 'tool_result') })
const ids = (m, type, key) => m.content.filter((b) => b.type === type).map((b) => b[key])
const sum = (xs) => xs.reduce((a, b) => a + b, 0)
const lastOf = (xs, pred) => { for (let i = xs.length - 1; i >= 0; i--) if (pred(xs[i])) return xs[i]; return undefined }

// Where turns start in a request: the first message and every prompt.
function turnStarts(messages) {
  return messages.map((m, i) => (i === 0 || isPrompt(m) ? i : -1)).filter((i) => i >= 0)
}

// Tokens of a message by the ratio the stats report (tokens per character of message JSON).
// The documented estimate: characters of the message's content blocks as JSON, times tokensPerChar.
function est(message, ratio) {
  return Math.ceil(sum(message.content.map((b) => [...JSON.stringify(b)].length)) * ratio)
}

// Every tool_use is answered in the very next message and every tool_result answers a call of the
// message right before: a call never apart from its result.
function assertPaired(messages, what) {
  messages.forEach((m, i) => {
    const calls = ids(m, 'tool_use', 'id')
    const answered = i + 1 < messages.length ? ids(messages[i + 1], 'tool_result', 'tool_use_id') : []
    for (const id of calls) assert.ok(answered.includes(id), `${what}: tool_use ${id} (message ${i}) has no result in the next message`)
    const asked = i > 0 ? ids(messages[i - 1], 'tool_use', 'id') : []
    for (const id of ids(m, 'tool_result', 'tool_use_id')) assert.ok(asked.includes(id), `${what}: tool_result ${id} (message ${i}) has no call in the message before`)
  })
}

function toolUses(messages) {
  return messages.flatMap((m) => ids(m, 'tool_use', 'id'))
}

// A budgeted output `c` against the unbudgeted one `full`: whole turns dropped from the oldest,
// the rest as in `full` (the first kept message loses the results whose calls were dropped), the
// latest prompt always there, and stats that add up. Returns the index in full where it starts.
function checkCut(full, c, what) {
  const f = full.messages
  const starts = turnStarts(f)
  const k = c.messages.length
  assert.ok(k >= 1 && k <= f.length, `${what}: ${k} messages of ${f.length}`)
  const at = f.length - k
  assert.ok(starts.includes(at), `${what}: the cut (message ${at}) is at a turn start (${starts})`)
  assert.deepEqual(c.messages.slice(1), f.slice(at + 1), `${what}: the kept messages are the latest of the unbudgeted output`)
  if (at === 0) {
    assert.deepEqual(c.messages[0], f[0], `${what}: nothing dropped, first message as is`)
  } else {
    assert.deepEqual(c.messages[0], withoutResults(f[at]), `${what}: the first kept message loses only the results of dropped calls`)
    const unpaired = c.stats.unpaired.filter((u) => u.type === 'tool_result').map((u) => u.id)
    for (const id of ids(f[at], 'tool_result', 'tool_use_id')) {
      assert.ok(unpaired.includes(id), `${what}: stats.unpaired names the result ${id} left out`)
    }
  }
  assertPaired(c.messages, what)
  // Calls kept are exactly the calls of the kept messages, with their results.
  assert.deepEqual(toolUses(c.messages), toolUses(f.slice(at)), `${what}: no kept call lost`)
  // The latest prompt is always there.
  const latest = lastOf(f, isPrompt)
  assert.ok(latest, `${what}: the unbudgeted output has a prompt`)
  assert.deepEqual(withoutResults(lastOf(c.messages, isPrompt)), withoutResults(latest), `${what}: the latest prompt is kept`)
  // Stats.
  const s = c.stats
  assert.equal(s.keptTurns, starts.filter((i) => i >= at).length, `${what}: keptTurns`)
  assert.equal(s.droppedTurns, starts.length - s.keptTurns, `${what}: droppedTurns`)
  assert.equal(s.keptRecords + s.droppedRecords, full.stats.keptRecords, `${what}: every record of the context is kept or dropped`)
  if (at === 0) {
    assert.deepEqual(s.dropped, [], `${what}: no dropped range`)
    assert.equal(s.droppedRecords, 0)
  } else {
    assert.equal(s.dropped.length, 1, `${what}: one dropped range (the oldest turns)`)
    assert.equal(s.dropped[0].messages, at, `${what}: the dropped range counts the messages left out`)
    assert.equal(s.dropped[0].fromSeq, full.stats.startSeq, `${what}: the dropped range starts where the context starts`)
    assert.ok(s.droppedRecords >= at, `${what}: at least one record per dropped message`)
  }
  for (const d of s.dropped) assert.ok(d.fromSeq <= d.toSeq, `${what}: dropped range ${JSON.stringify(d)} is in order`)
  return at
}

// Token budgets that hit every cut of the unbudgeted output: the estimate of each suffix from a
// turn start, one under and over, and a sweep from nothing to more than the whole.
function budgetsFor(full, systemTokens = 0) {
  const f = full.messages
  const r = full.stats.tokensPerChar
  const total = full.stats.estimatedTokens
  const out = new Set([0, 1, total - 1, total, total + 1, total * 10])
  for (const i of turnStarts(f)) {
    const t = systemTokens + sum(f.slice(i).map((m) => est(m, r)))
    for (const d of [-f.length - 1, -1, 0, 1, f.length + 1]) out.add(Math.max(0, t + d))
  }
  for (let step = 0; step <= 40; step++) out.add(Math.floor((total * step) / 40))
  return [...out].sort((a, b) => a - b)
}

// A synthetic coding-agent session: 9 turns; responses split over several records (as Claude
// Code writes them); parallel calls answered in one or in two messages; a prompt that carries the
// results of the response before it; long and short outputs; signed thinking; usage.
function appendAgentSession(s) {
  const records = []
  let usage = 900
  for (let t = 0; t < 9; t++) {
    records.push(t === 5 ? null : `prompt ${t}: ${'please look at this '.repeat(3 + (t % 4) * 6)}`)
    const calls = t % 3
    if (calls === 0) {
      records.push({ role: 'assistant', model: MODEL_A, content: [{ type: 'text', text: `answer ${t} ${'.'.repeat(40 * t)}` }], usage: { input_tokens: (usage += 150), output_tokens: 40 } })
      continue
    }
    const callIds = Array.from({ length: calls }, (_, k) => `toolu_${t}_${k}_${'x'.repeat(6)}`)
    records.push({ role: 'assistant', model: MODEL_A, content: [{ type: 'thinking', thinking: `turn ${t}: read ${calls} files`, signature: `sig-${t}-${'s'.repeat(20)}` }] })
    records.push({ role: 'assistant', model: MODEL_A, content: callIds.map((id, k) => ({ type: 'tool_use', id, name: 'Read', input: { file_path: `/src/mod_${t}_${k}.rs` } })), usage: { input_tokens: (usage += 200), output_tokens: 60 } })
    const results = callIds.map((id, k) => ({ type: 'tool_result', tool_use_id: id, content: `fn f${t}${k}() {}\n`.repeat(5 + 40 * ((t + k) % 3)) }))
    if (t === 4) {
      // the user interrupts: the results and a new prompt in one message
      records.push({ role: 'user', content: [...results, { type: 'text', text: 'stop, look at the tests instead' }] })
    } else if (calls === 2 && t % 2 === 0) {
      for (const r of results) records.push({ role: 'user', content: [r] })
    } else {
      records.push({ role: 'user', content: results })
    }
    records.push({ role: 'assistant', model: MODEL_A, content: [{ type: 'text', text: `done with turn ${t}` }], usage: { input_tokens: (usage += 300), output_tokens: 30 } })
  }
  return records.filter((r) => r !== null).map((r) => s.append(r))
}

function agentSession() {
  const s = new Session()
  appendAgentSession(s)
  return s
}

// Every message record of the session from the start (compactions aside), from its log.
function history(s) {
  return s.envelopes().filter((e) => e.message && e.includeInContext !== false && !e.stream).map((e) => ({ uuid: e.uuid, message: e.message }))
}

// The uuid of each of session.messages (sessions here have no orphan results, which messages
// leaves out).
function messageUuids(s) {
  const uuids = s.envelopes().filter((e) => e.message && e.includeInContext !== false).map((e) => e.uuid)
  assert.equal(uuids.length, s.messages.length, 'one record per message')
  return uuids
}

function storeFiles(file) {
  return [file, `${file}-wal`, `${file}-shm`].filter((f) => fs.existsSync(f))
}

function storeBytes(file) {
  return sum(storeFiles(file).map((f) => fs.statSync(f).size))
}

// ---------------------------------------------------------------------------------------------
// 1. budgets

describe('budget: whole turns, oldest first, always a valid request', () => {
  const sessions = [...FIXTURES.map((name) => ({ name, make: () => restored(name) })), { name: 'synthetic agent session', make: agentSession }]

  for (const { name, make } of sessions) {
    test(`${name}: every maxTokens cut keeps pairs, the latest prompt and consistent stats`, () => {
      const s = make()
      const full = build(s, { target: ANTHROPIC })
      assert.equal(full.stats.fits, true)
      assert.equal(full.stats.droppedTurns, 0)
      assert.equal(full.stats.keptTurns, turnStarts(full.messages).length, 'keptTurns counts the turns of the request')
      const r = full.stats.tokensPerChar
      let previousKept = 0
      for (const maxTokens of budgetsFor(full)) {
        const what = `${name} maxTokens ${maxTokens}`
        const c = build(s, { target: ANTHROPIC, maxTokens })
        const at = checkCut(full, c, what)
        if (c.stats.fits) {
          assert.ok(c.stats.estimatedTokens <= maxTokens, `${what}: fits, so estimatedTokens ${c.stats.estimatedTokens} <= maxTokens`)
        } else {
          assert.equal(c.stats.keptTurns, 1, `${what}: does not fit only when the latest turn alone is kept`)
          assert.ok(c.stats.estimatedTokens > maxTokens, `${what}: does not fit, so over budget`)
        }
        // No turn dropped that would have fitted: the output one turn larger (counted with the
        // results its first message would lose, so an upper bound) is over budget.
        if (at > 0) {
          const starts = turnStarts(full.messages)
          const prev = starts[starts.indexOf(at) - 1]
          const upper = sum(full.messages.slice(prev).map((m) => est(m, r)))
          assert.ok(upper + full.messages.length > maxTokens, `${what}: the turn at ${prev} (${upper} tokens at most) would have fitted`)
        }
        if (maxTokens === 0) assert.equal(c.stats.fits, false, `${what}: nothing fits in no tokens, the latest turn is sent anyway`)
        if (maxTokens >= full.stats.estimatedTokens) assert.deepEqual(c.messages, full.messages, `${what}: everything fits`)
        assert.ok(c.stats.keptTurns >= previousKept, `${what}: a larger budget never keeps fewer turns`)
        previousKept = c.stats.keptTurns
      }
    })

    test(`${name}: maxMessages 1..N cuts by whole turns`, () => {
      const s = make()
      const full = build(s, { target: ANTHROPIC })
      const f = full.messages
      const starts = turnStarts(f)
      let previousKept = 0
      for (let maxMessages = 1; maxMessages <= f.length + 1; maxMessages++) {
        const what = `${name} maxMessages ${maxMessages}`
        const c = build(s, { target: ANTHROPIC, maxMessages })
        const at = checkCut(full, c, what)
        if (c.stats.fits) {
          assert.ok(c.messages.length <= maxMessages, `${what}: fits, so at most maxMessages`)
        } else {
          assert.equal(c.stats.keptTurns, 1, `${what}: does not fit only when the latest turn alone is kept`)
          assert.ok(c.messages.length > maxMessages, `${what}: the latest turn alone has more messages`)
        }
        if (at > 0) {
          const prev = starts[starts.indexOf(at) - 1]
          assert.ok(f.length - prev > maxMessages, `${what}: one more turn (${f.length - prev} messages) would not have fitted`)
        }
        assert.ok(c.stats.keptTurns >= previousKept, `${what}: a larger budget never keeps fewer turns`)
        previousKept = c.stats.keptTurns
      }
    })
  }

  test('maxTokens and maxMessages together: the stricter one decides', () => {
    const s = agentSession()
    const full = build(s, { target: ANTHROPIC })
    const half = Math.floor(full.stats.estimatedTokens / 2)
    const byTokens = build(s, { target: ANTHROPIC, maxTokens: half })
    const byMessages = build(s, { target: ANTHROPIC, maxMessages: 3 })
    const both = build(s, { target: ANTHROPIC, maxTokens: half, maxMessages: 3 })
    checkCut(full, both, 'both')
    assert.equal(both.messages.length, Math.min(byTokens.messages.length, byMessages.messages.length))
  })

  test('stats.estimatedTokens is the estimate of what is sent, and fits says whether that fits', () => {
    for (const make of [() => restored('tool_heavy.jsonl'), agentSession]) {
      const s = make()
      const full = build(s, { target: ANTHROPIC })
      const r = full.stats.tokensPerChar
      for (const maxTokens of budgetsFor(full)) {
        const c = build(s, { target: ANTHROPIC, maxTokens })
        const sent = sum(c.messages.map((m) => est(m, r)))
        assert.ok(Math.abs(c.stats.estimatedTokens - sent) <= c.messages.length + 1, `maxTokens ${maxTokens}: estimatedTokens ${c.stats.estimatedTokens}, the messages sent ${sent}`)
        assert.equal(c.stats.fits, sent <= maxTokens, `maxTokens ${maxTokens}: fits says whether the ${sent} tokens sent fit`)
        const at = full.messages.length - c.messages.length
        if (at > 0) {
          const starts = turnStarts(full.messages)
          const prev = starts[starts.indexOf(at) - 1]
          const larger = [prev === 0 ? full.messages[0] : withoutResults(full.messages[prev]), ...full.messages.slice(prev + 1)]
          assert.ok(sum(larger.map((m) => est(m, r))) > maxTokens, `maxTokens ${maxTokens}: one more turn, as it would be sent, would not fit`)
        }
      }
    }
  })
})

// ---------------------------------------------------------------------------------------------
// 2. system

describe('system: given per call, never stored', () => {
  test('OpenAI targets: the system prompt is the first message / input item', () => {
    const s = agentSession()
    const chat = build(s, { target: 'openai-chat', system: 'You are a careful coding agent.' })
    assert.equal('system' in chat, false)
    assert.deepEqual(chat.messages[0], { role: 'system', content: 'You are a careful coding agent.' })
    assert.equal(build(s, { target: 'openai-chat' }).messages[0].role, 'user', 'none given, none sent')
    const input = build(s, { target: 'openai-responses', system: 'You are a careful coding agent.' })
    assert.equal(input.messages[0].role, 'system')
    assert.deepEqual(JSON.stringify(input.messages[0]).includes('You are a careful coding agent.'), true)
  })

  for (const target of [ANTHROPIC]) {
    test(`${target}: returned as given, counted in the budget, absent when not given`, () => {
      const s = agentSession()
      const plain = build(s, { target })
      assert.equal('system' in plain, false, 'no system given, none returned')
      const text = build(s, { target, system: 'You are a careful coding agent.' })
      assert.equal(text.system, 'You are a careful coding agent.')
      const blocks = [
        { type: 'text', text: 'You are a careful coding agent.', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'Tools: Read, Bash.', citations: null },
      ]
      const withBlocks = build(s, { target, system: blocks })
      assertSameJson(withBlocks.system, blocks, 'system blocks')
      assert.deepEqual(withBlocks.messages, plain.messages, 'the system prompt does not change the messages')
      // The system prompt takes its share of the budget.
      const r = plain.stats.tokensPerChar
      const big = 'Rules of the house. '.repeat(400)
      const withBig = build(s, { target, system: big })
      assert.ok(Math.abs(withBig.stats.estimatedTokens - plain.stats.estimatedTokens - Math.ceil(JSON.stringify(big).length * r)) <= 1, 'estimatedTokens includes the system prompt')
      const tight = build(s, { target, system: big, maxTokens: plain.stats.estimatedTokens })
      assert.ok(tight.stats.keptTurns < plain.stats.keptTurns, 'a budget that fits the messages alone does not fit them with a long system prompt')
      assert.ok(!tight.stats.fits || tight.stats.estimatedTokens <= plain.stats.estimatedTokens)
    })

    test(`${target}: the system prompt is written nowhere (records, messages, snapshot, file)`, (t) => {
      const file = path.join(tmpDir(t), 'store.db')
      const store = Store.open(file)
      t.after(() => store.close())
      const s = store.createSession({ project: 'sys' })
      appendAgentSession(s)
      const before = { envelopes: s.envelopes(), messages: s.messages, info: s.info, tracker: s.tokenTracker }
      const marker = `SYSTEM-MARKER-${crypto.randomBytes(8).toString('hex')}`
      const longMarker = `${marker}-LONG-${'z'.repeat(20000)}`
      build(s, { target, system: marker })
      build(s, { target, system: [{ type: 'text', text: longMarker }], maxTokens: 100 })
      assert.deepEqual(s.envelopes(), before.envelopes, 'no record written')
      assert.deepEqual(s.messages, before.messages)
      assert.deepEqual(s.tokenTracker, before.tracker)
      assert.equal(s.info.messageCount, before.info.messageCount)
      assert.ok(!s.snapshot().includes(marker), 'not in the snapshot')
      const reopened = Store.open(file)
      const again = reopened.openSession(s.id)
      assert.ok(!JSON.stringify(again.envelopes()).includes(marker), 'not in the records read back')
      reopened.close()
      for (const f of storeFiles(file)) {
        assert.ok(!fs.readFileSync(f).includes(marker), `not in ${path.basename(f)}`)
      }
    })
  }
})

// ---------------------------------------------------------------------------------------------
// 3. what never goes to a model

test('records out of context, events, orphan results and unfinished thinking are left out', () => {
  const s = new Session()
  s.append('VISIBLE-PROMPT-1')
  s.append({
    role: 'assistant', model: MODEL_A,
    content: [
      { type: 'thinking', thinking: 'UNSIGNED-THOUGHT' },
      { type: 'thinking', thinking: 'EMPTY-SIGNATURE-THOUGHT', signature: '' },
      { type: 'thinking', thinking: 'SIGNED-THOUGHT', signature: 'sig-signed' },
      { type: 'text', text: 'VISIBLE-ANSWER-1' },
      { type: 'tool_use', id: 'toolu_real', name: 'Bash', input: { command: 'ls' } },
    ],
  }, { provider: 'anthropic' })
  s.append({ role: 'user', content: [{ type: 'text', text: 'HIDDEN-NOTE: shown to people only' }] }, { includeInContext: false })
  s.appendEvent('ui.scroll', { marker: 'EVENT-DATA' })
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_real', content: 'VISIBLE-RESULT' }] })
  s.append({ role: 'assistant', model: MODEL_A, content: [{ type: 'text', text: 'VISIBLE-ANSWER-2' }] })
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_ghost_1', content: 'ORPHAN-ALONE' }] })
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_ghost_2', content: 'ORPHAN-WITH-PROMPT' }, { type: 'text', text: 'VISIBLE-PROMPT-2' }] })
  // A response cut off mid-stream: its signed thinking and its text survive, the thinking that
  // had no signature yet does not.
  const w = s.beginResponse({ model: MODEL_A, provider: 'anthropic' })
  w.push({ type: 'reasoning', text: 'STREAMED-SIGNED-THOUGHT', signature: 'sig-streamed' })
  w.push({ type: 'text', text: 'VISIBLE-PARTIAL' })
  w.push({ type: 'reasoning', text: 'HALF-STREAMED-THOUGHT' })
  w.fail({ message: 'connection reset' })
  s.append('VISIBLE-PROMPT-3')
  const hidden = ['UNSIGNED-THOUGHT', 'EMPTY-SIGNATURE-THOUGHT', 'HIDDEN-NOTE', 'EVENT-DATA', 'toolu_ghost_1', 'ORPHAN-ALONE', 'toolu_ghost_2', 'ORPHAN-WITH-PROMPT', 'HALF-STREAMED-THOUGHT']
  const visible = ['VISIBLE-PROMPT-1', 'VISIBLE-ANSWER-1', 'toolu_real', 'VISIBLE-RESULT', 'VISIBLE-ANSWER-2', 'VISIBLE-PROMPT-2', 'VISIBLE-PARTIAL', 'VISIBLE-PROMPT-3']
  for (const reasoning of ['keep', 'same-model']) {
    const c = build(s, { target: ANTHROPIC, reasoning, model: MODEL_A })
    const json = JSON.stringify(c.messages)
    for (const h of hidden) assert.ok(!json.includes(h), `${reasoning}: ${h} is not sent`)
    for (const v of visible) assert.ok(json.includes(v), `${reasoning}: ${v} is sent`)
    const thinking = c.messages.flatMap((m) => m.content.filter((b) => b.type === 'thinking'))
    assert.deepEqual(thinking, [
      { type: 'thinking', thinking: 'SIGNED-THOUGHT', signature: 'sig-signed' },
      { type: 'thinking', thinking: 'STREAMED-SIGNED-THOUGHT', signature: 'sig-streamed' },
    ], `${reasoning}: signed thinking goes back as it was`)
    assert.ok(c.stats.droppedThinking >= 2, `${reasoning}: the two unsigned blocks are counted as dropped`)
    // (A message of orphan results only never reaches the context: the session leaves it out of
    // its messages. An orphan beside a prompt is taken out here, and named.)
    assert.ok(c.stats.unpaired.some((u) => u.type === 'tool_result' && u.id === 'toolu_ghost_2'), `${reasoning}: the orphan beside a prompt is named in stats.unpaired`)
  }
  // Nothing is deleted: the log keeps all of it.
  const log = JSON.stringify(s.envelopes())
  for (const h of ['UNSIGNED-THOUGHT', 'HIDDEN-NOTE', 'EVENT-DATA', 'ORPHAN-ALONE', 'ORPHAN-WITH-PROMPT']) assert.ok(log.includes(h), `${h} stays in the log`)
})

// ---------------------------------------------------------------------------------------------
// 4. previews

describe('long tool results: preview + handle, full output on request', () => {
  test('tool_heavy.jsonl: results over the limit are previewed, readToolOutput gives them back exactly', () => {
    const s = restored('tool_heavy.jsonl')
    const stored = s.messages
    const full = build(s, { target: ANTHROPIC })
    const originals = new Map()
    for (const m of full.messages) for (const b of m.content) if (b.type === 'tool_result') originals.set(b.tool_use_id, b)
    assert.ok(originals.size >= 4, 'the fixture has tool results')
    const textOf = (b) => (typeof b.content === 'string' ? b.content : b.content.filter((x) => x.type === 'text').map((x) => x.text).join('\n'))
    const lengths = [...originals.values()].map((b) => [...textOf(b)].length).sort((a, b) => a - b)
    const limit = lengths[Math.floor(lengths.length / 2)] - 1   // about half of them are longer
    const c = build(s, { target: ANTHROPIC, toolResultPreviewChars: limit })
    const long = [...originals.entries()].filter(([, b]) => [...textOf(b)].length > limit).map(([id]) => id)
    assert.ok(long.length >= 1 && long.length < originals.size, 'some results are long, some are not')
    assert.deepEqual(c.stats.previewed.map((p) => p.toolUseId).sort(), [...long].sort(), 'stats.previewed names exactly the long results')
    for (const m of c.messages) {
      for (const b of m.content) {
        if (b.type !== 'tool_result') continue
        const original = originals.get(b.tool_use_id)
        if (!long.includes(b.tool_use_id)) {
          assert.deepEqual(b, original, 'a short result goes as it is')
          continue
        }
        const text = textOf(original)
        assert.equal(typeof b.content, 'string')
        assert.ok(b.content.startsWith([...text].slice(0, limit).join('')), 'the preview is the start of the output')
        const note = b.content.slice([...text].slice(0, limit).join('').length)
        assert.match(note, /read_tool_output/, 'the preview names read_tool_output')
        assert.ok(note.includes(b.tool_use_id), 'and the id to read')
        assert.ok(note.length < 400, 'the preview is the start and one short line')
        assert.equal(b.is_error, original.is_error, 'is_error kept')
        const p = c.stats.previewed.find((x) => x.toolUseId === b.tool_use_id)
        assert.deepEqual(p, { toolUseId: b.tool_use_id, chars: [...text].length, shownChars: limit })
        // The full output, exactly as stored.
        const storedBlock = stored.flatMap((x) => x.content).find((x) => x.type === 'tool_result' && x.tool_use_id === b.tool_use_id)
        assertSameJson(s.readToolOutput(b.tool_use_id), storedBlock.content, `readToolOutput(${b.tool_use_id})`)
      }
    }
    assert.ok(c.stats.estimatedTokens < full.stats.estimatedTokens, 'previews make the request smaller')
    assert.deepEqual(s.messages, stored, 'the stored messages are untouched')
  })

  test('block content (text and image) comes back exactly; unknown ids and calls without output are NOT_FOUND', () => {
    const s = new Session()
    s.append('read the screenshot and the log')
    s.append({ role: 'assistant', content: [
      { type: 'tool_use', id: 'toolu_shot', name: 'Screenshot', input: {} },
      { type: 'tool_use', id: 'toolu_log', name: 'Bash', input: { command: 'cat log' } },
    ] })
    const blocks = [
      { type: 'text', text: 'é'.repeat(500) + ' the end' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: crypto.randomBytes(600).toString('base64') } },
      { type: 'text', text: 'caption' },
    ]
    const log = 'ERROR: disk full\n'.repeat(300)
    s.append({ role: 'user', content: [
      { type: 'tool_result', tool_use_id: 'toolu_shot', content: blocks },
      { type: 'tool_result', tool_use_id: 'toolu_log', content: log, is_error: true },
    ] })
    s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_pending', name: 'Bash', input: {} }] })
    const c = build(s, { target: ANTHROPIC, toolResultPreviewChars: 100 })
    assert.deepEqual(c.stats.previewed.map((p) => p.toolUseId).sort(), ['toolu_log', 'toolu_shot'])
    const log2 = c.messages[2].content.find((b) => b.tool_use_id === 'toolu_log')
    assert.equal(log2.is_error, true, 'an error result stays an error')
    assert.ok(log2.content.startsWith(log.slice(0, 100)))
    assertSameJson(s.readToolOutput('toolu_shot'), blocks, 'block content')
    assert.equal(s.readToolOutput('toolu_log'), log)
    expectError(() => s.readToolOutput('toolu_unknown'), 'NOT_FOUND', 'readToolOutput', 'toolu_unknown')
    expectError(() => s.readToolOutput('toolu_pending'), 'NOT_FOUND', 'toolu_pending')
    expectError(() => s.readToolOutput(42), 'INVALID_INPUT', 'readToolOutput')
  })

  test('after a rewind, readToolOutput gives the output the context shows', () => {
    const s = new Session()
    s.append('run it')
    const call = s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_run', name: 'Bash', input: {} }] })
    s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_run', content: 'OLD OUTPUT '.repeat(50) }] })
    s.rewind(call.uuid)
    s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_run', content: 'NEW OUTPUT '.repeat(50) }] })
    const c = build(s, { target: ANTHROPIC, toolResultPreviewChars: 20 })
    assert.ok(c.messages[2].content[0].content.startsWith('NEW OUTPUT'))
    assert.equal(s.readToolOutput('toolu_run'), 'NEW OUTPUT '.repeat(50))
  })
})

// ---------------------------------------------------------------------------------------------
// 5. reasoning across a model and provider switch

test('reasoning modes across a model switch and a provider switch', () => {
  const s = new Session()
  const thinkingA = { type: 'thinking', thinking: 'A thinks', signature: 'sig-model-a' }
  const redactedA = { type: 'redacted_thinking', data: 'redacted-by-a' }
  const thinkingB = { type: 'thinking', thinking: 'B thinks', signature: 'sig-model-b' }
  const redactedB = { type: 'redacted_thinking', data: 'redacted-by-b' }
  const thinkingO = { type: 'thinking', thinking: 'other provider thinks', signature: 'sig-other' }
  s.append('q1')
  s.append({ role: 'assistant', model: MODEL_A, content: [thinkingA, redactedA, { type: 'text', text: 'a1' }] }, { provider: 'anthropic' })
  s.append('q2')
  s.append({ role: 'assistant', model: MODEL_B, content: [thinkingB, { type: 'thinking', thinking: 'B unsigned' }, redactedB, { type: 'text', text: 'a2' }] }, { provider: 'anthropic' })
  s.append('q3')
  s.append({ role: 'assistant', model: 'gpt-5', content: [thinkingO, { type: 'text', text: 'a3' }] }, { provider: 'openai' })
  s.append('q4')
  s.append({ role: 'assistant', content: [{ type: 'thinking', thinking: 'no model recorded', signature: 'sig-nomodel' }, { type: 'text', text: 'a4' }] }, { provider: 'anthropic' })
  s.append('q5')
  const all = [thinkingA, redactedA, thinkingB, redactedB, thinkingO, { type: 'thinking', thinking: 'no model recorded', signature: 'sig-nomodel' }]
  const reasoningOf = (c) => c.messages.flatMap((m) => m.content.filter((b) => b.type === 'thinking' || b.type === 'redacted_thinking'))
  const textsOf = (c) => c.messages.map((m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''))
  const texts = ['q1', 'a1', 'q2', 'a2', 'q3', 'a3', 'q4', 'a4', 'q5']
  const blocksTotal = all.length + 1   // the signed and redacted ones, and one unsigned

  const keep = build(s, { target: ANTHROPIC, reasoning: 'keep' })
  assert.deepEqual(reasoningOf(keep), all, 'keep: every signed or redacted block, in place')
  assert.equal(keep.stats.droppedThinking, 1, 'keep: only the unsigned one dropped')
  // Kept blocks stay before the text of their message, as written.
  assert.deepEqual(keep.messages[1].content, [thinkingA, redactedA, { type: 'text', text: 'a1' }])

  const drop = build(s, { target: ANTHROPIC, reasoning: 'drop' })
  assert.deepEqual(reasoningOf(drop), [], 'drop: none')
  assert.equal(drop.stats.droppedThinking, blocksTotal)

  const sameA = build(s, { target: ANTHROPIC, reasoning: 'same-model', model: MODEL_A })
  assert.deepEqual(reasoningOf(sameA), [thinkingA, redactedA], 'same-model A: only what model A wrote')
  assert.equal(sameA.stats.droppedThinking, blocksTotal - 2)
  const sameB = build(s, { target: ANTHROPIC, reasoning: 'same-model', model: MODEL_B })
  assert.deepEqual(reasoningOf(sameB), [thinkingB, redactedB], 'same-model B: only what model B wrote')
  const sameGpt = build(s, { target: ANTHROPIC, reasoning: 'same-model', model: 'gpt-5' })
  assert.deepEqual(reasoningOf(sameGpt), [], 'another provider\'s thinking never goes to Anthropic, even for a model of the same name')
  const byDefault = build(s, { target: ANTHROPIC, model: MODEL_A })
  assert.deepEqual(byDefault.messages, sameA.messages, 'same-model is the default')

  for (const c of [keep, drop, sameA, sameB, sameGpt, byDefault]) {
    assert.deepEqual(textsOf(c), texts, 'the text of every message goes in any mode')
  }
})

// ---------------------------------------------------------------------------------------------
// 6. compaction

describe('compaction', () => {
  test('compactionPlan: whole turns, never a call apart from its result, the last keepTurns kept, writes nothing', () => {
    for (const make of [() => restored('tool_heavy.jsonl'), agentSession]) {
      const s = make()
      const messages = s.messages
      const envelopes = s.envelopes()
      const uuids = messageUuids(s)
      const turns = s.turns
      const starts = turns.map((t) => t.startIndex)
      // Cutting before index i parts a call from its result when a call before i is answered at or after i.
      const parts = (i) => messages.slice(0, i).flatMap((m) => ids(m, 'tool_use', 'id'))
        .some((id) => messages.slice(i).some((m) => ids(m, 'tool_result', 'tool_use_id').includes(id)))
      const full = build(s, { target: ANTHROPIC })
      for (let keepTurns = 1; keepTurns <= turns.length + 1; keepTurns++) {
        let previous = Infinity
        for (const step of [0, 1, 2, 4, 8, 16, 1000]) {
          const targetTokens = Math.floor((full.stats.estimatedTokens * step) / 16)
          const what = `keepTurns ${keepTurns}, targetTokens ${targetTokens}`
          const plan = s.compactionPlan({ targetTokens, keepTurns })
          const n = plan.records.length
          assert.deepEqual(plan.records.map((r) => r.message), messages.slice(0, n), `${what}: the records summarised are the oldest messages`)
          assert.deepEqual(plan.records.map((r) => r.uuid), uuids.slice(0, n), `${what}: with their uuids`)
          assert.equal(plan.firstKeptUuid, n === 0 ? null : uuids[n], `${what}: firstKeptUuid is the first record kept`)
          assert.ok(n === 0 || starts.includes(n), `${what}: the cut (${n}) is at a turn start`)
          assert.ok(!parts(n), `${what}: no call apart from its result`)
          const kept = turns.filter((t) => t.startIndex >= n).length
          assert.ok(kept >= Math.min(keepTurns, turns.length), `${what}: keeps the last ${keepTurns} turns (kept ${kept})`)
          assert.equal(plan.turnsKept, kept)
          assert.equal(plan.turnsSummarised + plan.turnsKept, turns.length)
          assert.equal(plan.recordsOmitted, 0, `${what}: every record to summarise is handed over`)
          assert.ok(Math.abs(plan.tokensToSummarise + plan.tokensKept - plan.tokensBefore) <= 2, `${what}: tokens add up`)
          if (plan.tokensKept > targetTokens) {
            // It could not cut later: every later turn start keeps too few turns or parts a call.
            for (const t of turns.filter((t) => t.startIndex > n)) {
              const wouldKeep = turns.filter((u) => u.startIndex >= t.startIndex).length
              assert.ok(wouldKeep < keepTurns || parts(t.startIndex), `${what}: could have cut at ${t.startIndex}`)
            }
          }
          assert.ok(n <= previous, `${what}: a larger target never summarises more`)
          previous = n
          if (n > 0) {
            assert.equal(typeof plan.text, 'string')
            assert.ok(plan.text.includes(messages[0].content.find((b) => b.type === 'text').text.slice(0, 30)), `${what}: the text renders the first prompt`)
            for (const b of messages.slice(0, n).flatMap((m) => m.content)) {
              if (b.type === 'tool_use') assert.ok(plan.text.includes(b.name), `${what}: the text names the call ${b.name}`)
              if (b.type === 'thinking') assert.ok(!plan.text.includes(b.signature), `${what}: no signatures in the text`)
            }
          } else {
            assert.equal(plan.text, '')
          }
        }
      }
      assert.deepEqual(s.envelopes(), envelopes, 'plans write nothing')
    }
  })

  test('compact: the context starts at the summary, failures change nothing, the tracker is re-based, all of it survives reopening', (t) => {
    const file = path.join(tmpDir(t), 'store.db')
    let store = Store.open(file)
    t.after(() => store.close())
    let s = store.createSession({ project: 'compaction', contextWindow: 200000 })
    s.restoreMessages(readJsonl('tool_heavy.jsonl'))
    const messages = s.messages
    const envelopes = s.envelopes()
    const before = build(s, { target: ANTHROPIC })
    const trackerBefore = s.tokenTracker
    assert.equal(before.stats.compacted, false)
    const unchanged = (what) => {
      assert.deepEqual(s.envelopes(), envelopes, `${what}: nothing written`)
      assert.deepEqual(build(s, { target: ANTHROPIC }), before, `${what}: the context starts where it did`)
      assert.deepEqual(s.tokenTracker, trackerBefore, `${what}: the tracker is as it was`)
    }

    const plan = s.compactionPlan({ targetTokens: 0, keepTurns: 1 })
    assert.ok(plan.firstKeptUuid, 'something to summarise')
    // A summariser that fails before compact is called.
    assert.throws(() => {
      const p = s.compactionPlan({ targetTokens: 0, keepTurns: 1 })
      if (p.text.length > 0) throw new Error('the summarising model timed out')
      s.compact({ summary: 'never', firstKeptUuid: p.firstKeptUuid })
    }, /timed out/)
    unchanged('summariser failed')
    // compact refusing its input.
    expectError(() => s.compact({ summary: 'S', firstKeptUuid: 'no-such-uuid' }), 'INVALID_INPUT', 'firstKeptUuid', 'no-such-uuid')
    unchanged('unknown firstKeptUuid')
    expectError(() => s.compact({ summary: '   ', firstKeptUuid: plan.firstKeptUuid }), 'INVALID_INPUT', 'summary')
    unchanged('blank summary')
    expectError(() => s.compact({ summary: 'S', trigger: 'sometimes' }), 'INVALID_INPUT', 'trigger')
    unchanged('bad trigger')
    const resultEnv = envelopes.find((e) => e.message && e.message.content.every((b) => b.type === 'tool_result'))
    expectError(() => s.compact({ summary: 'S', firstKeptUuid: resultEnv.uuid }), 'INVALID_INPUT', 'firstKeptUuid', 'tool call')
    unchanged('a first kept record that parts a call from its result')
    expectError(() => s.compact({ summary: 'S', keepTurns: s.turns.length }), 'INVALID_INPUT', 'nothing to summarise')
    unchanged('nothing to summarise')

    const summary = 'The user started Phoenix and asked about scrolling in xterm.js; the MCP server was reconnected.'
    const env = s.compact({ summary, firstKeptUuid: plan.firstKeptUuid, trigger: 'auto' })
    assert.equal(env.type, 'compaction')
    assert.equal(env.compaction.summary, summary)
    assert.equal(env.compaction.firstKeptUuid, plan.firstKeptUuid)
    assert.equal(env.compaction.trigger, 'auto')
    assert.ok(Number.isInteger(env.compaction.tokensBefore) && Number.isInteger(env.compaction.tokensAfter))
    assert.ok(env.compaction.tokensAfter < env.compaction.tokensBefore, 'fewer tokens after')
    const log = s.envelopes()
    assert.equal(log.length, envelopes.length + 1, 'one record written')
    assert.deepEqual(log.slice(0, -1), envelopes, 'the history stays')
    assert.deepEqual(log[log.length - 1], env, 'the compaction record is in envelopes()')
    assert.deepEqual(history(s).map((h) => h.message), messages, 'the records keep the whole history')

    const after = build(s, { target: ANTHROPIC })
    assert.equal(after.stats.compacted, true)
    assert.equal(after.messages[0].role, 'user')
    assert.ok(after.messages[0].content[0].text.includes(summary), 'the context starts with the summary')
    const flat = (ms) => ms.flatMap((m) => m.content)
    // (blank text blocks stay stored but are never sent: providers refuse them)
    const sendable = (b) => !(b.type === 'text' && b.text.trim() === '')
    assert.deepEqual(flat(after.messages).slice(1), flat(messages.slice(plan.records.length)).filter(sendable), 'then the kept records, all of them')
    assert.ok(after.stats.estimatedTokens < before.stats.estimatedTokens)

    const tracker = s.tokenTracker
    assert.equal(tracker.contextTokens, env.compaction.tokensAfter, 'the tracker is re-based on the compaction')
    assert.ok(tracker.contextTokens < trackerBefore.contextTokens)
    for (const k of ['cumulativeInputTokens', 'cumulativeOutputTokens', 'cumulativeCacheReadTokens', 'cumulativeCacheCreationTokens']) {
      assert.equal(tracker[k], trackerBefore[k], `${k}: what was spent stays spent`)
    }

    // Reopened: the same context, tracker and log.
    store.close()
    store = Store.open(file)
    s = store.openSession(s.id)
    assert.deepEqual(build(s, { target: ANTHROPIC }), after, 'the context after reopening')
    assert.deepEqual(s.tokenTracker, tracker)
    assert.deepEqual(s.envelopes().at(-1), env)

    // The session goes on from the compacted context.
    s.append('and now fix the scrolling')
    assert.ok(s.tokenTracker.contextTokens > tracker.contextTokens, 'new messages add to the re-based count')
    const next = build(s, { target: ANTHROPIC })
    assert.ok(next.messages[0].content[0].text.includes(summary))
    assert.deepEqual(next.messages.at(-1).content.at(-1), { type: 'text', text: 'and now fix the scrolling' })

    // The summary of a compaction is not a record to keep from.
    const count = s.envelopes().length
    expectError(() => s.compact({ summary: 'S2', firstKeptUuid: env.uuid }), 'INVALID_INPUT', 'firstKeptUuid')
    assert.equal(s.envelopes().length, count, 'nothing written')
  })

  test('a second compaction summarises the first summary and replaces it', () => {
    const s = agentSession()
    const plan1 = s.compactionPlan({ targetTokens: 0, keepTurns: 4 })
    s.compact({ summary: 'FIRST SUMMARY', firstKeptUuid: plan1.firstKeptUuid })
    const plan2 = s.compactionPlan({ targetTokens: 0, keepTurns: 2 })
    assert.ok(plan2.records[0].message.content[0].text.includes('FIRST SUMMARY'), 'the plan starts with the summary in force')
    assert.ok(plan2.text.includes('FIRST SUMMARY'))
    const env2 = s.compact({ summary: 'SECOND SUMMARY', firstKeptUuid: plan2.firstKeptUuid })
    const c = build(s, { target: ANTHROPIC })
    const json = JSON.stringify(c.messages)
    assert.ok(c.messages[0].content[0].text.includes('SECOND SUMMARY'))
    assert.ok(!json.includes('FIRST SUMMARY'), 'the first summary is summarised, not sent')
    const all = history(s)
    const keptFrom = all.findIndex((h) => h.uuid === env2.compaction.firstKeptUuid)
    assert.ok(keptFrom > 0)
    assert.deepEqual(c.messages.flatMap((m) => m.content).slice(1), all.slice(keptFrom).flatMap((h) => h.message.content), 'the records kept by the second compaction follow')
  })

  test('a prompt that carries the results of the response before it is not a cut point', () => {
    const s = new Session()
    s.append('q1')
    s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_a', name: 'Bash', input: { command: 'make' } }] })
    s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'RESULT-A' }, { type: 'text', text: 'q2, and also this' }] })
    s.append({ role: 'assistant', content: [{ type: 'text', text: 'a2' }] })
    s.append('q3')
    s.append({ role: 'assistant', content: [{ type: 'text', text: 'a3' }] })
    assert.equal(s.turns.length, 3)
    const plan = s.compactionPlan({ targetTokens: 0, keepTurns: 2 })
    assert.equal(plan.firstKeptUuid, null, 'the only cut keeping 2 turns would part toolu_a from its result')
    const plan1 = s.compactionPlan({ targetTokens: 0, keepTurns: 1 })
    assert.equal(plan1.records.length, 4)
    assert.ok(plan1.text.includes('RESULT-A'), 'the result is summarised with its call')
    s.compact({ summary: 'SUM', firstKeptUuid: plan1.firstKeptUuid })
    const c = build(s, { target: ANTHROPIC })
    assert.deepEqual(c.stats.unpaired, [], 'no result lost')
  })

  test('rewinding past a compaction gives the uncompacted context back', () => {
    const s = agentSession()
    const before = build(s, { target: ANTHROPIC })
    const last = s.envelopes().at(-1)
    const plan = s.compactionPlan({ targetTokens: 0, keepTurns: 2 })
    s.compact({ summary: 'SUM', firstKeptUuid: plan.firstKeptUuid })
    assert.equal(build(s, { target: ANTHROPIC }).stats.compacted, true)
    s.rewind(last.uuid)
    const again = build(s, { target: ANTHROPIC })
    assert.equal(again.stats.compacted, false)
    assert.deepEqual(again.messages, before.messages)
  })

  test('budgets on a compacted context report dropped ranges in order', () => {
    const s = agentSession()
    const plan = s.compactionPlan({ targetTokens: 0, keepTurns: 3 })
    s.compact({ summary: 'SUM', firstKeptUuid: plan.firstKeptUuid })
    const full = build(s, { target: ANTHROPIC })
    for (const maxTokens of budgetsFor(full)) checkCut(full, build(s, { target: ANTHROPIC, maxTokens }), `compacted, maxTokens ${maxTokens}`)
  })
})

// ---------------------------------------------------------------------------------------------
// 7. the real compacted Claude Code session

test('compacted-session.jsonl: built from its compact_boundary, the summary first', () => {
  const lines = readJsonl('compacted-session.jsonl')
  const raw = lines.map((l) => JSON.parse(l))
  const boundary = raw.findIndex((r) => r.type === 'system' && r.subtype === 'compact_boundary')
  assert.ok(boundary > 0, 'the fixture has a compact_boundary')
  const summaryRecord = raw[boundary + 1]
  assert.equal(summaryRecord.isCompactSummary, true)
  const s = restored('compacted-session.jsonl')
  const c = build(s, { target: ANTHROPIC })
  assert.equal(c.stats.compacted, true)
  const summaryText = typeof summaryRecord.message.content === 'string' ? summaryRecord.message.content : summaryRecord.message.content.map((b) => b.text).join('')
  assert.equal(c.messages[0].role, 'user')
  assert.equal(c.messages[0].content[0].text, summaryText, 'the first message is the summary after the boundary')
  const seqOfSummary = s.envelopes().find((e) => e.uuid === summaryRecord.uuid).seq
  assert.equal(c.stats.startSeq, seqOfSummary, 'the context starts at the summary')
  // Nothing from before the boundary; every answered call after it.
  const callsBefore = new Set(raw.slice(0, boundary).flatMap((r) => (r.message && Array.isArray(r.message.content) ? r.message.content : []).filter((b) => b.type === 'tool_use').map((b) => b.id)))
  const resultsAfter = new Set(raw.slice(boundary).flatMap((r) => (r.message && Array.isArray(r.message.content) ? r.message.content : []).filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id)))
  const callsAfter = raw.slice(boundary).flatMap((r) => (r.type === 'assistant' && Array.isArray(r.message.content) ? r.message.content : []).filter((b) => b.type === 'tool_use').map((b) => b.id))
  const sent = toolUses(c.messages)
  for (const id of sent) assert.ok(!callsBefore.has(id), `${id} is from before the boundary`)
  assert.deepEqual(sent, callsAfter.filter((id) => resultsAfter.has(id)), 'the answered calls after the boundary, in order')
  const all = history(s)
  assert.ok(all.length > 300, 'the whole history is still there')
  assert.ok(c.messages.length < all.length - 200, 'the context is the part after the boundary')
})

// ---------------------------------------------------------------------------------------------
// 8. rewind and branches

// The leaves of the session's record tree (records no other record names as parent), rewind
// records aside: what branches() must list.
function leaves(envelopes) {
  const nodes = envelopes.filter((e) => e.type !== 'rewind')
  const parents = new Set(nodes.map((e) => e.parentUuid))
  return nodes.filter((e) => !parents.has(e.uuid)).map((e) => e.uuid).sort()
}

test('rewind: the next append continues from the record, the abandoned branch stays, everything follows the branch, and survives reopening', (t) => {
  const file = path.join(tmpDir(t), 'store.db')
  let store = Store.open(file)
  t.after(() => store.close())
  let s = store.createSession({ title: 'rewind' })
  const q1 = s.append('list the files')
  const a1 = s.append({ role: 'assistant', id: 'msg_a1', content: [{ type: 'tool_use', id: 'toolu_ls', name: 'Bash', input: { command: 'ls' } }], usage: { input_tokens: 100, output_tokens: 10 } })
  const r1 = s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_ls', content: 'a.rs\nb.rs' }] })
  const a1b = s.append({ role: 'assistant', id: 'msg_a1b', content: [{ type: 'text', text: 'two files' }], usage: { input_tokens: 130, output_tokens: 12 } })
  const at = { messages: s.messages, turns: s.turns, tracker: s.tokenTracker, context: build(s, { target: ANTHROPIC }) }
  s.append('delete them')
  const a2 = s.append({ role: 'assistant', id: 'msg_a2', content: [{ type: 'text', text: 'deleted' }], usage: { input_tokens: 150, output_tokens: 5 } })
  const abandoned = { messages: s.messages, envelopes: s.envelopes() }
  assert.deepEqual(s.branches().map((b) => b.leafUuid), [a2.uuid])

  s.rewind(a1b.uuid)
  assert.deepEqual(s.messages, at.messages, 'messages are the branch rewound to')
  assert.deepEqual(s.turns, at.turns, 'turns too')
  assert.deepEqual(s.tokenTracker, at.tracker, 'and the token state')
  assert.deepEqual(build(s, { target: ANTHROPIC }), at.context, 'and the context')
  const log = s.envelopes()
  assert.deepEqual(log.slice(0, abandoned.envelopes.length), abandoned.envelopes, 'the abandoned branch stays in the log')
  assert.equal(log.length, abandoned.envelopes.length + 1)
  assert.equal(log.at(-1).type, 'rewind', 'a rewind record marks the switch')
  assert.equal(log.at(-1).includeInContext, false)
  let branches = s.branches()
  assert.equal(branches.length, 2)
  assert.deepEqual([branches[0].leafUuid, branches[0].current], [a1b.uuid, true])
  assert.deepEqual(branches[1], { leafUuid: a2.uuid, leafSeq: a2.seq, messageCount: abandoned.messages.length, current: false, forkedAtUuid: a1b.uuid })

  const q3 = s.append('count them instead')
  assert.equal(q3.parentUuid, a1b.uuid, 'the next append continues from the record rewound to')
  assert.deepEqual(s.messages, [...at.messages, q3.message])
  assert.equal(s.turns.length, at.turns.length + 1)
  assert.equal(s.turns.at(-1).startUuid, q3.uuid)
  const c = build(s, { target: ANTHROPIC })
  assert.deepEqual(c.messages, [...at.context.messages, q3.message], 'the context follows the branch')
  assert.ok(!JSON.stringify(c.messages).includes('delete them'), 'nothing of the abandoned branch')
  assert.deepEqual(leaves(s.envelopes()), [a2.uuid, q3.uuid].sort())
  assert.deepEqual(s.branches().map((b) => b.leafUuid).sort(), leaves(s.envelopes()), 'branches() lists the leaves of the tree')

  // Unknown record: NOT_FOUND, nothing changed.
  const state = { envelopes: s.envelopes(), messages: s.messages, branches: s.branches(), tracker: s.tokenTracker }
  expectError(() => s.rewind('no-such-record'), 'NOT_FOUND', 'rewind', 'no-such-record')
  expectError(() => s.rewind(''), 'INVALID_INPUT', 'rewind')
  assert.deepEqual({ envelopes: s.envelopes(), messages: s.messages, branches: s.branches(), tracker: s.tokenTracker }, state, 'nothing changed')

  // Rewind to a record, then straight away to another: the first is not a branch of its own.
  s.rewind(r1.uuid)
  s.rewind(a1.uuid)
  const r1b = s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_ls', content: 'a.rs\nb.rs\nc.rs' }] })
  assert.equal(r1b.parentUuid, a1.uuid)
  assert.deepEqual(s.messages, [q1.message, a1.message, r1b.message])
  branches = s.branches()
  assert.deepEqual(branches.map((b) => b.leafUuid).sort(), leaves(s.envelopes()), 'branches() lists the leaves of the tree, each once')
  assert.equal(branches[0].leafUuid, r1b.uuid)
  assert.equal(branches[0].current, true)
  assert.equal(branches.filter((b) => b.current).length, 1)
  const after = { messages: s.messages, envelopes: s.envelopes(), branches, turns: s.turns, tracker: s.tokenTracker, context: build(s, { target: ANTHROPIC }) }

  // Reopened: the same branch, and appends continue from it.
  store.close()
  store = Store.open(file)
  s = store.openSession(s.id)
  assert.deepEqual({ messages: s.messages, envelopes: s.envelopes(), branches: s.branches(), turns: s.turns, tracker: s.tokenTracker, context: build(s, { target: ANTHROPIC }) }, after)
  const next = s.append({ role: 'assistant', content: [{ type: 'text', text: 'three files' }] })
  assert.equal(next.parentUuid, r1b.uuid)
  // And back to the abandoned branch: all of it again.
  s.rewind(a2.uuid)
  assert.deepEqual(s.messages, abandoned.messages)
})

// ---------------------------------------------------------------------------------------------
// 9. forks

test('forkSession: a new session up to a record, blobs shared, token baseline inherited, the origin untouched', (t) => {
  const file = path.join(tmpDir(t), 'store.db')
  let store = Store.open(file)
  t.after(() => store.close())
  const origin = store.createSession({ title: 'origin', project: 'forks', model: MODEL_A })
  const image = crypto.randomBytes(3 << 20).toString('base64')   // 4 MiB of base64
  origin.append({ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: image } }, { type: 'text', text: 'what is this?' }] })
  const a1 = origin.append({ role: 'assistant', id: 'msg_1', model: MODEL_A, content: [{ type: 'text', text: 'a cat' }], usage: { input_tokens: 5000, output_tokens: 10, cache_read_input_tokens: 40 } })
  const trackerAtA1 = origin.tokenTracker
  origin.append('which breed?')
  origin.append({ role: 'assistant', id: 'msg_2', model: MODEL_A, content: [{ type: 'text', text: 'a tabby' }], usage: { input_tokens: 5100, output_tokens: 20 } })
  const originState = () => ({ messages: origin.messages, envelopes: origin.envelopes(), tracker: origin.tokenTracker, info: origin.info, context: build(origin, { target: ANTHROPIC }) })
  const before = originState()
  const sessionsBefore = store.listSessions().length

  const size0 = storeBytes(file)
  const fork = store.forkSession(origin.id, { atUuid: a1.uuid, title: 'the fork' })
  const grew = storeBytes(file) - size0
  assert.ok(grew < image.length / 4, `the fork shares the image: the store grew by ${grew} bytes, the image is ${image.length}`)
  assert.notEqual(fork.id, origin.id)
  assert.deepEqual(fork.info.forkedFrom, { sessionId: origin.id, uuid: a1.uuid })
  assert.equal(fork.info.title, 'the fork')
  assert.equal(fork.info.project, 'forks')
  assert.deepEqual(fork.messages, before.messages.slice(0, 2), 'the messages up to atUuid, image included')
  assert.ok(fork.envelopes().every((e) => e.sessionId === fork.id), 'the records are the fork\'s')
  assert.deepEqual(fork.envelopes().map((e) => e.uuid), before.envelopes.slice(0, 2).map((e) => e.uuid), 'same uuids')
  assert.deepEqual(fork.tokenTracker, trackerAtA1, 'the token baseline is the origin\'s at the fork point, counted once')
  assert.deepEqual(originState(), before, 'the origin is untouched')

  // A fork at the latest record has the origin's counts, not twice them.
  const whole = store.forkSession(origin.id)
  assert.deepEqual(whole.tokenTracker, before.tracker)
  assert.deepEqual(whole.messages, before.messages)
  assert.equal(whole.info.forkedFrom.uuid, before.envelopes.at(-1).uuid)

  // The fork goes its own way.
  const q = fork.append('is it a lion?')
  assert.equal(q.parentUuid, a1.uuid)
  fork.append({ role: 'assistant', id: 'msg_f1', content: [{ type: 'text', text: 'no' }], usage: { input_tokens: 5050, output_tokens: 3 } })
  assert.equal(fork.tokenTracker.cumulativeInputTokens, trackerAtA1.cumulativeInputTokens + 5050)
  assert.equal(fork.tokenTracker.cumulativeOutputTokens, trackerAtA1.cumulativeOutputTokens + 3)
  assert.deepEqual(originState(), before, 'appending to the fork does not touch the origin')
  assert.equal(store.listSessions().length, sessionsBefore + 2)

  // Unknown session or record: NOT_FOUND, no session created.
  expectError(() => store.forkSession('no-such-session'), 'NOT_FOUND', 'forkSession')
  expectError(() => store.forkSession(origin.id, { atUuid: 'no-such-record' }), 'NOT_FOUND', 'no-such-record')
  expectError(() => store.forkSession(origin.id, { at: a1.uuid }), 'INVALID_INPUT', 'options.at')
  assert.equal(store.listSessions().length, sessionsBefore + 2)

  // Reopened.
  const forkMessages = fork.messages
  store.close()
  store = Store.open(file)
  const reopened = store.openSession(fork.id)
  assert.deepEqual(reopened.info.forkedFrom, { sessionId: origin.id, uuid: a1.uuid })
  assert.deepEqual(reopened.messages, forkMessages)
  assert.deepEqual(store.openSession(origin.id).messages, before.messages)
})

test('forkSession of a rewound session takes the current branch only', () => {
  const store = Store.open(':memory:')
  const s = store.createSession()
  s.append('q1')
  const a1 = s.append({ role: 'assistant', content: [{ type: 'text', text: 'a1' }] })
  s.append('ABANDONED prompt')
  s.append({ role: 'assistant', content: [{ type: 'text', text: 'ABANDONED answer' }] })
  s.rewind(a1.uuid)
  s.append('q2')
  const fork = store.forkSession(s.id)
  assert.deepEqual(fork.messages, s.messages)
  assert.ok(!JSON.stringify(fork.envelopes()).includes('ABANDONED'), 'the abandoned branch is not copied')
  assert.ok(fork.envelopes().every((e) => e.type !== 'rewind'))
  assert.deepEqual(build(fork, { target: ANTHROPIC }).messages, build(s, { target: ANTHROPIC }).messages)
  store.close()
})

// ---------------------------------------------------------------------------------------------
// 10. bad input

describe('bad input: INVALID_INPUT naming the path, nothing written', () => {
  for (const target of TARGETS) {
    test(`buildContext (${target})`, () => {
      const s = agentSession()
      const count = s.envelopes().length
      expectError(() => s.buildContext(), 'INVALID_INPUT', 'buildContext', 'target')
      expectError(() => s.buildContext({}), 'INVALID_INPUT', 'buildContext', 'target')
      expectError(() => s.buildContext({ target: 'gemini' }), 'INVALID_INPUT', 'options.target', 'gemini')
      expectError(() => s.buildContext({ target: 42 }), 'INVALID_INPUT', 'options.target')
      expectError(() => s.buildContext(target), 'INVALID_INPUT', 'buildContext: options')
      expectError(() => s.buildContext({ target, maxTokens: -1 }), 'INVALID_INPUT', 'options.maxTokens')
      expectError(() => s.buildContext({ target, maxTokens: 1.5 }), 'INVALID_INPUT', 'options.maxTokens')
      expectError(() => s.buildContext({ target, maxTokens: '1000' }), 'INVALID_INPUT', 'options.maxTokens')
      expectError(() => s.buildContext({ target, maxMessages: -2 }), 'INVALID_INPUT', 'options.maxMessages')
      expectError(() => s.buildContext({ target, toolResultPreviewChars: -5 }), 'INVALID_INPUT', 'options.toolResultPreviewChars')
      expectError(() => s.buildContext({ target, reasoning: 'sometimes' }), 'INVALID_INPUT', 'options.reasoning', 'sometimes')
      expectError(() => s.buildContext({ target, maxToken: 100 }), 'INVALID_INPUT', 'options.maxToken')
      expectError(() => s.buildContext({ target, model: 7 }), 'INVALID_INPUT', 'options.model')
      assert.equal(s.envelopes().length, count, 'nothing written')
    })

    test(`buildContext (${target}): a system prompt that is neither a string nor text blocks`, () => {
      const s = agentSession()
      expectError(() => s.buildContext({ target, system: 42 }), 'INVALID_INPUT', 'options.system')
      expectError(() => s.buildContext({ target, system: { text: 'x' } }), 'INVALID_INPUT', 'options.system')
      expectError(() => s.buildContext({ target, system: [{ type: 'image' }] }), 'INVALID_INPUT', 'options.system')
    })
  }

  test('compactionPlan, compact, rewind', () => {
    const s = agentSession()
    const count = s.envelopes().length
    expectError(() => s.compactionPlan(), 'INVALID_INPUT', 'compactionPlan', 'targetTokens')
    expectError(() => s.compactionPlan({ targetTokens: -1 }), 'INVALID_INPUT', 'options.targetTokens')
    expectError(() => s.compactionPlan({ targetTokens: 10, keepTurns: -1 }), 'INVALID_INPUT', 'options.keepTurns')
    expectError(() => s.compactionPlan({ targetTokens: 10, keep: 1 }), 'INVALID_INPUT', 'options.keep')
    expectError(() => s.compact(), 'INVALID_INPUT', 'compact', 'summary')
    expectError(() => s.compact({ summary: 5 }), 'INVALID_INPUT', 'options.summary')
    expectError(() => s.compact({ summary: 'S', keepTurns: 'two' }), 'INVALID_INPUT', 'options.keepTurns')
    expectError(() => s.compact({ summary: 'S', trigger: 'later' }), 'INVALID_INPUT', 'options.trigger', 'later')
    expectError(() => s.compact({ summary: 'S', bogus: true }), 'INVALID_INPUT', 'options.bogus')
    expectError(() => s.rewind(), 'INVALID_INPUT', 'rewind')
    assert.equal(s.envelopes().length, count, 'nothing written')
  })
})

// ---------------------------------------------------------------------------------------------
// 11. OpenAI targets

describe('OpenAI targets: the same context, converted, always valid', () => {
  const { fromOpenAIChat, fromOpenAIResponses } = lib

  for (const name of FIXTURES) {
    test(`${name}: every budget cut is a valid Chat Completions and Responses request`, () => {
      const s = restored(name)
      const neutral = build(s, { target: ANTHROPIC, reasoning: 'keep' })
      for (const target of ['openai-chat', 'openai-responses']) {
        const full = build(s, { target, reasoning: 'keep' })
        // Every tool call of the neutral context is there once, with its output.
        const calls = sum(neutral.messages.map((m) => ids(m, 'tool_use', 'id').length))
        const sent = target === 'openai-chat'
          ? sum(full.messages.map((m) => (m.tool_calls ?? []).length))
          : full.messages.filter((i) => i.type === 'function_call').length
        assert.equal(sent, calls, `${target}: every tool call goes in`)
        const thinking = sum(neutral.messages.map((m) => m.content.filter((b) => b.type === 'thinking' || b.type === 'redacted_thinking').length))
        assert.equal(full.stats.warnings.filter((w) => w.code === 'thinking_dropped').length, thinking,
          `${target}: each thinking block it cannot take is named in a warning`)
        for (let step = 1; step <= 8; step++) {
          const maxTokens = Math.floor((full.stats.estimatedTokens * step) / 8)
          const c = build(s, { target, maxTokens, system: 'You are terse.' })
          assert.ok(c.stats.keptTurns >= 1)
        }
      }
    })
  }

  test('tool-call ids a target does not accept are mapped, the same on call and result, and mapped back', () => {
    const s = new Session()
    const longId = 'toolu_' + 'x'.repeat(60)
    s.append('Read the file')
    s.append({ role: 'assistant', content: [{ type: 'tool_use', id: longId, name: 'Read', input: { path: 'a.ts' } }] })
    s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: longId, content: 'export {}' }] })
    s.append({ role: 'assistant', content: [{ type: 'text', text: 'It is empty.' }] })
    s.append('Thanks')
    const chat = build(s, { target: 'openai-chat' })
    const call = chat.messages.find((m) => m.tool_calls).tool_calls[0]
    assert.ok(call.id.length <= 40, `${call.id}: Chat Completions takes at most 40 characters`)
    assert.equal(chat.messages.find((m) => m.role === 'tool').tool_call_id, call.id)
    assert.deepEqual(chat.stats.idMap, { [call.id]: longId })
    const back = fromOpenAIChat(chat.messages, { idMap: chat.stats.idMap })
    assert.equal(back.messages[1].content[0].id, longId, 'mapped back to the stored id')
    // Anthropic accepts it as it is.
    assert.deepEqual(build(s, { target: ANTHROPIC }).stats.idMap, {})
  })

  test('Responses reasoning items go back to OpenAI only; Anthropic thinking to Anthropic only', () => {
    const s = new Session()
    s.append('What is in a.ts?')
    const output = [
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Read it.' }], encrypted_content: 'gAAAA-opaque' },
      { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'Read', arguments: '{"path":"a.ts"}' },
    ]
    const converted = fromOpenAIResponses(output)
    s.append(converted.messages[0], { provider: 'openai' })
    s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'export {}' }] })
    s.append({ role: 'assistant', content: [{ type: 'thinking', thinking: 'Empty module.', signature: 'sig-1' }, { type: 'text', text: 'Nothing.' }], model: MODEL_A }, { provider: 'anthropic' })
    s.append('Thanks')

    const responses = build(s, { target: 'openai-responses' })
    const reasoning = responses.messages.filter((i) => i.type === 'reasoning')
    assert.equal(reasoning.length, 1, 'the reasoning item goes back to the Responses API')
    assert.equal(reasoning[0].encrypted_content, 'gAAAA-opaque')
    assert.equal(JSON.stringify(responses.messages).includes('Empty module.'), false, "Anthropic's thinking is not sent to OpenAI")

    const anthropic = build(s, { target: ANTHROPIC })
    const types = anthropic.messages.flatMap((m) => m.content.map((b) => b.type))
    assert.ok(types.includes('thinking'), 'its own thinking goes back to Anthropic')
    assert.equal(types.includes('openai_reasoning'), false, 'OpenAI reasoning does not')
    assert.equal(anthropic.stats.droppedThinking, 1)
    for (const m of anthropic.messages) assert.deepEqual(Object.keys(m), ['role', 'content'], 'Anthropic gets role and content only')

    // 'keep' sends all it can, and says what the target cannot take.
    const chat = build(s, { target: 'openai-chat', reasoning: 'keep' })
    const codes = chat.stats.warnings.map((w) => w.code)
    assert.ok(codes.includes('thinking_dropped') && codes.includes('reasoning_dropped'), JSON.stringify(codes))
  })
})

test('text outside ASCII (accents, CJK, emoji beyond the BMP, escapes beside them) comes back exactly, on both APIs', async (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'unicode.db'))
  const s = store.createSession()
  const texts = ['café naïve', '日本語のテキスト', 'party 🎉🧵 time', 'tab\tquote" backslash\\ 🎉\n日本', '\u2028 line sep \u2029', 'plain']
  for (const [i, text] of texts.entries()) {
    s.append({ role: i % 2 ? 'assistant' : 'user', content: [{ type: 'text', text }] })
  }
  const sent = (c) => c.messages.map((m) => m.content.map((b) => b.text))
  const expected = texts.map((t) => [t])
  assert.deepEqual(sent(build(s, { target: ANTHROPIC })), expected)
  const { Store: PStore } = require(path.join(__dirname, '..', 'promise.js'))
  const ps = await PStore.open(path.join(dir, 'unicode.db'))
  const again = await ps.openSession(s.id)
  assert.deepEqual(sent(await again.buildContext({ target: ANTHROPIC })), expected)
  await ps.close()
  store.close()
})
