'use strict'
// threadline/openai-agents: ThreadlineSession driven by the real OpenAI Agents SDK (`run(agent,
// input, { session })`) against the loopback model server (Responses API), on SQLite and, with
// THREADLINE_TEST_POSTGRES, on PostgreSQL.
const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Agent, run, MemorySession, setDefaultOpenAIClient, setTracingDisabled } = require('@openai/agents')
const OpenAI = require('openai').default
const { Store } = require('..')
const promiseApi = require('../promise.js')
const { ThreadlineSession } = require('../adapters/openai-agents')
const { startModelServer, reply } = require('./helpers/model-server')
const { makeAgent } = require('./helpers/openai-agents-run.js')

const RUNNER = path.join(__dirname, 'helpers', 'openai-agents-run.js')
setTracingDisabled(true)

/** The engines to run on: a file for SQLite, a schema of the test server for PostgreSQL. */
function engines(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-oai-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const list = [['sqlite', (name) => path.join(dir, `${name}.db`)]]
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (base) {
    const sep = base.includes('?') ? '&' : '?'
    const tag = crypto.randomBytes(6).toString('hex')
    list.push(['postgres', (name) => `${base}${sep}schema=t_oai_${tag}_${name.replace(/\W/g, '_')}`])
  } else {
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: PostgreSQL part skipped (run through scripts/postgres.js)')
  }
  return list
}

/**
 * The model: a tool call (with reasoning) until the last input item is a tool output, then an
 * answer (with reasoning). A prompt containing 'block' asks for lookup('block').
 */
function script({ body }) {
  const input = Array.isArray(body.input) ? body.input : []
  const last = input.at(-1)
  if (last && last.type === 'function_call_output') return reply.blocks([reply.thinking('now answer'), 'done'])
  const prompt = JSON.stringify(last ?? '')
  return reply.blocks([reply.thinking('look first'), reply.toolUse('lookup', { q: prompt.includes('block') ? 'block' : 'x' })])
}

// One server for the file: the SDK's default provider keeps the first client it is given.
/** @type {Promise<any> | undefined} */
let shared
after(async () => {
  if (shared) (await shared).close()
})
async function modelServer() {
  if (!shared) {
    shared = startModelServer({ script })
    const server = await shared
    setDefaultOpenAIClient(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 }))
  }
  return shared
}

/** Every reasoning item the server received carries exactly what it issued for that id. */
function assertReasoningAsIssued(server) {
  const issued = new Map(server.issued.filter((i) => i.type === 'reasoning').map((i) => [i.id, i]))
  let seen = 0
  for (const request of server.modelRequests) {
    for (const item of request.body.input ?? []) {
      if (item.type !== 'reasoning') continue
      seen += 1
      assert.ok(issued.has(item.id), `reasoning ${item.id} was issued`)
      assert.equal(item.encrypted_content, issued.get(item.id).encrypted_content)
    }
  }
  return seen
}

/** A ThreadlineSession that also keeps what the SDK gave it. */
class Recording extends ThreadlineSession {
  added = []
  async addItems(items, ...rest) {
    this.added.push(...structuredClone(items))
    return super.addItems(items, ...rest)
  }
}

function child(args, { onMarker } = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [RUNNER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    proc.stdout.on('data', (d) => (out += d))
    proc.stderr.on('data', (d) => (err += d))
    let timer
    if (onMarker) {
      const marker = args[4]
      timer = setInterval(() => {
        if (fs.existsSync(marker)) {
          clearInterval(timer)
          onMarker(proc)
        }
      }, 20)
    }
    proc.on('error', reject)
    proc.on('exit', (code, signal) => {
      clearInterval(timer)
      resolve({ code, signal, out, err })
    })
  })
}

test('a multi-step run with a tool and reasoning: items kept as given, in order, a Threadline session', async (t) => {
  const server = await modelServer()
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('run'))
    t.after(() => store.close())
    const session = new Recording({ store, sessionId: `run-${engine}` })
    const first = await run(makeAgent(), 'hello there', { session })
    assert.equal(first.finalOutput, 'done')
    assert.deepEqual(
      session.added.map((i) => i.type),
      ['message', 'reasoning', 'function_call', 'function_call_result', 'reasoning', 'message'],
    )
    // as given, providerData included, and again from a new object over a reopened store
    assert.deepEqual(await session.getItems(), session.added)
    const again = new ThreadlineSession({ store: Store.open(at('run')), sessionId: `run-${engine}` })
    assert.deepEqual(await again.getItems(), session.added)
    assert.equal(await again.getSessionId(), `run-${engine}`)

    const second = await run(makeAgent(), 'and again', { session })
    assert.equal(second.finalOutput, 'done')
    assert.deepEqual(await session.getItems(), session.added)
    assert.deepEqual(server.invalid, [])
    assert.ok(assertReasoningAsIssued(server) > 0)

    // an ordinary Threadline session: messages, turns, search, export
    const stored = store.openSession(`run-${engine}`)
    assert.equal(stored.turns.length, 2)
    assert.equal(stored.messages[0].content[0].text, 'hello there')
    assert.ok(stored.messages.some((m) => m.content.some((b) => b.type === 'tool_use' && b.name === 'lookup')))
    assert.ok(stored.messages.some((m) => m.content.some((b) => b.type === 'openai_reasoning')))
    // the usage of each model request is on the response it produced
    const usage = [...first.rawResponses, ...second.rawResponses].map((r) => r.usage)
    const sum = (k) => usage.reduce((n, u) => n + u[k], 0)
    assert.equal(usage.length, 4)
    assert.equal(stored.tokenTracker.cumulativeOutputTokens, sum('outputTokens'))
    assert.equal(stored.tokenTracker.cumulativeInputTokens, sum('inputTokens'))
    assert.deepEqual(stored.turns.map((turn) => turn.usage.output_tokens), [
      usage[0].outputTokens + usage[1].outputTokens,
      usage[2].outputTokens + usage[3].outputTokens,
    ])
    const hits = store.search('hello', { sessionId: `run-${engine}` }).hits
    assert.equal(hits.length, 1)
    assert.match(stored.export('markdown'), /found x/)
  }
})

test('SIGKILL while a tool runs, then a new process continues: every request valid, reasoning as issued', async (t) => {
  const server = await modelServer()
  for (const [engine, at] of engines(t)) {
    const location = at('kill')
    const marker = path.join(os.tmpdir(), `tl-oai-marker-${process.pid}-${engine}`)
    fs.rmSync(marker, { force: true })
    t.after(() => fs.rmSync(marker, { force: true }))
    const first = await child([location, 'k', server.url, 'first question', marker])
    assert.equal(first.code, 0, first.err)

    const killed = await child([location, 'k', server.url, 'please block', marker], { onMarker: (p) => p.kill('SIGKILL') })
    assert.equal(killed.signal, 'SIGKILL')

    const store = Store.open(location)
    t.after(() => store.close())
    const items = await new ThreadlineSession({ store, sessionId: 'k' }).getItems()
    // The SDK persists a run's items when the run ends: the killed run left none, and nothing
    // of the first run was lost.
    assert.deepEqual(items.map((i) => i.type), ['message', 'reasoning', 'function_call', 'function_call_result', 'reasoning', 'message'])

    const third = await child([location, 'k', server.url, 'third question', marker])
    assert.equal(third.code, 0, third.err)
    assert.equal(third.out, '"done"')
    assert.deepEqual(server.invalid, [])
    assert.ok(assertReasoningAsIssued(server) >= 4)
    const last = server.modelRequests.at(-1).body.input
    assert.deepEqual(last.filter((i) => i.role === 'user').map((i) => i.content), ['first question', 'third question'])
  }
})

test('a call left without its output (a killed app) is answered as recover() answers it, and recorded', async (t) => {
  const server = await modelServer()
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('orphan'))
    t.after(() => store.close())
    const source = new Recording({ store, sessionId: 'source' })
    await run(makeAgent(), 'hello', { session: source })
    // what an app persisting items as they stream has when it dies while the tool runs
    const session = new ThreadlineSession({ store, sessionId: `cut-${engine}` })
    await session.addItems(source.added.slice(0, 3))
    const items = await session.getItems()
    assert.deepEqual(items.slice(0, 3), source.added.slice(0, 3))
    assert.equal(items.length, 4)
    assert.equal(items[3].type, 'function_call_result')
    assert.equal(items[3].callId, source.added[2].callId)
    assert.equal(items[3].name, 'lookup')
    assert.match(items[3].output.text, /^Not run/)
    const stored = store.openSession(`cut-${engine}`)
    assert.ok(stored.envelopes().some((e) => e.repair !== undefined), 'the repair is a record')
    assert.deepEqual(stored.pendingRepairs(), [])
    // reading again changes nothing
    const count = stored.envelopes().length
    assert.deepEqual(await session.getItems(), items)
    assert.equal(stored.envelopes().length, count)

    const next = await run(makeAgent(), 'go on', { session })
    assert.equal(next.finalOutput, 'done')
    assert.deepEqual(server.invalid, [])
    assertReasoningAsIssued(server)
  }
})

test('an output without its call is left out of getItems and recorded once as an event', async (t) => {
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('stray'))
    t.after(() => store.close())
    const session = new ThreadlineSession({ store, sessionId: `stray-${engine}` })
    const user = { type: 'message', role: 'user', content: 'hi' }
    const stray = { type: 'function_call_result', name: 'lookup', callId: 'call_gone', status: 'completed', output: { type: 'text', text: 'x' } }
    await session.addItems([user, stray])
    assert.deepEqual(await session.getItems(), [user])
    assert.deepEqual(await session.getItems(), [user])
    const events = store.openSession(`stray-${engine}`).envelopes().filter((e) => e.name === 'openai-agents.dropped')
    assert.equal(events.length, 1)
    assert.equal(events[0].data.callId, 'call_gone')
  }
})

test('getItems(limit): the latest items, never starting with an output whose call was cut off or without its reasoning', async (t) => {
  const server = await modelServer()
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('limit'))
    t.after(() => store.close())
    const session = new Recording({ store, sessionId: `limit-${engine}` })
    await run(makeAgent(), 'hello', { session })
    const all = session.added // user, reasoning, call, output, reasoning, message
    assert.deepEqual(await session.getItems(2), all.slice(4))
    assert.deepEqual(await session.getItems(3), all.slice(4)) // the output's call is cut off
    assert.deepEqual(await session.getItems(1), []) // the message without its reasoning
    assert.deepEqual(await session.getItems(0), [])
    assert.deepEqual(await session.getItems(6), all)
    assert.deepEqual(await session.getItems(60), all)
    const memory = new MemorySession({ initialItems: all })
    assert.deepEqual(await session.getItems(6), await memory.getItems(6))
  }
  assert.deepEqual(server.invalid, [])
})

test('popItem and clearSession are durable; a reasoning item goes with the item it produced', async (t) => {
  await modelServer()
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('pop'))
    t.after(() => store.close())
    const id = `pop-${engine}`
    const session = new Recording({ store, sessionId: id })
    await run(makeAgent(), 'hello', { session })
    const all = session.added
    assert.deepEqual(await session.popItem(), all[5])
    const reopened = () => new ThreadlineSession({ store: Store.open(at('pop')), sessionId: id })
    // the reasoning before the popped message went with it
    assert.deepEqual(await reopened().getItems(), all.slice(0, 4))
    assert.equal(store.openSession(id).messages.length, 4)
    assert.deepEqual(await session.popItem(), all[3])
    assert.deepEqual(await reopened().getItems(), all.slice(0, 1)) // the call alone would be an orphan
    await session.addItems([{ type: 'message', role: 'user', content: 'more' }])
    assert.deepEqual((await reopened().getItems()).map((i) => i.content), ['hello', 'more'])

    await session.clearSession()
    assert.deepEqual(await reopened().getItems(), [])
    assert.equal(await session.popItem(), undefined)
    assert.equal(await session.getSessionId(), id)
    await session.addItems([{ type: 'message', role: 'user', content: 'fresh' }])
    assert.deepEqual(await reopened().getItems(), [{ type: 'message', role: 'user', content: 'fresh' }])
  }
})

test('works over threadline/promise too, and with a streamed run', async (t) => {
  const server = await modelServer()
  for (const [engine, at] of engines(t)) {
    const store = await promiseApi.Store.open(at('promise'))
    t.after(() => store.close())
    const session = new Recording({ store, sessionId: `p-${engine}` })
    await run(makeAgent(), 'hello', { session })
    // streamed: the same items reach the session
    const streamed = await run(makeAgent(), 'again', { session, stream: true })
    for await (const event of streamed) void event
    await streamed.completed
    assert.equal(streamed.finalOutput, 'done')
    assert.equal(session.added.length, 12)
    assert.deepEqual(await session.getItems(), session.added)
    assert.deepEqual(await session.popItem(), session.added.at(-1))
    assert.equal((await (await store.openSession(`p-${engine}`)).messages()).length, 10)
  }
  assert.deepEqual(server.invalid, [])
})

test('bad arguments: INVALID_INPUT with the path, nothing stored', async (t) => {
  const [[, at]] = engines(t)
  const store = Store.open(at('bad'))
  t.after(() => store.close())
  const code = (re) => (err) => err.code === 'INVALID_INPUT' && re.test(err.message)
  assert.throws(() => new ThreadlineSession(), code(/options/))
  assert.throws(() => new ThreadlineSession({ store: {} }), code(/options\.store/))
  assert.throws(() => new ThreadlineSession({ store, sessionId: '' }), code(/options\.sessionId/))
  assert.throws(() => new ThreadlineSession({ store, limit: 3 }), code(/options\.limit: unknown/))
  const session = new ThreadlineSession({ store, sessionId: 'bad' })
  await assert.rejects(session.addItems('x'), code(/addItems: items/))
  await assert.rejects(session.addItems([{ type: 'message', role: 'user', content: 'ok' }, 7]), code(/addItems: items\[1\]/))
  await assert.rejects(session.getItems(-1), code(/getItems: limit/))
  assert.deepEqual(await session.getItems(), [])
})

test('history transactions: append_items and replace_suffix are atomic and applied once per operationId', async (t) => {
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('tx'))
    t.after(() => store.close())
    const id = `tx-${engine}`
    const session = new ThreadlineSession({ store, sessionId: id })
    const say = (content) => ({ type: 'message', role: 'user', content })
    await session.applyHistoryTransaction({ operationId: 'op-1', transaction: { type: 'append_items', items: [say('a'), say('b')] } })
    await session.applyHistoryTransaction({ operationId: 'op-1', transaction: { type: 'append_items', items: [say('a'), say('b')] } })
    const count = store.openSession(id).envelopes().length
    await assert.rejects(
      session.applyHistoryTransaction({ operationId: 'op-1', transaction: { type: 'append_items', items: [say('c')] } }),
      (err) => err.code === 'INVALID_INPUT' && /args\.operationId: 'op-1' was applied with another transaction/.test(err.message),
    )
    await assert.rejects(
      session.applyHistoryTransaction({ operationId: 'op-2', transaction: { type: 'replace_suffix', expectedSuffix: [say('a')], replacement: [] } }),
      (err) => err.code === 'INVALID_INPUT' && /expectedSuffix: does not match/.test(err.message),
    )
    assert.equal(store.openSession(id).envelopes().length, count, 'a refused transaction writes nothing')

    const replace = { operationId: 'op-3', transaction: { type: 'replace_suffix', expectedSuffix: [say('b')], replacement: [say('B'), say('C')] } }
    await session.applyHistoryTransaction(replace)
    await session.applyHistoryTransaction(replace)
    const reopened = new ThreadlineSession({ store: Store.open(at('tx')), sessionId: id })
    assert.deepEqual(await reopened.getItems(), [say('a'), say('B'), say('C')])
    assert.deepEqual(store.openSession(id).messages.map((m) => m.content[0].text), ['a', 'B', 'C'])
    // the whole history, the first item included
    await reopened.applyHistoryTransaction({ operationId: 'op-4', transaction: { type: 'replace_suffix', expectedSuffix: [say('a'), say('B'), say('C')], replacement: [say('z')] } })
    assert.deepEqual(await session.getItems(), [say('z')])
  }
})

test('replace_suffix interrupted after its rewind: the retry finishes it', async (t) => {
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('txcrash'))
    t.after(() => store.close())
    const id = `txc-${engine}`
    const say = (content) => ({ type: 'message', role: 'user', content })
    await new ThreadlineSession({ store, sessionId: id }).addItems([say('a'), say('b')])
    // a store whose appendMany fails once: the process "dies" between the rewind and the append
    let failNext = true
    const flaky = new Proxy(store, {
      get(target, name) {
        if (name !== 'openSession') return Reflect.get(target, name).bind(target)
        return (...args) => {
          const real = target.openSession(...args)
          return new Proxy(real, {
            get(s, n) {
              const v = Reflect.get(s, n)
              if (n === 'appendMany') {
                return (records) => {
                  if (failNext) {
                    failNext = false
                    throw Object.assign(new Error('killed'), { code: 'STORE_IO' })
                  }
                  return s.appendMany(records)
                }
              }
              return typeof v === 'function' ? v.bind(s) : v
            },
          })
        }
      },
    })
    const replace = { operationId: 'op-r', transaction: { type: 'replace_suffix', expectedSuffix: [say('b')], replacement: [say('B')] } }
    await assert.rejects(new ThreadlineSession({ store: flaky, sessionId: id }).applyHistoryTransaction(replace), /killed/)
    const retry = new ThreadlineSession({ store, sessionId: id })
    assert.deepEqual(await retry.getItems(), [say('a')])
    await retry.applyHistoryTransaction(replace)
    assert.deepEqual(await retry.getItems(), [say('a'), say('B')])
    await retry.applyHistoryTransaction(replace)
    assert.deepEqual(await retry.getItems(), [say('a'), say('B')])
  }
})

test('without @openai/agents installed: MODULE_NOT_FOUND naming the npm command', async () => {
  // a child where resolving the SDK fails, as it does when it is not installed
  const hide = "const M = require('module'); const r = M._resolveFilename; M._resolveFilename = function (req, ...a) { if (req === '@openai/agents') throw Object.assign(new Error('nope'), { code: 'MODULE_NOT_FOUND' }); return r.call(this, req, ...a) };"
  const code = `${hide} try { require(${JSON.stringify(path.join(__dirname, '..', 'adapters', 'openai-agents'))}) } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }`
  const out = await new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] })
    let text = ''
    proc.stdout.on('data', (d) => (text += d))
    proc.on('error', reject)
    proc.on('exit', () => resolve(text))
  })
  const err = JSON.parse(out)
  assert.equal(err.code, 'MODULE_NOT_FOUND')
  assert.match(err.message, /npm install @openai\/agents/)
})

test('another process can continue the conversation while this one is alive (each call releases the session)', async (t) => {
  for (const [engine, at] of engines(t)) {
    const location = at('shared')
    const store = Store.open(location)
    t.after(() => store.close())
    const id = `shared-${engine}`
    const here = new ThreadlineSession({ store, sessionId: id })
    await here.addItems([{ type: 'message', role: 'user', content: 'from here' }])
    const adapter = path.join(__dirname, '..', 'adapters', 'openai-agents')
    const code = `const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))}); const { ThreadlineSession } = require(${JSON.stringify(adapter)});
      const s = new ThreadlineSession({ store: Store.open(${JSON.stringify(location)}), sessionId: ${JSON.stringify(id)} });
      s.addItems([{ type: 'message', role: 'user', content: 'from there' }]).then(() => process.exit(0), (e) => { console.error(e.code, e.message); process.exit(1) })`
    const result = await new Promise((resolve, reject) => {
      const proc = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'inherit', 'pipe'] })
      let err = ''
      proc.stderr.on('data', (d) => (err += d))
      proc.on('error', reject)
      proc.on('exit', (status) => resolve({ status, err }))
    })
    assert.equal(result.status, 0, result.err)
    assert.deepEqual((await here.getItems()).map((i) => i.content), ['from here', 'from there'])
    await here.addItems([{ type: 'message', role: 'user', content: 'here again' }])
    assert.equal((await here.getItems()).length, 3)
  }
})

test('items come back in the order they were added, however close together', async (t) => {
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('order'))
    t.after(() => store.close())
    const session = new ThreadlineSession({ store, sessionId: `order-${engine}` })
    const items = Array.from({ length: 60 }, (_, i) => ({ type: 'message', role: i % 2 ? 'assistant' : 'user', content: i % 2 ? [{ type: 'output_text', text: `a${i}` }] : `u${i}`, status: 'completed' }))
    // one at a time, several in one call, and calls not awaited one by one
    await session.addItems(items.slice(0, 10))
    for (const item of items.slice(10, 30)) await session.addItems([item])
    await Promise.all(items.slice(30).map((item) => session.addItems([item])))
    assert.deepEqual(await session.getItems(), items)
    assert.deepEqual(await new ThreadlineSession({ store: Store.open(at('order')), sessionId: `order-${engine}` }).getItems(), items)
  }
})

test('what another ThreadlineSession (or process) writes to the session is seen, a clear too', async (t) => {
  for (const [engine, at] of engines(t)) {
    const store = Store.open(at('two'))
    t.after(() => store.close())
    const id = `two-${engine}`
    const say = (content) => ({ type: 'message', role: 'user', content })
    const a = new ThreadlineSession({ store, sessionId: id })
    const b = new ThreadlineSession({ store: Store.open(at('two')), sessionId: id })
    await a.addItems([say('1'), say('2')])
    assert.deepEqual(await a.getItems(), [say('1'), say('2')])
    await b.addItems([say('3')])
    assert.deepEqual(await a.getItems(), [say('1'), say('2'), say('3')])
    // cleared and written again to as many records as before
    await b.clearSession()
    await b.addItems([say('x'), say('y'), say('z')])
    assert.deepEqual(await a.getItems(), [say('x'), say('y'), say('z')])
    assert.deepEqual(await a.popItem(), say('z'))
    assert.deepEqual(await b.getItems(), [say('x'), say('y')])
  }
})
