'use strict'
// The addon in worker_threads: it loads, opens stores, appends and reads there; two workers work
// on two stores at once; the main thread (which has loaded the addon too) reads what they wrote.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Worker } = require('node:worker_threads')

const { lib, ROOT, tmpDir, openReadonlyDb } = require('./helpers/util')

const { Store } = lib

// Worker body: opens workerData.file, appends workerData.count prompt/answer pairs to a new
// session, reads them back, checks error codes, and posts what it saw.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const { Store, Session } = require(workerData.root)
const { file, id, count, tag } = workerData
const store = Store.open(file)
const s = store.createSession({ id })
for (let i = 0; i < count; i++) {
  s.append('question ' + tag + ' ' + i)
  s.appendMany([{ type: 'assistant', message: { role: 'assistant', id: 'msg_' + tag + '_' + i, content: [{ type: 'text', text: 'answer ' + tag + ' ' + i }], usage: { input_tokens: 1, output_tokens: 2 } } }])
}
let notFound = null
try { store.openSession('no-such-session') } catch (e) { notFound = { code: e.code, message: e.message, isError: e instanceof Error } }
const mem = new Session()
mem.append('in memory too')
const result = {
  messages: s.messages,
  turns: s.turns.length,
  tracker: s.tokenTracker,
  seqs: s.envelopes().map((e) => e.seq),
  notFound,
  memoryMessages: mem.messages.length,
}
store.close()
parentPort.postMessage(result)
`

function runWorker(workerData) {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER, { eval: true, workerData })
    let result
    w.on('message', (m) => { result = m })
    w.on('error', reject)
    w.on('exit', (code) => (code === 0 && result ? resolve(result) : reject(new Error(`worker exited with ${code} and ${result ? 'a' : 'no'} result`))))
  })
}

function expectedMessages(tag, count) {
  const out = []
  for (let i = 0; i < count; i++) {
    out.push({ role: 'user', content: [{ type: 'text', text: `question ${tag} ${i}` }] })
    out.push({ role: 'assistant', id: `msg_${tag}_${i}`, content: [{ type: 'text', text: `answer ${tag} ${i}` }], usage: { input_tokens: 1, output_tokens: 2 } })
  }
  return out
}

test('the addon loads and works in a worker thread', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'w.db')
  const r = await runWorker({ root: ROOT, file, id: 'in-worker', count: 20, tag: 'a' })
  assert.deepStrictEqual(r.messages, expectedMessages('a', 20))
  assert.equal(r.turns, 20)
  assert.equal(r.tracker.cumulativeInputTokens, 20)
  assert.equal(r.tracker.cumulativeOutputTokens, 40)
  assert.deepStrictEqual(r.seqs, Array.from({ length: 40 }, (_, i) => i))
  assert.deepStrictEqual(r.notFound, { code: 'NOT_FOUND', message: r.notFound.message, isError: true })
  assert.match(r.notFound.message, /openSession: .*no-such-session/)
  assert.equal(r.memoryMessages, 1)

  // the main thread reads what the worker wrote
  const store = Store.open(file)
  assert.deepStrictEqual(store.openSession('in-worker').messages, expectedMessages('a', 20))
  store.close()
})

test('two workers on two stores at once', async (t) => {
  const dir = tmpDir(t)
  const f1 = path.join(dir, 'one.db')
  const f2 = path.join(dir, 'two.db')
  // the main thread works on a store of its own meanwhile
  const mainStore = Store.open(path.join(dir, 'main.db'))
  const mainSession = mainStore.createSession({ id: 'main' })
  const both = Promise.all([
    runWorker({ root: ROOT, file: f1, id: 's1', count: 300, tag: 'one' }),
    runWorker({ root: ROOT, file: f2, id: 's2', count: 300, tag: 'two' }),
  ])
  for (let i = 0; i < 100; i++) mainSession.append(`main ${i}`)
  const [r1, r2] = await both
  assert.deepStrictEqual(r1.messages, expectedMessages('one', 300))
  assert.deepStrictEqual(r2.messages, expectedMessages('two', 300))
  assert.equal(mainSession.messages.length, 100)
  mainStore.close()

  for (const [file, id, tag] of [[f1, 's1', 'one'], [f2, 's2', 'two']]) {
    const store = Store.open(file)
    assert.deepStrictEqual(store.listSessions().map((i) => i.id), [id], `${file} holds only its own session`)
    assert.deepStrictEqual(store.openSession(id).messages, expectedMessages(tag, 300))
    store.close()
    const db = openReadonlyDb(file)
    assert.deepStrictEqual(db.pragma('integrity_check'), [{ integrity_check: 'ok' }])
    db.close()
  }
})

test('a worker terminated while appending leaves a usable store', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'term.db')
  const init = Store.open(file)
  init.createSession({ id: 'busy' })
  init.close()
  const code = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Store } = require(workerData.root)
    const s = Store.open(workerData.file).openSession('busy')
    parentPort.postMessage('ready')
    for (let i = 0; ; i++) s.append('loop ' + i)
  `
  const w = new Worker(code, { eval: true, workerData: { root: ROOT, file } })
  await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  await new Promise((resolve) => setTimeout(resolve, 150))
  await w.terminate()

  const store = Store.open(file)
  const s = store.openSession('busy')
  const envs = s.envelopes()
  assert.ok(envs.length > 0, 'the worker appended before it was stopped')
  envs.forEach((e, i) => {
    assert.equal(e.seq, i)
    assert.deepStrictEqual(e.message.content, [{ type: 'text', text: `loop ${i}` }])
  })
  const e = s.append('after the worker')
  assert.equal(e.seq, envs.length)
  store.close()
  const db = openReadonlyDb(file)
  assert.deepStrictEqual(db.pragma('integrity_check'), [{ integrity_check: 'ok' }])
  db.close()
})
