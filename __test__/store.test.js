'use strict'
// The store file: created private (0600, with its -wal/-shm), defaultStorePath and THREADLINE_HOME,
// and the basic session bookkeeping of a store (list, info, status, delete).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { once } = require('node:events')

const { lib, ROOT, tmpDir, expectError, readInNewProcess, openReadonlyDb } = require('./helpers/util')

const { Store } = lib
// The garbage collector, to finalize dropped stores now (node runs without --expose-gc).
require('node:v8').setFlagsFromString('--expose-gc')
const gc = require('node:vm').runInNewContext('gc')

function mode(file) {
  return fs.statSync(file).mode & 0o777
}

test('a new store file is created with mode 0600, and so are its -wal and -shm files', (t) => {
  const dir = tmpDir(t)
  const old = process.umask(0o022) // a usual umask, which alone would give 0644
  try {
    const file = path.join(dir, 'private.db')
    const store = Store.open(file)
    store.createSession().append('secret prompt')
    assert.equal(mode(file), 0o600)
    for (const side of [`${file}-wal`, `${file}-shm`]) {
      assert.ok(fs.existsSync(side), `${side} exists while the store is open (WAL mode)`)
      assert.equal(mode(side), 0o600, side)
    }
    store.close()
    assert.equal(mode(file), 0o600)
  } finally {
    process.umask(old)
  }
})

function childEnv(changes) {
  const env = { ...process.env }
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined) delete env[k]
    else env[k] = v
  }
  return env
}

// In a child with `env`: defaultStorePath(), and the path of Store.open() with no path (created).
function defaultsIn(env) {
  const code = `
    const { Store, defaultStorePath } = require(${JSON.stringify(ROOT)})
    const p = defaultStorePath()
    const store = Store.open()
    store.createSession({ id: 'default' }).append('hi')
    const opened = store.path
    store.close()
    process.stdout.write(JSON.stringify({ p, opened }))
  `
  const r = spawnSync(process.execPath, ['-e', code], { env, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('defaultStorePath honours THREADLINE_HOME, and Store.open() with no path uses it', (t) => {
  const home = path.join(tmpDir(t), 'tl-home')
  const { p, opened } = defaultsIn(childEnv({ THREADLINE_HOME: home }))
  assert.equal(p, path.join(home, 'threadline.db'))
  assert.equal(opened, p)
  assert.ok(fs.existsSync(p), 'the store was created there')
  assert.equal(mode(p), 0o600)
  const back = readInNewProcess(p, 'default')
  assert.equal(back.messages.length, 1)
})

test('without THREADLINE_HOME, the default store is in the per-user data dir under threadline/', (t) => {
  const dir = tmpDir(t)
  let env
  let expected
  if (process.platform === 'linux') {
    env = childEnv({ THREADLINE_HOME: undefined, XDG_DATA_HOME: path.join(dir, 'xdg-data') })
    expected = path.join(dir, 'xdg-data', 'threadline', 'threadline.db')
  } else if (process.platform === 'darwin') {
    env = childEnv({ THREADLINE_HOME: undefined, HOME: dir })
    expected = path.join(dir, 'Library', 'Application Support', 'threadline', 'threadline.db')
  } else {
    env = childEnv({ THREADLINE_HOME: undefined, APPDATA: dir })
    expected = path.join(dir, 'threadline', 'threadline.db')
  }
  const { p, opened } = defaultsIn(env)
  assert.equal(p, expected)
  assert.equal(opened, expected)
  assert.ok(fs.existsSync(expected))
  // the parent process's own default follows its own environment
  const saved = process.env.THREADLINE_HOME
  process.env.THREADLINE_HOME = path.join(dir, 'here')
  try {
    assert.equal(lib.defaultStorePath(), path.join(dir, 'here', 'threadline.db'))
  } finally {
    if (saved === undefined) delete process.env.THREADLINE_HOME
    else process.env.THREADLINE_HOME = saved
  }
})

test('sessions: info, listSessions (most recently updated first), setStatus, deleteSession', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 's.db')
  const store = Store.open(file)
  const a = store.createSession({ id: 'a', project: 'p1', title: 'First', model: 'claude-x', contextWindow: 1000, metadata: { k: [1, 2] } })
  const b = store.createSession({ id: 'b', project: 'p2' })
  a.append('one')
  await new Promise((r) => setTimeout(r, 5))
  b.append('two')
  b.append({ role: 'assistant', content: 'three' })
  const info = a.info
  assert.equal(info.id, 'a')
  assert.equal(info.project, 'p1')
  assert.equal(info.title, 'First')
  assert.equal(info.model, 'claude-x')
  assert.equal(info.contextWindow, 1000)
  assert.deepStrictEqual(info.metadata, { k: [1, 2] })
  assert.equal(info.status, 'active')
  assert.equal(info.messageCount, 1)
  assert.ok(!Number.isNaN(Date.parse(info.createdAt)))
  assert.ok(Date.parse(info.updatedAt) >= Date.parse(info.createdAt))
  assert.equal(b.info.messageCount, 2)

  assert.deepStrictEqual(store.listSessions().map((i) => i.id), ['b', 'a'])
  assert.deepStrictEqual(store.listSessions({ project: 'p1' }).map((i) => i.id), ['a'])
  assert.deepStrictEqual(store.listSessions({ limit: 1 }).map((i) => i.id), ['b'])
  await new Promise((r) => setTimeout(r, 5))
  a.append('four')
  assert.deepStrictEqual(store.listSessions().map((i) => i.id), ['a', 'b'])

  b.setStatus('completed')
  assert.equal(b.info.status, 'completed')
  assert.deepStrictEqual(store.listSessions({ status: 'completed' }).map((i) => i.id), ['b'])

  store.deleteSession('b')
  assert.deepStrictEqual(store.listSessions().map((i) => i.id), ['a'])
  expectError(() => store.openSession('b'), 'NOT_FOUND', 'b')
  store.close()
  const back = readInNewProcess(file, 'a')
  assert.equal(back.info.status, 'active')
  assert.equal(back.messages.length, 2)
})

test('listSessions: most recently updated first, ties within one millisecond in write order, across processes', (t) => {
  const file = path.join(tmpDir(t), 's.db')
  const store = Store.open(file)
  t.after(() => store.close())
  // Back to back: many of these land in the same millisecond; the order must still be exact.
  for (let i = 0; i < 200; i++) {
    const older = store.createSession({ id: `old-${i}` })
    store.createSession({ id: `new-${i}` })
    older.append('written after new-' + i + ' was created')
    const ids = store.listSessions({ limit: 2 }).map((s) => s.id)
    assert.deepStrictEqual(ids, [`old-${i}`, `new-${i}`], `round ${i}`)
  }
  // A write from another process counts as a write in the same order.
  const child = spawnSync(process.execPath, ['-e', `
    const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const s = Store.open(process.argv[1]); s.openSession('new-0').append('from a child'); s.close()
  `, file], { encoding: 'utf8' })
  assert.equal(child.status, 0, child.stderr)
  assert.equal(store.listSessions({ limit: 1 })[0].id, 'new-0')
  // Closing a session is a write too; a retried append that stores nothing is not.
  const s5 = store.openSession('old-5')
  s5.setStatus('completed')
  assert.equal(store.listSessions({ limit: 1 })[0].id, 'old-5')
  const first = store.openSession('old-7').envelopes()[0]
  store.openSession('old-7').append(first)
  assert.equal(store.listSessions({ limit: 1 })[0].id, 'old-5', 'a no-op retry does not move a session up')
})

test('two handles on one session (same process) see each other\'s appends; seq and parent chain continue', (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'h.db'))
  const first = store.createSession({ id: 'h' })
  first.append('zero')
  const h1 = store.openSession('h')
  const h2 = store.openSession('h')
  const a = h1.append('from h1')
  const b = h2.append('from h2')
  const c = first.append({ role: 'assistant', content: 'from the first handle', usage: { input_tokens: 3, output_tokens: 4 } })
  assert.deepStrictEqual([a.seq, b.seq, c.seq], [1, 2, 3])
  assert.equal(b.parentUuid, a.uuid)
  assert.equal(c.parentUuid, b.uuid)
  for (const h of [first, h1, h2]) {
    assert.deepStrictEqual(h.messages.map((m) => m.content[0].text), ['zero', 'from h1', 'from h2', 'from the first handle'])
    assert.equal(h.turns.length, 3)
    assert.equal(h.tokenTracker.cumulativeOutputTokens, 4)
    assert.equal(h.info.messageCount, 4)
  }
  store.close()
})

test('two processes append to two sessions of one store at the same time', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'shared.db')
  const init = Store.open(file)
  init.createSession({ id: 'p1' })
  init.createSession({ id: 'p2' })
  init.close()
  const code = `
    const { Store } = require(${JSON.stringify(ROOT)})
    const [file, id] = process.argv.slice(1)
    const s = Store.open(file).openSession(id)
    for (let i = 0; i < 300; i++) {
      if (i % 3 === 0) s.appendMany([id + ' ' + i + 'a', id + ' ' + i + 'b'])
      else s.append(id + ' ' + i)
    }
  `
  const runs = ['p1', 'p2'].map((id) => {
    const child = spawn(process.execPath, ['-e', code, file, id], { stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    child.stderr.on('data', (d) => { err += d })
    return once(child, 'exit').then(([status]) => ({ status, err }))
  })
  for (const r of await Promise.all(runs)) assert.equal(r.status, 0, r.err)

  const expected = (id) => {
    const out = []
    for (let i = 0; i < 300; i++) {
      if (i % 3 === 0) out.push(`${id} ${i}a`, `${id} ${i}b`)
      else out.push(`${id} ${i}`)
    }
    return out
  }
  for (const id of ['p1', 'p2']) {
    const back = readInNewProcess(file, id)
    assert.deepStrictEqual(back.messages.map((m) => m.content[0].text), expected(id))
    back.envelopes.forEach((e, i) => {
      assert.equal(e.seq, i)
      assert.equal(e.sessionId, id)
      assert.equal(e.parentUuid, i === 0 ? null : back.envelopes[i - 1].uuid)
    })
  }
  const db = openReadonlyDb(file)
  assert.deepStrictEqual(db.pragma('integrity_check'), [{ integrity_check: 'ok' }])
  db.close()
})

test('appendEvent keeps data exactly, null included, and leaves it out only when undefined', () => {
  const s = new lib.Session()
  assert.equal(s.appendEvent('a', null).data, null)
  s.appendEvent('b')
  s.appendEvent('c', { n: 1 })
  const [a, b, c] = s.envelopes()
  assert.ok('data' in a)
  assert.equal(a.data, null)
  assert.ok(!('data' in b))
  assert.deepEqual(c.data, { n: 1 })
  assert.deepEqual([a.type, a.name, c.name], ['event', 'a', 'c'])
  assert.deepEqual(s.messages, [])
})

test('ERROR_CODES cannot be altered, so error codes stay stable', async () => {
  assert.ok(Object.isFrozen(lib.ERROR_CODES))
  assert.throws(() => { 'use strict'; lib.ERROR_CODES.length = 0 })
  const store = lib.Store.open(':memory:')
  await assert.rejects(store.openSessionAsync('nope'), (e) => e.code === 'NOT_FOUND')
  store.close()
})

test('appending the same record again (a retry) writes nothing and returns the stored envelope', () => {
  const s = new lib.Session()
  const record = { uuid: 'u-retry', message: { role: 'user', content: 'once' } }
  const first = s.append(record)
  const again = s.append(record)
  assert.deepEqual(again, first)
  assert.equal(s.envelopes().length, 1)
  assert.throws(() => s.append({ uuid: 'u-retry', message: { role: 'user', content: 'other' } }),
    (e) => e.code === 'INVALID_INPUT' && /already used by record seq 0, with other content/.test(e.message))
})

test('processes creating the same new store at the same moment all open it and write (the schema is made once)', async (t) => {
  // Repeated: the race is between the first reads of the file and another process's migration.
  for (let round = 0; round < 5; round++) {
    const file = path.join(tmpDir(t), 'new.db')
    const at = Date.now() + 500
    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      while (Date.now() < ${at}) {}
      const s = Store.open(process.argv[1])
      s.createSession({ id: 'p' + process.argv[2] }).append('hi')
      s.close()
    `
    const children = Array.from({ length: 8 }, (_, i) => spawn(process.execPath, ['-e', code, file, String(i)], { stdio: ['ignore', 'ignore', 'pipe'] }))
    const results = await Promise.all(children.map(async (c) => {
      let err = ''
      c.stderr.on('data', (d) => { err += d })
      const [status] = await once(c, 'exit')
      return { status, err }
    }))
    for (const r of results) assert.equal(r.status, 0, `round ${round}: ${r.err}`)
    const store = Store.open(file)
    assert.deepEqual(store.listSessions().map((s) => s.id).sort(), ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7'])
    store.close()
  }
})

// How many file descriptors of this process are open on `file` (or its -wal, -shm).
function handlesOfFile(file) {
  return fs.readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith(file)
    } catch {
      return false
    }
  }).length
}

// Opens `n` stores on `file` and drops them without close(). (Not inline in an async test: a
// suspended async function can keep the last of them alive in a saved register.)
function dropStores(file, n) {
  for (let i = 0; i < n; i++) {
    const dropped = Store.open(file)
    assert.equal(dropped.openSession('x').messages.length, 1)
  }
}

test('stores of one process on one file share its connections: dropped stores hold no file handles, and the last close closes the file', { skip: !fs.existsSync('/proc/self/fd') && 'needs /proc/self/fd' }, async (t) => {
  const file = path.join(tmpDir(t), 'shared.db')
  const fds = () => fs.readdirSync('/proc/self/fd').length
  const handlesOf = () => handlesOfFile(file)
  const kept = Store.open(file)
  kept.createSession({ id: 'x' }).append('hi')
  const before = fds()
  // Dropped without close(), each of them read the session: no handle is added.
  dropStores(path.join(path.dirname(file), '.', 'shared.db'), 300)
  assert.ok(fds() <= before + 2, `${fds() - before} descriptors more after 300 stores were dropped`)
  // A second store writes through the same connections; closing it leaves the first working.
  const other = Store.open(file)
  other.openSession('x').append('again')
  other.close()
  assert.throws(() => other.listSessions(), (e) => e.code === 'CLOSED')
  assert.equal(kept.openSession('x').messages.length, 2)
  // Other settings get their own connections.
  const readonly = Store.open(file, { readonly: true })
  assert.equal(readonly.openSession('x').messages.length, 2)
  readonly.close()
  kept.close()
  // The dropped stores, once finalized, let go of the file too: it is closed.
  for (let i = 0; i < 200 && handlesOf() > 0; i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  assert.equal(handlesOf(), 0, 'the file is still open after every store was closed or finalized')
})

test('two stores on one file: closing one keeps the other working, closing both closes the file', { skip: !fs.existsSync('/proc/self/fd') && 'needs /proc/self/fd' }, (t) => {
  const file = path.join(tmpDir(t), 'two.db')
  const handlesOf = () => handlesOfFile(file)
  const a = Store.open(file)
  const b = Store.open(file)
  a.createSession({ id: 's' }).append('from a')
  const s = b.openSession('s')
  a.close()
  s.append('from b after a closed')
  const reader = Store.open(file, { readonly: true })
  assert.deepEqual(reader.openSession('s').messages.map((m) => m.content[0].text), ['from a', 'from b after a closed'])
  reader.close()
  assert.ok(handlesOf() > 0)
  b.close()
  assert.throws(() => s.messages, (e) => e.code === 'CLOSED')
  assert.equal(handlesOf(), 0, 'the file is still open after both stores were closed')
})
