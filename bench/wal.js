'use strict'
// How big the write-ahead log gets, and what appends cost, in the situations that used to let it
// grow: writers killed before they checkpoint, a long-lived reader in another process, two
// writer processes. Real processes, SIGKILL. Prints one JSON line per scenario.
//
//   node bench/wal.js [--lib DIR] [--dir DIR] [scenario...]
//
// scenarios: latency (one writer, p50/p99/max append; --durability power for fsync per commit), crashloop (30 writers SIGKILLed at random
// moments before their 1,024th commit, durability 'power'), reader (a writer appends 40 MiB while
// another process holds a session open, an unfinished read-ahead stream, and reads in a loop),
// foreign (the same with a reader that holds one SQLite read transaction open throughout),
// twowriters (two processes appending to their own sessions of one store). --lib DIR loads the
// package from DIR (to compare a build with another), default this checkout.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { mulberry32 } = require('../__test__/helpers/seeded.js')

const ROOT = path.join(__dirname, '..')

function arg(name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : fallback
}

function walSize(file) {
  try {
    return fs.statSync(`${file}-wal`).size
  } catch {
    return 0
  }
}

const MiB = (n) => Math.round((n / 1048576) * 10) / 10

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]
}

function stats(latenciesNs) {
  const s = Float64Array.from(latenciesNs).sort()
  const us = (ns) => Math.round(ns / 100) / 10
  return { n: s.length, p50: us(percentile(s, 0.5)), p99: us(percentile(s, 0.99)), p999: us(percentile(s, 0.999)), max: us(s[s.length - 1]) }
}

// Deterministic text of about `bytes` bytes, different for each (tag, n).
function text(tag, n, bytes) {
  let out = `${tag}/${n} `
  let x = (n * 2654435761 + tag.length * 40503) >>> 0
  while (out.length < bytes) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    out += x.toString(36) + ' '
  }
  return out
}

// ---- child processes ----

// writer LIB FILE SESSION DURABILITY COUNT BYTES: appends COUNT messages (0: until killed) and
// prints `A <uuid>` after each; at the end one line `L <json stats>`.
function writer([lib, file, sessionId, durability, count, bytes]) {
  const { Store } = require(lib)
  const store = Store.open(file, { durability })
  let session
  try {
    session = store.openSession(sessionId)
  } catch {
    session = store.createSession({ id: sessionId })
  }
  const n = Number(count)
  const size = Number(bytes)
  const lat = []
  const tag = `${sessionId}-${process.pid}`
  fs.writeSync(1, 'ready\n')
  for (let i = 0; n === 0 || i < n; i++) {
    const m = { role: i % 2 ? 'assistant' : 'user', content: [{ type: 'text', text: text(tag, i, size - 200 + ((i * 37) % 400)) }] }
    const t0 = process.hrtime.bigint()
    const env = session.append(m)
    lat.push(Number(process.hrtime.bigint() - t0))
    fs.writeSync(1, `A ${env.uuid}\n`)
  }
  fs.writeSync(1, `L ${JSON.stringify(stats(lat))}\n`)
  store.close()
}

// reader LIB FILE SESSION MODE: holds the store open until killed. idle: a session open and
// idle; stream: also an unfinished read-ahead stream of messages; loop: reads every message again
// and again; foreign: one SQLite read transaction (better-sqlite3) held open.
async function reader([lib, file, sessionId, mode]) {
  if (mode === 'foreign') {
    const Database = require(path.join(lib, 'node_modules', 'better-sqlite3'))
    const db = new Database(file, { readonly: true })
    db.prepare('BEGIN').run()
    db.prepare('SELECT count(*) FROM records').get()
    fs.writeSync(1, 'ready\n')
    setInterval(() => {}, 1000)
    return
  }
  const { Store } = require(lib)
  const store = Store.open(file)
  const session = store.openSession(sessionId)
  const native = session[Object.getOwnPropertySymbols(session).find((s) => s.description === 'native')]
  let pages
  if (mode === 'stream') {
    pages = native.readMessages(true)
    pages.next() // the first page; the read-ahead thread has the next ones in hand
  }
  fs.writeSync(1, 'ready\n')
  if (mode === 'loop') {
    for (;;) {
      session.messages.length
      await new Promise((r) => setImmediate(r))
    }
  }
  setInterval(() => pages, 1000)
}

// ---- the parent ----

function start(role, args) {
  const child = spawn(process.execPath, [__filename, '--child', role, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  child.out = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (d) => { child.out += d })
  child.done = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  return child
}

async function until(cond, ms = 30000) {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 2))
  }
}

function acked(out) {
  return out.split('\n').filter((l) => l.startsWith('A ')).map((l) => l.slice(2))
}

function watchWal(file) {
  const w = { max: 0 }
  w.timer = setInterval(() => { w.max = Math.max(w.max, walSize(file)) }, 5)
  w.stop = () => { clearInterval(w.timer); w.max = Math.max(w.max, walSize(file)); return w.max }
  return w
}


async function latency(lib, dir) {
  const file = path.join(dir, 'latency.db')
  const durability = arg('--durability', 'process')
  const child = start('writer', [lib, file, 's', durability, '6000', '3000'])
  const w = watchWal(file)
  await child.done
  const line = child.out.split('\n').find((l) => l.startsWith('L '))
  return { scenario: 'latency', durability, appends: 6000, bytes: 3000, latencyUs: JSON.parse(line.slice(2)), walMaxMiB: MiB(w.stop()) }
}

async function crashloop(lib, dir) {
  const file = path.join(dir, 'crash.db')
  const random = mulberry32(Number(arg('--seed', 7)))
  const all = []
  const after = []
  const w = watchWal(file)
  const t0 = Date.now()
  for (let k = 0; k < 30; k++) {
    const child = start('writer', [lib, file, 'crash', 'power', '0', '3000'])
    await until(() => child.out.includes('ready\n'))
    // a random moment within the first ~300 to ~900 appends
    const target = 200 + Math.floor(random() * 700)
    await until(() => acked(child.out).length >= target || child.exitCode !== null)
    child.kill('SIGKILL')
    await child.done
    all.push(...acked(child.out))
    after.push(MiB(walSize(file)))
  }
  const max = w.stop()
  const { Store } = require(lib)
  const store = Store.open(file)
  const have = new Set(store.openSession('crash').envelopes().map((e) => e.uuid))
  const lost = all.filter((u) => !have.has(u)).length
  const dbBytes = fs.statSync(file).size
  store.close()
  return { scenario: 'crashloop', kills: 30, acked: all.length, lost, walAfterEachKillMiB: after, walMaxMiB: MiB(max), dbMiB: MiB(dbBytes), ms: Date.now() - t0 }
}

async function withReader(lib, dir, mode) {
  const file = path.join(dir, `reader-${mode}.db`)
  const { Store } = require(lib)
  // a session with some history for the reader
  const seed = Store.open(file)
  const s = seed.createSession({ id: 'read' })
  for (let i = 0; i < 3000; i++) s.append({ role: 'user', content: text('seed', i, 3000) })
  seed.close()
  const readers = mode === 'foreign' ? ['foreign'] : arg('--readers', 'idle,stream,loop').split(',')
  const rs = readers.map((m) => start('reader', [lib, file, 'read', m]))
  for (const r of rs) await until(() => r.out.includes('ready\n'))
  const w = watchWal(file)
  const t0 = Date.now()
  const child = start('writer', [lib, file, 'w', 'process', '14000', '3000'])
  await child.done
  const ms = Date.now() - t0
  const max = w.stop()
  for (const r of rs) r.kill('SIGKILL')
  await Promise.all(rs.map((r) => r.done))
  const line = child.out.split('\n').find((l) => l.startsWith('L '))
  return { scenario: mode === 'foreign' ? 'foreign-reader' : 'readers', readers, appends: 14000, bytes: 3000, latencyUs: JSON.parse(line.slice(2)), walMaxMiB: MiB(max), walEndMiB: MiB(walSize(file)), ms }
}

async function twoWriters(lib, dir) {
  const file = path.join(dir, 'two.db')
  const { Store } = require(lib)
  Store.open(file).close() // made first: two processes opening a new store at once can collide
  const t0 = Date.now()
  const w = watchWal(file)
  const a = start('writer', [lib, file, 'a', 'process', '8000', '3000'])
  const b = start('writer', [lib, file, 'b', 'process', '8000', '3000'])
  await Promise.all([a.done, b.done])
  const max = w.stop()
  const lat = [a, b].map((c) => JSON.parse(c.out.split('\n').find((l) => l.startsWith('L ')).slice(2)))
  return { scenario: 'twowriters', appendsEach: 8000, bytes: 3000, latencyUs: lat, walMaxMiB: MiB(max), ms: Date.now() - t0 }
}

async function main() {
  const lib = path.resolve(arg('--lib', ROOT))
  const base = arg('--dir', os.tmpdir())
  const names = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !(i > 0 && all[i - 1].startsWith('--')))
  const run = { latency, crashloop, reader: (l, d) => withReader(l, d, 'threadline'), foreign: (l, d) => withReader(l, d, 'foreign'), twowriters: twoWriters }
  for (const name of names.length ? names : Object.keys(run)) {
    const dir = fs.mkdtempSync(path.join(base, 'threadline-wal-'))
    try {
      console.log(JSON.stringify({ lib, ...(await run[name](lib, dir)) }))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

if (process.argv[2] === '--child') {
  const role = process.argv[3]
  const args = process.argv.slice(4)
  if (role === 'writer') writer(args)
  else reader(args)
} else {
  main().catch((e) => { console.error(e); process.exit(1) })
}
