'use strict'
// threadline/promise: the same classes and methods as `threadline`, every method returning a
// Promise with its store work on the thread pool. Both APIs run one implementation of each method
// (lib/steps/: the steps), so this suite runs the same operations through both on the real Claude
// Code sessions and expects the same results and the same errors; then what only the promise API
// promises: the event loop runs during a long call, calls on one object keep their order, and
// many calls at once all complete.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const { lib, tmpDir, readJsonl, expectRejection } = require('./helpers/util')
const promise = require('../promise.js')

const FIXTURES = ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']

// What differs between two stores by nature: ids and times the store makes.
function stable(info) {
  const { id, createdAt, updatedAt, ...rest } = info
  return rest
}

// A store of each API, in a directory of the test's own, closed after it.
async function bothStores(t) {
  const dir = tmpDir(t)
  const sync = lib.Store.open(path.join(dir, 'sync.db'))
  const prom = await promise.Store.open(path.join(dir, 'promise.db'))
  t.after(async () => {
    sync.close()
    await prom.close()
  })
  return { dir, sync, prom }
}

test('the same operations give the same results through both APIs, on every real fixture', async (t) => {
  const { dir, sync, prom } = await bothStores(t)
  for (const name of FIXTURES) {
    const lines = readJsonl(name)
    const a = sync.createSession({ id: name, title: name })
    const b = await prom.createSession({ id: name, title: name })
    assert.deepEqual(await b.restoreMessages(lines), a.restoreMessages(lines), name)
    assert.deepEqual(await b.messages(), a.messages, `${name}: messages`)
    assert.deepEqual(await b.allMessages(), a.allMessages, `${name}: allMessages`)
    assert.deepEqual(await b.turns(), a.turns, `${name}: turns`)
    assert.deepEqual(await b.tokenTracker(), a.tokenTracker, `${name}: tokenTracker`)
    assert.deepEqual(await b.contextFill(), a.contextFill, `${name}: contextFill`)
    assert.deepEqual(stable(await b.info()), stable(a.info), `${name}: info`)
    // (records without a uuid or timestamp of their own get ones each store makes)
    const shape = (envs) => envs.map(({ seq, type, sessionId, message }) => ({ seq, type, sessionId, message }))
    assert.deepEqual(shape(await b.envelopes({ fromSeq: 3, limit: 40 })), shape(a.envelopes({ fromSeq: 3, limit: 40 })), `${name}: envelopes`)
    // (each store stamps the journal with its own write times)
    const untimed = (calls) => calls.map(({ requestedAt, startedAt, endedAt, ...c }) => c)
    assert.deepEqual(untimed(await b.toolCalls()), untimed(a.toolCalls()), `${name}: toolCalls`)
    assert.deepEqual(await b.pendingRepairs(), a.pendingRepairs(), `${name}: pendingRepairs`)
    assert.deepEqual(await b.branches(), a.branches(), `${name}: branches`)
    for (const target of ['anthropic', 'openai-chat', 'openai-responses']) {
      assert.deepEqual(await b.buildContext({ target, maxTokens: 20_000 }), a.buildContext({ target, maxTokens: 20_000 }), `${name}: buildContext ${target}`)
    }
    assert.deepEqual((await b.verify()).damaged, a.verify().damaged)
    // A snapshot from one API imports through the other (into a store of its own) and reads
    // back the same.
    const copies = lib.Store.open(path.join(dir, `copy-${name}.db`))
    assert.deepEqual(copies.importSnapshot(await b.snapshot()).messages, a.messages, `${name}: snapshot`)
    copies.close()
  }
  const sessions = (list) => list.map(stable).sort((x, y) => x.title.localeCompare(y.title))
  assert.deepEqual(sessions(await prom.listSessions()), sessions(sync.listSessions()))
  const strip = (page) => page.hits.map(({ sessionId, uuid, timestamp, ...h }) => h)
  for (const q of ['TranscriptRenderer', '"run the tests"', 'pars*', 'JSONSerializer']) {
    const ours = strip(await prom.search(q, { limit: 5, fields: ['text', 'tool_input', 'tool_output'] }))
    assert.deepEqual(ours, strip(sync.search(q, { limit: 5, fields: ['text', 'tool_input', 'tool_output'] })), `search ${q}`)
  }
  assert.ok(strip(await prom.search('TranscriptRenderer')).length > 0)
  const tools = await prom.recallTools()
  assert.deepEqual(tools.names, sync.recallTools().names)
  const read = await tools.handle({ name: 'session_read', input: { session_id: 'short.jsonl' } })
  assert.equal(read.type, 'tool_result')
  assert.equal(read.is_error, undefined)
  const body = (r) => r.content.split('\n').slice(1).join('\n') // (the header says when it was last written)
  const theirs = await sync.recallTools().handle({ name: 'session_read', input: { session_id: 'short.jsonl' } })
  assert.ok(body(read).includes('[seq 3] user: mix phx.server'))
  assert.equal(body(read), body(theirs))
})

test('bad input is refused with the same code and message in both APIs, and nothing is written', async (t) => {
  const { dir, sync, prom } = await bothStores(t)
  const a = sync.createSession({ id: 's' })
  const b = await prom.createSession({ id: 's' })
  const cases = [
    ['append', [null]],
    ['append', [{ role: 'user', content: [{ type: 'tool_result' }] }]],
    ['append', ['hi', 'not an object']],
    ['appendMany', ['nope']],
    ['appendEvent', ['']],
    ['restoreMessages', [{}]],
    ['setStatus', [42]],
    ['toolCallStarted', ['toolu_missing']],
    ['recordToolOutcome', ['', 'x']],
    ['buildContext', [undefined]],
    ['buildContext', [{ target: 'gemini' }]],
    ['compact', [{}]],
    ['rewind', ['no-such-uuid']],
    ['readToolOutput', ['toolu_missing']],
    ['envelopes', [{ fromSeq: -1 }]],
  ]
  for (const [method, args] of cases) {
    const e = thrown(() => a[method](...args))
    const r = await expectRejection(() => b[method](...args), e.code)
    assert.equal(r.message, e.message, `${method}(${JSON.stringify(args)})`)
  }
  assert.equal((await b.messages()).length, 0)
  for (const [method, args] of [['openSession', ['missing']], ['search', ['"unclosed']], ['deleteSession', ['missing']], ['forkSession', ['missing']], ['importSnapshot', ['{}']], ['verify', [{ deep: true }]]]) {
    const e = thrown(() => sync[method](...args))
    const r = await expectRejection(() => prom[method](...args), e.code)
    assert.equal(r.message, e.message, `${method}(${JSON.stringify(args)})`)
  }
  await expectRejection(() => promise.Store.open(path.join(dir, 'missing-dir', 'x.db')), 'STORE_IO')
  await expectRejection(() => promise.Store.open(42), 'INVALID_INPUT', 'path')
})

// The error the synchronous call throws (each case above must throw one, with a code).
function thrown(fn) {
  try {
    fn()
  } catch (e) {
    assert.equal(typeof e.code, 'string', e.message)
    return e
  }
  assert.fail('expected the synchronous call to throw')
}

test('a closed store or session rejects with CLOSED; close waits for the calls made before it', async (t) => {
  const dir = tmpDir(t)
  const store = await promise.Store.open(path.join(dir, 's.db'))
  const s = await store.createSession()
  const pending = [s.append('one'), s.append('two')]
  const closing = s.close()
  await Promise.all(pending)
  await closing
  await expectRejection(() => s.append('three'), 'CLOSED')
  const other = await store.createSession()
  await store.close()
  await expectRejection(() => other.messages(), 'CLOSED')
  await expectRejection(() => store.listSessions(), 'CLOSED')
  const again = await promise.Store.open(path.join(dir, 's.db'))
  const listed = await again.listSessions()
  assert.equal(listed.find((i) => i.id === s.id).messageCount, 2)
  await again.close()
})

test("recallTools().handle of a promise Store takes its turn among the store's calls", async (t) => {
  const dir = tmpDir(t)
  const store = await promise.Store.open(path.join(dir, 's.db'))
  const s = await store.createSession({ id: 'kept' })
  await s.append('hello')
  const tools = await store.recallTools()
  const call = { name: 'session_read', input: { session_id: 'kept' } }
  // Made before close(), a handle runs before the store closes; made after it, after.
  const before = tools.handle(call)
  const closing = store.close()
  const after = tools.handle(call)
  const read = await before
  assert.equal(read.type, 'tool_result')
  assert.equal(read.is_error, undefined)
  await closing
  await expectRejection(after, 'CLOSED')
})

test('the event loop keeps running while a long call is in flight', async (t) => {
  const dir = tmpDir(t)
  const lines = readJsonl('compacted-session.jsonl')
  const many = Array.from({ length: 12 }, () => lines).flat()
  // The synchronous API blocks the loop for the whole call: no tick while it runs.
  const sync = lib.Store.open(path.join(dir, 'a.db'))
  t.after(() => sync.close())
  const ticksDuring = async (fn) => {
    let ticks = 0
    const timer = setInterval(() => ticks++, 1)
    try {
      await fn()
    } finally {
      clearInterval(timer)
    }
    return ticks
  }
  assert.equal(await ticksDuring(() => sync.createSession().restoreMessages(many)), 0)
  const prom = await promise.Store.open(path.join(dir, 'b.db'))
  t.after(async () => prom.close())
  const s = await prom.createSession()
  const restoreTicks = await ticksDuring(() => s.restoreMessages(many))
  assert.ok(restoreTicks > 0, 'the timer ticked during restoreMessages')
  const readTicks = await ticksDuring(() => s.allMessages())
  assert.ok(readTicks > 0, 'the timer ticked during allMessages')
  assert.equal((await s.allMessages()).length, sync.listSessions()[0].messageCount)
})

test('calls on one session keep the order they were made in; many at once on one store all complete', async (t) => {
  const dir = tmpDir(t)
  const store = await promise.Store.open(path.join(dir, 's.db'))
  t.after(async () => store.close())
  const sessions = await Promise.all(Array.from({ length: 8 }, (_, i) => store.createSession({ id: `s${i}` })))
  const calls = []
  for (let n = 0; n < 50; n++) {
    for (const s of sessions) {
      calls.push(s.append(n % 2 === 0 ? `prompt ${n}` : { role: 'assistant', content: [{ type: 'text', text: `answer ${n}` }] }))
    }
  }
  calls.push(store.listSessions())
  const results = await Promise.all(calls)
  for (const s of sessions) {
    const envs = results.filter((e) => e && e.sessionId === s.id)
    assert.deepEqual(envs.map((e) => e.seq), Array.from({ length: 50 }, (_, i) => i))
    const texts = (await s.messages()).map((m) => (typeof m.content === 'string' ? m.content : m.content[0].text))
    assert.deepEqual(texts, Array.from({ length: 50 }, (_, n) => (n % 2 === 0 ? `prompt ${n}` : `answer ${n}`)))
  }
  // A streamed response whose pushes are not awaited one by one keeps its chunks in order.
  const w = await sessions[0].beginResponse()
  w.push({ type: 'message_start', message: { id: 'msg_x', role: 'assistant', content: [], model: 'm' } })
  w.push({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
  for (const part of ['a', 'b', 'c', 'd']) w.push({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: part } })
  w.push({ type: 'content_block_stop', index: 0 })
  const done = await w.finish()
  assert.deepEqual(done.message.content, [{ type: 'text', text: 'abcd' }])
})

test('recover() with replay runs through the promise API as through the synchronous one', async (t) => {
  const dir = tmpDir(t)
  const store = await promise.Store.open(path.join(dir, 's.db'))
  t.after(async () => store.close())
  const s = await store.createSession()
  await s.append('list the files')
  await s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_ls', name: 'ls', input: {} }, { type: 'tool_use', id: 'toolu_rm', name: 'rm', input: {} }] })
  await s.toolCallStarted('toolu_ls')
  await s.toolCallStarted('toolu_rm')
  const replayed = []
  const report = await s.recover({ isSafe: (c) => c.name === 'ls', replay: async (c) => { replayed.push(c.id); return 'a.txt' } })
  assert.deepEqual(replayed, ['toolu_ls'])
  assert.deepEqual(report.repairs.map((r) => [r.toolUseId, r.kind]).sort(), [['toolu_ls', 'replayed'], ['toolu_rm', 'unknown_outcome']].sort())
  const last = (await s.messages()).at(-1)
  assert.equal(last.role, 'user')
  assert.deepEqual(last.content.map((b) => b.tool_use_id).sort(), ['toolu_ls', 'toolu_rm'])
})

test('threadline/promise loads from CommonJS and ESM, with the same native classes as threadline', async () => {
  const esm = await import('../promise.mjs')
  assert.equal(esm.Store, promise.Store)
  assert.equal(esm.default.Store, promise.Store)
  assert.equal(promise.validateMessages, lib.validateMessages)
  assert.notEqual(promise.Store, lib.Store)
  assert.throws(() => new promise.Session(), /sessions come from a Store/)
})
