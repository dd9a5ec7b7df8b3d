'use strict'
// Persistence failures, for real: the disk refuses and the caller gets STORE_IO / STORE_BUSY, the
// session keeps exactly what was committed (in this handle, in a new handle, in a new process), and
// the same append retried once the disk accepts again is stored once (a record whose uuid is
// already stored with the same content is a no-op that returns it).
//
// - disk full: a store on a small tmpfs (`mount -t tmpfs -o size=...`) filled up by appends
//   (records with blobs, then a batch), by every other kind of write, by creating a store, and by a
//   long run that goes through background checkpoints and log restarts first;
// - read-only: a read-only bind mount of the store's directory while the writable handle stays
//   open, and the whole tmpfs remounted read-only under a store left by a killed writer and under
//   a cleanly closed one. (`mount -o remount,ro` of a filesystem refuses with EBUSY while any file
//   on it is open for writing, and an open store always has its files open for writing: the store
//   is closed, or its writer killed, before such a remount.)
// - locked: another process holds the lock (errors.test.js covers the basic STORE_BUSY append;
//   here: a store opened while locked, retry of the same uuid, every kind of write, and a store
//   held in exclusive locking mode, which even Store.open cannot read).
//
// Mounting needs root (CI and the dev machine run the tests as root): without it these tests fail
// at the mount, they are not skipped. Every mount is made by this file on a fresh directory under
// os.tmpdir() and unmounted when its test ends, passed or failed; nothing else is ever remounted.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawn, spawnSync } = require('node:child_process')
const { once } = require('node:events')

const { lib, expectError } = require('./helpers/util')

const { Store, Session } = lib
const READER = path.join(__dirname, 'helpers', 'read-store.js')
const WRITER = path.join(__dirname, 'helpers', 'diskfail-writer.js')

// ---------------------------------------------------------------------------------------------
// Mounts
// ---------------------------------------------------------------------------------------------

function run(cmd, args) {
  try {
    return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
  } catch (e) {
    const err = new Error(`${cmd} ${args.join(' ')} failed: ${(e.stderr || e.message).trim()}`)
    err.stderr = e.stderr
    throw err
  }
}

function sleepMs(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

// Scratch space for one test: tmpfs mounts and bind mounts it made, stores and child processes it
// opened. `t.after` closes the stores, kills the children, then unmounts (innermost first) and
// removes the directories, whether the test passed or not.
class Scratch {
  constructor(t) {
    this.mounts = []
    this.dirs = []
    this.stores = []
    this.children = []
    t.after(() => this.cleanup())
  }

  dir(prefix) {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), `threadline-diskfail-${prefix}-`))
    this.dirs.push(d)
    return d
  }

  // A fresh tmpfs of `sizeKiB`; returns its mount point.
  tmpfs(sizeKiB) {
    const d = this.dir('fs')
    run('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k,mode=0700`, 'threadline-diskfail', d])
    this.mounts.push(d)
    return d
  }

  // `source` (a directory on a filesystem this test mounted) bind-mounted at a new directory,
  // read-only: the same files, refused for writing through this path only.
  readonlyBind(source) {
    const d = this.dir('ro')
    run('mount', ['--bind', source, d])
    this.mounts.push(d)
    run('mount', ['-o', 'remount,bind,ro', d])
    return d
  }

  open(file, options) {
    const store = Store.open(file, options)
    this.stores.push(store)
    return store
  }

  spawn(args, options) {
    const child = spawn(process.execPath, args, options)
    this.children.push(child)
    return child
  }

  cleanup() {
    for (const s of this.stores) {
      try {
        s.close()
      } catch {}
    }
    for (const c of this.children) {
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    }
    const problems = []
    for (const m of this.mounts.reverse()) {
      let done = false
      // Every store is closed by now (SQLite may defer closing a file descriptor while another
      // connection of the process holds a lock on the same file, so all of them are closed
      // first); a process killed just before may still be releasing its files: retry a moment.
      for (let i = 0; i < 20 && !done; i++) {
        try {
          run('umount', [m])
          done = true
        } catch (e) {
          sleepMs(50)
          if (i === 19) problems.push(e.message)
        }
      }
      if (!done) {
        try {
          run('umount', ['-l', m]) // our own mount: detach it lazily rather than leave it
        } catch (e) {
          problems.push(e.message)
        }
      }
    }
    for (const d of this.dirs.reverse()) {
      try {
        fs.rmSync(d, { recursive: true, force: true })
      } catch (e) {
        problems.push(`rm ${d}: ${e.message}`)
      }
    }
    if (problems.length > 0) throw new Error(`cleanup: ${problems.join('; ')}`)
  }
}

function remount(dir, flags) {
  run('mount', ['-o', `remount,${flags}`, dir])
}

function isReadonlyMount(dir) {
  try {
    fs.writeFileSync(path.join(dir, '.probe'), 'x')
  } catch (e) {
    return e.code === 'EROFS'
  }
  fs.rmSync(path.join(dir, '.probe'))
  return false
}

// ---------------------------------------------------------------------------------------------
// Records and checks
// ---------------------------------------------------------------------------------------------

const BLOB_THRESHOLD = 10240

function noise(n) {
  return crypto.randomBytes(Math.ceil((n * 3) / 4) + 3).toString('base64').slice(0, n)
}

// Record `i` of an agent loop, as an envelope with an explicit uuid: prompt, assistant tool call
// (thinking, usage, its own message id), tool result (every other one over the blob threshold,
// with toolUseResult over it too), final assistant text. Every string is random, so nothing is
// shared between records and each record really takes its size on disk.
function agentRecord(i) {
  const uuid = crypto.randomUUID()
  const usage = { input_tokens: 1000 + i, output_tokens: 40 + i, cache_read_input_tokens: 7 * i, cache_creation_input_tokens: 3 }
  switch (i % 4) {
    case 0:
      return { uuid, message: { role: 'user', content: `step ${i}: ${noise(300)}` } }
    case 1:
      return {
        uuid,
        requestId: `req_${i}`,
        message: {
          id: `msg_${i}`, type: 'message', role: 'assistant', model: 'claude-sonnet-4-5',
          content: [
            { type: 'thinking', thinking: noise(900), signature: noise(120) },
            { type: 'tool_use', id: `toolu_${i}`, name: 'read_file', input: { path: `src/f${i}.ts` } },
          ],
          stop_reason: 'tool_use', stop_sequence: null, usage,
        },
      }
    case 2: {
      const big = i % 8 === 2
      return {
        uuid,
        message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${i - 1}`, content: noise(big ? 48 * 1024 : 6 * 1024) }] },
        toolUseResult: { stdout: noise(big ? 12 * 1024 : 200), stderr: '', interrupted: false },
      }
    }
    default:
      return {
        uuid,
        message: {
          id: `msg_${i}`, type: 'message', role: 'assistant', model: 'claude-sonnet-4-5',
          content: [{ type: 'text', text: noise(1500) }], stop_reason: 'end_turn', stop_sequence: null, usage,
        },
      }
  }
}

// The same record in one of the three forms `append` takes, as its argument list: a string prompt
// with envelope fields, a bare message with envelope fields, or an envelope.
function agentAppend(i) {
  const r = agentRecord(i)
  if (i % 4 === 0) return [r.message.content, { uuid: r.uuid }]
  if (i % 4 === 3) return [r.message, { uuid: r.uuid, requestId: `req_${i}` }]
  return [r]
}

function uuidOf(args) {
  return args[1] ? args[1].uuid : args[0].uuid
}

// An event record with a long payload, for batches.
function bigEvent(i, bytes) {
  return { uuid: crypto.randomUUID(), type: 'event', name: `dump_${i}`, data: { text: noise(bytes) } }
}

// What a session holding exactly the records of `appends` (argument lists of `append`, in this
// order) must show, from a session in memory fed the same: messages, turns, tokenTracker, message
// count. (Turns and token state depend only on the records, their uuids and the messages' JSON,
// all given here.)
function expectedState(appends) {
  const replica = new Session({ contextWindow: 200000 })
  for (const args of appends) replica.append(...args)
  return { messages: replica.messages, turns: replica.turns, tokenTracker: replica.tokenTracker, messageCount: replica.info.messageCount }
}

function assertState(actual, expected, what) {
  assert.deepStrictEqual(actual.messages, expected.messages, `${what}: messages`)
  assert.deepStrictEqual(actual.turns, expected.turns, `${what}: turns`)
  assert.deepStrictEqual(actual.tokenTracker, expected.tokenTracker, `${what}: tokenTracker`)
  assert.equal(actual.info.messageCount, expected.messageCount, `${what}: info.messageCount`)
}

function stateOf(session) {
  return { messages: session.messages, envelopes: session.envelopes(), turns: session.turns, tokenTracker: session.tokenTracker, info: session.info }
}

// Exactly these envelopes, in order (the JSON text, so key order too), and the derived state.
function assertHolds(session, envelopes, expected, what) {
  const now = stateOf(session)
  assert.equal(now.envelopes.length, envelopes.length, `${what}: record count`)
  assert.equal(JSON.stringify(now.envelopes), JSON.stringify(envelopes), `${what}: envelopes`)
  assertState(now, expected, what)
}

// Reads a session in a new node process (the output goes to os.tmpdir(), never to the
// filesystem under test, which may be full or read-only).
function readInOtherProcess(storePath, sessionId, options) {
  const out = path.join(os.tmpdir(), `threadline-diskfail-read-${process.pid}-${crypto.randomUUID()}.json`)
  const args = [READER, storePath, sessionId, out]
  if (options) args.push(JSON.stringify(options))
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 << 20 })
  try {
    assert.equal(r.status, 0, `reader process failed (status ${r.status}, signal ${r.signal}):\n${r.stderr}`)
    return JSON.parse(fs.readFileSync(out, 'utf8'))
  } finally {
    fs.rmSync(out, { force: true })
  }
}

function countUuid(envelopes, uuid) {
  return envelopes.filter((e) => e.uuid === uuid).length
}

function freeBytes(dir) {
  const s = fs.statfsSync(dir)
  return s.bavail * s.bsize
}

// ---------------------------------------------------------------------------------------------
// Disk full
// ---------------------------------------------------------------------------------------------

test('disk full: STORE_IO "disk is full", only acknowledged records are kept, and the same append succeeds once after space is freed', (t) => {
  const scratch = new Scratch(t)
  const mnt = scratch.tmpfs(4096)
  // A filler file on the same filesystem, deleted later to make room again.
  const filler = path.join(mnt, 'filler.bin')
  fs.writeFileSync(filler, Buffer.alloc(1024 * 1024, 0x5a))
  const file = path.join(mnt, 'full.db')
  const store = scratch.open(file)
  const session = store.createSession({ id: 'full', contextWindow: 200000 })

  const acked = [] // { args, env }
  let failed = null
  for (let i = 0; i < 5000 && failed === null; i++) {
    const args = agentAppend(i)
    try {
      acked.push({ args, env: session.append(...args) })
    } catch (err) {
      failed = { args, err }
    }
  }
  assert.ok(failed, 'an append failed before 5000 records on a 4 MiB filesystem')
  assert.ok(acked.length >= 20, `enough records were stored before the disk filled up (${acked.length})`)
  assert.ok(acked.some((a) => JSON.stringify(a.args).length > BLOB_THRESHOLD * 4), 'some stored records hold blobs')
  const { err } = failed
  assert.ok(err instanceof Error)
  assert.equal(err.code, 'STORE_IO', `wrong code; message: ${err.message}`)
  assert.match(err.message, /^append: /)
  assert.match(err.message, /disk is full/)
  assert.ok(freeBytes(mnt) < JSON.stringify(failed.args).length + 64 * 1024, 'the filesystem really is (nearly) full')

  const ackedEnvs = acked.map((a) => a.env)
  const ackedArgs = acked.map((a) => a.args)
  const expected = expectedState(ackedArgs)
  const failedUuid = uuidOf(failed.args)

  // This handle: exactly the acknowledged records, the failed one nowhere.
  assertHolds(session, ackedEnvs, expected, 'after the failed append')
  assert.equal(countUuid(session.envelopes(), failedUuid), 0)
  assert.equal(store.listSessions()[0].messageCount, expected.messageCount)

  // A new handle on the same file, opened while the disk is full, and a new process.
  const second = scratch.open(file)
  assertHolds(second.openSession('full'), ackedEnvs, expected, 'a new Store handle')
  const other = readInOtherProcess(file, 'full')
  assert.equal(JSON.stringify(other.envelopes), JSON.stringify(ackedEnvs), 'a new process: envelopes')
  assertState(other, expected, 'a new process')

  // Still full: the same append fails again, and a batch fails as a whole.
  expectError(() => session.append(...failed.args), 'STORE_IO', 'append: ', 'disk is full')
  const batch = [bigEvent(0, 100 * 1024), bigEvent(1, 100 * 1024), bigEvent(2, 100 * 1024)]
  expectError(() => session.appendMany(batch), 'STORE_IO', 'appendMany: ', 'disk is full')
  assertHolds(session, ackedEnvs, expected, 'after the failed appendMany')
  for (const b of batch) assert.equal(countUuid(session.envelopes(), b.uuid), 0, 'no record of the failed batch')
  assertHolds(second.openSession('full'), ackedEnvs, expected, 'a new Store handle, after the failed appendMany')

  // Make room; the same append (same uuid, same content) now succeeds, once.
  fs.rmSync(filler)
  const env = session.append(...failed.args)
  assert.equal(env.uuid, failedUuid)
  assert.equal(env.seq, acked.length, 'it takes the next position: nothing was left behind by the failure')
  assert.equal(env.parentUuid, ackedEnvs.at(-1).uuid, 'chained to the last acknowledged record')
  const withRetry = [...ackedEnvs, env]
  const expectedRetry = expectedState([...ackedArgs, failed.args])
  assertHolds(session, withRetry, expectedRetry, 'after the retry')
  assert.equal(countUuid(session.envelopes(), failedUuid), 1)

  // Appending it again, from this handle or another: the stored envelope back, nothing added.
  assert.deepStrictEqual(session.append(...failed.args), env)
  assert.deepStrictEqual(second.openSession('full').append(...failed.args), env)
  // So is re-appending records that had been acknowledged before the disk filled up.
  for (const a of [acked[0], acked[Math.floor(acked.length / 2)], acked.at(-1)]) {
    assert.deepStrictEqual(session.append(...a.args), a.env, `retry of acknowledged seq ${a.env.seq}`)
  }
  assertHolds(session, withRetry, expectedRetry, 'after the repeated appends')

  // The batch that failed goes in whole now.
  const batchEnvs = session.appendMany(batch)
  assert.deepStrictEqual(batchEnvs.map((e) => e.seq), [acked.length + 1, acked.length + 2, acked.length + 3])
  const all = [...withRetry, ...batchEnvs]
  assertHolds(session, all, expectedRetry, 'after the batch') // events: no message, no token change
  assertHolds(second.openSession('full'), all, expectedRetry, 'a new Store handle, at the end')
  const otherEnd = readInOtherProcess(file, 'full')
  assert.equal(JSON.stringify(otherEnd.envelopes), JSON.stringify(all), 'a new process, at the end')
  assertState(otherEnd, expectedRetry, 'a new process, at the end')
  for (const u of [failedUuid, ...batch.map((b) => b.uuid), ...ackedArgs.map(uuidOf)]) {
    assert.equal(countUuid(otherEnd.envelopes, u), 1, `uuid ${u} is stored once`)
  }
})

// Writes to `file` until the filesystem has no free byte left.
function fillUp(file, mnt) {
  const fd = fs.openSync(file, 'w')
  try {
    for (;;) fs.writeSync(fd, Buffer.alloc(Math.min(64 * 1024, Math.max(1, freeBytes(mnt))), 1))
  } catch (e) {
    assert.equal(e.code, 'ENOSPC')
  } finally {
    fs.closeSync(fd)
  }
  assert.equal(freeBytes(mnt), 0, 'the filesystem is full')
}

test('disk full on every other write (createSession, setStatus, appendEvent, restoreMessages, restoreTokenState) and on close: STORE_IO, nothing changed', (t) => {
  const scratch = new Scratch(t)
  const mnt = scratch.tmpfs(1024)
  const filler = path.join(mnt, 'filler.bin')
  const file = path.join(mnt, 'small.db')
  const store = scratch.open(file)
  const session = store.createSession({ id: 'kept', title: 'before' })
  session.append('a prompt')
  const empty = store.createSession({ id: 'empty' })
  fillUp(filler, mnt)
  const before = store.listSessions()
  const tokensBefore = session.tokenTracker

  // Every commit adds at least one page to the write-ahead log, which zero free bytes cannot hold.
  const full = 'disk is full'
  expectError(() => store.createSession({ id: 'new' }), 'STORE_IO', 'createSession: ', full)
  expectError(() => session.setStatus('completed'), 'STORE_IO', 'setStatus: ', full)
  expectError(() => session.append('one more prompt'), 'STORE_IO', 'append: ', full)
  expectError(() => session.appendEvent('note', { text: noise(200 * 1024) }), 'STORE_IO', 'appendEvent: ', full)
  expectError(() => session.restoreTokenState({ inputTokens: 5, cumulativeInputTokens: 500 }), 'STORE_IO', 'restoreTokenState: ', full)
  const history = [{ role: 'user', content: 'old prompt' }, { role: 'assistant', content: 'old answer' }]
  expectError(() => empty.restoreMessages(history), 'STORE_IO', 'restoreMessages: ', full)
  assert.deepStrictEqual(store.listSessions(), before)
  assert.equal(session.info.status, 'active')
  assert.equal(session.envelopes().length, 1)
  assert.deepStrictEqual(session.tokenTracker, tokensBefore)
  assert.equal(empty.envelopes().length, 0)
  assert.equal(empty.info.messageCount, 0)
  expectError(() => store.openSession('new'), 'NOT_FOUND')

  // Closing the only handle while the disk is full: the final checkpoint cannot run, which loses
  // nothing (the log stays for the next open) and is not an error of close().
  store.close()
  fs.rmSync(filler)
  const again = scratch.open(file)
  assert.deepStrictEqual(again.listSessions(), before)
  const kept = again.openSession('kept')
  assert.equal(kept.envelopes().length, 1)
  const created = again.createSession({ id: 'new' })
  assert.equal(created.info.messageCount, 0)
  kept.setStatus('completed')
  assert.equal(kept.append('one more prompt').seq, 1)
  const report = again.openSession('empty').restoreMessages(history)
  assert.equal(report.messageCount, 2)
  assert.deepStrictEqual(
    again.listSessions().map((s) => [s.id, s.status, s.messageCount]).sort(),
    [['empty', 'active', 2], ['kept', 'completed', 2], ['new', 'active', 0]],
  )
})

test('disk full when a new store is created: Store.open fails with STORE_IO naming the path, and works once there is room', (t) => {
  const scratch = new Scratch(t)
  const mnt = scratch.tmpfs(256)
  const filler = path.join(mnt, 'filler.bin')
  fillUp(filler, mnt)
  const file = path.join(mnt, 'new.db')
  expectError(() => Store.open(file), 'STORE_IO', `open ${file}: `, 'disk is full')
  fs.rmSync(filler)
  // What the failed open left (at most an empty file) is a valid place for a new store.
  const store = scratch.open(file)
  const env = store.createSession({ id: 'fresh' }).append('first')
  assert.equal(env.seq, 0)
  store.close()
  const reopened = scratch.open(file)
  assert.equal(reopened.openSession('fresh').envelopes().length, 1)
})

test('disk full after thousands of appends (background checkpoints and log restarts on the way): only acknowledged records, and the retry is stored once', (t) => {
  const scratch = new Scratch(t)
  const mnt = scratch.tmpfs(32 * 1024)
  const filler = path.join(mnt, 'filler.bin')
  fs.writeFileSync(filler, Buffer.alloc(1024 * 1024, 0x5a))
  const file = path.join(mnt, 'long.db')
  const store = scratch.open(file)
  const session = store.createSession({ id: 'long', contextWindow: 200000 })
  const acked = []
  let failed = null
  // 1,200 small records (about 15 KiB of log each: 1,200 fit in 32 MiB), then records of 60 KiB
  // (blobs) until the disk is full.
  for (let i = 0; i < 20000 && failed === null; i++) {
    const size = i < 1200 ? 100 : 60 * 1024
    const args = i % 2 === 0
      ? [`prompt ${i} ${noise(size)}`, { uuid: crypto.randomUUID() }]
      : [{ id: `msg_${i}`, role: 'assistant', content: noise(size), usage: { input_tokens: i, output_tokens: 7 } }, { uuid: crypto.randomUUID() }]
    try {
      acked.push({ args, env: session.append(...args) })
    } catch (err) {
      failed = { args, err }
    }
  }
  assert.ok(failed, 'the disk filled up')
  assert.equal(failed.err.code, 'STORE_IO', failed.err.message)
  assert.match(failed.err.message, /^append: .*disk is full/)
  // The writer checkpoints and restarts its log every 1,024 commits (README, Durability): this run
  // went well past that before the disk filled up.
  assert.ok(acked.length > 1200, `${acked.length} appends before the disk filled up`)
  const ackedEnvs = acked.map((a) => a.env)
  const expected = expectedState(acked.map((a) => a.args))
  assertHolds(session, ackedEnvs, expected, 'after the failed append')
  assertHolds(scratch.open(file).openSession('long'), ackedEnvs, expected, 'a new Store handle')

  fs.rmSync(filler)
  const env = session.append(...failed.args)
  assert.equal(env.seq, acked.length)
  assert.deepStrictEqual(session.append(...failed.args), env)
  const other = readInOtherProcess(file, 'long')
  assert.equal(other.envelopes.length, acked.length + 1)
  assert.equal(JSON.stringify(other.envelopes), JSON.stringify([...ackedEnvs, env]))
  assertState(other, expectedState([...acked.map((a) => a.args), failed.args]), 'a new process')
})

// ---------------------------------------------------------------------------------------------
// Read-only
// ---------------------------------------------------------------------------------------------

// Appends `n` agent records to `session`; returns { inputs, envs } (inputs: argument lists).
function fillSession(session, n) {
  const inputs = []
  const envs = []
  for (let i = 0; i < n; i++) {
    const args = agentAppend(i)
    inputs.push(args)
    envs.push(session.append(...args))
  }
  return { inputs, envs }
}

test('read-only bind mount: writes through it fail with STORE_IO, reads work, and after it is writable the same append is stored once', (t) => {
  const scratch = new Scratch(t)
  const mnt = scratch.tmpfs(8192)
  const file = path.join(mnt, 'store.db')
  // The writer: a store opened on the writable mount, which stays open throughout.
  const writer = scratch.open(file)
  const ws = writer.createSession({ id: 'ro', contextWindow: 200000 })
  const { inputs, envs } = fillSession(ws, 12)

  // The same directory bind-mounted read-only: the kernel refuses every write through it (EROFS).
  // A store opened there gets its file read-only (SQLite falls back to a read-only open when the
  // read-write one is refused), with the writer's -wal and -shm, which SQLite can read.
  const roDir = scratch.readonlyBind(mnt)
  assert.ok(isReadonlyMount(roDir), 'the bind mount refuses writes')
  const roFile = path.join(roDir, 'store.db')
  const reader = scratch.open(roFile)
  const rs = reader.openSession('ro')
  const expected = expectedState(inputs)

  // Reads work.
  assertHolds(rs, envs, expected, 'through the read-only mount')
  assert.deepStrictEqual(reader.listSessions().map((s) => s.id), ['ro'])
  assert.deepStrictEqual(rs.contextFill, ws.contextFill)

  // Every write fails with STORE_IO and a message that says why; nothing changes.
  const next = agentAppend(12)
  const readonly = /read-?only/i
  expectError(() => rs.append(...next), 'STORE_IO', 'append: ', readonly)
  expectError(() => rs.appendMany([agentRecord(13), agentRecord(14)]), 'STORE_IO', 'appendMany: ', readonly)
  expectError(() => rs.appendEvent('note', { x: 1 }), 'STORE_IO', 'appendEvent: ', readonly)
  expectError(() => rs.setStatus('completed'), 'STORE_IO', 'setStatus: ', readonly)
  expectError(() => reader.createSession({ id: 'other' }), 'STORE_IO', 'createSession: ', readonly)
  expectError(() => reader.deleteSession('ro'), 'STORE_IO', 'deleteSession: ', readonly)
  assertHolds(rs, envs, expected, 'after the refused writes (reader)')
  assertHolds(ws, envs, expected, 'after the refused writes (writer)')
  assert.equal(ws.info.status, 'active')
  assert.deepStrictEqual(writer.listSessions().map((s) => s.id), ['ro'])

  // The writer, on the writable path, goes on; the read-only handle sees what it commits.
  const more = agentAppend(15)
  const moreEnv = ws.append(...more)
  assert.equal(moreEnv.seq, 12)
  const expectedMore = expectedState([...inputs, more])
  assertHolds(rs, [...envs, moreEnv], expectedMore, 'the reader sees the writer\'s new record')
  // Still refused while read-only.
  expectError(() => rs.append(...next), 'STORE_IO', 'append: ', readonly)

  // Writable again. The handle opened while read-only keeps its file open read-only (SQLite does
  // not reopen it), so the store is opened again to write through this path.
  remount(roDir, 'bind,rw')
  assert.ok(!isReadonlyMount(roDir))
  reader.close()
  const again = scratch.open(roFile)
  const as = again.openSession('ro')
  const env = as.append(...next)
  assert.equal(env.uuid, uuidOf(next))
  assert.equal(env.seq, 13)
  assert.equal(env.parentUuid, moreEnv.uuid)
  const all = [...envs, moreEnv, env]
  const expectedAll = expectedState([...inputs, more, next])
  assertHolds(as, all, expectedAll, 'after the retry')
  assertHolds(ws, all, expectedAll, 'the writer sees the retried record')
  // The same append again, from either handle: the stored envelope, nothing added.
  assert.deepStrictEqual(as.append(...next), env)
  assert.deepStrictEqual(ws.append(...next), env)
  assert.deepStrictEqual(ws.append(...inputs[3]), envs[3])
  assert.deepStrictEqual(ws.append(...inputs[4]), envs[4])
  const other = readInOtherProcess(file, 'ro')
  assert.equal(JSON.stringify(other.envelopes), JSON.stringify(all))
  assertState(other, expectedAll, 'a new process')
  assert.equal(countUuid(other.envelopes, uuidOf(next)), 1)
})

// Runs diskfail-writer.js on `file`: appends `records` to a new session `id`, then SIGKILLs
// itself. Returns the envelopes it acknowledged.
function killedWriter(scratch, file, id, records) {
  const list = path.join(scratch.dir('records'), 'records.json')
  fs.writeFileSync(list, JSON.stringify(records))
  const r = spawnSync(process.execPath, [WRITER, file, id, list], { encoding: 'utf8', maxBuffer: 64 << 20 })
  assert.equal(r.signal, 'SIGKILL', `the writer killed itself (status ${r.status}):\n${r.stderr}`)
  return r.stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
}

test('filesystem remounted read-only under a store left by a killed writer: reads work, writes fail with STORE_IO, and after remounting read-write the same append is stored once', (t) => {
  const scratch = new Scratch(t)
  const mnt = scratch.tmpfs(8192)
  const file = path.join(mnt, 'crashed.db')
  const records = Array.from({ length: 10 }, (_, i) => agentRecord(i))
  const inputs = records.map((r) => [r])
  const envs = killedWriter(scratch, file, 'crashed', records)
  assert.equal(envs.length, inputs.length)
  assert.ok(fs.existsSync(`${file}-wal`) && fs.existsSync(`${file}-shm`), 'the killed writer left its -wal and -shm')

  // No file is open for writing now, so the whole filesystem can go read-only.
  remount(mnt, 'ro')
  assert.ok(isReadonlyMount(mnt))
  const expected = expectedState(inputs)

  // Opening the store (read-write asked, read-only given: SQLite falls back) and reading works:
  // SQLite reads a WAL database on read-only media when its -wal and -shm exist, recovering the
  // log in private memory. Writes fail with SQLite's "attempt to write a readonly database".
  const store = scratch.open(file)
  const session = store.openSession('crashed')
  assertHolds(session, envs, expected, 'on the read-only filesystem')
  const next = agentAppend(10)
  expectError(() => session.append(...next), 'STORE_IO', 'append: ', /read-?only/i)
  expectError(() => session.appendMany([agentRecord(11)]), 'STORE_IO', 'appendMany: ', /read-?only/i)
  expectError(() => store.createSession(), 'STORE_IO', 'createSession: ', /read-?only/i)
  assertHolds(session, envs, expected, 'after the refused writes')
  // readonly: true and another process read the same.
  const ro = scratch.open(file, { readonly: true })
  assertHolds(ro.openSession('crashed'), envs, expected, 'a readonly store')
  const other = readInOtherProcess(file, 'crashed')
  assert.equal(JSON.stringify(other.envelopes), JSON.stringify(envs))
  assertState(other, expected, 'a new process, read-only filesystem')
  store.close()
  ro.close()

  remount(mnt, 'rw')
  assert.ok(!isReadonlyMount(mnt))
  const back = scratch.open(file)
  const bs = back.openSession('crashed')
  const env = bs.append(...next)
  assert.equal(env.uuid, uuidOf(next))
  assert.equal(env.seq, 10)
  assert.equal(env.parentUuid, envs.at(-1).uuid)
  assert.deepStrictEqual(bs.append(...next), env, 'the same append again: the stored envelope')
  assert.deepStrictEqual(bs.append(...inputs[0]), envs[0], 'an acknowledged record again: the stored envelope')
  const all = [...envs, env]
  const expectedAll = expectedState([...inputs, next])
  assertHolds(bs, all, expectedAll, 'after the retry')
  const end = readInOtherProcess(file, 'crashed')
  assert.equal(JSON.stringify(end.envelopes), JSON.stringify(all))
  assert.equal(countUuid(end.envelopes, uuidOf(next)), 1)
})

test('filesystem remounted read-only under a cleanly closed store: Store.open fails with STORE_IO naming the path; writable again, the append is stored once', (t) => {
  const scratch = new Scratch(t)
  const mnt = scratch.tmpfs(8192)
  const file = path.join(mnt, 'closed.db')
  const first = scratch.open(file)
  const { inputs, envs } = fillSession(first.createSession({ id: 'closed' }), 8)
  first.close()
  // The last connection to close checkpoints the log and removes -wal and -shm.
  assert.deepStrictEqual(fs.readdirSync(mnt), ['closed.db'])
  const bytes = fs.readFileSync(file)

  remount(mnt, 'ro')
  assert.ok(isReadonlyMount(mnt))
  // A writable open fails with STORE_IO, naming the operation and the file. A readonly one reads
  // it: with no log and no way for anyone to write one, SQLite opens the file as immutable (it
  // cannot create the -shm file WAL mode reads need on read-only media).
  expectError(() => Store.open(file), 'STORE_IO', `open ${file}: `)
  const ro = Store.open(file, { readonly: true })
  assertHolds(ro.openSession('closed'), envs, expectedState(inputs), 'readonly on read-only media')
  expectError(() => ro.createSession({ id: 'no' }), 'STORE_IO', 'readonly')
  ro.close()
  assert.ok(fs.readFileSync(file).equals(bytes), 'the file is unchanged')
  assert.deepStrictEqual(fs.readdirSync(mnt), ['closed.db'])

  remount(mnt, 'rw')
  const store = scratch.open(file)
  const session = store.openSession('closed')
  assertHolds(session, envs, expectedState(inputs), 'writable again')
  const next = agentAppend(8)
  const env = session.append(...next)
  assert.equal(env.seq, 8)
  assert.deepStrictEqual(session.append(...next), env)
  assert.equal(countUuid(session.envelopes(), uuidOf(next)), 1)
  assert.equal(session.envelopes().length, 9)
})

// ---------------------------------------------------------------------------------------------
// Locked past the timeout
// ---------------------------------------------------------------------------------------------

// A child process that takes a lock on `file` with better-sqlite3 and holds it until its stdin
// ends. mode 'write': BEGIN IMMEDIATE plus an uncommitted change (WAL readers are not blocked);
// 'exclusive': locking_mode EXCLUSIVE after a write (nobody else may even read).
async function lockHolder(scratch, file, mode) {
  const code = `
    const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))})
    const db = new Database(process.argv[1])
    if (process.argv[2] === 'exclusive') {
      db.pragma('locking_mode = EXCLUSIVE')
      db.exec("BEGIN EXCLUSIVE; UPDATE sessions SET title = title; COMMIT")
    } else {
      db.exec("BEGIN IMMEDIATE; UPDATE sessions SET title = 'uncommitted by the lock holder'")
    }
    process.stdout.write('locked\\n')
    process.stdin.on('end', () => {
      if (db.inTransaction) db.exec('ROLLBACK')
      db.close()
      process.exit(0)
    })
    process.stdin.resume()
  `
  const child = scratch.spawn(['-e', code, file, mode], { stdio: ['pipe', 'pipe', 'inherit'] })
  const exited = once(child, 'exit')
  const [line] = await Promise.race([once(child.stdout, 'data'), exited.then(() => ['exited'])])
  assert.equal(String(line).trim(), 'locked', 'the lock holder is holding the lock')
  return async () => {
    child.stdin.end()
    const [status] = await exited
    assert.equal(status, 0, 'the lock holder exited cleanly')
  }
}

// Runs `fn`, which must fail with STORE_BUSY after waiting about busyTimeoutMs (200 here): not at
// once, and not the default 5000.
function expectBusy(fn, op) {
  const t0 = Date.now()
  const err = expectError(fn, 'STORE_BUSY', op, 'busyTimeoutMs')
  const waited = Date.now() - t0
  assert.ok(waited >= 150, `${op} waited ${waited} ms: it should wait busyTimeoutMs (200) before giving up`)
  assert.ok(waited < 2500, `${op} waited ${waited} ms: busyTimeoutMs is 200`)
  return err
}

test('a store opened while another process holds the write lock: reads work, writes fail with STORE_BUSY within the timeout, and the same append succeeds once after', async (t) => {
  const scratch = new Scratch(t)
  const dir = scratch.dir('busy')
  const file = path.join(dir, 'busy.db')
  const setup = scratch.open(file)
  const s0 = setup.createSession({ id: 'busy', title: 'committed title' })
  const { inputs, envs } = fillSession(s0, 6)
  setup.close()
  const expected = expectedState(inputs)

  const release = await lockHolder(scratch, file, 'write')
  let released = false
  try {
    // Opening and reading are not blocked by a writer (WAL).
    const store = scratch.open(file, { busyTimeoutMs: 200 })
    const session = store.openSession('busy')
    assertHolds(session, envs, expected, 'while locked')
    assert.equal(session.info.title, 'committed title', 'the lock holder\'s uncommitted change is not seen')

    const next = agentAppend(6)
    expectBusy(() => session.append(...next), 'append: ')
    expectBusy(() => session.appendMany([agentRecord(7), agentRecord(8)]), 'appendMany: ')
    expectBusy(() => session.appendEvent('note'), 'appendEvent: ')
    expectBusy(() => store.createSession({ id: 'second' }), 'createSession: ')
    expectBusy(() => store.deleteSession('busy'), 'deleteSession: ')
    assertHolds(session, envs, expected, 'after the refused writes')
    const other = readInOtherProcess(file, 'busy')
    assert.equal(JSON.stringify(other.envelopes), JSON.stringify(envs), 'a new process reads the same while locked')

    await release()
    released = true
    const env = session.append(...next)
    assert.equal(env.uuid, uuidOf(next))
    assert.equal(env.seq, 6)
    assert.equal(env.parentUuid, envs.at(-1).uuid)
    assert.deepStrictEqual(session.append(...next), env, 'the same append again: the stored envelope')
    const all = [...envs, env]
    const expectedAll = expectedState([...inputs, next])
    assertHolds(session, all, expectedAll, 'after the lock is released')
    expectError(() => store.openSession('second'), 'NOT_FOUND')
    assert.equal(session.info.title, 'committed title', 'the lock holder\'s change was rolled back')
    const end = readInOtherProcess(file, 'busy')
    assert.equal(JSON.stringify(end.envelopes), JSON.stringify(all))
    assertState(end, expectedAll, 'a new process, at the end')
    assert.equal(countUuid(end.envelopes, uuidOf(next)), 1)
  } finally {
    if (!released) await release()
  }
})

test('a store held in exclusive locking mode by another process: Store.open fails with STORE_BUSY naming the path, and opens once it is released', async (t) => {
  const scratch = new Scratch(t)
  const dir = scratch.dir('excl')
  const file = path.join(dir, 'excl.db')
  const setup = scratch.open(file)
  const { inputs, envs } = fillSession(setup.createSession({ id: 'excl' }), 4)
  setup.close()

  const release = await lockHolder(scratch, file, 'exclusive')
  let released = false
  try {
    expectBusy(() => Store.open(file, { busyTimeoutMs: 200 }), `open ${file}: `)
    expectBusy(() => Store.open(file, { busyTimeoutMs: 200, readonly: true }), `open ${file}: `)
    await release()
    released = true
  } finally {
    if (!released) await release()
  }
  const store = scratch.open(file, { busyTimeoutMs: 200 })
  const session = store.openSession('excl')
  assertHolds(session, envs, expectedState(inputs), 'after the exclusive lock is released')
  const next = agentAppend(4)
  const env = session.append(...next)
  assert.equal(env.seq, 4)
  assert.deepStrictEqual(session.append(...next), env)
  assert.equal(session.envelopes().length, 5)
})
