'use strict'
// session.watch and store.watch (docs/live.md): each committed record once, in seq order, as any
// process commits it, on both engines and through both APIs. Real processes: two writers append
// 10,000 records into four sessions while three session watchers and a store watcher collect;
// one writer is SIGKILLed mid-run (what it acknowledged arrives, nothing else), one session
// watcher is SIGKILLed and restarted with fromSeq and the store watcher with the cursor of the
// last change it printed (neither misses nor repeats anything), and on PostgreSQL the server
// restarts mid-run. A stopped watch leaves nothing behind: every watcher exits on its own.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const readline = require('node:readline')
const { spawn } = require('node:child_process')

const { lib, tmpDir, expectError, pgUrl } = require('./helpers/util')
const promise = require('../promise.js')
const { restartServer } = require('./helpers/torture/faults.js')

const { Store } = lib
const WRITER = path.join(__dirname, 'helpers', 'watch-writer.js')
const READER = path.join(__dirname, 'helpers', 'watch-reader.js')
const STORE_READER = path.join(__dirname, 'helpers', 'store-watch-reader.js')

// Both engines: a file in a temporary directory, and a schema on the test server when there is one.
function engines(t, name) {
  const out = [['sqlite', path.join(tmpDir(t), `${name}.db`)]]
  const url = pgUrl(t, name)
  if (url) out.push(['postgres', url])
  return out
}

const spawned = []
test.after(() => { for (const p of spawned) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL') })

// A child process whose stdout lines go to `onLine`; `exited` resolves with its exit code (or
// signal name).
function child(script, args, onLine) {
  const p = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  spawned.push(p)
  let stderr = ''
  p.stderr.on('data', (d) => { stderr += d })
  readline.createInterface({ input: p.stdout }).on('line', onLine)
  p.exited = new Promise((resolve) => p.on('close', (code, signal) => resolve({ code: code ?? signal, stderr })))
  return p
}

// Resolves once `check()` holds, checked at each line a process prints.
function until(check) {
  let resolve
  const done = new Promise((r) => { resolve = r })
  return { done, poke: () => { if (check()) resolve() } }
}

for (const [engine, api] of [['sqlite', 'sync'], ['postgres', 'promise']]) {
  test(`${engine}: two writers append 5,000 records each into four sessions (one SIGKILLed mid-run), three session watchers and a store watcher each get every record once, in order; a killed writer's acknowledged records arrive; a killed watcher resumes with fromSeq or since${engine === 'postgres' ? '; the server restarts mid-run' : ''}`, { timeout: 600_000 }, async (t) => {
    const location = engine === 'sqlite' ? path.join(tmpDir(t), 'live.db') : pgUrl(t, 'live')
    if (!location) return
    const setup = Store.open(location)
    const ids = [0, 1, 2, 3].map(() => setup.createSession({ project: 'live' }).id)
    setup.close()
    const from = Object.fromEntries(ids.map((id) => [id, 0]))

    // What each watcher printed, per session: [seq, uuid] in the order it came. Watchers 0-2
    // watch each session (session.watch), watcher 3 the project (store.watch).
    const seen = [new Map(), new Map(), new Map(), new Map()]
    let onProgress = () => {}
    let storeCursor = null
    let storeCreated = () => {}
    const onRec = (i) => (line) => {
      const [kind, id, seq, uuid, cursor] = line.split(' ')
      if (kind === 'created') storeCreated(id)
      if (kind !== 'rec') return
      if (!seen[i].has(id)) seen[i].set(id, [])
      seen[i].get(id).push([Number(seq), uuid])
      if (i === 3) storeCursor = cursor
      onProgress()
    }
    const readers = [
      child(READER, [location, api, JSON.stringify(from)], onRec(0)),
      child(READER, [location, api === 'sync' ? 'promise' : 'sync', JSON.stringify(from)], onRec(1)),
      child(READER, [location, api, JSON.stringify(from)], onRec(2)),
      child(STORE_READER, [location, api, 'live'], onRec(3)),
    ]
    // The store watcher starts at the end its first look finds: a session made once it watches
    // shows it is watching before any record is written.
    let watching = false
    storeCreated = () => { watching = true }
    const marker = Store.open(location)
    while (!watching) {
      marker.createSession({ project: 'live' })
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    marker.close()

    const acked = new Map(ids.map((id) => [id, []]))
    let acks = 0
    let onAck = () => {}
    const onWriter = (line) => {
      const [kind, id, seq, uuid] = line.split(' ')
      if (kind !== 'ack') return
      acked.get(id).push([Number(seq), uuid])
      acks++
      onAck()
    }
    const steady = child(WRITER, [location, `${ids[0]},${ids[1]}`, '5000'], onWriter)
    const doomed = child(WRITER, [location, `${ids[2]},${ids[3]}`, '5000'], onWriter)

    // Mid-run: the third watcher is killed once it has 500 records, the store watcher at 1,500
    // (restarted with the cursor of the last record it printed), the second writer once 3,000
    // records are acknowledged, and (PostgreSQL) the server restarts at 4,000.
    const killWatcher = until(() => [...seen[2].values()].reduce((n, l) => n + l.length, 0) >= 500)
    const killStoreWatcher = until(() => [...seen[3].values()].reduce((n, l) => n + l.length, 0) >= 1500)
    const killWriter = until(() => acks >= 3000)
    const restart = until(() => acks >= 4000)
    onAck = () => { killWriter.poke(); restart.poke() }
    onProgress = () => { killWatcher.poke(); killStoreWatcher.poke() }
    const steps = [
      killWatcher.done.then(async () => {
        readers[2].kill('SIGKILL')
        await readers[2].exited
        const resume = Object.fromEntries(ids.map((id) => {
          const got = seen[2].get(id) ?? []
          return [id, got.length ? got[got.length - 1][0] + 1 : 0]
        }))
        readers[2] = child(READER, [location, api, JSON.stringify(resume)], onRec(2))
      }),
      killStoreWatcher.done.then(async () => {
        readers[3].kill('SIGKILL')
        await readers[3].exited
        readers[3] = child(STORE_READER, [location, api === 'sync' ? 'promise' : 'sync', 'live', storeCursor], onRec(3))
      }),
      killWriter.done.then(() => doomed.kill('SIGKILL')),
    ]
    if (engine === 'postgres') {
      steps.push(restart.done.then(async () => assert.equal(await restartServer(), null)))
    }
    const steadyExit = await steady.exited
    assert.equal(steadyExit.code, 0, steadyExit.stderr)
    await Promise.all(steps)
    assert.equal((await doomed.exited).code, 'SIGKILL')

    // What the store holds now (opening it replays what the killed writer acknowledged).
    const check = Store.open(location)
    const stored = new Map(ids.map((id) => [id, check.openSession(id).envelopes().map((r) => [r.seq, r.uuid])]))
    check.close()
    for (const [n, id] of ids.entries()) {
      const have = stored.get(id)
      const ack = acked.get(id)
      assert.deepEqual(have.slice(0, ack.length), ack, `session ${n}: every acknowledged record, at its seq`)
      if (n < 2) assert.equal(have.length, ack.length, `session ${n}: nothing but what was acknowledged`)
      // The killed writer: at most the append it was making when killed besides.
      else assert.ok(have.length <= ack.length + 1, `session ${n}: ${have.length} stored, ${ack.length} acknowledged`)
    }
    const total = [...stored.values()].reduce((n, l) => n + l.length, 0)
    t.diagnostic(`${engine}: ${total} records stored, ${acks} acknowledged`)

    const counts = Object.fromEntries(ids.map((id) => [id, stored.get(id).length]))
    for (const r of readers) r.stdin.write(`stop ${JSON.stringify(counts)}\n`)
    for (const [i, r] of readers.entries()) {
      const { code, stderr } = await r.exited
      assert.equal(code, 0, `watcher ${i} exits on its own once its watches stop: ${stderr}`)
    }
    for (const [i, got] of seen.entries()) {
      for (const [n, id] of ids.entries()) {
        assert.deepEqual(got.get(id) ?? [], stored.get(id), `watcher ${i}, session ${n}: every record once, in seq order`)
      }
    }
  })
}

test('watch starts after the current end unless fromSeq says; fromSeq is the first seq yielded, as in envelopes()', async (t) => {
  for (const [engine, location] of engines(t, 'start')) {
    const writer = Store.open(location)
    const s = writer.createSession({})
    s.append('zero')
    s.append('one')
    const watcher = await promise.Store.open(location)
    const w = await watcher.openSession(s.id)
    const fresh = w.watch()
    const fromOne = w.watch({ fromSeq: 1 })
    assert.equal((await fromOne.next()).value.seq, 1, engine)
    // The watch without fromSeq starts where its first read finds the end: records appended
    // from now on until it yields one; it yields none of the two before.
    let got
    const first = fresh.next().then((r) => { got = r })
    for (let i = 2; got === undefined; i++) {
      s.append(`record ${i}`)
      await new Promise((resolve) => setImmediate(resolve))
    }
    await first
    s.append('one more')
    assert.ok(got.value.seq >= 2, `${engine}: ${got.value.seq}`)
    const second = await fresh.next()
    assert.equal(second.value.seq, got.value.seq + 1, `${engine}: the next one follows`)
    assert.equal((await fromOne.next()).value.message.content[0].text, 'record 2', `${engine}: fromSeq 1 goes on with seq 2`)
    await fresh.return()
    await fromOne.return()
    await watcher.close()
    writer.close()
  }
})

test('an aborted signal ends the watch with an AbortError, as Node\'s own async iterables do; return() ends one waiting for a record', async (t) => {
  for (const [engine, location] of engines(t, 'abort')) {
    const store = Store.open(location)
    const s = store.createSession({})
    const ac = new AbortController()
    const waiting = s.watch({ signal: ac.signal }).next()
    ac.abort()
    await assert.rejects(waiting, (e) => e.name === 'AbortError' && e.code === 'ABORT_ERR', engine)

    const aborted = AbortSignal.abort()
    await assert.rejects(s.watch({ signal: aborted }).next(), { name: 'AbortError' }, engine)

    const it = s.watch()
    const pending = it.next()
    await it.return()
    assert.deepEqual(await pending, { value: undefined, done: true }, engine)
    store.close()
  }
})

test('a process whose watches stopped (session.watch and store.watch) exits on its own', async (t) => {
  for (const [engine, location] of engines(t, 'exit')) {
    const store = Store.open(location)
    const created = store.createSession({})
    created.append('one record')
    const id = created.id
    store.close()
    for (const api of ['sync', 'promise']) {
      // Stopped while waiting, no record ever written: nothing it made may keep the process up.
      const script = `
        const { Store } = require(${JSON.stringify(api === 'promise' ? path.join(__dirname, '..', 'promise.js') : path.join(__dirname, '..'))})
        ;(async () => {
          const store = await Store.open(${JSON.stringify(location)})
          const s = await store.openSession(${JSON.stringify(id)})
          const ac = new AbortController()
          const it = s.watch({ signal: ac.signal })
          const next = it.next()
          setImmediate(() => ac.abort())
          await next.catch((e) => { if (e.name !== 'AbortError') throw e })
          for await (const r of s.watch({ fromSeq: 0 })) break
          const other = s.watch()
          const waiting = other.next()
          await other.return()
          await waiting
          const all = store.watch()
          const pending = all.next()
          await all.return()
          await pending
          const ended = new AbortController()
          const project = store.watch({ project: 'x', signal: ended.signal })
          const aborted = project.next()
          setImmediate(() => ended.abort())
          await aborted.catch((e) => { if (e.name !== 'AbortError') throw e })
          process.stdout.write('stopped')
        })()`
      const p = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
      let out = ''
      let err = ''
      p.stdout.on('data', (d) => { out += d })
      p.stderr.on('data', (d) => { err += d })
      const code = await new Promise((resolve) => p.on('close', resolve))
      assert.equal(code, 0, `${engine} ${api}: ${err}`)
      assert.equal(out, 'stopped', `${engine} ${api}`)
    }
  }
})

test('sqlite: what a writer SIGKILLed before its commit acknowledged reaches the watches, though no other process writes after it', { timeout: 60_000 }, async (t) => {
  const location = path.join(tmpDir(t), 'killed.db')
  const store = Store.open(location)
  const all = store.watch()
  const firstChange = all.next()
  // The writer makes its session with one record, appends a second 300 ms later (its append log
  // is made then, and that append committed), then, 400 ms later, 18 more, and kills itself at
  // once: those are in its append log only, and no process writes the store after it.
  const script = `
    const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const store = Store.open(${JSON.stringify(location)})
    const s = store.createSession({ id: 'doomed' })
    s.append({ role: 'user', content: 'record 0' })
    process.stdout.write('made\\n')
    setTimeout(() => s.append({ role: 'assistant', content: 'record 1' }), 300)
    setTimeout(() => {
      for (let i = 2; i < 20; i++) s.append({ role: i % 2 ? 'assistant' : 'user', content: 'record ' + i })
      require('node:fs').writeSync(1, 'acked\\n')
      process.kill(process.pid, 'SIGKILL')
    }, 700)`
  const lines = []
  const p = child('-e', [script], (line) => lines.push(line))
  const created = await firstChange
  assert.equal(created.value.type, 'created')
  assert.equal(created.value.sessionId, 'doomed')
  const seqs = []
  // Both watches have the first two records (committed) before the rest is written: the rest,
  // in the killed writer's log only, is what they must still get.
  const one = store.openSession('doomed').watch({ fromSeq: 0 })
  const got = []
  while (got.length < 2) got.push((await one.next()).value.seq)
  while (seqs.length < 2) {
    const c = (await all.next()).value
    if (c.type === 'record') seqs.push(c.record.seq)
  }
  // Both wait for the next change while the writer still runs.
  let nextOne = one.next()
  let nextAll = all.next()
  assert.equal((await p.exited).code, 'SIGKILL')
  assert.deepEqual(lines, ['made', 'acked'])
  while (got.length < 20) {
    got.push((await nextOne).value.seq)
    nextOne = one.next()
  }
  assert.deepEqual(got, [...Array(20).keys()], 'session.watch: every acknowledged record, in order')
  while (seqs.length < 20) {
    const c = (await nextAll).value
    if (c.type === 'record') seqs.push(c.record.seq)
    if (seqs.length < 20) nextAll = all.next()
  }
  assert.deepEqual(seqs, [...Array(20).keys()], 'store.watch: every acknowledged record, in order')
  await one.return()
  await nextOne
  await all.return()
  store.close()
})

test('a deleted session ends its watch with NOT_FOUND', async (t) => {
  for (const [engine, location] of engines(t, 'deleted')) {
    const writer = Store.open(location)
    const s = writer.createSession({})
    s.append('kept')
    const watcher = Store.open(location)
    const it = watcher.openSession(s.id).watch({ fromSeq: 0 })
    assert.equal((await it.next()).value.seq, 0, engine)
    const next = it.next()
    writer.deleteSession(s.id)
    await assert.rejects(next, (e) => e.code === 'NOT_FOUND' && /^watch: .*deleted/.test(e.message), engine)
    watcher.close()
    writer.close()
  }
})

test('watch refuses bad options with INVALID_INPUT and the option\'s path, in both APIs; an in-memory store has nothing to watch', async (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'bad.db'))
  const s = store.createSession({})
  const p = await (await promise.Store.open(path.join(dir, 'bad.db'))).openSession(s.id)
  for (const session of [s, p]) {
    expectError(() => session.watch({ fromSeq: -1 }), 'INVALID_INPUT', 'watch: options.fromSeq')
    expectError(() => session.watch({ fromSeq: 1.5 }), 'INVALID_INPUT', 'watch: options.fromSeq')
    expectError(() => session.watch({ fromSeq: '2' }), 'INVALID_INPUT', 'watch: options.fromSeq')
    expectError(() => session.watch({ from: 2 }), 'INVALID_INPUT', 'watch: options.from', 'unknown option')
    expectError(() => session.watch({ signal: {} }), 'INVALID_INPUT', 'watch: options.signal', 'AbortSignal')
    expectError(() => session.watch(5), 'INVALID_INPUT', 'watch: options')
  }
  const memory = Store.open(':memory:').createSession({})
  expectError(() => memory.watch(), 'INVALID_INPUT', 'watch', 'in-memory')
  expectError(() => new lib.Session({}).watch(), 'INVALID_INPUT', 'watch', 'in-memory')
  store.close()
})

test('a session deleted by another process ends its watch with NOT_FOUND (and envelopes() says so)', { timeout: 60_000 }, async (t) => {
  for (const [engine, location] of engines(t, 'deleted_elsewhere')) {
    const writer = Store.open(location)
    const s = writer.createSession({})
    s.append('kept')
    s.close()
    writer.close()
    const watcher = Store.open(location)
    const session = watcher.openSession(s.id)
    const it = session.watch({ fromSeq: 0 })
    assert.equal((await it.next()).value.seq, 0, engine)
    const ended = assert.rejects(it.next(), (e) => e.code === 'NOT_FOUND' && /^watch: .*deleted/.test(e.message), engine)
    const script = `const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))}); const st = Store.open(process.argv[1]); st.deleteSession(process.argv[2]); st.close()`
    const p = spawn(process.execPath, ['-e', script, location, s.id], { stdio: 'inherit' })
    assert.equal(await new Promise((resolve) => p.on('close', resolve)), 0, engine)
    await ended
    expectError(() => session.envelopes(), 'NOT_FOUND', 'envelopes: ')
    watcher.close()
  }
})

test('SQLite: a watch in another process sees an append with durability \'power\' though nothing is written after it', { timeout: 60_000 }, async (t) => {
  const location = path.join(tmpDir(t), 'power.db')
  const setup = Store.open(location)
  const s = setup.createSession({})
  s.append('zero')
  setup.close()
  const watcher = Store.open(location)
  const it = watcher.openSession(s.id).watch({ fromSeq: 0 })
  assert.equal((await it.next()).value.seq, 0) // the watch is registered
  // The writer appends, committed with an fsync before each append returns: one when it has opened
  // the store, one more when told, then it stays open and idle. That commit's frames reach the
  // -wal file before it can be seen, and no change of the files follows it.
  const script = `
    const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const store = Store.open(${JSON.stringify(location)}, { durability: 'power' })
    const session = store.openSession(${JSON.stringify(s.id)})
    session.append('warm')
    require('node:readline').createInterface({ input: process.stdin }).on('line', () => session.append('one'))
    process.stdin.on('end', () => store.close())`
  const writer = child('-e', [script], () => {})
  assert.equal((await it.next()).value.seq, 1)
  writer.stdin.write('go\n')
  const got = await it.next()
  assert.equal(got.value.seq, 2)
  assert.equal(got.value.message.content[0].text, 'one')
  writer.stdin.end()
  assert.equal((await writer.exited).code, 0)
  await it.return()
  watcher.close()
})
