'use strict'
// Damage is detected, never returned. A store is built from a real Claude Code session
// (fixtures/claude-code/tool_heavy.jsonl, restoreMessages), closed, and damaged: bytes of record
// columns, blob literals and tool-call journal rows rewritten with better-sqlite3, raw bytes of
// the file's record, blob and journal pages flipped. Reopened, it is read through every path. Each read returns exactly what it gave
// before the damage, or throws an Error whose code is STORE_CORRUPT: never a SyntaxError, never
// other data, never fewer records without an error. verify() never throws and finds the damage.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { lib, tmpDir, readJsonl } = require('./helpers/util')

const { Store } = lib
const Database = require('better-sqlite3')

const ID = 'damaged'
// Small blobs, so that some strings of the fixture are stored as blobs and blob damage is tried.
const OPTIONS = { blobThresholdBytes: 1024 }
const TRIALS = Number(process.env.THREADLINE_DAMAGE_TRIALS || 300)

function build(file) {
  const store = Store.open(file, OPTIONS)
  const s = store.createSession({ id: ID, metadata: { project: 'spotter' } })
  s.restoreMessages(readJsonl('tool_heavy.jsonl'))
  s.appendEvent('note', { x: 1 })
  store.close()
}

const READS = {
  messages: (s) => s.messages,
  allMessages: (s) => s.allMessages,
  envelopes: (s) => s.envelopes(),
  turns: (s) => s.turns,
  buildContext: (s) => s.buildContext({ target: 'anthropic' }),
  snapshot: (s) => s.snapshot(),
}

// Every read path of the store at `file`: each as { value } (JSON text) or { error }.
function readAll(file) {
  const out = {}
  let store
  let session
  try {
    store = Store.open(file, OPTIONS)
    session = store.openSession(ID)
  } catch (error) {
    for (const name of Object.keys(READS)) out[name] = { error }
    if (store) store.close()
    return out
  }
  for (const [name, read] of Object.entries(READS)) {
    try {
      out[name] = { value: JSON.stringify(read(session)) }
    } catch (error) {
      out[name] = { error }
    }
  }
  store.close()
  return out
}

// Both verifies; they never throw on damage.
function verifyAll(file) {
  let store
  try {
    store = Store.open(file, OPTIONS)
  } catch (error) {
    assertCorrupt(error, 'Store.open before verify')
    return null
  }
  try {
    const report = store.verify()
    assert.equal(typeof report.ok, 'boolean')
    assert.ok(Array.isArray(report.damaged))
    let own = null
    try {
      own = store.openSession(ID).verify()
    } catch (error) {
      assertCorrupt(error, 'openSession before session.verify')
    }
    if (own && !own.ok) assert.equal(report.ok, false, 'session.verify found damage that store.verify did not')
    return report
  } finally {
    store.close()
  }
}

function assertCorrupt(error, what) {
  assert.ok(error instanceof Error, `${what}: threw a non-Error: ${error}`)
  assert.notEqual(error.name, 'SyntaxError', `${what}: a bare SyntaxError: ${error.message}`)
  assert.equal(error.code, 'STORE_CORRUPT', `${what}: ${error.code}: ${error.message}`)
}

// Checks one damaged file against the pristine reads; returns whether any read failed.
function check(file, pristine, what) {
  const got = readAll(file)
  let failed = false
  for (const name of Object.keys(READS)) {
    const r = got[name]
    if ('error' in r) {
      assertCorrupt(r.error, `${what}: ${name}`)
      failed = true
    } else {
      assert.ok(r.value === pristine[name].value, `${what}: ${name} returned other data than before the damage`)
    }
  }
  const report = verifyAll(file)
  if (failed && report) assert.equal(report.ok, false, `${what}: reads failed but verify() found nothing`)
  return { failed, report }
}

// xorshift32: the same trials on every run.
function rng(seed) {
  let x = seed >>> 0 || 1
  const next = () => {
    x ^= x << 13; x >>>= 0
    x ^= x >>> 17
    x ^= x << 5; x >>>= 0
    return x
  }
  return { next, below: (n) => next() % Math.max(1, n) }
}

function setup(t) {
  const dir = tmpDir(t, 'threadline-damage-')
  const clean = path.join(dir, 'clean.db')
  build(clean)
  const pristine = readAll(clean)
  for (const [name, r] of Object.entries(pristine)) assert.ok('value' in r, `${name} of the clean store: ${r.error}`)
  const report = verifyAll(clean)
  assert.equal(report.ok, true, JSON.stringify(report.damaged))
  assert.ok(report.records >= 39 && report.blobs > 0, JSON.stringify(report))
  return { dir, clean, pristine, trial: path.join(dir, 'trial.db') }
}

const COLUMNS = ['body', 'message', 'state', 'uuid', 'type', 'msg_index', 'turn_start', 'has_blobs', 'provider', 'crc', 'meta_crc']
const JOURNAL = ['kind', 'name', 'state', 'call_seq', 'result_seq', 'outcome', 'ended_ms', 'crc']

describe('randomized damage', () => {
  test(`${TRIALS} trials of rewritten column bytes: original data or STORE_CORRUPT on every path`, (t) => {
    const { clean, pristine, trial } = setup(t)
    const r = rng(0x7e1d)
    let detected = 0
    let changed = 0
    for (let i = 0; i < TRIALS; i++) {
      fs.copyFileSync(clean, trial)
      const db = new Database(trial)
      // Mostly records; every eighth trial a blob literal, every eighth a tool-call journal row.
      const table = i % 8 === 7 ? 'blobs' : i % 8 === 3 ? 'tool_calls' : 'records'
      const col = table === 'blobs' ? 'literal' : table === 'tool_calls' ? JOURNAL[r.below(JOURNAL.length)] : COLUMNS[r.below(COLUMNS.length)]
      // tool_calls has no rowid: its key is (session, id)
      const keyOf = table === 'tool_calls' ? "session || ' ' || id" : 'rowid'
      const keys = db.prepare(`SELECT ${keyOf} AS k FROM ${table}`).all().map((x) => x.k)
      const key = keys[r.below(keys.length)]
      const where = `${keyOf} = ?`
      const before = db.prepare(`SELECT ${col} AS v FROM ${table} WHERE ${where}`).get(key).v
      let after
      if (typeof before === 'string' || Buffer.isBuffer(before)) {
        const bytes = Buffer.from(before)
        for (let n = 1 + r.below(3); n > 0; n--) if (bytes.length) bytes[r.below(bytes.length)] = r.below(256)
        after = bytes
        // text stays text (possibly not UTF-8 any more), a blob stays a blob
        const cast = typeof before === 'string' ? 'CAST(? AS TEXT)' : '?'
        db.prepare(`UPDATE ${table} SET ${col} = ${cast} WHERE ${where}`).run(bytes, key)
        if (!bytes.equals(Buffer.from(before))) changed++
      } else if (typeof before === 'number' || typeof before === 'bigint') {
        after = r.below(2) ? Number(before) + 1 : Number(before) ^ 1
        db.prepare(`UPDATE ${table} SET ${col} = ? WHERE ${where}`).run(after, key)
        changed++
      } else {
        db.prepare(`UPDATE ${table} SET ${col} = 0 WHERE ${where}`).run(key)
        changed++
      }
      db.close()
      const { failed, report } = check(trial, pristine, `trial ${i}: ${table}.${col} of row ${key}`)
      if (failed) detected++
      // Every column is covered: any change is found by verify.
      assert.ok(report === null || !report.ok || Buffer.isBuffer(after) && after.equals(Buffer.from(before)),
        `trial ${i}: ${table}.${col} of row ${key} changed, verify found nothing`)
    }
    assert.ok(detected > TRIALS * 0.6, `only ${detected} of ${changed} changed trials were detected by a read`)
  })

  test(`${TRIALS} trials of flipped bits in the file's record, blob and journal pages`, (t) => {
    const { clean, pristine, trial } = setup(t)
    const db = new Database(clean, { readonly: true })
    const pageSize = db.pragma('page_size', { simple: true })
    // The pages of the record and blob tables and their indexes (dbstat: SQLite's page map).
    const pages = db.prepare(`SELECT pageno FROM dbstat WHERE name IN
      ('records', 'records_uuid', 'records_response', 'records_turn_start', 'blobs', 'sqlite_autoindex_blobs_1', 'tool_calls')`).all().map((x) => x.pageno)
    db.close()
    assert.ok(pages.length > 5)
    const bytes = fs.readFileSync(clean)
    const r = rng(0xf11b)
    let detected = 0
    for (let i = 0; i < TRIALS; i++) {
      const b = Buffer.from(bytes)
      for (let n = 1 + r.below(4); n > 0; n--) {
        const page = pages[r.below(pages.length)]
        b[(page - 1) * pageSize + r.below(pageSize)] ^= 1 << r.below(8)
      }
      fs.writeFileSync(trial, b)
      if (check(trial, pristine, `flip trial ${i}`).failed) detected++
    }
    assert.ok(detected > TRIALS * 0.3, `only ${detected} of ${TRIALS} trials were detected`)
  })
})

describe('the reported cases', () => {
  // Each damages the clean store with one statement; every path that reads the damaged record
  // throws STORE_CORRUPT naming the session and the seq; paths that never read it may give their
  // data, unchanged.
  const CASES = {
    'a `"` changed in a stored message': `UPDATE records SET message = CAST(replace(CAST(message AS TEXT), '"role"', 'Xrole"') AS BLOB)
      WHERE id = (SELECT min(id) FROM records WHERE instr(CAST(message AS TEXT), '"role"') > 0)`,
    'a message column holding {...},{...}': `UPDATE records SET message = CAST('{"role":"user","content":"a"},{"role":"user","content":"injected"}' AS BLOB)
      WHERE id = (SELECT min(id) FROM records WHERE message IS NOT NULL)`,
    'a record deleted': 'DELETE FROM records WHERE id = (SELECT min(id) + 5 FROM records)',
    'the last record deleted': 'DELETE FROM records WHERE id = (SELECT max(id) FROM records)',
    'a blob literal changed': `UPDATE blobs SET literal = CAST(replace(CAST(literal AS TEXT), 'e', 'E') AS BLOB)
      WHERE rowid = (SELECT min(rowid) FROM blobs)`,
  }
  for (const [what, sql] of Object.entries(CASES)) {
    test(`${what}: STORE_CORRUPT naming the session and seq on every path that reads it`, (t) => {
      const { clean, pristine, trial } = setup(t)
      fs.copyFileSync(clean, trial)
      const db = new Database(trial)
      assert.equal(db.prepare(sql).run().changes, 1)
      db.close()
      const got = readAll(trial)
      for (const name of ['messages', 'allMessages', 'envelopes', 'snapshot']) {
        assert.ok('error' in got[name], `${what}: ${name} returned data`)
        assertCorrupt(got[name].error, `${what}: ${name}`)
        assert.match(got[name].error.message, new RegExp(`seq \\d+ of session '${ID}'`), `${what}: ${name}`)
      }
      for (const name of ['turns', 'buildContext']) {
        if ('error' in got[name]) assertCorrupt(got[name].error, `${what}: ${name}`)
        else assert.equal(got[name].value, pristine[name].value, `${what}: ${name}`)
      }
      const store = Store.open(trial, OPTIONS)
      const report = store.verify()
      assert.equal(report.ok, false)
      assert.equal(report.damaged[0].sessionId, ID)
      assert.equal(typeof report.damaged[0].seq, 'number')
      assert.equal(typeof report.damaged[0].reason, 'string')
      store.close()
    })
  }

  test("the same damage is the same error on every path (a `\"` in a message: messages and buildContext agree)", (t) => {
    const { clean, trial } = setup(t)
    fs.copyFileSync(clean, trial)
    const db = new Database(trial)
    const { id } = db.prepare(`SELECT max(id) AS id FROM records WHERE instr(CAST(message AS TEXT), '"role":"assistant"') > 0`).get()
    db.prepare(`UPDATE records SET message = CAST(replace(CAST(message AS TEXT), '"role":"assistant"', '"role":"assistant\\"') AS BLOB) WHERE id = ?`).run(id)
    db.close()
    const got = readAll(trial)
    const messages = got.messages.error
    const context = got.buildContext.error
    assertCorrupt(messages, 'messages')
    assertCorrupt(context, 'buildContext')
    const where = (m) => m.match(/seq \d+ of session '[^']+'/)[0]
    assert.equal(where(messages.message), where(context.message))
  })

  test('verify lists every damaged record and the rest of the session stays readable around them', (t) => {
    const { clean, trial } = setup(t)
    fs.copyFileSync(clean, trial)
    const db = new Database(trial)
    const ids = db.prepare('SELECT id FROM records ORDER BY id').all().map((x) => x.id)
    const lo = ids[0]
    for (const i of [3, 12, 30]) {
      db.prepare(`UPDATE records SET body = CAST(replace(CAST(body AS TEXT), 'uuid', 'uuix') AS BLOB) WHERE id = ?`).run(ids[i])
    }
    db.close()
    const store = Store.open(trial, OPTIONS)
    const s = store.openSession(ID)
    const report = s.verify()
    assert.equal(report.ok, false)
    assert.equal(report.records, ids.length)
    assert.deepEqual(report.damaged.map((d) => d.seq), [3, 12, 30].map((i) => ids[i] - lo))
    assert.deepEqual(report.damaged.map((d) => d.sessionId), [ID, ID, ID])
    const all = store.verify({ quick: true })
    assert.deepEqual(all.damaged, report.damaged)
    assert.throws(() => s.envelopes(), (e) => e.code === 'STORE_CORRUPT' && e.message.includes(`seq 3 of session '${ID}'`))
    // Around the damage, ranges still read.
    assert.equal(s.envelopes({ fromSeq: 0, limit: 3 }).length, 3)
    assert.equal(s.envelopes({ fromSeq: 4, limit: 8 }).length, 8)
    assert.throws(() => store.verify({ quick: 'yes' }), (e) => e.code === 'INVALID_INPUT')
    assert.throws(() => store.verify({ fast: true }), (e) => e.code === 'INVALID_INPUT')
    store.close()
  })
})

describe('damaged schema rows are STORE_CORRUPT, not STORE_IO', () => {
  const CASES = {
    'metadata not JSON': `UPDATE sessions SET metadata = '{"project":'`,
    'metadata a blob': `UPDATE sessions SET metadata = x'00ff'`,
    'status unknown': `UPDATE sessions SET status = 'actve'`,
    'status a number': 'UPDATE sessions SET status = 7',
    'created_ms text': `UPDATE sessions SET created_ms = 'yesterday'`,
    'a record state an integer': 'UPDATE records SET state = 5 WHERE id = (SELECT max(id) FROM records)',
    'a record state not JSON': `UPDATE records SET state = '{"m":' WHERE id = (SELECT max(id) FROM records)`,
  }
  for (const [what, sql] of Object.entries(CASES)) {
    test(what, (t) => {
      const { clean, trial } = setup(t)
      fs.copyFileSync(clean, trial)
      const db = new Database(trial)
      db.exec(sql)
      db.close()
      const store = Store.open(trial, OPTIONS)
      const calls = {
        listSessions: () => store.listSessions(),
        info: () => store.openSession(ID).info,
        snapshot: () => store.openSession(ID).snapshot(),
      }
      for (const [name, call] of Object.entries(calls)) {
        assert.throws(call, (e) => {
          assertCorrupt(e, `${what}: ${name}`)
          return true
        }, `${what}: ${name}`)
      }
      assert.equal(store.verify().ok, false, what)
      store.close()
    })
  }
})
