'use strict'
// store.watch (docs/live.md): every change to a store's sessions as another process commits it
// (a session created, each record, a status change, a deletion), filtered by project or
// session, and resumed from a change's cursor with nothing missed and nothing twice, on both
// engines and through both APIs. (The many-writer run with kills and a server restart is in
// watch.test.js.)

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const readline = require('node:readline')
const { spawn } = require('node:child_process')

const { lib, tmpDir, expectError, pgUrl } = require('./helpers/util')
const promise = require('../promise.js')

const ROOT = path.join(__dirname, '..')

// Both engines, each through one API: a file in a temporary directory with the sync API, a
// schema on the test server (when there is one) with threadline/promise.
function engines(t, name) {
  const out = [['sqlite', path.join(tmpDir(t), `${name}.db`), lib]]
  const url = pgUrl(t, name)
  if (url) out.push(['postgres', url, promise])
  return out
}

// Another process that runs each operation it is sent (a JSON line) and prints `ok` once it has
// returned: `create` (id, project), `append` (id, n messages), `status` (id, status), `delete`.
function writer(location) {
  const script = `
    const { Store } = require(${JSON.stringify(ROOT)})
    const store = Store.open(${JSON.stringify(location)})
    const sessions = new Map()
    const session = (id) => sessions.get(id) ?? sessions.set(id, store.openSession(id)).get(id)
    require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
      const op = JSON.parse(line)
      if (op.op === 'create') sessions.set(op.id, store.createSession({ id: op.id, project: op.project }))
      if (op.op === 'append') for (let i = 0; i < op.n; i++) session(op.id).append({ role: i % 2 ? 'assistant' : 'user', content: op.id + ' ' + i })
      if (op.op === 'status') session(op.id).setStatus(op.status)
      if (op.op === 'delete') { sessions.delete(op.id); store.deleteSession(op.id) }
      process.stdout.write('ok\\n')
    })`
  const p = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  p.stderr.on('data', (d) => { stderr += d })
  const acks = []
  readline.createInterface({ input: p.stdout }).on('line', () => acks.shift()?.())
  return {
    run(op) {
      return new Promise((resolve, reject) => {
        acks.push(resolve)
        p.stdin.write(`${JSON.stringify(op)}\n`)
        p.once('close', () => reject(new Error(`the writer died: ${stderr}`)))
      })
    },
    async close() {
      p.stdin.end()
      await new Promise((resolve) => p.on('close', resolve))
    },
  }
}

// A watch's changes as short strings, collected as they come.
function collect(iterator) {
  const got = []
  const changes = []
  let wake = () => {}
  const done = (async () => {
    for await (const c of iterator) {
      got.push(describe(c))
      changes.push(c)
      wake()
    }
  })()
  return {
    got,
    changes,
    done,
    // Resolves once a change described as `what` came (at once when `what` is undefined).
    async until(what) {
      while (what !== undefined && !got.includes(what)) await new Promise((resolve) => { wake = resolve })
    },
  }
}

function describe(c) {
  if (c.type === 'record') return `record ${c.sessionId} ${c.record.seq} ${c.record.message.content[0].text}`
  if (c.type === 'created') return `created ${c.sessionId} ${c.session.project} ${c.session.status}`
  if (c.type === 'status') return `status ${c.sessionId} ${c.session.status}`
  return `${c.type} ${c.sessionId}`
}

for (const [engine, api] of [['sqlite', 'sync'], ['postgres', 'promise']]) {
  test(`${engine} (${api}): store.watch gives each session created, its records in order, its status changes and its deletion as another process commits them; project and sessionId filter them`, { timeout: 120_000 }, async (t) => {
    const found = engines(t, 'events').find(([e]) => e === engine)
    if (!found) return
    const [, location, { Store }] = found
    const store = await Store.open(location)
    const w = writer(location)
    await w.run({ op: 'create', id: 'b1', project: 'beta' })
    const stop = new AbortController()
    const all = collect(store.watch({ signal: stop.signal }))
    const alpha = collect(store.watch({ project: 'alpha', signal: stop.signal }))
    const one = collect(store.watch({ sessionId: 'b1', signal: stop.signal }))
    // A watch starts at its first look (its first next()): changes are made until each has seen
    // one, so the ones below come after.
    let warm = 0
    while (!(all.got.length && alpha.got.length && one.got.length)) {
      await w.run({ op: 'create', id: `warm-${warm}`, project: 'alpha' })
      await w.run({ op: 'append', id: 'b1', n: 1 })
      warm++
      await new Promise((resolve) => setTimeout(resolve, 50))
      if (warm > 200) assert.fail('the watches never started')
    }
    // Each step's changes, as each watch must give them; the next step waits for them.
    const steps = [
      [{ op: 'create', id: 'a1', project: 'alpha' }, ['created a1 alpha active'], ['created a1 alpha active'], []],
      [{ op: 'append', id: 'a1', n: 3 }, ['record a1 0 a1 0', 'record a1 1 a1 1', 'record a1 2 a1 2'], 'same', []],
      [{ op: 'append', id: 'b1', n: 2 }, [`record b1 ${warm} b1 0`, `record b1 ${warm + 1} b1 1`], [], 'same'],
      [{ op: 'status', id: 'a1', status: 'failed' }, ['status a1 failed'], 'same', []],
      [{ op: 'status', id: 'b1', status: 'interrupted' }, ['status b1 interrupted'], [], 'same'],
      [{ op: 'delete', id: 'a1' }, ['deleted a1'], 'same', []],
      [{ op: 'delete', id: 'b1' }, ['deleted b1'], [], 'same'],
    ]
    const want = { all: [], alpha: [], one: [] }
    for (const [op, forAll, forAlpha, forOne] of steps) {
      await w.run(op)
      want.all.push(...forAll)
      want.alpha.push(...(forAlpha === 'same' ? forAll : forAlpha))
      want.one.push(...(forOne === 'same' ? forAll : forOne))
      await Promise.all([[all, want.all], [alpha, want.alpha], [one, want.one]].map(([c, w]) => c.until(w.at(-1))))
    }
    await w.close()
    stop.abort()
    await Promise.allSettled([all.done, alpha.done, one.done])
    assert.deepEqual(all.got.slice(-want.all.length), want.all, `${engine}: every session`)
    assert.deepEqual(alpha.got.slice(-want.alpha.length), want.alpha, `${engine}: project alpha only`)
    assert.ok(!alpha.got.some((g) => g.includes('b1')), `${engine}: project alpha only`)
    assert.deepEqual(one.got.slice(-want.one.length), want.one, `${engine}: session b1 only`)
    assert.ok(one.got.every((g) => g.split(' ')[1] === 'b1'), `${engine}: session b1 only`)
    // A record change is the record session.envelopes() gives.
    const rec = all.changes.find((c) => c.type === 'record')
    assert.equal(typeof rec.record.uuid, 'string')
    assert.equal(rec.record.message.role, 'user')
    await store.close()
  })

  test(`${engine} (${api}): after \`await watch.ready\` a listing and the watch's changes leave no gap: what another process commits between them is given`, { timeout: 120_000 }, async (t) => {
    const found = engines(t, 'ready').find(([e]) => e === engine)
    if (!found) return
    const [, location, { Store }] = found
    const store = await Store.open(location)
    const w = writer(location)
    await w.run({ op: 'create', id: 'r1', project: 'p' })
    const stop = new AbortController()
    const watch = store.watch({ signal: stop.signal })
    assert.equal(await watch.ready, undefined)
    // Committed after ready and before the first next(): the watch started, so it is given.
    await w.run({ op: 'create', id: 'r2', project: 'p' })
    await w.run({ op: 'append', id: 'r1', n: 2 })
    const listed = (await store.listSessions()).map((s) => s.id).sort()
    assert.deepEqual(listed, ['r1', 'r2'])
    const c = collect(watch)
    await c.until('record r1 1 r1 1')
    assert.deepEqual(c.got, ['created r2 p active', 'record r1 0 r1 0', 'record r1 1 r1 1'])
    // ready is the same promise, settled, once the watch runs
    assert.equal(await watch.ready, undefined)
    stop.abort()
    await Promise.allSettled([c.done])

    // Stopped before its first look: ready rejects with an AbortError; a watch of a store closed
    // meanwhile rejects as its next() does.
    const early = new AbortController()
    early.abort()
    const stopped = store.watch({ signal: early.signal })
    await assert.rejects(stopped.ready, { name: 'AbortError' })
    const ended = store.watch()
    await ended.return()
    await assert.rejects(ended.ready, { name: 'AbortError' })
    await w.close()
    await store.close()
  })

  test(`${engine} (${api}): a watch resumed with a change's cursor gives every change after it, made while no watch ran too, and none twice`, { timeout: 120_000 }, async (t) => {
    const found = engines(t, 'resume').find(([e]) => e === engine)
    if (!found) return
    const [, location, { Store }] = found
    const store = await Store.open(location)
    const w = writer(location)
    await w.run({ op: 'create', id: 's1', project: 'p' })
    await w.run({ op: 'create', id: 's2', project: 'p' })
    await w.run({ op: 'append', id: 's1', n: 2 })
    // A reference watch runs throughout; the first watch stops part way, and a third resumes
    // from the cursor of the last change the first gave.
    const stop = new AbortController()
    const stopFirst = new AbortController()
    const reference = collect(store.watch({ project: 'p', signal: stop.signal }))
    const first = collect(store.watch({ project: 'p', signal: stopFirst.signal }))
    for (let i = 0; !(reference.got.length && first.got.length); i++) {
      await w.run({ op: 'append', id: 's2', n: 1 })
      await new Promise((resolve) => setTimeout(resolve, 50))
      if (i > 200) assert.fail('the watches never started')
    }
    await w.run({ op: 'create', id: 's3', project: 'p' })
    await w.run({ op: 'append', id: 's3', n: 2 })
    await w.run({ op: 'append', id: 's1', n: 2 })
    await Promise.all([reference.until('record s1 3 s1 1'), first.until('record s1 3 s1 1')])
    stopFirst.abort()
    await Promise.allSettled([first.done])
    const cursor = first.changes.at(-1).cursor
    assert.equal(typeof cursor, 'string')

    // While no watch but the reference runs: records, a new session, a status, a deletion, and
    // a session of another project (not in the scope).
    await w.run({ op: 'append', id: 's3', n: 1 })
    await w.run({ op: 'create', id: 's4', project: 'p' })
    await w.run({ op: 'append', id: 's4', n: 3 })
    await w.run({ op: 'create', id: 'x', project: 'other' })
    await w.run({ op: 'status', id: 's1', status: 'completed' })
    await w.run({ op: 'delete', id: 's2' })
    await w.run({ op: 'append', id: 's1', n: 1 })
    await reference.until('record s1 4 s1 0')

    const resumed = collect(store.watch({ project: 'p', since: cursor, signal: stop.signal }))
    const at = reference.got.indexOf(first.got.at(-1))
    assert.deepEqual(reference.got.slice(0, at + 1).slice(-first.got.length), first.got, `${engine}: the first watch gave what the reference did`)
    await resumed.until(reference.got.at(-1))
    // And it goes on live.
    await w.run({ op: 'append', id: 's3', n: 1 })
    await Promise.all([reference.until('record s3 3 s3 0'), resumed.until('record s3 3 s3 0')])
    stop.abort()
    await Promise.allSettled([reference.done, resumed.done])
    // Each session's records in the same order; the other changes the same, though a catch-up
    // knows only where each session is now (its status comes after the records it found).
    const records = (list, id) => list.filter((g) => g.startsWith(`record ${id} `))
    const others = (list) => list.filter((g) => !g.startsWith('record ')).sort()
    const rest = reference.got.slice(at + 1)
    for (const id of ['s1', 's2', 's3', 's4']) {
      assert.deepEqual(records(resumed.got, id), records(rest, id), `${engine}: ${id}'s records after the cursor, once, in order`)
    }
    assert.deepEqual(others(resumed.got), others(rest), `${engine}: the sessions made, deleted and whose status changed`)
    assert.equal(resumed.got.length, rest.length, `${engine}: nothing twice`)
    for (const made of ['created s4 p active', 'record s4 2 s4 2', 'status s1 completed', 'deleted s2', 'record s1 4 s1 0']) {
      assert.ok(resumed.got.includes(made), `${engine}: ${made} (made while no watch but the reference ran)`)
    }
    assert.ok(!resumed.got.some((g) => g.includes(' x ')), `${engine}: not another project's`)
    await w.close()
    await store.close()
  })
}

test('store.watch refuses bad options with INVALID_INPUT and the option\'s path, in both APIs: a since that is no cursor, or a cursor of another scope; an in-memory store has nothing to watch', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'bad.db')
  const store = lib.Store.open(file)
  const p = await promise.Store.open(file)
  const s = store.createSession({ project: 'p' })
  // A real cursor, of a watch of project p.
  const it = store.watch({ project: 'p' })
  const next = it.next()
  let cursor
  for (let i = 0; cursor === undefined; i++) {
    s.append(`record ${i}`)
    const got = await Promise.race([next, new Promise((resolve) => setTimeout(resolve, 50))])
    if (got) cursor = got.value.cursor
  }
  await it.return()
  for (const st of [store, p]) {
    expectError(() => st.watch({ since: 'nope' }), 'INVALID_INPUT', 'watch: options.since', 'not a cursor')
    expectError(() => st.watch({ since: 7 }), 'INVALID_INPUT', 'watch: options.since')
    expectError(() => st.watch({ since: cursor }), 'INVALID_INPUT', 'watch: options.since', "project 'p'")
    expectError(() => st.watch({ project: 'p', sessionId: s.id, since: cursor }), 'INVALID_INPUT', 'watch: options.since')
    expectError(() => st.watch({ project: 5 }), 'INVALID_INPUT', 'watch: options.project')
    expectError(() => st.watch({ sessionId: '' }), 'INVALID_INPUT', 'watch: options.sessionId')
    expectError(() => st.watch({ fromSeq: 1 }), 'INVALID_INPUT', 'watch: options.fromSeq', 'unknown option')
    expectError(() => st.watch({ signal: 'x' }), 'INVALID_INPUT', 'watch: options.signal', 'AbortSignal')
  }
  // The same scope takes it.
  const again = store.watch({ project: 'p', since: cursor })
  const resumed = again.next()
  s.append('after')
  assert.equal((await resumed).value.type, 'record')
  await again.return()
  expectError(() => lib.Store.open(':memory:').watch(), 'INVALID_INPUT', 'watch', 'in memory')
  await p.close()
  store.close()
})
