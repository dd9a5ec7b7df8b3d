'use strict'
// threadline/ai-sdk: ThreadlineChatStore driven by the real AI SDK (`ai` 7, @ai-sdk/anthropic,
// @ai-sdk/openai) against the loopback model server, which refuses what the real APIs refuse.

require('./helpers/engine')
const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawn } = require('node:child_process')

const { Store } = require('..')
const promiseApi = require('../promise')
const { ThreadlineChatStore, INTERRUPTED } = require('../adapters/ai-sdk')
const { startModelServer, reply } = require('./helpers/model-server')
const { tmpDir } = require('./helpers/util')

const RUN = path.join(__dirname, 'helpers', 'ai-sdk-run.mjs')
const libs = () => Promise.all([import('ai'), import(RUN)])

const SIGNATURE = 'c2lnbmF0dXJlIG9mIHRoZSBmaXJzdCB0aGlua2luZw=='
const REDACTED = 'RURBQ1RFRC1kYXRhLWZyb20tdGhlLXByb3ZpZGVy'

/** One UIMessage list with every part type and tool state. */
function everyPart() {
  return [
    { id: 's1', role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] },
    {
      id: 'u1',
      role: 'user',
      metadata: { createdAt: 1764270000000, tags: ['a'] },
      parts: [
        { type: 'text', text: 'Look at this picture and the report.' },
        { type: 'file', mediaType: 'image/png', filename: 'dot.png', url: 'data:image/png;base64,iVBORw0KGgo=' },
        { type: 'file', mediaType: 'application/pdf', url: 'https://example.invalid/report.pdf' },
        { type: 'data-weather', id: 'w1', data: { city: 'Oslo', temp: -3.5 } },
      ],
    },
    {
      id: 'a1',
      role: 'assistant',
      metadata: { model: 'claude-sonnet-4-5' },
      parts: [
        { type: 'step-start' },
        { type: 'reasoning', text: 'They want both.', state: 'done', providerMetadata: { anthropic: { signature: SIGNATURE } } },
        { type: 'reasoning', text: '', state: 'done', providerMetadata: { anthropic: { redactedData: REDACTED } } },
        { type: 'text', text: 'Checking.', state: 'done', providerMetadata: { anthropic: { citations: [] } } },
        { type: 'tool-read', toolCallId: 'toolu_1', state: 'output-available', input: { path: 'a' }, output: { lines: 3, ok: true } },
        { type: 'tool-read', toolCallId: 'toolu_2', state: 'output-error', input: { path: 'b' }, errorText: 'ENOENT' },
        { type: 'dynamic-tool', toolName: 'mcp_lookup', toolCallId: 'toolu_3', state: 'output-available', input: { q: 'x' }, output: 'plain text' },
        { type: 'tool-rm', toolCallId: 'toolu_4', state: 'output-denied', input: { path: '/' }, approval: { id: 'ap1', approved: false, reason: 'no' } },
        { type: 'step-start' },
        { type: 'source-url', sourceId: 'src1', url: 'https://example.invalid/a', title: 'A' },
        { type: 'source-document', sourceId: 'src2', mediaType: 'application/pdf', title: 'Report', filename: 'report.pdf' },
        { type: 'file', mediaType: 'image/png', url: 'data:image/png;base64,iVBORw0KGgo=' },
        { type: 'data-progress', data: { done: 2, of: 2 } },
        { type: 'text', text: 'Both read; one failed.', state: 'done' },
      ],
    },
  ]
}

/** A fresh store of the engine under test (SQLite file; PostgreSQL with THREADLINE_TEST_ENGINE). */
function openStore(t, dir) {
  const store = Store.open(path.join(dir ?? tmpDir(t), 'chats.db'))
  t.after(() => store.close())
  return store
}

describe('ThreadlineChatStore: storing UIMessages', () => {
  test('save then load gives every UIMessage back deep-equal, every part type and tool state', async (t) => {
    const chats = new ThreadlineChatStore(openStore(t))
    assert.deepEqual(await chats.load('chat-1'), [])
    const messages = everyPart()
    await chats.save('chat-1', messages)
    assert.deepEqual(await chats.load('chat-1'), messages)
    // A new ThreadlineChatStore (nothing cached) reads the same.
    const { validateUIMessages, convertToModelMessages } = await import('ai')
    const loaded = await chats.load('chat-1')
    await validateUIMessages({ messages: loaded })
    assert.ok((await convertToModelMessages(loaded)).length > 0)
  })

  test('the chat is an ordinary Threadline session: messages, signed thinking, turns, search, export', async (t) => {
    const store = openStore(t)
    const chats = new ThreadlineChatStore(store)
    await chats.save('chat-2', everyPart())
    const session = store.openSession('chat-2')
    const messages = session.messages
    assert.deepEqual(messages.map((m) => m.role), ['system', 'user', 'assistant', 'user', 'assistant'])
    assert.deepEqual(messages[1].content.map((b) => b.type), ['text', 'image', 'document'])
    assert.deepEqual(messages[2].content.slice(0, 2), [
      { type: 'thinking', thinking: 'They want both.', signature: SIGNATURE },
      { type: 'redacted_thinking', data: REDACTED },
    ])
    assert.deepEqual(messages[3].content, [
      { type: 'tool_result', tool_use_id: 'toolu_1', content: '{"lines":3,"ok":true}' },
      { type: 'tool_result', tool_use_id: 'toolu_2', content: 'ENOENT', is_error: true },
      { type: 'tool_result', tool_use_id: 'toolu_3', content: 'plain text' },
      { type: 'tool_result', tool_use_id: 'toolu_4', content: 'denied: no', is_error: true },
    ])
    assert.equal(session.turns.length, 1)
    assert.equal(session.turns[0].toolUseCount, 4)
    assert.ok(store.search('picture').hits.some((h) => h.sessionId === 'chat-2'))
    assert.match(session.export('markdown'), /Both read; one failed\./)
    assert.deepEqual(session.buildContext({ target: 'anthropic' }).messages.at(-1).content, [{ type: 'text', text: 'Both read; one failed.' }])
  })

  test('save stores only what changed: the same list writes nothing, a grown last message only its new parts', async (t) => {
    const store = openStore(t)
    const chats = new ThreadlineChatStore(store)
    const [, user, full] = everyPart()
    const firstStep = { ...full, parts: full.parts.slice(0, 8) }
    await chats.save('chat-3', [user, firstStep])
    const session = store.openSession('chat-3')
    const n = session.envelopes().length
    await chats.save('chat-3', [user, firstStep])
    assert.equal(session.envelopes().length, n, 'saving the same messages again writes nothing')
    await chats.save('chat-3', [user, full])
    const added = session.envelopes().slice(n)
    // The second step's assistant record, and one event with only the parts added.
    assert.deepEqual(added.map((e) => e.type), ['assistant', 'event'])
    assert.deepEqual(added[1].data.message.parts, full.parts.slice(8))
    assert.deepEqual(await new ThreadlineChatStore(store).load('chat-3'), [user, full])
  })

  test('a regenerated or edited message replaces the old one: load and the context follow the new branch', async (t) => {
    const store = openStore(t)
    const chats = new ThreadlineChatStore(store)
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }
    const old = { id: 'a-old', role: 'assistant', parts: [{ type: 'text', text: 'first answer' }] }
    await chats.save('chat-4', [user, old])
    const regenerated = { id: 'a-new', role: 'assistant', parts: [{ type: 'text', text: 'second answer' }] }
    await chats.save('chat-4', [user, regenerated])
    assert.deepEqual(await chats.load('chat-4'), [user, regenerated])
    const session = store.openSession('chat-4')
    assert.deepEqual(session.messages.map((m) => m.content[0].text), ['hello', 'second answer'])
    // An edit of the first message (same id) starts the chat over from it.
    const edited = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello again' }] }
    await chats.save('chat-4', [edited])
    assert.deepEqual(await new ThreadlineChatStore(store).load('chat-4'), [edited])
    assert.deepEqual(session.messages.map((m) => m.content[0].text), ['hello again'])
    await chats.save('chat-4', [])
    assert.deepEqual(await chats.load('chat-4'), [])
  })

  test('a tool part saved without an outcome loads as output-error saying it was interrupted, valid to convert', async (t) => {
    const chats = new ThreadlineChatStore(openStore(t))
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'run it' }] }
    const cut = {
      id: 'a1',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        { type: 'tool-wait', toolCallId: 'toolu_9', state: 'input-available', input: { text: 'x' } },
        { type: 'tool-note', toolCallId: 'toolu_8', state: 'input-streaming' },
      ],
    }
    await chats.save('chat-5', [user, cut])
    const loaded = await chats.load('chat-5')
    assert.deepEqual(loaded[1].parts.slice(1), [
      { type: 'tool-wait', toolCallId: 'toolu_9', state: 'output-error', input: { text: 'x' }, errorText: INTERRUPTED },
      { type: 'tool-note', toolCallId: 'toolu_8', state: 'output-error', input: {}, errorText: INTERRUPTED },
    ])
    const { validateUIMessages, convertToModelMessages } = await import('ai')
    await validateUIMessages({ messages: loaded })
    const model = await convertToModelMessages(loaded)
    assert.deepEqual(model.at(-1).content.map((p) => [p.type, p.toolCallId, p.output.type]), [
      ['tool-result', 'toolu_9', 'error-text'],
      ['tool-result', 'toolu_8', 'error-text'],
    ])
    // Saved back as loaded (the client sends it so), the calls get their results in Threadline.
    await chats.save('chat-5', loaded)
    assert.deepEqual(await chats.load('chat-5'), loaded)
  })

  test('two ThreadlineChatStores (two server instances) saving one chat in turn see each other\'s writes', async (t) => {
    const store = openStore(t)
    const a = new ThreadlineChatStore(store)
    const b = new ThreadlineChatStore(store)
    const u1 = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'one' }] }
    const a1 = { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'first' }] }
    const u2 = { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'two' }] }
    await a.save('shared', [u1])
    await b.save('shared', [u1, a1])
    await a.save('shared', [u1, a1, u2])
    const session = store.openSession('shared')
    assert.deepEqual(session.messages.map((m) => m.content[0].text), ['one', 'first', 'two'])
    // b regenerates the answer (a rewind); a, saving next, builds on b's branch.
    const a1b = { id: 'a1b', role: 'assistant', parts: [{ type: 'text', text: 'other' }] }
    await b.save('shared', [u1, a1b])
    await a.save('shared', [u1, a1b, u2])
    assert.deepEqual(await a.load('shared'), [u1, a1b, u2])
    assert.deepEqual(await b.load('shared'), [u1, a1b, u2])
    assert.deepEqual(session.messages.map((m) => m.content[0].text), ['one', 'other', 'two'])
  })

  test('another live process that saved the chat does not keep this one from saving it (two server instances)', async (t) => {
    const dir = tmpDir(t)
    const where = path.join(dir, 'chats.db')
    const u1 = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'from the other instance' }] }
    const a1 = { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'answered there' }] }
    // The other instance saves, then stays alive (its store open) until this test ends.
    const code = `
      require(${JSON.stringify(path.join(__dirname, 'helpers', 'engine.js'))})
      const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const { ThreadlineChatStore } = require(${JSON.stringify(path.join(__dirname, '..', 'adapters', 'ai-sdk'))})
      const chats = new ThreadlineChatStore(Store.open(process.argv[1]))
      chats.save('shared', JSON.parse(process.argv[2])).then(() => { process.stdout.write('saved\\n'); setInterval(() => {}, 1000) },
        (e) => { console.error(e); process.exit(1) })`
    const child = spawn(process.execPath, ['-e', code, where, JSON.stringify([u1, a1])], { stdio: ['ignore', 'pipe', 'inherit'] })
    t.after(() => child.kill('SIGKILL'))
    await new Promise((resolve, reject) => {
      child.stdout.on('data', (d) => { if (String(d).includes('saved')) resolve() })
      child.on('exit', (c) => reject(new Error(`the other instance exited with ${c}`)))
    })
    const chats = new ThreadlineChatStore(openStore(t, dir))
    assert.deepEqual(await chats.load('shared'), [u1, a1])
    const u2 = { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'and here' }] }
    await chats.save('shared', [u1, a1, u2])
    assert.deepEqual(await chats.load('shared'), [u1, a1, u2])
  })

  test('what load gives is the caller\'s to change: the stored chat stays as saved', async (t) => {
    const chats = new ThreadlineChatStore(openStore(t))
    const messages = everyPart()
    await chats.save('own', messages)
    const loaded = await chats.load('own')
    loaded[1].parts[0].text = 'changed'
    loaded.pop()
    messages[0].parts[0].text = 'changed too'
    assert.deepEqual(await chats.load('own'), everyPart())
  })

  test('generateMessageId gives unique ids that sort in the order they were made', (t) => {
    const chats = new ThreadlineChatStore(openStore(t))
    const ids = Array.from({ length: 3000 }, () => chats.generateMessageId())
    assert.equal(new Set(ids).size, ids.length)
    assert.deepEqual([...ids].sort(), ids)
  })

  test('bad arguments are INVALID_INPUT naming the field, and nothing is written', async (t) => {
    const store = openStore(t)
    const chats = new ThreadlineChatStore(store)
    assert.throws(() => new ThreadlineChatStore({}), { code: 'INVALID_INPUT', message: /store: expected a Store/ })
    await assert.rejects(chats.load(''), { code: 'INVALID_INPUT', message: /load: chatId/ })
    await assert.rejects(chats.save('c', {}), { code: 'INVALID_INPUT', message: /save: messages: expected an array/ })
    await assert.rejects(chats.save('c', [{ id: 'x', role: 'user', parts: [] }, { id: 'x', role: 'user', parts: [] }]), {
      code: 'INVALID_INPUT', message: /save: messages\[1\]\.id: 'x' appears twice/,
    })
    await assert.rejects(chats.save('c', [{ id: 'x', role: 'tool', parts: [] }]), { code: 'INVALID_INPUT', message: /messages\[0\]\.role/ })
    await assert.rejects(chats.save('c', [{ id: 'x', role: 'user', parts: [{ text: 'no type' }] }]), {
      code: 'INVALID_INPUT', message: /messages\[0\]\.parts\[0\]\.type/,
    })
    await assert.rejects(chats.modelMessages('c', { maxTokens: 0 }), { code: 'INVALID_INPUT', message: /options\.maxTokens/ })
    await assert.rejects(chats.onStepEnd('c')({}), { code: 'INVALID_INPUT', message: /onStepEnd: event\.messages/ })
    assert.deepEqual(store.listSessions(), [], 'no session was created by refused calls')
  })

  test('without `ai` installed the import fails at once with MODULE_NOT_FOUND and the npm command', () => {
    const code = `
      const Module = require('node:module')
      const resolve = Module._resolveFilename
      Module._resolveFilename = function (request, ...rest) {
        if (request === 'ai') { const e = new Error("Cannot find module 'ai'"); e.code = 'MODULE_NOT_FOUND'; throw e }
        return resolve.call(this, request, ...rest)
      }
      try { require(${JSON.stringify(path.join(__dirname, '..', 'adapters', 'ai-sdk'))}); console.log('loaded') }
      catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }`
    const r = require('node:child_process').spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' })
    assert.deepEqual(JSON.parse(r.stdout), { code: 'MODULE_NOT_FOUND', message: 'threadline/ai-sdk needs the Vercel AI SDK: npm install ai' })
  })

  test('the ESM entry point gives the same class', async () => {
    const esm = await import('../adapters/ai-sdk/index.mjs')
    assert.equal(esm.ThreadlineChatStore, ThreadlineChatStore)
    assert.equal(esm.INTERRUPTED, INTERRUPTED)
    assert.equal(esm.default.ThreadlineChatStore, ThreadlineChatStore)
  })

  test('the promise API store works the same', async (t) => {
    const store = await promiseApi.Store.open(path.join(tmpDir(t), 'p.db'))
    t.after(() => store.close())
    const chats = new ThreadlineChatStore(store)
    await chats.save('chat-p', everyPart())
    assert.deepEqual(await chats.load('chat-p'), everyPart())
  })
})

describe('ThreadlineChatStore with streamText and @ai-sdk/anthropic', () => {
  test('a multi-step run with tools and thinking: stored step by step, continued with every signature byte for byte', async (t) => {
    const [, run] = await libs()
    let n = 0
    const server = await startModelServer({
      script: (req) => {
        n++
        if (n === 1) return reply.blocks([reply.thinking('note first'), reply.toolUse('note', { text: 'a' })])
        if (n === 2) return reply.blocks([reply.redactedThinking(), reply.toolUse('note', { text: 'b' })])
        if (n === 3) return reply.blocks([reply.thinking('now answer'), 'done'])
        return reply.blocks([reply.thinking('second turn'), 'again'])
      },
    })
    t.after(() => server.close())
    const store = openStore(t)
    const chats = new ThreadlineChatStore(store)
    const model = run.anthropicModel(server.url)
    const steps = []
    const onStepEnd = chats.onStepEnd.bind(chats)
    chats.onStepEnd = (id) => {
      const save = onStepEnd(id)
      return async (e) => { await save(e); steps.push(store.openSession(id).messages.length) }
    }
    const first = await run.turn({ chats, chatId: 'run-1', model, text: 'note twice' })
    // Each step was durable when it ended: user; +assistant+results; again; +final answer.
    assert.deepEqual(steps, [3, 5, 6])
    assert.equal(first.length, 2)
    const second = await run.turn({ chats: new ThreadlineChatStore(store), chatId: 'run-1', model, text: 'once more' })
    assert.equal(second.length, 4)
    assert.deepEqual(server.invalid, [])
    assert.equal(server.modelRequests.length, 4)
    // The last request carried the first turn's thinking exactly as issued.
    const sent = server.modelRequests[3].body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((b) => b.type === 'thinking' || b.type === 'redacted_thinking')
    assert.deepEqual(sent, server.issued.slice(0, 3))
    const session = store.openSession('run-1')
    assert.equal(session.turns.length, 2)
    assert.ok(session.tokenTracker.cumulativeInputTokens > 0, 'usage of each response counted')
    assert.ok(store.search('again').hits.some((h) => h.sessionId === 'run-1'))
  })

  test('the documented route handler: the client sends its new message, the chat is stored step by step', async (t) => {
    const [ai, run] = await libs()
    const { createAnthropic } = await import('@ai-sdk/anthropic')
    const server = await startModelServer({
      script: (req) => (req.index % 2 === 0
        ? reply.blocks([reply.thinking(`look ${req.index}`), reply.toolUse('note', { text: 'x' })])
        : reply.blocks([reply.thinking(`answer ${req.index}`), `answer ${req.index}`])),
    })
    t.after(() => server.close())
    const chats = new ThreadlineChatStore(openStore(t))
    const anthropic = createAnthropic({ baseURL: `${server.url}/v1`, apiKey: 'k' })
    // docs/ai-sdk.md's POST, with this test's model and tools.
    async function POST(req) {
      const { id, message } = await req.json()
      const messages = [...(await chats.load(id)), message]
      await chats.save(id, messages)
      const result = ai.streamText({
        model: anthropic('claude-sonnet-4-5'),
        messages: await ai.convertToModelMessages(messages),
        tools: run.tools(),
        stopWhen: ai.stepCountIs(10),
        providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 4096 } } },
      })
      return result.toUIMessageStreamResponse({
        originalMessages: messages,
        generateMessageId: chats.generateMessageId,
        onStepEnd: chats.onStepEnd(id),
        onEnd: chats.onEnd(id),
      })
    }
    for (const text of ['first question', 'second question']) {
      const message = { id: chats.generateMessageId(), role: 'user', parts: [{ type: 'text', text }] }
      const res = await POST(new Request('http://app.invalid/api/chat', { method: 'POST', body: JSON.stringify({ id: 'route', message }) }))
      assert.equal(res.status, 200)
      await res.text() // the browser reads the stream to its end
    }
    // onEnd runs after the stream's last chunk: wait for the queued save through load.
    const chat = await chats.load('route')
    assert.deepEqual(chat.map((m) => m.role), ['user', 'assistant', 'user', 'assistant'])
    assert.deepEqual(chat[3].parts.filter((p) => p.type === 'text').map((p) => p.text), ['answer 3'])
    assert.deepEqual(server.invalid, [])
    assert.equal(server.modelRequests.length, 4)
    const ids = chat.map((m) => m.id)
    assert.deepEqual([...ids].sort(), ids, 'generateMessageId gives ids in the order they were made')
  })

  test('a run stopped while its tool runs (the user pressed stop): the next turn is valid, not "Tool result is missing"', async (t) => {
    const [ai, run] = await libs()
    const server = await startModelServer({
      script: (req) => (req.index === 0
        ? reply.blocks([reply.thinking('wait for it'), reply.toolUse('wait', {})])
        : reply.blocks([reply.thinking('after the stop'), 'ok'])),
    })
    t.after(() => server.close())
    const chats = new ThreadlineChatStore(openStore(t))
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'wait' }] }
    await chats.save('stopped', [user])
    const stop = new AbortController()
    let started
    const toolRuns = new Promise((resolve) => { started = resolve })
    const result = ai.streamText({
      model: run.anthropicModel(server.url),
      messages: await ai.convertToModelMessages([user]),
      tools: {
        wait: ai.tool({
          inputSchema: ai.jsonSchema({ type: 'object', properties: {} }),
          execute: (_input, { abortSignal }) => new Promise((_resolve, reject) => {
            started()
            abortSignal?.addEventListener('abort', () => reject(new Error('aborted')))
          }),
        }),
      },
      stopWhen: ai.stepCountIs(5),
      abortSignal: stop.signal,
      providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 1024 } } },
    })
    let ended
    const end = new Promise((resolve) => { ended = resolve })
    const onEnd = chats.onEnd('stopped')
    const stream = result.toUIMessageStream({
      originalMessages: [user],
      generateMessageId: chats.generateMessageId,
      onStepEnd: chats.onStepEnd('stopped'),
      onEnd: async (e) => { await onEnd(e); ended(e) },
    })
    const reading = (async () => { for await (const _ of stream) { /* the client */ } })()
    await toolRuns
    stop.abort()
    await reading.catch(() => {})
    const event = await end
    assert.equal(event.isAborted, true)
    const loaded = await chats.load('stopped')
    const call = loaded[1].parts.find((p) => p.type === 'tool-wait')
    assert.equal(call.state, 'output-error')
    assert.equal(call.errorText, INTERRUPTED)
    await run.turn({ chats, chatId: 'stopped', model: run.anthropicModel(server.url), text: 'go on' })
    assert.deepEqual(server.invalid, [])
    assert.equal(server.modelRequests.length, 2)
    const last = server.modelRequests[1].body.messages
    assert.ok(last.some((m) => Array.isArray(m.content) && m.content.some((b) => b.type === 'tool_result' && b.is_error)))
  })

  test('after a run ends (onEnd), another process can save the chat while this one lives on', async (t) => {
    const [, run] = await libs()
    const server = await startModelServer({ script: () => reply.blocks([reply.thinking('hm'), 'hi']) })
    t.after(() => server.close())
    const dir = tmpDir(t)
    const chats = new ThreadlineChatStore(openStore(t, dir))
    const after = await run.turn({ chats, chatId: 'handover', model: run.anthropicModel(server.url), text: 'hello' })
    const more = [...after, { id: 'u9', role: 'user', parts: [{ type: 'text', text: 'from elsewhere' }] }]
    const code = `
      require(${JSON.stringify(path.join(__dirname, 'helpers', 'engine.js'))})
      const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const { ThreadlineChatStore } = require(${JSON.stringify(path.join(__dirname, '..', 'adapters', 'ai-sdk'))})
      new ThreadlineChatStore(Store.open(process.argv[1])).save('handover', JSON.parse(process.argv[2]))
        .catch((e) => { console.error(e.code, e.message); process.exit(1) })`
    const r = require('node:child_process').spawnSync(process.execPath, ['-e', code, path.join(dir, 'chats.db'), JSON.stringify(more)], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    // As JSON keeps it: the AI SDK's response message has `metadata: undefined`.
    assert.deepEqual(await chats.load('handover'), JSON.parse(JSON.stringify(more)))
  })

  test('modelMessages cuts to maxTokens by whole turns, and what it gives is accepted by the model', async (t) => {
    const [, run] = await libs()
    const server = await startModelServer({ script: (req) => reply.text(`answer ${'x'.repeat(400)} ${req.index}`) })
    t.after(() => server.close())
    const chats = new ThreadlineChatStore(openStore(t))
    const model = run.anthropicModel(server.url)
    for (let i = 0; i < 4; i++) await run.turn({ chats, chatId: 'long', model, text: `question ${i}`, thinking: false })
    const all = await chats.modelMessages('long')
    assert.equal(all.length, 8)
    const cut = await chats.modelMessages('long', { maxTokens: 300 })
    assert.ok(cut.length < all.length && cut.length >= 2 && cut.length % 2 === 0, `kept ${cut.length}`)
    assert.deepEqual(cut, all.slice(all.length - cut.length))
    const { generateText } = await import('ai')
    await generateText({ model, messages: [...cut, { role: 'user', content: 'go on' }] })
    assert.deepEqual(server.invalid, [])
  })

  test('SIGKILL mid-run: a new process loads the finished steps and continues; every request valid', async (t) => {
    const [, run] = await libs()
    const dir = tmpDir(t)
    const marker = path.join(dir, 'marker')
    let n = 0
    const server = await startModelServer({
      script: () => {
        n++
        if (n === 1) return reply.blocks([reply.thinking('note first'), reply.toolUse('note', { text: 'a' })])
        if (n === 2) return reply.blocks([reply.thinking('then wait'), reply.toolUse('wait', {})])
        return reply.blocks([reply.thinking('resumed'), 'back'])
      },
    })
    t.after(() => server.close())
    const where = path.join(dir, 'chats.db')
    const child = spawn(process.execPath, [RUN, where, 'killed', server.url, marker], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d) => { stderr += d })
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
    while (!fs.existsSync(marker)) {
      const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 20))])
      assert.equal(early, null, `the run ended before its tool blocked: ${stderr}`)
    }
    child.kill('SIGKILL')
    assert.equal((await exited).signal, 'SIGKILL')

    const store = openStore(t, dir)
    const chats = new ThreadlineChatStore(store)
    const loaded = await chats.load('killed')
    // The user's message and the finished first step; the step cut off is not there.
    assert.deepEqual(loaded.map((m) => m.role), ['user', 'assistant'], `loaded ${JSON.stringify(loaded)}; child stderr: ${stderr}`)
    assert.deepEqual(loaded[1].parts.filter((p) => p.type !== 'custom').map((p) => p.type), ['step-start', 'reasoning', 'tool-note'])
    assert.equal(loaded[1].parts.find((p) => p.type === 'reasoning').providerMetadata.anthropic.signature, server.issued[0].signature)
    const after = await run.turn({ chats, chatId: 'killed', model: run.anthropicModel(server.url), text: 'continue' })
    assert.equal(after.length, 4)
    assert.deepEqual(server.invalid, [], JSON.stringify(server.requests.map((r) => [r.status, r.error])))
    const thinking = server.modelRequests[2].body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((b) => b.type === 'thinking')
    assert.deepEqual(thinking, [server.issued[0]])
  })
})

describe('ThreadlineChatStore.stepHooks', () => {
  test('SIGKILL the moment the second model request arrives: with stepHooks the first step is saved already', async (t) => {
    const [, run] = await libs()
    const dir = tmpDir(t)
    let child
    /** The model requests in the order they arrived. */
    const arrivals = []
    const server = await startModelServer({
      script: (req) => {
        arrivals.push({ index: req.index })
        if (req.index === 0) return reply.blocks([reply.thinking('note first'), reply.toolUse('note', { text: 'a' })])
        if (req.index === 1) {
          // Step 2's request is on the wire: the process dies before it can do anything more.
          child.kill('SIGKILL')
          return new Promise(() => {})
        }
        return reply.blocks([reply.thinking('resumed'), 'back'])
      },
    })
    t.after(() => server.close())
    // Mode 'hooks': stepHooks, with each step's save taking 500 ms (a store far away). With
    // onStepEnd alone (mode 'plain'), streamText sends step 2's request during that save, and
    // this kill leaves only the user's message.
    child = spawn(process.execPath, [RUN, path.join(dir, 'chats.db'), 'hooks', server.url, path.join(dir, 'marker'), 'hooks'], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d) => { stderr += d })
    const exited = await new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
    assert.equal(exited.signal, 'SIGKILL', stderr)
    assert.deepEqual(arrivals.map((a) => a.index), [0, 1])

    const chats = new ThreadlineChatStore(openStore(t, dir))
    const loaded = await chats.load('hooks')
    assert.deepEqual(loaded.map((m) => m.role), ['user', 'assistant'], `loaded ${JSON.stringify(loaded)}; child stderr: ${stderr}`)
    const parts = loaded[1].parts.filter((p) => p.type !== 'custom')
    assert.deepEqual(parts.map((p) => p.type), ['step-start', 'reasoning', 'tool-note'])
    assert.deepEqual(parts[2].output, { noted: 'a' })
    assert.equal(parts[1].providerMetadata.anthropic.signature, server.issued[0].signature)
    // A new process continues from it; every request valid.
    const after = await run.turn({ chats, chatId: 'hooks', model: run.anthropicModel(server.url), text: 'continue', hooks: true })
    assert.equal(after.length, 4)
    assert.deepEqual(server.invalid, [])
  })

  test('prepareStep waits for the previous step\'s save, calls the run\'s own prepareStep, and fails the run if that save failed', async (t) => {
    const chats = new ThreadlineChatStore(openStore(t))
    const order = []
    const hooks = chats.stepHooks('waits', { prepareStep: ({ stepNumber }) => { order.push(`own ${stepNumber}`); return { toolChoice: 'none' } } })
    assert.deepEqual(await hooks.prepareStep({ stepNumber: 0 }), { toolChoice: 'none' })
    const second = hooks.prepareStep({ stepNumber: 1 }).then((r) => { order.push('step 1 may start'); return r })
    await new Promise((resolve) => setImmediate(resolve))
    // Step 0 has not ended: step 1 may not start.
    assert.deepEqual(order, ['own 0'])
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }
    const saving = hooks.onStepEnd({ messages: [user, { id: 'a1', role: 'assistant', parts: [{ type: 'step-start' }, { type: 'text', text: 'one', state: 'done' }] }] })
    order.push('step 0 ended')
    await saving
    assert.deepEqual(await second, { toolChoice: 'none' })
    assert.deepEqual(order, ['own 0', 'step 0 ended', 'own 1', 'step 1 may start'])
    assert.deepEqual((await chats.load('waits')).map((m) => m.id), ['u1', 'a1'])

    // A save that fails: the next step's prepareStep rejects with its error (nothing is sent).
    const bad = chats.stepHooks('bad')
    const next = bad.prepareStep({ stepNumber: 1 })
    await assert.rejects(bad.onStepEnd({ messages: [{ id: 'x', role: 'robot', parts: [] }] }), { code: 'INVALID_INPUT' })
    await assert.rejects(next, { code: 'INVALID_INPUT' })
    // onEnd releases a prepareStep whose step end never comes (a cancelled UI stream).
    const cut = chats.stepHooks('cut')
    const waiting = cut.prepareStep({ stepNumber: 1 })
    await cut.onEnd({ messages: [user] })
    assert.equal(await waiting, undefined)
    assert.throws(() => chats.stepHooks('x', { prepareStep: 1 }), { code: 'INVALID_INPUT', message: /options\.prepareStep/ })
    assert.throws(() => chats.stepHooks('x', { other: 1 }), { code: 'INVALID_INPUT', message: /options\.other/ })
    await assert.rejects(hooks.prepareStep({}), { code: 'INVALID_INPUT', message: /stepNumber/ })
  })
})

describe('ThreadlineChatStore with @ai-sdk/openai', () => {
  test('a run through the OpenAI Responses API is stored and continued; every request valid', async (t) => {
    const [, run] = await libs()
    const { createOpenAI } = await import('@ai-sdk/openai')
    const server = await startModelServer({
      script: (req) => (req.index === 0
        ? reply.blocks([reply.toolUse('note', { text: 'a' })])
        : reply.text(`ok ${req.index}`)),
    })
    t.after(() => server.close())
    const model = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'k' })('gpt-5')
    const store = openStore(t)
    await run.turn({ chats: new ThreadlineChatStore(store), chatId: 'oa', model, text: 'note it', thinking: false })
    const loaded = await run.turn({ chats: new ThreadlineChatStore(store), chatId: 'oa', model, text: 'and again', thinking: false })
    assert.equal(loaded.length, 4)
    assert.deepEqual(server.invalid, [])
  })
})

// The store-level behaviour on the other engine: this whole file again with every store (the
// killed child's too) on PostgreSQL, as __test__/postgres.test.js runs the core's files.
test('ai-sdk.test.js on PostgreSQL', (t) => {
  if (process.env.THREADLINE_TEST_ENGINE === 'postgres') return // this is that run
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (!base) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `node scripts/postgres.js run -- node --test __test__/ai-sdk.test.js`')
    return
  }
  const { NODE_TEST_CONTEXT, ...outer } = process.env
  const env = {
    ...outer,
    THREADLINE_TEST_ENGINE: 'postgres',
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${path.join(__dirname, 'helpers', 'engine.js')}`.trim(),
  }
  const r = require('node:child_process').spawnSync(process.execPath, ['--test', '--test-reporter=tap', __filename], { env, encoding: 'utf8', maxBuffer: 64 << 20 })
  const counts = Object.fromEntries([...r.stdout.matchAll(/^# (pass|fail) (\d+)$/gm)].map((m) => [m[1], Number(m[2])]))
  t.diagnostic(`ai-sdk.test.js on PostgreSQL: ${counts.pass} passed, ${counts.fail} failed`)
  const failed = r.stdout.split('\n').filter((l) => /^\s*not ok/.test(l)).join('\n')
  assert.equal(r.status, 0, `failed on PostgreSQL:\n${failed}\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-2000)}`)
  assert.ok(counts.pass > 0 && counts.fail === 0)
})
