'use strict'
// Streaming a response into a session (beginResponse -> push -> finish / fail): the message built
// from Anthropic's raw stream events is exactly the one the real SDK builds; partial output is
// persisted as `stream` records (never sent to a model); a failed or cut-off stream keeps only
// what a model may be sent again; bad chunks change nothing.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { once } = require('node:events')

const { lib, ROOT, tmpDir, expectError, assertSameJson, jsonClone, UUID_RE } = require('./helpers/util')
const { sdkFinalMessage } = require('./helpers/sdk-stream')
const EVENTS = require('./fixtures/anthropic-stream-events.json')
const SIMPLE = require('./fixtures/simple-stream-chunks.json')

const { Store, validateMessages } = lib

const TOOL_CASE = EVENTS.cases[0] // thinking, text and a tool call

function newSession(store = Store.open(':memory:'), options) {
  const s = store.createSession(options)
  s.append('find the main function')
  return s
}

function streamRecords(session) {
  return session.envelopes().filter((e) => e.type === 'stream')
}

// Every chunk persisted so far for stream `id`, in order.
function persistedChunks(session, id) {
  const out = []
  let part = 0
  for (const e of streamRecords(session)) {
    if (e.stream.id !== id) continue
    assert.equal(e.stream.part, part++, 'parts are numbered in order')
    out.push(...e.stream.chunks)
  }
  return out
}

function observe(session) {
  return { envelopes: session.envelopes(), messages: session.messages, toolCalls: session.toolCalls() }
}

// The index of the event at which the first `n` events are cut in the middle of block `type`
// (after its start and at least one delta, before its stop).
function cutInside(events, blockType) {
  const start = events.findIndex((e) => e.type === 'content_block_start' && e.content_block.type === blockType)
  assert.ok(start >= 0, `no ${blockType} block in the fixture`)
  return start + 2
}

// A child process holding the store's write lock (better-sqlite3, BEGIN EXCLUSIVE) until released.
async function holdWriteLock(file) {
  const code = `
    const Database = require(${JSON.stringify(path.join(ROOT, 'node_modules', 'better-sqlite3'))})
    const db = new Database(${JSON.stringify(file)})
    db.exec('BEGIN EXCLUSIVE')
    process.stdout.write('locked\\n')
    process.stdin.once('data', () => { db.exec('COMMIT'); db.close(); process.exit(0) })
  `
  const child = spawn(process.execPath, ['-e', code], { stdio: ['pipe', 'pipe', 'inherit'] })
  const [data] = await once(child.stdout, 'data')
  assert.equal(String(data), 'locked\n')
  return async () => {
    child.stdin.write('go\n')
    await once(child, 'exit')
  }
}

describe('Anthropic raw stream events', () => {
  for (const c of EVENTS.cases) {
    test(`${c.name}: finish() stores exactly what the SDK's finalMessage() builds`, async () => {
      const sdk = await sdkFinalMessage(c.events)
      assert.deepStrictEqual(sdk, c.expected, 'the fixture matches the installed SDK')
      const s = newSession()
      const w = s.beginResponse({ requestId: 'req_011CUx', model: 'ignored-when-the-stream-names-one', provider: 'anthropic' })
      assert.match(w.id, UUID_RE)
      for (const e of c.events) w.push(e)
      assert.equal(s.messages.length, 1, 'nothing in messages before finish')
      const env = w.finish()
      assertSameJson(env.message, sdk, 'returned message')
      assert.equal(env.type, 'assistant')
      assert.equal(env.streamId, w.id)
      assert.equal(env.requestId, 'req_011CUx')
      assert.equal(env.provider, 'anthropic')
      const messages = s.messages
      assert.equal(messages.length, 2)
      assertSameJson(messages[1], sdk, 'stored message')
      const last = s.envelopes().at(-1)
      assert.equal(last.uuid, env.uuid)
      assert.equal(last.seq, env.seq)
      assertSameJson(last.message, sdk, 'stored envelope message')
      // usage of the final message (message_delta's output_tokens) is what the tracker counts
      assert.equal(s.tokenTracker.outputTokens, sdk.usage.output_tokens)
      assert.equal(s.tokenTracker.inputTokens, sdk.usage.input_tokens)
      assert.equal(s.turns.at(-1).toolUseCount, sdk.content.filter((b) => b.type.endsWith('tool_use')).length)
    })
  }

  test('the stored message reads back the same from a new store handle', async (t) => {
    const file = path.join(tmpDir(t), 'stream.db')
    const s = newSession(Store.open(file), { id: 'st' })
    const w = s.beginResponse()
    for (const e of TOOL_CASE.events) w.push(e)
    w.finish()
    const back = Store.open(file).openSession('st')
    assertSameJson(back.messages[1], await sdkFinalMessage(TOOL_CASE.events))
    assert.deepStrictEqual(back.toolCalls().map((c) => [c.id, c.state]), [['toolu_01T1x1fJ34qAmk2tNTrN7Up6', 'requested']])
    assert.deepStrictEqual(back.turns.at(-1).status, 'awaiting_tool_results')
  })

  test('partial output: stream records in envelopes(), never in messages, persisted at every block boundary', () => {
    const s = newSession()
    const w = s.beginResponse({ requestId: 'req_p' })
    const events = TOOL_CASE.events
    events.forEach((e, i) => {
      w.push(e)
      assert.equal(s.messages.length, 1, `after event ${i}: messages unchanged`)
      const chunks = persistedChunks(s, w.id)
      assert.deepStrictEqual(chunks, events.slice(0, chunks.length), `after event ${i}: a prefix of what was pushed, in order`)
      const lastStop = events.slice(0, i + 1).map((x) => x.type).lastIndexOf('content_block_stop')
      assert.ok(chunks.length >= lastStop + 1, `after event ${i}: every chunk up to the last content_block_stop is persisted`)
    })
    for (const r of streamRecords(s)) {
      assert.equal(r.includeInContext, false)
      assert.equal(r.requestId, 'req_p')
      assert.equal(r.message, undefined)
    }
    assert.ok(streamRecords(s).length >= 3, 'one record per block at least')
    w.finish()
    const messages = s.messages
    assert.equal(messages.length, 2, 'the prompt and the one final assistant message')
    assert.equal(messages[1].role, 'assistant')
    assert.equal(s.envelopes().filter((e) => e.type === 'assistant').length, 1)
    assert.deepStrictEqual(validateMessages(messages.concat([{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', content: 'x' }] }])), [])
  })

  test('within a long block, buffered chunks are persisted at least every 200 ms', async () => {
    const s = newSession()
    const w = s.beginResponse()
    const events = TOOL_CASE.events
    w.push(events[0]) // message_start
    w.push(events[2]) // thinking block start
    w.push(events[3]) // a delta
    await new Promise((r) => setTimeout(r, 250))
    w.push(events[4]) // a delta after the interval
    assert.deepStrictEqual(persistedChunks(s, w.id), [events[0], events[2], events[3], events[4]])
  })

  test("finish(message) stores the SDK's finalMessage() object exactly (unknown fields too)", async () => {
    const final = await sdkFinalMessage(TOOL_CASE.events, { keepParsedOutput: true })
    assert.ok('parsed_output' in final)
    const s = newSession()
    const w = s.beginResponse({ requestId: 'req_f' })
    for (const e of TOOL_CASE.events) w.push(e)
    const env = w.finish(final)
    assertSameJson(env.message, final)
    assertSameJson(s.messages[1], final)
    assertSameJson(s.envelopes().at(-1).message, final)
    assert.equal(s.envelopes().at(-1).streamId, w.id)
  })

  test('finish(message) with a bad message is INVALID_INPUT naming the path; the writer can still finish', async () => {
    const s = newSession()
    const w = s.beginResponse()
    for (const e of TOOL_CASE.events) w.push(e)
    const before = observe(s)
    expectError(() => w.finish({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_x', input: {} }] }), 'INVALID_INPUT', 'finish', 'content[0].name')
    expectError(() => w.finish('text'), 'INVALID_INPUT', 'finish')
    assert.deepStrictEqual(observe(s), before)
    w.finish()
    assertSameJson(s.messages[1], await sdkFinalMessage(TOOL_CASE.events))
  })
})

describe('simple chunks', () => {
  for (const c of SIMPLE.cases) {
    test(`${c.name}: finish() gives the expected message`, () => {
      const s = newSession()
      const w = s.beginResponse()
      for (const chunk of c.chunks) w.push(chunk)
      const env = w.finish()
      assertSameJson(env.message, c.expected, 'returned')
      assertSameJson(s.messages[1], c.expected, 'stored')
      assert.equal(s.messages.length, 2)
      assert.ok(streamRecords(s).length >= 1)
      // a persisted prefix of what was pushed
      const chunks = persistedChunks(s, w.id)
      assert.deepStrictEqual(chunks, c.chunks.slice(0, chunks.length))
    })

    test(`${c.name}: fail() keeps the salvageable blocks`, () => {
      const s = newSession()
      const w = s.beginResponse()
      for (const chunk of c.chunks) w.push(chunk)
      const env = w.fail({ message: 'connection reset' })
      assertSameJson(env.message.content, c.salvage)
      assertSameJson(s.messages[1].content, c.salvage)
    })
  }

  test('the model option names a message the chunks do not', () => {
    const c = SIMPLE.cases[0]
    const s = newSession()
    const w = s.beginResponse({ model: 'gpt-5', provider: 'openai', requestId: 'resp_1' })
    for (const chunk of c.chunks) w.push(chunk)
    const env = w.finish()
    assertSameJson(env.message, { ...c.expected, model: 'gpt-5' })
    assert.equal(env.provider, 'openai')
    assert.equal(env.requestId, 'resp_1')
  })
})

describe('fail()', () => {
  test("an 'error' record with {message, code} and the salvaged content: complete thinking (signed) and text kept, half tool input left out", async () => {
    const events = TOOL_CASE.events
    const cut = cutInside(events, 'tool_use') + 2
    const s = newSession()
    const w = s.beginResponse({ requestId: 'req_fail', provider: 'anthropic' })
    for (const e of events.slice(0, cut)) w.push(e)
    const env = w.fail({ message: 'Overloaded', code: 'overloaded_error' })
    assert.equal(env.type, 'error')
    assert.deepStrictEqual(env.error, { message: 'Overloaded', code: 'overloaded_error' })
    assert.equal(env.streamId, w.id)
    assert.equal(env.requestId, 'req_fail')
    assert.notEqual(env.includeInContext, false)
    const full = await sdkFinalMessage(events)
    const content = env.message.content
    assert.deepStrictEqual(content.map((b) => b.type), ['thinking', 'text'])
    assertSameJson(content[0], full.content[0], 'the complete thinking block with its signature')
    assertSameJson(content[1], full.content[1], 'the complete text block')
    assert.equal(env.message.role, 'assistant')
    assert.equal(env.message.id, full.id)
    assert.equal(env.message.model, full.model)
    assert.equal(env.message.stop_reason, null)
    const messages = s.messages
    assert.equal(messages.length, 2)
    assertSameJson(messages[1], env.message)
    assert.deepStrictEqual(s.toolCalls(), [], 'the half-streamed tool call was never requested')
    assert.deepStrictEqual(validateMessages(messages), [])
    const stored = s.envelopes().at(-1)
    assert.equal(stored.uuid, env.uuid)
    assert.deepStrictEqual(stored.error, env.error)
  })

  test('half-streamed thinking is left out; with nothing salvageable nothing enters messages', () => {
    const events = TOOL_CASE.events
    const s = newSession()
    const w = s.beginResponse()
    for (const e of events.slice(0, cutInside(events, 'thinking') + 1)) w.push(e)
    const env = w.fail({ message: 'socket hang up' })
    assert.equal(env.type, 'error')
    assert.deepStrictEqual(env.error, { message: 'socket hang up' }, 'no code when none is given')
    assert.equal(env.message, undefined)
    assert.equal(env.includeInContext, false)
    assert.equal(s.messages.length, 1)
    assert.equal(s.envelopes().at(-1).type, 'error')
    assert.deepStrictEqual(validateMessages(s.messages), [])

    // nothing pushed at all
    const t = newSession()
    const w2 = t.beginResponse()
    const env2 = w2.fail({ message: 'refused', code: 'E' })
    assert.deepStrictEqual(env2.error, { message: 'refused', code: 'E' })
    assert.equal(t.messages.length, 1)
  })

  test('a text block cut mid-way keeps the text that arrived; a later half thinking block is left out', async () => {
    const events = TOOL_CASE.events
    const s = newSession()
    const w = s.beginResponse()
    for (const e of events.slice(0, cutInside(events, 'text'))) w.push(e)
    const env = w.fail({ message: 'cut' })
    const full = await sdkFinalMessage(events)
    assert.deepStrictEqual(env.message.content.map((b) => b.type), ['thinking', 'text'])
    assertSameJson(env.message.content[0], full.content[0])
    assert.ok(full.content[1].text.startsWith(env.message.content[1].text))
    assert.ok(env.message.content[1].text.length > 0)
  })

  test('fail() arguments are checked', () => {
    const s = newSession()
    const w = s.beginResponse()
    const before = observe(s)
    expectError(() => w.fail(), 'INVALID_INPUT', 'fail')
    expectError(() => w.fail({ message: 5 }), 'INVALID_INPUT', 'error.message')
    expectError(() => w.fail({ message: 'x', code: 5 }), 'INVALID_INPUT', 'error.code')
    assert.deepStrictEqual(observe(s), before)
    w.fail({ message: 'ok now' })
  })
})

describe('bad chunks and finished writers', () => {
  test('a bad chunk is INVALID_INPUT naming the path, and changes nothing', async () => {
    const events = TOOL_CASE.events
    const s = newSession()
    const w = s.beginResponse()
    const bad = [
      [null, 'chunk'],
      ['text', 'chunk'],
      [[], 'chunk'],
      [{ type: 'weird_chunk' }, 'chunk.type'],
      [{ type: 'text', text: 5 }, 'chunk.text'],
      [{ type: 'reasoning', text: 'x', signature: 1 }, 'chunk.signature'],
      [{ type: 'tool_call_delta', delta: '{}' }, 'chunk.id'],
      [{ type: 'tool_call_delta', id: 'c1' }, 'chunk.delta'],
      [{ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x' } }, 'chunk.type'],
      [{ type: 'text', text: 'x', big: 10n }, 'BigInt'],
    ]
    for (const [chunk, part] of bad) expectError(() => w.push(chunk), 'INVALID_INPUT', 'push', part)
    const cut = cutInside(events, 'thinking')
    for (const e of events.slice(0, cut)) w.push(e)
    const mid = [
      [{ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x' } }, 'chunk.delta.type'],
      [{ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{' } }, 'chunk.delta.type'],
      [{ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 7 } }, 'chunk.delta.thinking'],
      [{ type: 'content_block_start', index: 4, content_block: { type: 'text', text: '' } }, 'chunk.index'],
      [{ type: 'message_start', message: events[0].message }, 'chunk.type'],
      [{ type: 'text', text: 'a simple chunk in a raw event stream' }, 'chunk.type'],
    ]
    const before = observe(s)
    for (const [chunk, part] of mid) {
      expectError(() => w.push(chunk), 'INVALID_INPUT', 'push', part)
      assert.deepStrictEqual(observe(s), before, JSON.stringify(chunk))
    }
    for (const e of events.slice(cut)) w.push(e)
    w.finish()
    assertSameJson(s.messages[1], await sdkFinalMessage(events), 'the rejected chunks left no trace')
    assert.deepStrictEqual(persistedChunks(s, w.id), events.slice(0, persistedChunks(s, w.id).length))
  })

  test('push, finish and fail after finish (or after fail) are INVALID_INPUT and write nothing', () => {
    for (const end of ['finish', 'fail']) {
      const s = newSession()
      const w = s.beginResponse()
      for (const e of TOOL_CASE.events) w.push(e)
      if (end === 'finish') w.finish()
      else w.fail({ message: 'x' })
      const before = observe(s)
      expectError(() => w.push(TOOL_CASE.events.at(-1)), 'INVALID_INPUT', 'push', 'finished')
      expectError(() => w.push({ type: 'text', text: 'more' }), 'INVALID_INPUT', 'push')
      expectError(() => w.finish(), 'INVALID_INPUT', 'finish')
      expectError(() => w.finish(jsonClone(TOOL_CASE.expected)), 'INVALID_INPUT', 'finish')
      expectError(() => w.fail({ message: 'again' }), 'INVALID_INPUT', 'fail')
      assert.deepStrictEqual(observe(s), before, end)
    }
  })

  test('finish() after a persistence error (STORE_BUSY) can be retried and stores the whole message', async (t) => {
    const file = path.join(tmpDir(t), 'busy.db')
    const s = newSession(Store.open(file, { busyTimeoutMs: 50 }))
    const w = s.beginResponse()
    for (const e of TOOL_CASE.events) w.push(e)
    const release = await holdWriteLock(file)
    try {
      expectError(() => w.finish(), 'STORE_BUSY', 'finish')
    } finally {
      await release()
    }
    assert.equal(s.messages.length, 1)
    const env = w.finish()
    const sdk = await sdkFinalMessage(TOOL_CASE.events)
    assertSameJson(env.message, sdk, 'the retried finish')
    assertSameJson(s.messages[1], sdk)
  })
})

describe('a stream cut off without finish', () => {
  async function cutStream(t, events, options) {
    const file = path.join(tmpDir(t), 'cut.db')
    const s = newSession(Store.open(file), { id: 'cut' })
    const w = s.beginResponse(options)
    for (const e of events) w.push(e)
    // the writer is abandoned (the process "died"); a new handle opens the session
    const again = Store.open(file).openSession('cut')
    return { again, streamId: w.id, file }
  }

  test('pendingRepairs shows close_stream; recover() writes the interrupted record; the history is valid', async (t) => {
    const events = TOOL_CASE.events
    const cut = cutInside(events, 'tool_use') + 3
    const { again: s, streamId, file } = await cutStream(t, events.slice(0, cut), { requestId: 'req_cut', provider: 'anthropic' })
    assert.equal(s.messages.length, 1)
    const before = observe(s)
    const planned = s.pendingRepairs()
    assert.deepStrictEqual(observe(s), before, 'pendingRepairs wrote nothing')
    assert.deepStrictEqual(planned.map((r) => r.kind), ['close_stream'])
    assert.match(planned[0].recordUuid, UUID_RE)
    assert.ok(planned[0].reason.includes(streamId))

    const report = await s.recover()
    assert.deepStrictEqual(report.repairs, planned)
    assert.equal(report.recordsWritten, 1)
    const rec = s.envelopes().at(-1)
    assert.equal(rec.uuid, planned[0].recordUuid)
    assert.equal(rec.type, 'error')
    assert.equal(rec.error.code, 'INTERRUPTED')
    assert.match(rec.error.message, /interrupted/)
    assert.equal(rec.streamId, streamId)
    assert.equal(rec.requestId, 'req_cut')
    assert.equal(rec.provider, 'anthropic')
    assert.deepStrictEqual(rec.repair, { kind: 'close_stream' })
    const full = await sdkFinalMessage(events)
    assert.deepStrictEqual(rec.message.content, full.content.slice(0, 2), 'complete thinking and text; the half tool call left out')
    const messages = s.messages
    assert.equal(messages.length, 2)
    assert.deepStrictEqual(validateMessages(messages), [])
    assert.deepStrictEqual(await s.recover(), { repairs: [], recordsWritten: 0, clean: true })
    assert.deepStrictEqual(Store.open(file).openSession('cut').pendingRepairs(), [])
  })

  test('complete tool calls of a cut stream are answered as never started, in the same recovery', async (t) => {
    const c = SIMPLE.cases[0]
    const { again: s } = await cutStream(t, c.chunks)
    const planned = s.pendingRepairs()
    assert.equal(planned[0].kind, 'close_stream')
    const report = await s.recover()
    assert.equal(report.repairs[0].kind, 'close_stream')
    const calls = report.repairs.slice(1)
    assert.ok(calls.length >= 1)
    for (const r of calls) assert.equal(r.kind, 'never_started')
    assert.deepStrictEqual(calls.map((r) => r.toolUseId), planned.slice(1).map((r) => r.toolUseId))
    assert.deepStrictEqual(validateMessages(s.messages), [])
    // A repair places a result; it does not change what is known: these calls never ran.
    for (const call of s.toolCalls()) assert.equal(call.state, 'requested', call.id)
    assert.deepStrictEqual((await s.recover()).clean, true)
  })

  test('a cut stream with nothing salvageable: the record stays out of messages', async (t) => {
    const events = TOOL_CASE.events
    const { again: s } = await cutStream(t, events.slice(0, cutInside(events, 'thinking') + 2))
    const report = await s.recover()
    assert.deepStrictEqual(report.repairs.map((r) => r.kind), ['close_stream'])
    assert.equal(s.envelopes().at(-1).type, 'error')
    assert.equal(s.envelopes().at(-1).message, undefined)
    assert.equal(s.messages.length, 1)
    assert.deepStrictEqual(validateMessages(s.messages), [])
  })

  test('the interrupted record is what fail() would have written (model option included)', async (t) => {
    const c = SIMPLE.cases[0]
    const { again: s } = await cutStream(t, c.chunks, { model: 'gpt-5' })
    await s.recover()
    const rec = s.envelopes().find((e) => e.repair && e.repair.kind === 'close_stream')
    assert.equal(rec.message.model, 'gpt-5', 'the writer was told the model; fail() would have stored it')
  })

  test('a new response after recovery streams normally', async (t) => {
    const events = TOOL_CASE.events
    const { again: s } = await cutStream(t, events.slice(0, 10))
    await s.recover()
    s.append('please continue')
    const c = EVENTS.cases[2]
    const w = s.beginResponse()
    for (const e of c.events) w.push(e)
    w.finish()
    assertSameJson(s.messages.at(-1), await sdkFinalMessage(c.events))
    assert.deepStrictEqual(s.pendingRepairs(), [])
    assert.deepStrictEqual(validateMessages(s.messages), [])
  })
})
