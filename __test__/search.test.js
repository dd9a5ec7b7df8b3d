'use strict'
// store.search over real Claude Code sessions (fixtures/claude-code): phrases found in the right
// session and record, identifiers in tool inputs, CJK, opt-in fields, filters, paging, what is
// not indexed, an index kept in the append's transaction (found from a new process, a failed
// append never found), hostile queries, and an index missing, damaged or not built yet.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { lib, ROOT, tmpDir, readJsonl } = require('./helpers/util')

const { Store } = lib
const Database = require('better-sqlite3')

// Three real sessions, each with its project and title.
function build(file) {
  const store = Store.open(file)
  const sessions = {
    compacted: ['compacted-session.jsonl', 'spotter', 'transcript components'],
    tools: ['tool_heavy.jsonl', 'spotter', 'phoenix and xterm'],
    short: ['short.jsonl', 'other', null],
  }
  for (const [id, [fixture, project, title]] of Object.entries(sessions)) {
    const s = store.createSession({ id, project, ...(title ? { title } : {}) })
    s.restoreMessages(readJsonl(fixture))
  }
  return store
}

function uuids(page) {
  return page.hits.map((h) => h.uuid).sort()
}

describe('search over real sessions', () => {
  let store
  test('setup', (t) => {
    store = build(path.join(tmpDir(t), 'search.db'))
  })

  test('a phrase is found in the right session and records, with its context marked', () => {
    const page = store.search('"AshComputer.LiveView API"')
    // the two assistant messages of compacted-session.jsonl that say it
    assert.deepEqual(uuids(page), ['7df7295e-dc7a-46b4-ba5a-2285f544563a', 'cbd6e1b4-7d0f-4771-8223-49124cf20d84'])
    for (const h of page.hits) {
      assert.equal(h.sessionId, 'compacted')
      assert.equal(h.role, 'assistant')
      assert.equal(h.field, 'text')
      assert.match(h.snippet, /the \*\*AshComputer\*\*\.\*\*LiveView\*\* \*\*API\*\*/)
      assert.deepEqual(h.session, { title: 'transcript components', project: 'spotter' })
      assert.ok(h.score > 0)
      assert.equal(typeof h.seq, 'number')
      assert.match(h.timestamp, /^2026-/)
    }
    assert.equal(page.nextCursor, null)
    // every committed record was indexed before the search answered
    assert.equal(page.unindexed, 0)
    // the record is the one at that seq
    const h = page.hits[0]
    const env = store.openSession('compacted').envelopes({ fromSeq: h.seq, limit: 1 })[0]
    assert.equal(env.uuid, h.uuid)
  })

  test('an identifier inside a tool input, and code identifiers by their parts', () => {
    const page = store.search('run_in_background')
    assert.ok(page.hits.length >= 1)
    for (const h of page.hits) {
      assert.equal(h.sessionId, 'tools')
      assert.equal(h.field, 'tool_input')
      assert.match(h.snippet, /\*\*run\*\*_\*\*in\*\*_\*\*background\*\*: true/)
    }
    // camelCase: TranscriptRenderer is found by a part of it
    const part = store.search('renderer', { sessionId: 'compacted' })
    assert.ok(part.hits.length > 0)
    assert.ok(part.hits.every((h) => /transcriptrenderer|renderer/i.test(h.snippet)), JSON.stringify(part.hits[0]))
    // a path, quoted or not
    assert.ok(store.search('assets/js/app.js').hits.some((h) => h.sessionId === 'tools'))
  })

  test('a term only in a tool output is found only when tool_output is asked for', () => {
    assert.deepEqual(store.search('JSONSerializer').hits, [])
    const page = store.search('JSONSerializer', { fields: ['tool_output'] })
    assert.equal(page.hits.length, 1)
    assert.equal(page.hits[0].field, 'tool_output')
    assert.equal(page.hits[0].role, 'user')
    assert.match(page.hits[0].snippet, /Phoenix\.Socket\.V2\.\*\*JSONSerializer\*\*/)
  })

  test('CJK text: words of two and more characters, inside sentences without spaces', (t) => {
    const s = store.createSession({ id: 'cjk', project: 'zh' })
    t.after(() => store.deleteSession('cjk'))
    const { uuid } = s.append('我们决定认证流程使用PKCE，令牌一小时后过期。')
    s.append({ role: 'assistant', content: [{ type: 'text', text: '好的，日本語のテキストも検索できます。' }] })
    for (const q of ['认证流程', '认证', '"令牌一小时"', 'PKCE 认证']) {
      const page = store.search(q, { project: 'zh' })
      assert.deepEqual(page.hits.map((h) => h.uuid), [uuid], q)
    }
    assert.match(store.search('认证', { project: 'zh' }).hits[0].snippet, /决定\*\*认证\*\*流程/)
    assert.equal(store.search('日本語', { project: 'zh' }).hits.length, 1)
    assert.equal(store.search('流认', { project: 'zh' }).hits.length, 0)
  })

  // Issue 23, finding 12: fullwidth letters were not folded.
  test('fullwidth letters and digits are found as the ASCII ones, and the other way', (t) => {
    const s = store.createSession({ id: 'wide', project: 'wide' })
    t.after(() => store.deleteSession('wide'))
    s.append('the Ｔｈｒｅａｄｌｉｎｅ index of ２０２６')
    s.append('plain threadline text of 2027')
    const seqs = (q) => store.search(q, { project: 'wide' }).hits.map((h) => h.seq).sort()
    assert.deepEqual(seqs('threadline'), [0, 1])
    assert.deepEqual(seqs('ＴＨＲＥＡＤＬＩＮＥ'), [0, 1])
    assert.deepEqual(seqs('2026'), [0])
    assert.deepEqual(seqs('２０２７'), [1])
    assert.deepEqual(seqs('"ｉｎｄｅｘ of 2026"'), [0])
    assert.equal(store.search('threadline 2026', { project: 'wide' }).hits[0].snippet, 'the **Ｔｈｒｅａｄｌｉｎｅ** index of **２０２６**')
  })

  test('filters: project, session, excluded session, roles, dates', () => {
    const all = store.search('phoenix', { limit: 200 })
    assert.ok(all.hits.length > 2)
    const sessions = new Set(all.hits.map((h) => h.sessionId))
    assert.ok(sessions.has('tools'))
    assert.ok(store.search('phoenix', { project: 'other', limit: 200 }).hits.every((h) => h.sessionId === 'short'))
    assert.ok(store.search('phoenix', { sessionId: 'tools', limit: 200 }).hits.every((h) => h.sessionId === 'tools'))
    assert.ok(store.search('phoenix', { excludeSessionId: 'tools', limit: 200 }).hits.every((h) => h.sessionId !== 'tools'))
    const users = store.search('phoenix', { roles: ['user'], limit: 200 }).hits
    assert.ok(users.length > 0 && users.every((h) => h.role === 'user'))
    const ts = all.hits.map((h) => h.timestamp).sort()
    const mid = ts[Math.floor(ts.length / 2)]
    const since = store.search('phoenix', { since: mid, limit: 200 }).hits
    const until = store.search('phoenix', { until: mid, limit: 200 }).hits
    assert.ok(since.every((h) => h.timestamp >= mid) && until.every((h) => h.timestamp <= mid))
    assert.equal(since.length + until.length, all.hits.length + all.hits.filter((h) => h.timestamp === mid).length)
  })

  test('ranking: higher score first; cursor paging gives every hit once', () => {
    const all = store.search('session OR live*', { limit: 200 })
    const scores = all.hits.map((h) => h.score)
    assert.deepEqual(scores, [...scores].sort((a, b) => b - a))
    const seen = []
    let cursor
    do {
      const page = store.search('session OR live*', { limit: 7, ...(cursor ? { cursor } : {}) })
      assert.ok(page.hits.length <= 7)
      seen.push(...page.hits.map((h) => `${h.sessionId}/${h.seq}`))
      cursor = page.nextCursor
    } while (cursor)
    assert.deepEqual(seen, all.hits.map((h) => `${h.sessionId}/${h.seq}`))
    // a cursor belongs to its query and options
    const first = store.search('session OR live*', { limit: 7 })
    assert.throws(() => store.search('other words', { cursor: first.nextCursor }), (e) => e.code === 'INVALID_INPUT' && /cursor/.test(e.message))
    assert.throws(() => store.search('session', { cursor: 'garbage' }), (e) => e.code === 'INVALID_INPUT')
  })

  // Issue 23, finding 10: the key covered the query but not the offset (an offset of 2^63 gave
  // page 1, u64::MAX wrapped).
  test('a cursor is refused unless this store gave it for this search: altered, cut, huge, foreign', (t) => {
    const q = 'session OR live*'
    const c = store.search(q, { limit: 7 }).nextCursor
    const second = store.search(q, { limit: 7, cursor: c }).hits
    const refused = (bad, options = { limit: 7 }, on = store) => assert.throws(
      () => on.search(q, { ...options, cursor: bad }),
      (e) => e.code === 'INVALID_INPUT' && /^search: options\.cursor: /.test(e.message),
      bad,
    )
    for (let i = 0; i < c.length; i++) refused(c.slice(0, i) + (c[i] === '0' ? '1' : '0') + c.slice(i + 1))
    const rest = c.replace(/^\d+/, '')
    for (const bad of [c.slice(0, -1), c.slice(1), `${c}0`, `9223372036854775808${rest}`, `18446744073709551615${rest}`, `-1${rest}`]) refused(bad)
    refused(c, { limit: 8 })
    // another store holding the same sessions
    const file = path.join(tmpDir(t), 'other.db')
    const other = build(file)
    t.after(() => other.close())
    refused(c, { limit: 7 }, other)
    // the key is kept in the store: its cursor leads to the same page from another process
    const mine = other.search(q, { limit: 7 }).nextCursor
    const page = other.search(q, { limit: 7, cursor: mine }).hits.map((h) => h.uuid)
    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      const store = Store.open(process.argv[1])
      console.log(JSON.stringify(store.search(process.argv[2], { limit: 7, cursor: process.argv[3] }).hits.map((h) => h.uuid)))
      store.close()
    `
    const r = spawnSync(process.execPath, ['-e', code, file, q, mine], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.deepEqual(JSON.parse(r.stdout), page)
    assert.equal(page.length, 7)
    assert.deepEqual(store.search(q, { limit: 7, cursor: c }).hits, second)
  })

  test('recency breaks ties: the same words in two sessions, the newer first', (t) => {
    const a = store.createSession({ id: 'tie-old' })
    const b = store.createSession({ id: 'tie-new' })
    t.after(() => { store.deleteSession('tie-old'); store.deleteSession('tie-new') })
    a.append({ uuid: 'old', timestamp: '2026-01-01T00:00:00.000Z', message: { role: 'user', content: 'quokka marmot' } })
    b.append({ uuid: 'new', timestamp: '2026-03-01T00:00:00.000Z', message: { role: 'user', content: 'quokka marmot' } })
    assert.deepEqual(store.search('quokka marmot').hits.map((h) => h.uuid), ['new', 'old'])
  })

  test('not conversation, not indexed: events, compaction summaries, repairs, excluded records', (t) => {
    const s = store.createSession({ id: 'noise' })
    t.after(() => store.deleteSession('noise'))
    s.append('first prompt about the wombat')
    s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_w', name: 'Bash', input: { command: 'ls' } }] })
    s.appendEvent('note', { text: 'platypus in an event' })
    s.append({ message: { role: 'user', content: 'platypus hidden' }, includeInContext: false })
    s.recover()
    s.append('second prompt')
    s.compact({ summary: 'platypus summary of the wombat talk', keepTurns: 1 })
    assert.deepEqual(store.search('platypus').hits, [])
    // the repair placed a result for the cut-off call: not searchable as conversation
    assert.deepEqual(store.search('toolu_w', { fields: ['tool_output'] }).hits, [])
    assert.equal(store.search('wombat').hits.length, 1)
  })

  test('deleteSession removes its hits', (t) => {
    const s = store.createSession({ id: 'gone' })
    s.append('the narwhal plan')
    assert.equal(store.search('narwhal').hits.length, 1)
    store.deleteSession('gone')
    assert.deepEqual(store.search('narwhal').hits, [])
  })

  test('30 hostile queries: a page or INVALID_INPUT saying why, never an SQL error; nothing stored changes', () => {
    const before = JSON.stringify(store.openSession('tools').envelopes())
    const queries = [
      '"', '"unclosed phrase', 'OR', 'a OR', 'OR b', 'a OR OR b', '-', '-a', '- -', 'a OR -b',
      'NEAR(a b)', 'text:secret', '{text tool_output}: a', '^a', 'a*b', '*', '**', '"" ""',
      "'; DROP TABLE records; --", '" OR 1=1 --', 'a\u0000b', '\ud800', '😀', '\\', '%', '_',
      '(a', 'a)', 'x'.repeat(3000), Array.from({ length: 40 }, (_, i) => `w${i}`).join(' '),
    ]
    assert.equal(queries.length, 30)
    for (const q of queries) {
      try {
        const page = store.search(q)
        assert.ok(Array.isArray(page.hits), q)
      } catch (e) {
        assert.equal(e.code, 'INVALID_INPUT', `${JSON.stringify(q).slice(0, 40)}: ${e.code} ${e.message}`)
        assert.match(e.message, /^search: query: /, q)
        assert.doesNotMatch(e.message, /fts5|sqlite|syntax error|SQL/i, q)
      }
    }
    for (const [q, why] of [['"open', /not closed/], ['OR b', /OR needs a term/], ['-a', /only excluded/], ['***', /no words/]]) {
      assert.throws(() => store.search(q), (e) => e.code === 'INVALID_INPUT' && why.test(e.message), q)
    }
    for (const bad of [[1, {}], ['a', { fields: ['body'] }], ['a', { limit: 0 }], ['a', { roles: ['system'] }], ['a', { since: 'yesterday' }], ['a', { nope: 1 }]]) {
      assert.throws(() => store.search(...bad), (e) => e.code === 'INVALID_INPUT', JSON.stringify(bad))
    }
    assert.equal(JSON.stringify(store.openSession('tools').envelopes()), before)
    assert.equal(store.verify().ok, true)
  })

  test('teardown', () => store.close())
})

describe('the index and the append share a transaction', () => {
  test('a record appended in another process is found here; a failed append is not', (t) => {
    const file = path.join(tmpDir(t), 'tx.db')
    const store = Store.open(file)
    t.after(() => store.close())
    store.createSession({ id: 's' }).append('start')
    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      const store = Store.open(process.argv[1])
      const s = store.createSession({ id: 'other process' })
      s.append('the capybara decision')
      try { s.appendMany([{ role: 'user', content: 'the axolotl draft' }, { role: 'bogus' }]) } catch (e) { console.log(e.code) }
      store.close()
    `
    const r = spawnSync(process.execPath, ['-e', code, file], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout.trim(), 'INVALID_INPUT')
    assert.equal(store.search('capybara').hits.length, 1)
    assert.deepEqual(store.search('axolotl').hits, [])
  })
})

describe('a readonly store', () => {
  test('searches what its writers have indexed, and never writes', (t) => {
    const file = path.join(tmpDir(t), 'ro.db')
    const writer = Store.open(file)
    t.after(() => writer.close())
    const s = writer.createSession({ id: 'w' })
    s.append('the first gazelle')
    assert.equal(writer.search('gazelle').hits.length, 1) // indexed by this search
    s.append('the second gazelle')
    const reader = Store.open(file, { readonly: true })
    t.after(() => reader.close())
    // the second record is committed but not indexed until a writer searches
    assert.deepEqual(reader.search('gazelle').hits.map((h) => h.seq), [0])
    assert.equal(writer.search('gazelle').hits.length, 2)
    assert.equal(reader.search('gazelle').hits.length, 2)
  })
})

describe('an index missing, damaged or not built yet', () => {
  function storeWith(t, name) {
    const file = path.join(tmpDir(t), name)
    build(file).close()
    return file
  }

  test('a store from before the index (schema version 4) gets it built at the first search', (t) => {
    const file = storeWith(t, 'old.db')
    const expected = (() => {
      const s = Store.open(file)
      const out = uuids(s.search('"AshComputer.LiveView API"'))
      s.close()
      return out
    })()
    const db = new Database(file)
    db.exec('DROP TABLE search; ALTER TABLE sessions DROP COLUMN indexed; PRAGMA user_version = 4')
    db.close()
    const store = Store.open(file)
    t.after(() => store.close())
    store.openSession('tools').append('appended after the migration: the ibex')
    assert.deepEqual(uuids(store.search('"AshComputer.LiveView API"')), expected)
    assert.equal(store.search('ibex').hits.length, 1)
  })

  test('a damaged index is built again, and the search answers', (t) => {
    const file = storeWith(t, 'damaged.db')
    const db = new Database(file)
    db.unsafeMode(true) // shadow tables of a virtual table are read-only in defensive mode
    db.exec('UPDATE search_data SET block = randomblob(length(block)) WHERE id > 10')
    db.close()
    const store = Store.open(file)
    t.after(() => store.close())
    assert.deepEqual(uuids(store.search('"AshComputer.LiveView API"')), ['7df7295e-dc7a-46b4-ba5a-2285f544563a', 'cbd6e1b4-7d0f-4771-8223-49124cf20d84'])
  })

  test('a dropped index: appends go on, and the next search builds it', (t) => {
    const file = storeWith(t, 'dropped.db')
    const db = new Database(file)
    db.exec('DROP TABLE search')
    db.close()
    const store = Store.open(file)
    t.after(() => store.close())
    store.openSession('short').append('after the drop: the okapi')
    assert.equal(store.search('okapi').hits.length, 1)
    assert.equal(store.search('JSONSerializer', { fields: ['tool_output'] }).hits.length, 1)
  })
})
