'use strict'
// What the SQLite part of a Threadline append costs, with no JSON work at all:
//   node bench/sql-replay.js [messages=10000]
// Writes the workload into a Threadline store, reads back the rows Threadline stored (records,
// blobs, blob_refs), then replays them through better-sqlite3 into an empty store with the same
// schema and pragmas, one BEGIN IMMEDIATE transaction per record with the statements
// Session::write issues (tail check SELECT, INSERT INTO records, blob INSERTs), interleaved
// message by message with the two baselines (JSON.stringify included for those). SQLite's own
// autocheckpoint (1000 pages) runs inline for both SQLite databases here.

const fs = require('fs')
const os = require('os')
const path = require('path')
const Database = require('better-sqlite3')
const { messages } = require('./workload.js')
const { Store } = require(path.resolve(process.env.BENCH_THREADLINE || path.join(__dirname, '..')))

const N = Number(process.argv[2] || 10000)
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-sql-replay-'))
const q = (xs, p) => xs[Math.min(xs.length - 1, Math.ceil(p * xs.length) - 1)]

try {
  // 1. the rows Threadline writes for this workload
  const srcFile = path.join(dir, 'src.db')
  const store = Store.open(srcFile)
  const session = store.createSession()
  const it = messages()
  const msgs = []
  for (let i = 0; i < N; i += 500) {
    const batch = []
    for (let j = 0; j < 500 && i + j < N; j++) batch.push(it.next().value)
    session.appendMany(batch)
    msgs.push(...batch)
  }
  store.close()
  const src = new Database(srcFile, { readonly: true })
  const recs = src.prepare('SELECT * FROM records ORDER BY id').all()
  const blobs = new Map(src.prepare('SELECT hash, bytes, literal FROM blobs').all().map((b) => [b.hash, b]))
  const refs = new Map()
  for (const r of src.prepare('SELECT record, hash FROM blob_refs').all()) {
    if (!refs.has(r.record)) refs.set(r.record, [])
    refs.get(r.record).push(r.hash)
  }
  const ddl = src.prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'").pluck().all()
  const bytes = src.prepare('SELECT avg(length(body)) body, avg(length(message)) message, avg(length(state)) state FROM records').get()
  src.close()

  // 2. replay, interleaved with the baselines
  const tl = new Database(path.join(dir, 'replay.db'))
  tl.pragma('journal_mode = WAL')
  tl.pragma('synchronous = NORMAL')
  tl.pragma('cache_size = -32768')
  tl.pragma('mmap_size = 268435456')
  for (const sql of ddl) tl.exec(sql)
  const cols = Object.keys(recs[0])
  const insert = tl.prepare(`INSERT INTO records(${cols.join(', ')}) VALUES (${cols.map((c) => '@' + c).join(', ')})`)
  const tail = tl.prepare('SELECT id FROM records WHERE id BETWEEN ? AND ? ORDER BY id DESC LIMIT 1').pluck()
  const putBlob = tl.prepare('INSERT OR IGNORE INTO blobs(hash, bytes, literal) VALUES (?, ?, ?)')
  const putRef = tl.prepare('INSERT OR IGNORE INTO blob_refs(record, hash) VALUES (?, ?)')
  const lo = Math.floor(recs[0].id / 2 ** 36) * 2 ** 36
  const one = tl.transaction((r) => {
    tail.get(lo, lo + 2 ** 36 - 1)
    insert.run(r)
    for (const h of refs.get(r.id) || []) {
      const b = blobs.get(h)
      putBlob.run(b.hash, b.bytes, b.literal)
      putRef.run(r.id, h)
    }
  })
  const sq = new Database(path.join(dir, 'baseline.db'))
  sq.pragma('journal_mode = WAL')
  sq.pragma('synchronous = NORMAL')
  sq.exec('CREATE TABLE messages(id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, body TEXT NOT NULL)')
  const sqInsert = sq.prepare('INSERT INTO messages(session_id, body) VALUES (?, ?)')
  const jsonl = path.join(dir, 'baseline.jsonl')
  const ops = {
    'threadline rows, SQL only': (i) => one.immediate(recs[i]),
    'better-sqlite3 baseline (incl. stringify)': (i) => sqInsert.run('s', JSON.stringify(msgs[i])),
    'JSONL appendFileSync (incl. stringify)': (i) => fs.appendFileSync(jsonl, JSON.stringify(msgs[i]) + '\n'),
  }
  const names = Object.keys(ops)
  const t = Object.fromEntries(names.map((n) => [n, []]))
  for (let i = 0; i < recs.length; i++) {
    for (let k = 0; k < names.length; k++) {
      const n = names[(i + k) % names.length]
      const a = process.hrtime.bigint()
      ops[n](i)
      t[n].push(Number(process.hrtime.bigint() - a) / 1e3)
    }
  }
  tl.close()
  sq.close()
  console.log(`${recs.length} records; Threadline row: body ${bytes.body.toFixed(0)} B + message ${bytes.message.toFixed(0)} B + state ${bytes.state.toFixed(0)} B (averages), 3 indexes`)
  for (const n of names) {
    const v = t[n].sort((a, b) => a - b)
    console.log(`${n.padEnd(44)} median ${q(v, 0.5).toFixed(1).padStart(6)} µs   p99 ${q(v, 0.99).toFixed(0).padStart(5)} µs   mean ${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(1).padStart(6)} µs`)
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
