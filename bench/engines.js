'use strict'
// The three ways to keep a session that the benchmark compares, behind one small interface:
//   threadline  Store.open(file, { durability }) + createSession; append / appendMany
//   sqlite      better-sqlite3, WAL, synchronous NORMAL (FULL for 'power'), one JSON row per message
//               (rowid table, one session per file, no secondary index: the cheapest sensible layout)
//   jsonl       one JSON line per message with fs.appendFileSync (Claude Code's way); for 'power'
//               the file is kept open and every append is followed by fs.fsyncSync
// Every engine is handed the same Anthropic message objects; the baselines' timings include their
// JSON.stringify (Threadline's append stringifies inside).

const fs = require('fs')
const path = require('path')
// BENCH_THREADLINE=/path/to/a/threadline/checkout runs the same benchmark against another build
// (e.g. to measure a proposed fix side by side); default: this repository.
const THREADLINE_DIR = path.resolve(process.env.BENCH_THREADLINE || path.join(__dirname, '..'))
const { Store } = require(THREADLINE_DIR)
const Database = require('better-sqlite3')

const ENGINES = ['threadline', 'sqlite', 'jsonl']

const SQLITE_SCHEMA = 'CREATE TABLE IF NOT EXISTS messages(id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, body TEXT NOT NULL)'
const SQLITE_SESSION = 'bench-session'

function fileOf(engine, dir, name) {
  return path.join(dir, engine === 'jsonl' ? `${name}.jsonl` : `${name}.${engine}.db`)
}

// durability: 'process' (default of each tool) or 'power'
function open(engine, file, durability = 'process') {
  switch (engine) {
    case 'threadline': {
      const store = Store.open(file, durability === 'power' ? { durability: 'power' } : undefined)
      const session = store.createSession({ title: 'bench' })
      return {
        engine, file, sessionId: session.id,
        append: (m) => session.append(m),
        appendMany: (batch) => session.appendMany(batch),
        close: () => store.close(),
      }
    }
    case 'sqlite': {
      const db = new Database(file)
      db.pragma('journal_mode = WAL')
      db.pragma(`synchronous = ${durability === 'power' ? 'FULL' : 'NORMAL'}`)
      db.exec(SQLITE_SCHEMA)
      const insert = db.prepare('INSERT INTO messages(session_id, body) VALUES (?, ?)')
      const insertMany = db.transaction((batch) => {
        for (const m of batch) insert.run(SQLITE_SESSION, JSON.stringify(m))
      })
      return {
        engine, file, sessionId: SQLITE_SESSION,
        append: (m) => insert.run(SQLITE_SESSION, JSON.stringify(m)),
        appendMany: (batch) => insertMany(batch),
        close: () => db.close(),
      }
    }
    case 'jsonl': {
      if (durability === 'power') {
        const fd = fs.openSync(file, 'a')
        return {
          engine, file, sessionId: null,
          append: (m) => { fs.appendFileSync(fd, JSON.stringify(m) + '\n'); fs.fsyncSync(fd) },
          appendMany: (batch) => { fs.appendFileSync(fd, batch.map((m) => JSON.stringify(m)).join('\n') + '\n'); fs.fsyncSync(fd) },
          close: () => fs.closeSync(fd),
        }
      }
      return {
        engine, file, sessionId: null,
        append: (m) => fs.appendFileSync(file, JSON.stringify(m) + '\n'),
        appendMany: (batch) => fs.appendFileSync(file, batch.map((m) => JSON.stringify(m)).join('\n') + '\n'),
        close: () => {},
      }
    }
    default:
      throw new Error(`unknown engine ${engine}`)
  }
}

// Full restore of a session to an array of JS message objects, as a resuming app would do it.
// Everything from opening the file to having the array is what the benchmark times.
function restore(engine, file, sessionId) {
  switch (engine) {
    case 'threadline': {
      const store = Store.open(file)
      const session = store.openSession(sessionId)
      const messages = session.messages
      return { messages, close: () => store.close() }
    }
    case 'sqlite': {
      const db = new Database(file)
      const rows = db.prepare('SELECT body FROM messages WHERE session_id = ? ORDER BY id').pluck().all(sessionId)
      for (let i = 0; i < rows.length; i++) rows[i] = JSON.parse(rows[i])
      return { messages: rows, close: () => db.close() }
    }
    case 'jsonl': {
      const lines = fs.readFileSync(file, 'utf8').split('\n')
      const messages = []
      for (const line of lines) if (line.length > 0) messages.push(JSON.parse(line))
      return { messages, close: () => {} }
    }
    default:
      throw new Error(`unknown engine ${engine}`)
  }
}

// Bytes on disk of an engine's file (with SQLite's -wal and -shm).
function diskBytes(file) {
  let total = 0
  for (const f of [file, file + '-wal', file + '-shm']) {
    try { total += fs.statSync(f).size } catch {}
  }
  return total
}

module.exports = { ENGINES, THREADLINE_DIR, open, restore, fileOf, diskBytes }
