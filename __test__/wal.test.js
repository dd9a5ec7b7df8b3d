'use strict'
// The write-ahead log stays bounded where it used to grow without end: writers killed (SIGKILL)
// before they ever checkpointed, a long-lived reader in another process, two writer processes.
// The -wal file is watched every few milliseconds throughout; its largest size must stay under
// the bound docs/recovery.md gives, and every acknowledged record must be readable by a new
// process afterwards.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const { mulberry32 } = require('./helpers/seeded')
const { lib, tmpDir } = require('./helpers/util')

const { Store } = lib
const WRITER = path.join(__dirname, 'helpers', 'wal-writer.js')
const READER = path.join(__dirname, 'helpers', 'wal-reader.js')
const BOUND = 48 << 20 // docs/recovery.md, "Durability"
const MiB = (n) => (n / 1048576).toFixed(1)


function walSize(file) {
  try {
    return fs.statSync(`${file}-wal`).size
  } catch {
    return 0
  }
}

// The largest size the -wal file reaches while it is watched.
function watchWal(file) {
  let max = 0
  const look = () => { max = Math.max(max, walSize(file)) }
  const timer = setInterval(look, 3)
  return () => { clearInterval(timer); look(); return max }
}

function start(script, args) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  child.out = ''
  child.err = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (d) => { child.out += d })
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d) => { child.err += d })
  child.closed = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  return child
}

async function until(cond, what, ms = 30000) {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(2)
  }
}

// Uuids of the records acknowledged on complete lines (a line cut by a kill was never reported).
function acked(out) {
  return out.split('\n').slice(0, -1).filter((l) => l.startsWith('A ')).map((l) => l.slice(2))
}

function latency(child) {
  const line = child.out.split('\n').find((l) => l.startsWith('L '))
  assert.ok(line, `the writer finished:\n${child.err}`)
  return JSON.parse(line.slice(2))
}

// The uuids of every record of `sessions`, read by a new process.
function readBack(file, sessions) {
  const script = `
    const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const store = Store.open(process.argv[1], { readonly: true })
    const out = {}
    for (const id of JSON.parse(process.argv[2])) out[id] = store.openSession(id).envelopes().map((e) => e.uuid)
    process.stdout.write(JSON.stringify(out))
    store.close()`
  const r = spawnSync(process.execPath, ['-e', script, file, JSON.stringify(sessions)], { encoding: 'utf8', maxBuffer: 256 << 20 })
  assert.equal(r.status, 0, `reader process failed:\n${r.stderr}`)
  return JSON.parse(r.stdout)
}

function assertAllThere(uuids, stored, what) {
  const have = new Set(stored)
  const lost = uuids.filter((u) => !have.has(u))
  assert.deepEqual(lost, [], `${lost.length} acknowledged records of ${what} lost`)
}

test('30 writers SIGKILLed before their 1,024th commit: the log stays bounded and nothing acknowledged is lost', { timeout: 90000 }, async (t) => {
  const seed = Number(process.env.THREADLINE_CRASH_SEED) || (Date.now() % 1e9)
  t.diagnostic(`seed ${seed} (THREADLINE_CRASH_SEED=${seed} repeats the kill schedule)`)
  const random = mulberry32(seed)
  const file = path.join(tmpDir(t), 'crash.db')
  Store.open(file).close()
  const all = []
  const sizes = []
  const stop = watchWal(file)
  const t0 = Date.now()
  for (let k = 0; k < 30; k++) {
    // 'power': each commit is fsynced, the setting the log grew most with
    const child = start(WRITER, [file, 'crash', 'power', '0', '3000'])
    await until(() => child.out.includes('ready\n') || child.exitCode !== null, `child ${k} to open the store`)
    // killed at a random moment, somewhere after 100 to 400 appends
    const target = 100 + Math.floor(random() * 300)
    await until(() => acked(child.out).length >= target || child.exitCode !== null, `child ${k} to append ${target}`)
    await sleep(Math.floor(random() * 5))
    child.kill('SIGKILL')
    const { signal } = await child.closed
    assert.equal(signal, 'SIGKILL', `child ${k} was killed, not dead on its own:\n${child.err}`)
    all.push(...acked(child.out))
    sizes.push(MiB(walSize(file)))
  }
  const max = stop()
  t.diagnostic(`${all.length} records acknowledged; -wal after each kill (MiB): ${sizes.join(' ')}; largest ${MiB(max)} MiB; ${Date.now() - t0} ms`)
  assert.ok(max < BOUND, `the -wal file reached ${MiB(max)} MiB`)
  assertAllThere(all, readBack(file, ['crash']).crash, 'the killed writers')
})

test('a long-lived reader in another process (idle session, unfinished read-ahead stream, reads in a loop) does not let the log grow while a writer appends 40 MiB', { timeout: 90000 }, async (t) => {
  const file = path.join(tmpDir(t), 'reader.db')
  const seeding = Store.open(file)
  const s = seeding.createSession({ id: 'read' })
  const text = 'history '.repeat(375)
  s.appendMany(Array.from({ length: 2000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `${i} ${text}` })))
  seeding.close()

  const reader = start(READER, [file, 'read'])
  await until(() => reader.out.includes('ready\n') || reader.exitCode !== null, 'the reader to start')
  assert.equal(reader.exitCode, null, `the reader is running:\n${reader.err}`)
  const stop = watchWal(file)
  const t0 = Date.now()
  const writer = start(WRITER, [file, 'write', 'process', '10000', '4000'])
  const { code } = await writer.closed
  const ms = Date.now() - t0
  const max = stop()
  assert.equal(code, 0, writer.err)
  reader.stdin.write('finish\n')
  await reader.closed
  const done = reader.out.split('\n').find((l) => l.startsWith('S '))
  assert.ok(done, `the reader finished:\n${reader.err}`)
  const [, streamed, reads] = done.split(' ').map(Number)
  const lat = latency(writer)
  t.diagnostic(`largest -wal ${MiB(max)} MiB; 10,000 appends in ${ms} ms, p50 ${lat.p50.toFixed(3)} ms, p99 ${lat.p99.toFixed(3)} ms, max ${lat.max.toFixed(1)} ms; the loop read the session ${reads} times`)
  assert.ok(reads > 0, 'the loop read while the writer wrote')
  assert.equal(streamed, 2000, 'the stream left open read every message in the end')
  assert.ok(max < BOUND, `the -wal file reached ${MiB(max)} MiB`)
  const back = readBack(file, ['write', 'read'])
  assertAllThere(acked(writer.out), back.write, 'the writer')
  assert.equal(back.read.length, 2000)
})

test('two writer processes appending to their own sessions of one store: the log stays bounded and no append waits long', { timeout: 90000 }, async (t) => {
  const file = path.join(tmpDir(t), 'two.db')
  Store.open(file).close()
  const stop = watchWal(file)
  const t0 = Date.now()
  const writers = ['a', 'b'].map((id) => start(WRITER, [file, id, 'process', '6000', '3000']))
  const exits = await Promise.all(writers.map((w) => w.closed))
  const ms = Date.now() - t0
  const max = stop()
  exits.forEach(({ code }, i) => assert.equal(code, 0, writers[i].err))
  const lats = writers.map(latency)
  t.diagnostic(`largest -wal ${MiB(max)} MiB; 2 x 6,000 appends in ${ms} ms; ${lats.map((l) => `p50 ${l.p50.toFixed(3)} ms, p99 ${l.p99.toFixed(3)} ms, max ${l.max.toFixed(1)} ms`).join('; ')}`)
  assert.ok(max < BOUND, `the -wal file reached ${MiB(max)} MiB`)
  // A writer that sleeps up to 100 ms between tries for the lock, next to one that never sleeps,
  // used to wait seconds; the bound here is far above what is measured and far below that.
  for (const l of lats) assert.ok(l.max < 1500, `an append waited ${l.max.toFixed(0)} ms`)
  const back = readBack(file, ['a', 'b'])
  assertAllThere(acked(writers[0].out), back.a, 'writer a')
  assertAllThere(acked(writers[1].out), back.b, 'writer b')
  assert.equal(back.a.length + back.b.length, 12000)
})
