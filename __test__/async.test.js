'use strict'
// The async API: Store.openAsync, store.openSessionAsync, session.envelopesAsync (fromSeq/limit,
// several pages), and coded errors from every async path.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { lib, tmpDir, expectRejection, jsonClone } = require('./helpers/util')

const { Store, Session } = lib

function fill(session, n) {
  const out = []
  for (let i = 0; i < n; i++) {
    out.push(i % 2 === 0
      ? session.append(`prompt ${i}`)
      : session.append({ role: 'assistant', content: [{ type: 'text', text: `answer ${i}` }] }))
  }
  session.appendEvent('marker', { n })
  return out
}

test('Store.openAsync opens (and creates) a store; openSessionAsync opens a session in it', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'sub', 'a.db')
  // A path in a directory that does not exist rejects, coded, and creates nothing.
  await assert.rejects(Store.openAsync(file), (e) => e.code === 'STORE_IO' && e.message.includes(path.join(dir, 'sub')))
  assert.deepEqual(fs.readdirSync(dir), [])
  fs.mkdirSync(path.join(dir, 'sub'))
  const pending = Store.openAsync(file)
  assert.ok(pending instanceof Promise)
  const store = await pending
  assert.ok(store instanceof Store)
  assert.equal(store.path, file)
  assert.ok(fs.existsSync(file))
  const s = store.createSession({ id: 'async' })
  fill(s, 6)
  const p = store.openSessionAsync('async')
  assert.ok(p instanceof Promise)
  const opened = await p
  assert.ok(opened instanceof Session)
  assert.equal(opened.id, 'async')
  assert.deepStrictEqual(opened.messages, s.messages)
  assert.deepStrictEqual(opened.envelopes(), s.envelopes())
  // the handle from openSessionAsync appends like any other
  const e = opened.append('from the async handle')
  assert.equal(e.seq, 7)
  assert.equal(s.envelopes().length, 8)
  store.close()

  const again = await Store.openAsync(file)
  assert.equal((await again.openSessionAsync('async')).messages.length, 7)
  again.close()
})

test('Store.openAsync with :memory:', async () => {
  const store = await Store.openAsync(':memory:')
  const s = store.createSession()
  s.append('x')
  assert.equal((await store.openSessionAsync(s.id)).messages.length, 1)
  store.close()
})

test('envelopesAsync equals envelopes, for every fromSeq/limit combination', async (t) => {
  const dir = tmpDir(t)
  const store = await Store.openAsync(path.join(dir, 'e.db'))
  const s = store.createSession()
  fill(s, 10) // 11 records
  const all = s.envelopes()
  assert.equal(all.length, 11)
  assert.deepStrictEqual(await s.envelopesAsync(), all)
  assert.deepStrictEqual(await s.envelopesAsync({}), all)
  for (const fromSeq of [undefined, 0, 1, 5, 10, 11, 50]) {
    for (const limit of [undefined, 0, 1, 3, 11, 100]) {
      const range = {}
      if (fromSeq !== undefined) range.fromSeq = fromSeq
      if (limit !== undefined) range.limit = limit
      const from = fromSeq ?? 0
      const expected = all.slice(from, limit === undefined ? undefined : from + limit)
      assert.deepStrictEqual(await s.envelopesAsync(range), expected, `envelopesAsync(${JSON.stringify(range)})`)
      assert.deepStrictEqual(s.envelopes(range), expected, `envelopes(${JSON.stringify(range)})`)
    }
  }
  store.close()
})

test('envelopesAsync reads a log larger than one page, with fromSeq and limit across pages', async (t) => {
  const dir = tmpDir(t)
  // a high threshold keeps the long strings inline, so the records themselves are large
  const store = await Store.openAsync(path.join(dir, 'big.db'), { blobThresholdBytes: 1 << 20 })
  const s = store.createSession()
  const texts = []
  for (let i = 0; i < 24; i++) {
    const text = `${i}:`.padEnd(400 * 1024, String.fromCharCode(97 + (i % 26)))
    texts.push(text)
    s.append({ role: 'user', content: [{ type: 'text', text }] })
  }
  const all = await s.envelopesAsync()
  assert.equal(all.length, 24)
  all.forEach((e, i) => {
    assert.equal(e.seq, i)
    assert.equal(e.message.content[0].text, texts[i])
  })
  assert.deepStrictEqual(all, s.envelopes())
  const mid = await s.envelopesAsync({ fromSeq: 5, limit: 15 })
  assert.deepStrictEqual(mid.map((e) => e.seq), Array.from({ length: 15 }, (_, i) => 5 + i))
  assert.deepStrictEqual(mid, all.slice(5, 20))
  assert.deepStrictEqual(s.envelopes({ fromSeq: 5, limit: 15 }), all.slice(5, 20))
  assert.deepStrictEqual((await s.envelopesAsync({ fromSeq: 23 })).map((e) => e.seq), [23])
  assert.deepStrictEqual(s.messages.map((m) => m.content[0].text), texts)
  store.close()
})

test('many envelopesAsync calls at once, interleaved with appends', async () => {
  const s = new Session()
  fill(s, 20)
  const snapshot = jsonClone(s.envelopes())
  const reads = Array.from({ length: 16 }, (_, i) => s.envelopesAsync({ fromSeq: i, limit: 5 }))
  const results = await Promise.all(reads)
  results.forEach((r, i) => assert.deepStrictEqual(r, snapshot.slice(i, i + 5)))
  const during = s.envelopesAsync()
  s.append('appended while a read was pending')
  const got = await during
  assert.ok(got.length === snapshot.length || got.length === snapshot.length + 1)
  assert.deepStrictEqual(got.slice(0, snapshot.length), snapshot)
})

test('errors from async paths are rejections with codes', async (t) => {
  const dir = tmpDir(t)

  const garbage = path.join(dir, 'garbage.db')
  fs.writeFileSync(garbage, Buffer.alloc(8192, 0x5a))
  const err1 = await expectRejection(Store.openAsync(garbage), 'STORE_CORRUPT', garbage)
  assert.ok(err1 instanceof Error)

  const newer = path.join(dir, 'newer.db')
  const st = await Store.openAsync(newer)
  st.close()
  const Database = require('better-sqlite3')
  const db = new Database(newer)
  db.pragma('user_version = 99')
  db.close()
  await expectRejection(Store.openAsync(newer), 'STORE_VERSION', newer)

  await expectRejection(() => Store.openAsync(path.join(dir, 'x.db'), { bogus: 1 }), 'INVALID_INPUT', 'options.bogus')
  await expectRejection(() => Store.openAsync(42), 'INVALID_INPUT', 'openAsync: path')
  assert.ok(!fs.existsSync(path.join(dir, 'x.db')), 'a rejected open creates no file')

  const store = await Store.openAsync(path.join(dir, 'ok.db'))
  const s = store.createSession({ id: 'here' })
  s.append('hello')
  await expectRejection(store.openSessionAsync('missing-session'), 'NOT_FOUND', 'openSession', 'missing-session')
  await expectRejection(() => store.openSessionAsync(''), 'INVALID_INPUT', 'openSessionAsync: id')
  await expectRejection(() => s.envelopesAsync({ fromSeq: -1 }), 'INVALID_INPUT', 'envelopesAsync: range.fromSeq')
  await expectRejection(() => s.envelopesAsync({ limit: 'all' }), 'INVALID_INPUT', 'envelopesAsync: range.limit')
  await expectRejection(() => s.envelopesAsync(7), 'INVALID_INPUT', 'envelopesAsync: range')

  const closedHandle = await store.openSessionAsync('here')
  closedHandle.close()
  await expectRejection(closedHandle.envelopesAsync(), 'CLOSED', 'envelopes')

  store.close()
  await expectRejection(s.envelopesAsync(), 'CLOSED', 'envelopes')
  await expectRejection(() => store.openSessionAsync('here'), 'CLOSED', 'openSession')
})

test('an async error names the operation it came from', async (t) => {
  const dir = tmpDir(t)
  const store = await Store.openAsync(path.join(dir, 'names.db'))
  await expectRejection(store.openSessionAsync('nope'), 'NOT_FOUND', /^openSession(Async)?: /)
  const s = store.createSession()
  store.close()
  await expectRejection(s.envelopesAsync(), 'CLOSED', /^envelopes(Async)?: /)
})
