'use strict'
// Telemetry: store.onEvent(listener) receives structured events ('repair', 'recovery',
// 'interrupted_session', 'persist_error', 'slow_operation'); the returned function unsubscribes;
// a throwing listener never breaks the operation it observes; THREADLINE_TELEMETRY=console prints
// the same events as JSON lines on stdout.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { once } = require('node:events')

const { lib, ROOT, tmpDir, expectError, ISO_RE, UUID_RE } = require('./helpers/util')

const { Store } = lib

const BETTER_SQLITE3 = path.join(ROOT, 'node_modules', 'better-sqlite3')

function childEnv(changes) {
  const env = { ...process.env }
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined) delete env[k]
    else env[k] = v
  }
  return env
}

// A session whose latest response has calls in three states: requested, started, recorded.
function interrupted(store, id = 'tel') {
  const s = store.createSession({ id })
  s.append('go')
  s.append({
    role: 'assistant',
    content: [
      { type: 'tool_use', id: 'toolu_never', name: 'Bash', input: {} },
      { type: 'tool_use', id: 'toolu_unknown', name: 'Bash', input: {} },
      { type: 'tool_use', id: 'toolu_done', name: 'Read', input: {} },
    ],
  })
  s.toolCallStarted('toolu_unknown')
  s.toolCallStarted('toolu_done')
  s.recordToolOutcome('toolu_done', { content: 'done' })
  return s
}

function checkEvent(e, type) {
  assert.equal(e.type, type)
  assert.match(e.time, ISO_RE)
  assert.ok(Math.abs(Date.parse(e.time) - Date.now()) < 60_000, 'time is now')
}

// A child process holding the store's write lock (better-sqlite3, BEGIN EXCLUSIVE) until released.
async function holdWriteLock(file) {
  const code = `
    const Database = require(${JSON.stringify(BETTER_SQLITE3)})
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

describe('onEvent', () => {
  test("recover() emits one 'repair' per repair, then a 'recovery' summary", async () => {
    const store = Store.open(':memory:')
    const s = interrupted(store)
    const events = []
    store.onEvent((e) => events.push(e))
    const report = await s.recover()
    const repairs = events.filter((e) => e.type === 'repair')
    const recoveries = events.filter((e) => e.type === 'recovery')
    assert.equal(repairs.length, 3)
    assert.equal(recoveries.length, 1)
    repairs.forEach((e, i) => {
      checkEvent(e, 'repair')
      assert.equal(e.sessionId, 'tel')
      assert.deepStrictEqual(e.repair, report.repairs[i])
    })
    assert.deepStrictEqual(repairs.map((e) => e.repair.kind), ['never_started', 'unknown_outcome', 'backfill'])
    assert.match(repairs[0].repair.recordUuid, UUID_RE)
    const [r] = recoveries
    checkEvent(r, 'recovery')
    assert.equal(r.sessionId, 'tel')
    assert.equal(r.repairs, 3)
    assert.equal(r.recordsWritten, 1)
    assert.equal(typeof r.durationMs, 'number')
    assert.ok(r.durationMs >= 0)
    assert.ok(events.indexOf(r) > events.indexOf(repairs.at(-1)), 'the summary comes after the repairs')

    // a clean second run: a recovery event with nothing repaired
    events.length = 0
    await s.recover()
    assert.deepStrictEqual(events.map((e) => [e.type, e.repairs, e.recordsWritten]), [['recovery', 0, 0]])
  })

  test("a listener sees the events of every session of its store, and only of its store", async () => {
    const a = Store.open(':memory:')
    const b = Store.open(':memory:')
    const seenA = []
    const seenB = []
    a.onEvent((e) => seenA.push(e))
    b.onEvent((e) => seenB.push(e))
    await interrupted(a, 'one').recover()
    await interrupted(a, 'two').recover()
    assert.deepStrictEqual([...new Set(seenA.map((e) => e.sessionId))], ['one', 'two'])
    assert.deepStrictEqual(seenB, [])
    // a session opened again from the store reports to the same listeners
    seenA.length = 0
    interrupted(a, 'three')
    await a.openSession('three').recover()
    assert.deepStrictEqual(seenA.map((e) => [e.type, e.sessionId]), [
      ['repair', 'three'], ['repair', 'three'], ['repair', 'three'], ['recovery', 'three'],
    ])
    assert.deepStrictEqual(seenB, [])
  })

  test("'interrupted_session' for a session left active by a process killed with SIGKILL", async (t) => {
    const file = path.join(tmpDir(t), 'killed.db')
    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      const store = Store.open(${JSON.stringify(file)})
      const s = store.createSession({ id: 'victim', project: 'telemetry', title: 'killed mid-turn' })
      s.append('hello')
      s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_k', name: 'Bash', input: { command: 'sleep 100' } }] })
      s.toolCallStarted('toolu_k')
      const done = store.createSession({ id: 'finished' })
      done.append('bye')
      done.setStatus('completed')
      process.stdout.write('ready\\n')
      setInterval(() => s.appendEvent('tick'), 5)
    `
    const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] })
    const [data] = await once(child.stdout, 'data')
    assert.equal(String(data), 'ready\n')
    const store = Store.open(file)
    const events = []
    store.onEvent((e) => events.push(e))
    assert.deepStrictEqual(store.interruptedSessions(), [], 'its writer is alive')
    assert.deepStrictEqual(events, [])
    child.kill('SIGKILL')
    const [, signal] = await once(child, 'exit')
    assert.equal(signal, 'SIGKILL')

    const found = store.interruptedSessions()
    assert.deepStrictEqual(found.map((i) => i.id), ['victim'])
    assert.equal(events.length, 1)
    const [e] = events
    checkEvent(e, 'interrupted_session')
    assert.equal(e.sessionId, 'victim')
    assert.deepStrictEqual(e.session, found[0])
    assert.equal(e.session.status, 'active')
    assert.equal(e.session.project, 'telemetry')
    assert.equal(e.session.title, 'killed mid-turn')

    // recovering it emits repair / recovery; once taken over it is no longer interrupted
    events.length = 0
    const s = store.openSession('victim')
    await s.recover()
    assert.deepStrictEqual(events.map((x) => x.type), ['repair', 'recovery'])
    assert.equal(events[0].repair.toolUseId, 'toolu_k')
    assert.equal(events[0].repair.kind, 'unknown_outcome')
    events.length = 0
    assert.deepStrictEqual(store.interruptedSessions(), [])
    assert.deepStrictEqual(events, [])
  })

  test("'persist_error' when the store stays locked past busyTimeoutMs (STORE_BUSY)", async (t) => {
    const file = path.join(tmpDir(t), 'busy.db')
    const store = Store.open(file, { busyTimeoutMs: 50 })
    const s = store.createSession({ id: 'busy' })
    s.append('first')
    const events = []
    store.onEvent((e) => events.push(e))
    const release = await holdWriteLock(file)
    let err
    try {
      // Acknowledged without the lock (its frame is in the append log); once its batch has
      // waited busyTimeoutMs for the lock, the next write waits for it too, and gives up.
      s.append('acked while locked')
      await new Promise((resolve) => setTimeout(resolve, 80))
      err = expectError(() => s.append('second'), 'STORE_BUSY', 'append')
      expectError(() => s.appendEvent('note', { x: 1 }), 'STORE_BUSY', 'appendEvent')
    } finally {
      await release()
    }
    const errors = events.filter((e) => e.type === 'persist_error')
    assert.equal(errors.length, 2)
    checkEvent(errors[0], 'persist_error')
    assert.equal(errors[0].sessionId, 'busy')
    assert.equal(errors[0].operation, 'append')
    assert.equal(errors[0].code, 'STORE_BUSY')
    assert.equal(errors[0].message, err.message)
    assert.equal(errors[1].operation, 'appendEvent')
    // the refused writes wrote nothing, and the store works again once the lock is gone
    assert.deepStrictEqual(s.envelopes().map((e) => e.message.content[0].text), ['first', 'acked while locked'])
    events.length = 0
    s.append('second')
    assert.equal(s.messages.length, 3)
    assert.deepStrictEqual(events.filter((e) => e.type === 'persist_error'), [])
  })

  test("'slow_operation' with slowOperationMs: 0; none with a high threshold", async () => {
    const store = Store.open(':memory:', { slowOperationMs: 0 })
    const events = []
    store.onEvent((e) => events.push(e))
    const s = interrupted(store, 'slow')
    assert.equal(s.messages.length, 2)
    await s.recover()
    const slow = events.filter((e) => e.type === 'slow_operation')
    const ops = slow.map((e) => e.operation)
    for (const op of ['append', 'toolCallStarted', 'recordToolOutcome', 'messages', 'recover']) {
      assert.ok(ops.includes(op), `${op} reported (got ${ops.join(', ')})`)
    }
    for (const e of slow) {
      checkEvent(e, 'slow_operation')
      assert.equal(e.sessionId, 'slow')
      assert.equal(e.thresholdMs, 0)
      assert.equal(typeof e.durationMs, 'number')
      assert.ok(e.durationMs >= 0)
    }

    const quiet = Store.open(':memory:', { slowOperationMs: 60_000 })
    const none = []
    quiet.onEvent((e) => none.push(e))
    const q = quiet.createSession()
    q.append('fast')
    q.append({ role: 'assistant', content: 'fast too' })
    assert.deepStrictEqual(none.filter((e) => e.type === 'slow_operation'), [])

    for (const bad of [-1, 'fast', NaN, null]) {
      expectError(() => Store.open(':memory:', { slowOperationMs: bad }), 'INVALID_INPUT', 'slowOperationMs')
    }
  })

  test('the unsubscribe function stops delivery (to that listener only)', async () => {
    const store = Store.open(':memory:', { slowOperationMs: 0 })
    const first = []
    const second = []
    const off1 = store.onEvent((e) => first.push(e))
    store.onEvent((e) => second.push(e))
    const s = store.createSession()
    s.append('one')
    assert.ok(first.length > 0)
    off1()
    off1() // twice is harmless
    const n1 = first.length
    const n2 = second.length
    s.append('two')
    await s.recover()
    assert.equal(first.length, n1, 'no more events after unsubscribing')
    assert.ok(second.length > n2, 'the other listener still receives')
    // the same function subscribed twice is delivered twice, and each subscription ends alone
    const counts = []
    const listener = (e) => counts.push(e.type)
    const offA = store.onEvent(listener)
    const offB = store.onEvent(listener)
    s.append('three')
    const twice = counts.length
    offA()
    offB()
    s.append('four')
    assert.equal(counts.length, twice)
    expectError(() => store.onEvent('not a function'), 'INVALID_INPUT', 'listener')
  })

  test('a throwing listener does not break the operation, nor other listeners', async () => {
    const store = Store.open(':memory:', { slowOperationMs: 0 })
    store.onEvent(() => { throw new Error('listener bug') })
    const seen = []
    store.onEvent((e) => seen.push(e.type))
    store.onEvent(() => { throw new TypeError('another listener bug') })
    const s = interrupted(store, 'throws')
    const report = await s.recover()
    assert.equal(report.recordsWritten, 1)
    assert.equal(s.envelopes().length, 3)
    assert.ok(seen.includes('repair'))
    assert.ok(seen.includes('recovery'))
    assert.ok(seen.includes('slow_operation'))
    const env = s.append('still works')
    assert.equal(env.seq, 3)
  })

  test('no listener, no console: nothing is emitted', () => {
    // in a child, so stdout can be checked: operations that would emit, with no one listening
    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      const store = Store.open(':memory:', { slowOperationMs: 0 })
      const s = store.createSession({ id: 'silent' })
      s.append('go')
      s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_s', name: 'Bash', input: {} }] })
      s.toolCallStarted('toolu_s')
      const off = store.onEvent(() => {})
      off()
      s.recover().then((r) => { store.interruptedSessions(); process.stderr.write('done ' + r.recordsWritten) })
    `
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: childEnv({ THREADLINE_TELEMETRY: undefined }) })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stderr, 'done 1')
    assert.equal(r.stdout, '')
  })
})

describe('THREADLINE_TELEMETRY=console', () => {
  test('prints every event as one JSON line on stdout, the same events a listener gets', () => {
    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      const store = Store.open(':memory:', { slowOperationMs: 0 })
      const seen = []
      store.onEvent((e) => seen.push(e))
      const s = store.createSession({ id: 'console' })
      s.append('go')
      s.append({ role: 'assistant', content: [
        { type: 'tool_use', id: 'toolu_c1', name: 'Bash', input: {} },
        { type: 'tool_use', id: 'toolu_c2', name: 'Bash', input: {} },
      ] })
      s.toolCallStarted('toolu_c1')
      s.recover().then(() => { process.stderr.write(JSON.stringify(seen)) })
    `
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: childEnv({ THREADLINE_TELEMETRY: 'console' }) })
    assert.equal(r.status, 0, r.stderr)
    assert.ok(r.stdout.endsWith('\n'))
    const lines = r.stdout.split('\n').slice(0, -1)
    const printed = lines.map((l) => JSON.parse(l))
    assert.deepStrictEqual(printed, JSON.parse(r.stderr), 'the listener got the same events, in the same order')
    const types = printed.map((e) => e.type)
    assert.ok(types.includes('slow_operation'))
    assert.deepStrictEqual(types.filter((x) => x !== 'slow_operation'), ['repair', 'repair', 'recovery'])
    for (const e of printed) {
      assert.match(e.time, ISO_RE)
      assert.equal(e.sessionId, 'console')
    }
    const recovery = printed.find((e) => e.type === 'recovery')
    assert.equal(recovery.repairs, 2)
    assert.equal(recovery.recordsWritten, 1)
  })

  test('without a listener, console mode alone prints recovery, interrupted_session and persist_error events', async (t) => {
    const file = path.join(tmpDir(t), 'console.db')
    // a session left active by a killed process
    const killed = spawnSync(process.execPath, ['-e', `
      const { Store } = require(${JSON.stringify(ROOT)})
      const s = Store.open(${JSON.stringify(file)}).createSession({ id: 'left' })
      s.append('hi')
      s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_l', name: 'Bash', input: {} }] })
      process.kill(process.pid, 'SIGKILL')
    `], { encoding: 'utf8' })
    assert.equal(killed.signal, 'SIGKILL')
    // The killed writer's log is replayed first: a read while another process holds the write
    // lock would wait for it to replay what the writer acknowledged (docs/recovery.md).
    lib.Store.open(file).close()
    const release = await holdWriteLock(file)
    let r
    try {
      const code = `
        const { Store } = require(${JSON.stringify(ROOT)})
        const store = Store.open(${JSON.stringify(file)}, { busyTimeoutMs: 50 })
        store.interruptedSessions()
        const s = store.openSession('left')
        try { s.append('blocked') } catch (e) { process.stderr.write(e.code) }
      `
      r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: childEnv({ THREADLINE_TELEMETRY: 'console' }) })
    } finally {
      await release()
    }
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stderr, 'STORE_BUSY')
    const printed = r.stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
    assert.deepStrictEqual(printed.map((e) => e.type), ['interrupted_session', 'persist_error'])
    assert.equal(printed[0].sessionId, 'left')
    assert.equal(printed[0].session.id, 'left')
    assert.equal(printed[1].sessionId, 'left')
    assert.equal(printed[1].code, 'STORE_BUSY')
    assert.equal(printed[1].operation, 'append')

    // and recovery, in a third process
    const rec = spawnSync(process.execPath, ['-e', `
      const { Store } = require(${JSON.stringify(ROOT)})
      Store.open(${JSON.stringify(file)}).openSession('left').recover()
    `], { encoding: 'utf8', env: childEnv({ THREADLINE_TELEMETRY: 'console' }) })
    assert.equal(rec.status, 0, rec.stderr)
    const lines = rec.stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
    assert.deepStrictEqual(lines.map((e) => e.type), ['repair', 'recovery'])
    assert.equal(lines[0].repair.kind, 'never_started')
    assert.equal(lines[1].recordsWritten, 1)
  })
})
