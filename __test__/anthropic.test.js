'use strict'
// threadline/anthropic with the real @anthropic-ai/sdk: its tool runner and its message streams
// talk to the model server on loopback (helpers/model-server), which refuses what the real API
// refuses (a tool_use without its result, a thinking signature it did not issue for that text).
// record() must store each message as it happens, so that a session continued from
// `buildContext()`, in this process or after a SIGKILL in another, sends valid requests with
// the signatures byte for byte. Each test runs on SQLite and, with THREADLINE_TEST_POSTGRES, on
// PostgreSQL.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnJsonLines } = require('./helpers/json-lines')

const Anthropic = require('@anthropic-ai/sdk').default
const sync = require('..')
const promise = require('../promise')
const { record } = require('../adapters/anthropic')
const { startModelServer, reply } = require('./helpers/model-server')
const { tmpDir } = require('./helpers/util')

const PG = process.env.THREADLINE_TEST_POSTGRES
const RUN = path.join(__dirname, 'helpers', 'anthropic-run.js')
let schemas = 0

const ENGINES = [
  { name: 'SQLite', store: (t) => path.join(tmpDir(t, 'threadline-anthropic-'), 'agent.db') },
  { name: 'PostgreSQL', skip: !PG && 'THREADLINE_TEST_POSTGRES is not set (node scripts/postgres.js run -- ... gives it)', store: () => `${PG}${PG.includes('?') ? '&' : '?'}schema=anthropic_${process.pid}_${schemas++}` },
]

/** One test per engine; the PostgreSQL one is skipped, saying why, without a server. */
function eachEngine(name, fn, options = {}) {
  for (const engine of ENGINES) test(`${name} (${engine.name})`, { skip: engine.skip, ...options }, (t) => fn(t, engine))
}

const schema = { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } }
const addTool = { name: 'add', description: 'Adds two numbers', input_schema: schema, run: async ({ a, b }) => String(a + b) }
const toolResults = (body) => body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []).filter((b) => b.type === 'tool_result'))

/** Two tool calls with thinking, then text; a request ending with the user's `more` gets 'more done'. */
function twoSteps({ body }) {
  const last = body.messages.at(-1)
  if (last.role === 'user' && JSON.stringify(last.content).includes('more')) return reply.text('more done')
  const done = toolResults(body).length
  if (done < 2) return reply.blocks([reply.thinking(`step ${done + 1}`), reply.toolUse('add', { a: done, b: 2 })])
  return reply.blocks([reply.thinking('all added'), 'Added twice.'])
}

async function start(t, script = twoSteps) {
  const server = await startModelServer({ script })
  t.after(() => server.close())
  const client = new Anthropic({ baseURL: server.url, apiKey: 'sk-ant-test', maxRetries: 0 })
  return { server, client }
}

async function open(t, engine, api) {
  const lib = api === 'promise' ? promise : sync
  const store = await lib.Store.open(engine.store(t))
  t.after(() => store.close())
  const session = await store.createSession({ project: 'anthropic-test' })
  return { lib, store, session }
}

const runnerParams = (messages, extra = {}) => ({
  model: 'claude-opus-4-5',
  max_tokens: 4096,
  thinking: { type: 'enabled', budget_tokens: 1024 },
  // The model server takes whole histories (the SDK's default sends only a thread's new messages).
  thread: false,
  messages,
  tools: [addTool],
  ...extra,
})

/** A message as a request carries it, with string content as its one text block. */
const wire = (m) => ({ role: m.role, content: typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content })

/** Every thinking block any request carried is one the server issued, byte for byte. */
function assertSignatures(server) {
  let seen = 0
  for (const r of server.modelRequests) {
    for (const m of r.body.messages) {
      for (const b of Array.isArray(m.content) ? m.content : []) {
        if (b.type !== 'thinking') continue
        seen++
        const issued = server.issued.find((i) => i.type === 'thinking' && i.signature === b.signature)
        assert.ok(issued, `signature not issued: ${b.signature}`)
        assert.equal(b.thinking, issued.thinking)
      }
    }
  }
  return seen
}

const contextOf = async (session) => (await session.buildContext({ target: 'anthropic' })).messages

eachEngine('a tool runner with thinking and two tools is recorded as it runs, and continues from buildContext', async (t, engine) => {
  const { server, client } = await start(t)
  const { session } = await open(t, engine, 'sync')
  const runner = client.beta.messages.toolRunner(runnerParams([{ role: 'user', content: 'Add twice' }]))
  const same = record(session, runner)
  assert.equal(same, runner, 'the same runner comes back')
  let replies = 0
  for await (const message of same) {
    replies++
    // Stored before the loop body sees it: a kill from here on keeps it.
    assert.deepEqual(session.envelopes().at(-1).message.content, message.content)
  }
  assert.equal(replies, 3)
  const last = server.modelRequests.at(-1).body
  const final = await runner.done()
  assert.deepEqual(session.buildContext({ target: 'anthropic' }).messages.map(wire), [...last.messages, { role: 'assistant', content: final.content }].map(wire))
  assert.deepEqual(session.toolCalls().map((c) => c.state), ['completed', 'completed'])

  // Continued from the session, with a new question: only that question is new to the session.
  const before = session.envelopes().length
  const next = record(session, client.beta.messages.toolRunner(runnerParams([...session.buildContext({ target: 'anthropic' }).messages, { role: 'user', content: 'more' }])))
  const answer = await next.runUntilDone()
  assert.deepEqual(answer.content.map((b) => b.type === 'text' && b.text).filter(Boolean), ['more done'])
  assert.equal(session.envelopes().length, before + 2)
  assert.deepEqual(server.invalid, [])
  assert.equal(assertSignatures(server), 0 + 1 + 2 + 3)
})

for (const stream of [false, true]) {
  eachEngine(`the runner's default message thread (each request after the first sends only the new messages) is recorded as with thread: false (${stream ? 'streamed' : 'plain'})`, async (t, engine) => {
    const { server, client } = await start(t)
    const { session } = await open(t, engine, stream ? 'promise' : 'sync')
    const { thread, ...params } = runnerParams([{ role: 'user', content: 'Add twice' }], { stream })
    assert.equal(thread, false)
    const runner = record(session, client.beta.messages.toolRunner(params))
    let final
    for await (const item of runner) final = stream ? await item.finalMessage() : item
    // It really ran on a server-side thread: a create, then continues carrying one message each.
    const sent = server.modelRequests.map((r) => r.thread?.type)
    assert.deepEqual(sent, ['create', 'continue', 'continue'])
    assert.deepEqual(server.modelRequests.slice(1).map((r) => r.sent.messages.length), [1, 1])
    assert.deepEqual(server.invalid, [])
    // The session holds the whole conversation the server holds.
    const last = server.modelRequests.at(-1).body
    assert.deepEqual((await contextOf(session)).map(wire), [...last.messages, { role: 'assistant', content: final.content }].map(wire))
    assert.deepEqual((await session.toolCalls()).map((c) => c.state), ['completed', 'completed'])

    // A new runner from the session's context starts a new thread with the whole history.
    const more = record(session, client.beta.messages.toolRunner({ ...params, messages: [...(await contextOf(session)), { role: 'user', content: 'more' }] }))
    await more.runUntilDone()
    assert.deepEqual(server.modelRequests.at(-1).thread, { type: 'create' })
    assert.deepEqual(server.invalid, [])
    assert.equal(assertSignatures(server), 0 + 1 + 2 + 3)
  })
}

eachEngine('a streaming tool runner on a threadline/promise session goes through beginResponse', async (t, engine) => {
  const { server, client } = await start(t)
  const { session } = await open(t, engine, 'promise')
  const runner = record(session, client.beta.messages.toolRunner(runnerParams([{ role: 'user', content: 'Add twice' }], { stream: true })))
  const finals = []
  for await (const stream of runner) {
    let text = ''
    stream.on('text', (d) => { text += d })
    const message = await stream.finalMessage()
    finals.push(message)
    assert.equal(typeof text, 'string')
  }
  assert.equal(finals.length, 3)
  const envelopes = await session.envelopes()
  assert.equal(envelopes.filter((e) => e.type === 'stream').length > 0, true, 'stream records were written while streaming')
  const context = await contextOf(session)
  const last = server.modelRequests.at(-1).body
  assert.deepEqual(context.map(wire), [...last.messages, { role: 'assistant', content: finals.at(-1).content }].map(wire))
  // Each assistant record is the SDK's own final message.
  const stored = envelopes.filter((e) => e.type === 'assistant').map((e) => e.message.content)
  assert.deepEqual(stored, finals.map((m) => m.content))

  const more = record(session, client.beta.messages.toolRunner(runnerParams([...context, { role: 'user', content: 'more' }], { stream: true })))
  await more.runUntilDone()
  assert.deepEqual(server.invalid, [])
  assert.equal(assertSignatures(server), 0 + 1 + 2 + 3)
})

eachEngine('record(session, client.messages.stream(params)).finalMessage() is the stored message', async (t, engine) => {
  for (const api of ['sync', 'promise']) {
    const { server, client } = await start(t, [reply.blocks([reply.thinking('greeting'), 'Hello.'])])
    const { session } = await open(t, engine, api)
    const stream = client.messages.stream({ model: 'claude-opus-4-5', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Hi' }] })
    assert.equal(record(session, stream), stream, 'the same stream comes back')
    const final = await stream.finalMessage()
    assert.equal(await stream.finalText(), 'Hello.')
    const context = await contextOf(session)
    assert.deepEqual(context.map(wire), [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: final.content }].map(wire))
    const envelopes = await session.envelopes()
    assert.equal(envelopes.at(-1).message.id, final.id)
    assert.equal(envelopes.at(-1).requestId, stream.request_id)
    assert.deepEqual(server.invalid, [])
  }
})

eachEngine('a stream that fails mid-way keeps what a model may see again, and the session continues', async (t, engine) => {
  const { server, client } = await start(t, [
    reply.blocks([reply.thinking('half'), 'Partial answer'], { streamError: { message: 'Overloaded', type: 'overloaded_error' } }),
    reply.text('Second try.'),
  ])
  const { session } = await open(t, engine, 'sync')
  const stream = record(session, client.messages.stream({ model: 'claude-opus-4-5', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Hi' }] }))
  await assert.rejects(stream.finalMessage(), /Overloaded/)
  const error = session.envelopes().at(-1)
  assert.equal(error.type, 'error')
  assert.match(JSON.stringify(error), /Overloaded/)
  const next = record(session, client.messages.stream({ model: 'claude-opus-4-5', max_tokens: 4096, messages: [...session.buildContext({ target: 'anthropic' }).messages, { role: 'user', content: 'again' }] }))
  assert.equal(await next.finalText(), 'Second try.')
  assert.deepEqual(server.invalid, [])
  assertSignatures(server)
})

eachEngine('a streamed runner whose reply fails mid-stream throws the SDK error once the error record is stored (threadline/promise)', async (t, engine) => {
  const { server, client } = await start(t, [reply.blocks([reply.thinking('half'), 'Partial'], { streamError: { message: 'Overloaded', type: 'overloaded_error' } })])
  const { session } = await open(t, engine, 'promise')
  const runner = record(session, client.beta.messages.toolRunner(runnerParams([{ role: 'user', content: 'Hi' }], { stream: true })))
  await assert.rejects(runner.runUntilDone(), /Overloaded/)
  const last = (await session.envelopes()).at(-1)
  assert.equal(last.type, 'error')
  assert.match(JSON.stringify(last), /Overloaded/)
  assert.deepEqual(server.invalid, [])
})

eachEngine("messages the caller pushes in the loop body are recorded in the runner's order", async (t, engine) => {
  const { server, client } = await start(t, ({ body }) => (JSON.stringify(body.messages.at(-1)).includes('more') ? reply.text('more done') : reply.text('first')))
  const { session } = await open(t, engine, 'sync')
  const runner = record(session, client.beta.messages.toolRunner(runnerParams([{ role: 'user', content: 'Hi' }])))
  for await (const message of runner) {
    if (message.content.some((b) => b.type === 'text' && b.text === 'first')) {
      runner.pushMessages({ role: 'assistant', content: message.content }, { role: 'user', content: 'more' })
    }
  }
  const sent = server.modelRequests.at(-1).body.messages
  assert.equal(sent.length, 3)
  const final = await runner.done()
  assert.equal(final.content.at(-1).text, 'more done')
  assert.deepEqual(session.buildContext({ target: 'anthropic' }).messages.map(wire), [...sent, { role: 'assistant', content: final.content }].map(wire))
  assert.deepEqual(session.branches().length <= 1, true, 'nothing was rewound')
  assert.deepEqual(server.invalid, [])
})

eachEngine('a reply the caller replaces in the loop body: the session continues from what was sent, the first reply kept on a branch', async (t, engine) => {
  const { server, client } = await start(t, ({ body }) => (JSON.stringify(body.messages.at(-1)).includes('more') ? reply.text('more done') : reply.text('first')))
  const { session } = await open(t, engine, 'promise')
  const runner = record(session, client.beta.messages.toolRunner(runnerParams([{ role: 'user', content: 'Hi' }])))
  for await (const message of runner) {
    if (message.content.some((b) => b.type === 'text' && b.text === 'first')) {
      runner.setMessagesParams((p) => ({ ...p, messages: [...p.messages, { role: 'assistant', content: 'A shorter answer.' }, { role: 'user', content: 'more' }] }))
    }
  }
  const final = await runner.done()
  const sent = server.modelRequests.at(-1).body.messages
  assert.deepEqual(sent.map(wire), [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'A shorter answer.' }, { role: 'user', content: 'more' }].map(wire))
  assert.deepEqual((await contextOf(session)).map(wire), [...sent, { role: 'assistant', content: final.content }].map(wire))
  // The model's first reply is not lost: it stays in the log, on the abandoned branch.
  assert.ok((await session.envelopes()).some((e) => e.type === 'assistant' && e.message.content.some((b) => b.text === 'first')))
  assert.equal((await session.branches()).length, 2)
  assert.deepEqual(server.invalid, [])
})

eachEngine('a history the caller replaces entirely cannot be mirrored: INVALID_INPUT, the session keeps what it had', async (t, engine) => {
  const { client } = await start(t, () => reply.text('an answer'))
  const { session } = await open(t, engine, 'sync')
  const runner = record(session, client.beta.messages.toolRunner(runnerParams([{ role: 'user', content: 'Hi' }])))
  const seen = []
  await assert.rejects(async () => {
    for await (const message of runner) {
      seen.push(message)
      if (seen.length === 1) runner.setMessagesParams((p) => ({ ...p, messages: [{ role: 'user', content: 'Another question' }] }))
    }
  }, { code: 'INVALID_INPUT', message: /record: runner\.params\.messages: the history was rewritten/ })
  assert.equal(seen.length, 1)
  assert.deepEqual(session.buildContext({ target: 'anthropic' }).messages.map(wire), [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: seen[0].content }].map(wire))
})

eachEngine('bad arguments are refused with INVALID_INPUT and the path; nothing is stored or sent', async (t, engine) => {
  const { server, client } = await start(t)
  const { session } = await open(t, engine, 'sync')
  const runner = client.beta.messages.toolRunner(runnerParams([{ role: 'user', content: 'Hi' }]))
  assert.throws(() => record({}, runner), { code: 'INVALID_INPUT', message: /record: session:/ })
  assert.throws(() => record(session, {}), { code: 'INVALID_INPUT', message: /record: runnerOrStream:/ })
  assert.throws(() => record(session, null), { code: 'INVALID_INPUT', message: /record: runnerOrStream:/ })
  record(session, runner)
  assert.throws(() => record(session, runner), { code: 'INVALID_INPUT', message: /already recorded/ })

  session.append({ role: 'user', content: 'An earlier question' })
  session.append({ role: 'assistant', content: [{ type: 'text', text: 'An earlier answer' }] })
  const before = session.envelopes().length
  // params that do not continue the session: refused before any request.
  await assert.rejects(runner.runUntilDone(), { code: 'INVALID_INPUT', message: /record: runner\.params\.messages: does not continue the session/ })
  assert.equal(session.envelopes().length, before)
  assert.equal(server.modelRequests.length, 0)
})

/** Starts the runner process; resolves with its printed lines once it exits. */
function runChild(job, onLine = () => {}) {
  const { NODE_TEST_CONTEXT, ...env } = process.env
  return spawnJsonLines(RUN, [JSON.stringify(job)], { env }, onLine).done
}

for (const [api, stream] of [['sync', false], ['promise', true]]) {
  eachEngine(`SIGKILL while a tool runs (${api}${stream ? ', streaming' : ''}), then a new process recovers and continues: every request valid`, async (t, engine) => {
    const { server } = await start(t, ({ body }) => {
      const done = toolResults(body)
      if (done.length === 0) return reply.blocks([reply.thinking('add first'), reply.toolUse('add', { a: 1, b: 2 })])
      if (done.length === 1) return reply.blocks([reply.thinking('now wait'), reply.toolUse('wait', {})])
      return reply.blocks([reply.thinking('resumed'), 'The wait was interrupted; 1 + 2 = 3.'])
    })
    const dir = tmpDir(t, 'threadline-anthropic-kill-')
    const marker = path.join(dir, 'marker')
    const store = engine.name === 'SQLite' ? path.join(dir, 'agent.db') : engine.store(t)
    const job = { store, url: server.url, api, stream, marker }
    let poll
    const killed = await runChild(job, (line, child) => {
      // Killed once the blocking tool has started (it writes the marker first).
      if (line.sessionId) poll = setInterval(() => fs.existsSync(marker) && child.kill('SIGKILL'), 20)
    })
    clearInterval(poll)
    assert.equal(killed.signal, 'SIGKILL', killed.stderr)
    const sessionId = killed.lines[0].sessionId
    assert.equal(server.modelRequests.length, 2)

    const resumed = await runChild({ ...job, sessionId })
    assert.equal(resumed.code, 0, resumed.stderr)
    // The wait call had started: its outcome is unknown, never "it did not run".
    assert.deepEqual(resumed.lines[0], { repairs: ['unknown_outcome'] })
    assert.deepEqual(resumed.lines.at(-1), { done: true, text: 'The wait was interrupted; 1 + 2 = 3.' })
    assert.deepEqual(server.invalid, [])
    const request = server.modelRequests.at(-1).body
    assert.equal(request.messages.length, 5)
    assert.equal(assertSignatures(server), 0 + 1 + 2)

    const s = sync.Store.open(store)
    t.after(() => s.close())
    const session = s.openSession(sessionId)
    assert.deepEqual(session.buildContext({ target: 'anthropic' }).messages.map(wire).slice(0, 5), request.messages.map(wire))
    session.close()
  })
}

eachEngine('SIGKILL mid-stream: what arrived is kept, recover() closes the stream, a new process continues with the signature intact', async (t, engine) => {
  const { server } = await start(t, ({ body }) => {
    if (body.messages.length === 1) return reply.blocks([reply.thinking('plan the sum'), 'Let me add.', reply.toolUse('add', { a: 1, b: 2 })])
    return reply.blocks([reply.thinking('go on'), 'Resumed.'])
  })
  const dir = tmpDir(t, 'threadline-anthropic-kill-')
  const store = engine.name === 'SQLite' ? path.join(dir, 'agent.db') : engine.store(t)
  const job = { store, url: server.url, api: 'promise', stream: true, marker: path.join(dir, 'marker'), stall: 2 }
  const reader = await promise.Store.open(store)
  t.after(() => reader.close())
  let sessionId
  const killed = await runChild(job, async (line, child) => {
    if (line.sessionId) sessionId = line.sessionId
    if (!line.stalled) return
    // Killed once the two finished blocks are persisted as stream chunks (readers never wait for the writer).
    const session = await reader.openSession(sessionId)
    const stops = async () => (await session.envelopes()).filter((e) => e.type === 'stream').flatMap((e) => e.stream.chunks).filter((c) => c.type === 'content_block_stop').length
    while ((await stops()) < 2) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    child.kill('SIGKILL')
  })
  assert.equal(killed.signal, 'SIGKILL', killed.stderr)

  const resumed = await runChild({ ...job, stall: 0, sessionId, followUp: 'Go on' })
  assert.equal(resumed.code, 0, resumed.stderr)
  assert.deepEqual(resumed.lines[0], { repairs: ['close_stream'] })
  assert.deepEqual(resumed.lines.at(-1), { done: true, text: 'Resumed.' })
  assert.deepEqual(server.invalid, [])
  const request = server.modelRequests.at(-1).body
  // The thinking and text that arrived before the kill went back; the unfinished tool call did not.
  assert.deepEqual(request.messages[1].content.map((b) => b.type), ['thinking', 'text'])
  assert.equal(request.messages[1].content[1].text, 'Let me add.')
  assert.equal(assertSignatures(server), 1)
})

eachEngine('SIGKILL in the middle of a block whose stream then stalls: the deltas that arrived are persisted all the same, and recover() keeps them', async (t, engine) => {
  const { server } = await start(t, ({ body }) => {
    if (body.messages.length === 1) return reply.blocks([reply.thinking('plan the sum'), 'Let me add.', reply.toolUse('add', { a: 1, b: 2 })])
    return reply.blocks([reply.thinking('go on'), 'Resumed.'])
  })
  const dir = tmpDir(t, 'threadline-anthropic-midblock-')
  const store = engine.name === 'SQLite' ? path.join(dir, 'agent.db') : engine.store(t)
  // Delivered: the whole thinking block (two deltas and its signature), then the text block's
  // start and its first delta ('Let me'); then nothing more arrives.
  const job = { store, url: server.url, api: 'promise', stream: true, marker: path.join(dir, 'marker'), stallDeltas: 4 }
  const reader = await promise.Store.open(store)
  t.after(() => reader.close())
  let sessionId
  const killed = await runChild(job, async (line, child) => {
    if (line.sessionId) sessionId = line.sessionId
    if (!line.stalled) return
    // No later event comes to make the writer persist the delta: record() pushes it so that the
    // writer persists it (its 200 ms interval), and the process is killed once it is stored.
    const session = await reader.openSession(sessionId)
    const texts = async () => (await session.envelopes()).filter((e) => e.type === 'stream').flatMap((e) => e.stream.chunks).filter((c) => c.delta?.type === 'text_delta').map((c) => c.delta.text).join('')
    while ((await texts()) !== 'Let me') {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    child.kill('SIGKILL')
  })
  assert.equal(killed.signal, 'SIGKILL', killed.stderr)

  const resumed = await runChild({ ...job, stallDeltas: 0, sessionId, followUp: 'Go on' })
  assert.equal(resumed.code, 0, resumed.stderr)
  assert.deepEqual(resumed.lines[0], { repairs: ['close_stream'] })
  assert.deepEqual(resumed.lines.at(-1), { done: true, text: 'Resumed.' })
  assert.deepEqual(server.invalid, [])
  // The cut text block went back with what arrived of it, after the signed thinking.
  const request = server.modelRequests.at(-1).body
  assert.deepEqual(request.messages[1].content.map((b) => b.type), ['thinking', 'text'])
  assert.equal(request.messages[1].content[1].text, 'Let me')
  assert.equal(assertSignatures(server), 1)
}, { timeout: 60_000 })

test('the model server keeps message threads as the API does: continue, thread_not_found, thread_already_continued, no system on a continue', async (t) => {
  const { server } = await start(t, () => reply.text('ok'))
  const post = async (body) => {
    const res = await fetch(`${server.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return { status: res.status, body: await res.json() }
  }
  const base = { model: 'claude-opus-4-5', max_tokens: 100, system: 'be brief' }
  const first = await post({ ...base, thread: { type: 'create' }, messages: [{ role: 'user', content: 'hi' }] })
  assert.equal(first.status, 200)
  const next = await post({ model: base.model, max_tokens: 100, thread: { type: 'continue', previous_message_id: first.body.id }, messages: [{ role: 'user', content: 'again' }] })
  assert.equal(next.status, 200)
  // What the model saw: the whole conversation, with the thread's system prompt.
  assert.deepEqual(server.modelRequests[1].body.messages.map((m) => m.role), ['user', 'assistant', 'user'])
  assert.equal(server.modelRequests[1].body.system, 'be brief')
  assert.deepEqual(server.modelRequests[1].sent.messages, [{ role: 'user', content: 'again' }])

  const again = await post({ model: base.model, max_tokens: 100, thread: { type: 'continue', previous_message_id: first.body.id }, messages: [{ role: 'user', content: 'twice' }] })
  assert.deepEqual([again.status, again.body.error.details], [409, { error_code: 'thread_already_continued' }])
  const lost = await post({ model: base.model, max_tokens: 100, thread: { type: 'continue', previous_message_id: 'msg_unknown' }, messages: [{ role: 'user', content: 'x' }] })
  assert.deepEqual([lost.status, lost.body.error.details], [404, { error_code: 'thread_not_found' }])
  assert.deepEqual(server.invalid, [])
  const repeated = await post({ ...base, thread: { type: 'continue', previous_message_id: next.body.id }, messages: [{ role: 'user', content: 'x' }] })
  assert.equal(repeated.status, 400)
  assert.equal(server.invalid.length, 1)
})

test('without @anthropic-ai/sdk installed, importing threadline/anthropic says what to install', () => {
  // A process where the SDK cannot be resolved, as for a user who has not installed it.
  const code = `
    const Module = require('node:module')
    const resolve = Module._resolveFilename
    Module._resolveFilename = function (request, ...rest) {
      if (request === '@anthropic-ai/sdk') throw Object.assign(new Error('not found'), { code: 'MODULE_NOT_FOUND' })
      return resolve.call(this, request, ...rest)
    }
    try { require(${JSON.stringify(path.join(__dirname, '..', 'adapters', 'anthropic'))}) } catch (err) {
      process.stdout.write(JSON.stringify({ code: err.code, message: err.message }))
    }`
  const r = require('node:child_process').spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' })
  assert.deepEqual(JSON.parse(r.stdout), { code: 'MODULE_NOT_FOUND', message: 'threadline/anthropic needs the Anthropic SDK: npm install @anthropic-ai/sdk' })
})

test('the ESM entry point (threadline/anthropic for `import`) is the same module', async () => {
  const esm = await import('../adapters/anthropic/index.mjs')
  assert.equal(esm.record, record)
  assert.equal(esm.default.record, record)
})
