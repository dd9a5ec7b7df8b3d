'use strict'
// session.update, the context windows of known models, and the store's upkeep (stats, vacuum,
// backup) through both APIs; a backup taken while another process appends.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')

const { lib, tmpDir, assertSameJson } = require('./helpers/util')
const { onPostgres } = require('./helpers/engine')
const promise = require('../promise.js')

const { Store } = lib
const WRITER = path.join(__dirname, 'helpers', 'log-writer.js')

// Only whole lines: the writer may be in the middle of one (or was killed inside its write).
const acks = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').slice(0, -1).map((l) => JSON.parse(l)) : [])
const stopped = (pid) => /^\d+ \(.*\) T /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** @param {any} fn */
function codeOf(fn) {
  try {
    fn()
  } catch (e) {
    return { code: e.code, message: e.message }
  }
  return null
}

test('update changes title, metadata, contextWindow and model; null clears; another handle sees it', (t) => {
  const file = path.join(tmpDir(t), 'u.db')
  const store = Store.open(file)
  const s = store.createSession({ id: 'u', title: 'first', metadata: { a: 1 } })
  const info = s.update({ title: 'second', metadata: { b: [1, 2] }, contextWindow: 1000, model: 'claude-opus-4-1' })
  assert.equal(info.title, 'second')
  assert.deepEqual(info.metadata, { b: [1, 2] }, 'metadata is replaced whole')
  assert.equal(info.contextWindow, 1000)
  assert.equal(info.model, 'claude-opus-4-1')
  assert.deepEqual(s.info, info)
  const other = Store.open(file)
  assert.equal(other.listSessions()[0].title, 'second')
  const cleared = s.update({ title: null, contextWindow: null })
  assert.equal(cleared.title, undefined)
  assert.equal(cleared.contextWindow, undefined)
  assert.equal(cleared.model, 'claude-opus-4-1', 'a field left out is kept')
  assert.equal(other.openSession('u').info.title, undefined)
  // without a window of its own, the model's
  assert.equal(s.contextFill.contextWindow, 200000)
  store.close()
  other.close()
})

test('update refuses bad values naming the field, and changes nothing', (t) => {
  const store = Store.open(path.join(tmpDir(t), 'bad.db'))
  const s = store.createSession({ title: 'kept', contextWindow: 500 })
  const before = s.info
  for (const [changes, says] of [
    [{ contextWindow: 0 }, 'update: contextWindow: expected a positive integer'],
    [{ contextWindow: -1 }, 'update: contextWindow: expected a positive integer'],
    [{ contextWindow: 2.5 }, 'update: contextWindow: expected a positive integer'],
    [{ contextWindow: NaN }, 'update: contextWindow: expected a positive integer'],
    [{ contextWindow: '9' }, 'update: contextWindow: expected a positive integer'],
    [{ title: 'new', model: 42 }, 'update: model: expected a string or null'],
    [{ metadata: 'x' }, 'update: metadata: expected an object or null'],
    [{ colour: 'red' }, 'update: colour: unknown field'],
    [null, 'update: changes: expected an object'],
    [[1], 'update: changes: expected an object'],
  ]) {
    const e = codeOf(() => s.update(changes))
    assert.equal(e?.code, 'INVALID_INPUT', JSON.stringify(changes))
    assert.ok(e.message.startsWith(says), `${JSON.stringify(changes)}: ${e.message}`)
  }
  assert.deepEqual(s.info, before)
  const other = store.createSession()
  store.deleteSession(other.id)
  assert.equal(codeOf(() => other.update({ title: 't' }))?.code, 'NOT_FOUND')
  store.close()
  assert.equal(codeOf(() => s.update({ title: 't' }))?.code, 'CLOSED')
})

test('update of a session another live process writes is SESSION_LOCKED; on a readonly store STORE_IO; nothing changed', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'locked.db')
  Store.open(file).close()
  const ackFile = path.join(dir, 'acks')
  const w = spawn(process.execPath, [WRITER, file, 'held', ackFile, 'create', 'loop', 'h'], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.after(() => { try { w.kill('SIGKILL') } catch {} })
  while (acks(ackFile).length < 5) await sleep(5)
  const store = Store.open(file)
  const s = store.openSession('held')
  assert.equal(codeOf(() => s.update({ title: 'mine' }))?.code, 'SESSION_LOCKED')
  w.kill('SIGKILL')
  store.close()
  const ro = Store.open(file, { readonly: true })
  const r = ro.openSession('held')
  assert.equal(codeOf(() => r.update({ title: 'mine' }))?.code, 'STORE_IO')
  assert.equal(r.info.title, undefined)
  ro.close()
})

test('contextFill knows the window of current Anthropic and OpenAI models; a given window wins', (t) => {
  const store = Store.open(path.join(tmpDir(t), 'w.db'))
  const fill = (options, replyModel) => {
    const s = store.createSession(options)
    s.append('hi')
    s.append({ role: 'assistant', content: [{ type: 'text', text: 'hello' }], usage: { input_tokens: 2000, output_tokens: 0 }, ...(replyModel ? { model: replyModel } : {}) })
    return s.contextFill
  }
  const f = fill({ model: 'claude-sonnet-4-5-20250929' })
  assert.equal(f.contextWindow, 200000)
  assert.equal(f.fraction, f.usedTokens / 200000)
  assert.equal(fill({}, 'gpt-4o-mini-2024-07-18').contextWindow, 128000)
  assert.equal(fill({ model: 'gpt-4.1' }).contextWindow, 1047576)
  assert.equal(fill({ model: 'o3' }).contextWindow, 200000)
  assert.equal(fill({ model: 'gpt-5', contextWindow: 4096 }).contextWindow, 4096)
  assert.deepEqual([fill({ model: 'my-model' }).contextWindow, fill({ model: 'my-model' }).fraction], [null, null])
  store.close()
})

function fill(store) {
  const a = store.createSession({ id: 'a', title: 'A', metadata: { k: 1 } })
  a.append('hello')
  a.append({ role: 'assistant', content: [{ type: 'text', text: 'é'.repeat(30000) }, { type: 'tool_use', id: 't1', name: 'bash', input: { cmd: 'ls' } }], usage: { input_tokens: 5, output_tokens: 1 } })
  a.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] })
  const b = store.createSession({ id: 'b' })
  for (let i = 0; i < 30; i++) b.append(`b ${i} ${1.0}`)
}

function everything(store) {
  return store.listSessions().map((info) => ({ info, envelopes: store.openSession(info.id).envelopes() }))
}

// What a backup file holds, read by Store.open in a new process that opens files as files (on
// the PostgreSQL run, the test's own Store.open would take the path for a schema); then `then`
// (code run on the opened `store`) and what it returns as `after`.
function readCopy(file, then = 'null') {
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  delete env.THREADLINE_TEST_ENGINE
  const code = `
    const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const store = Store.open(process.argv[1])
    const all = store.listSessions().map((info) => ({ info, envelopes: store.openSession(info.id).envelopes() }))
    const ok = store.verify().ok
    const after = (() => ${then})()
    store.close()
    process.stdout.write(JSON.stringify({ all, ok, after }))`
  const r = spawnSync(process.execPath, ['-e', code, file], { encoding: 'utf8', env, maxBuffer: 64 << 20 })
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('backup: a new SQLite file Store.open opens, holding every session exactly; never over a file', (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'b.db'))
  fill(store)
  const dest = path.join(dir, 'copy.db')
  const report = store.backup(dest)
  const want = everything(store)
  assert.deepEqual(report, { path: dest, sessions: 2, records: want.reduce((n, s) => n + s.envelopes.length, 0), bytes: fs.statSync(dest).size })
  const copy = readCopy(dest, "store.openSession('a').append('the copy takes writes').seq")
  assertSameJson(copy.all, want, 'the copy')
  assert.equal(copy.ok, true)
  assert.equal(copy.after, 3, 'the copy takes writes')
  assert.deepEqual(fs.readdirSync(dir).filter((n) => n.endsWith('.tmp')), [])

  fs.writeFileSync(path.join(dir, 'taken.db'), 'mine')
  const e = codeOf(() => store.backup(path.join(dir, 'taken.db')))
  assert.equal(e?.code, 'INVALID_INPUT')
  assert.match(e.message, /^backup: path: '.*taken\.db' already exists/)
  assert.equal(fs.readFileSync(path.join(dir, 'taken.db'), 'utf8'), 'mine')
  assert.equal(codeOf(() => store.backup(''))?.code, 'INVALID_INPUT')
  assert.equal(codeOf(() => store.backup(path.join(dir, 'nope', 'x.db')))?.code, 'STORE_IO')
  store.close()
  assert.equal(codeOf(() => store.backup(path.join(dir, 'late.db')))?.code, 'CLOSED')
})

test('backup, stats, vacuum and update through threadline/promise', async (t) => {
  const dir = tmpDir(t)
  const store = await promise.Store.open(path.join(dir, 'p.db'))
  const s = await store.createSession({ id: 'p' })
  for (let i = 0; i < 100; i++) await s.append(`${i} ${'words '.repeat(300)}`)
  assert.equal((await s.update({ title: 'promised' })).title, 'promised')
  await assert.rejects(s.update({ contextWindow: 0 }), { code: 'INVALID_INPUT' })
  const report = await store.backup(path.join(dir, 'p-copy.db'))
  assert.equal(report.sessions, 1)
  assert.equal(report.records, 100)
  await s.close()
  const stats = await store.stats()
  assert.equal(stats.engine, onPostgres ? 'postgres' : 'sqlite')
  assert.ok(stats.bytes > 100 * 1800, JSON.stringify(stats))
  await store.deleteSession('p')
  const freed = await store.stats()
  const v = await store.vacuum()
  assert.equal(v.bytesBefore, freed.bytes)
  const after = await store.stats()
  assert.equal(v.bytesAfter, after.bytes)
  assert.equal(after.freeBytes, 0)
  if (!onPostgres) {
    assert.ok(freed.freeBytes > 100 * 1800, JSON.stringify(freed))
    assert.equal(freed.freeBytes, freed.pageSize * freed.freePages)
    assert.ok(v.bytesAfter < v.bytesBefore, JSON.stringify(v))
  }
  await store.close()
})

test('a backup taken while another process appends holds every append acknowledged before it', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'live.db')
  Store.open(file).close()
  const ackFile = path.join(dir, 'acks')
  const w = spawn(process.execPath, [WRITER, file, 'live', ackFile, 'create', 'loop', 'w'], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.after(() => { try { w.kill('SIGKILL') } catch {} })
  while (acks(ackFile).length < 200) await sleep(5)
  const store = Store.open(file)
  const before = acks(ackFile)
  const dest = path.join(dir, 'live-copy.db')
  store.backup(dest)
  w.kill('SIGKILL')
  const got = new Set(readCopy(dest).all[0].envelopes.map((e) => e.uuid))
  const missing = before.filter((a) => !got.has(a.uuid))
  assert.deepEqual(missing, [], 'acknowledged before backup() and not in the copy')
  store.close()
})

test('a backup holds the appends of a writer stopped right after an append (on SQLite: its last batch in its log only)', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'frozen.db')
  Store.open(file).close()
  const ackFile = path.join(dir, 'acks')
  const w = spawn(process.execPath, [WRITER, file, 'frozen', ackFile, 'create', 'stop:40', 'f'], { stdio: 'inherit' })
  t.after(() => { try { w.kill('SIGKILL') } catch {} })
  while (!stopped(w.pid)) await sleep(10)
  const acked = acks(ackFile)
  assert.equal(acked.length, 40)
  const store = Store.open(file)
  store.backup(path.join(dir, 'frozen-copy.db'))
  assert.deepEqual(readCopy(path.join(dir, 'frozen-copy.db')).all[0].envelopes.map((e) => e.uuid), acked.map((a) => a.uuid))
  store.close()
})
