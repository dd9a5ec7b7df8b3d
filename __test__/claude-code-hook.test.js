'use strict'
// The hook threadline/claude-agent-sdk builds on: `store[Symbol.for('threadline.claudeCode')]`
// on the synchronous and the promise Store, on SQLite and (with a test server) PostgreSQL. The
// SDK appends what JSON.parse of Claude Code's lines gives, and reads back what JSON.parse of
// the load gives: a load deep-equals what was appended.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const { lib, tmpDir, expectError, expectRejection } = require('./helpers/util')
const promise = require('../promise.js')

const HOOK = Symbol.for('threadline.claudeCode')
const CRASH_WRITER = path.join(__dirname, 'helpers', 'crash-writer.js')

let schemas = 0
// The stores a test runs on: a SQLite file, and a PostgreSQL schema when there is a server.
function locations(t, name) {
  const out = [['sqlite', path.join(tmpDir(t), `${name}.db`)]]
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (base) {
    const schema = `js_cchook_${name}_${process.pid}_${Date.now() % 1e8}_${schemas++}`
    out.push(['postgres', `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`])
  } else {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: SQLite only')
  }
  return out
}

const KEY = { projectKey: '-tmp-sdk-work', sessionId: '4d369ef0-f68c-42c0-9acd-98d9b39f33b5' }
// JSON text as Claude Code writes it (number text the JS value does not keep: 1E+2, 1.50)
const LINES = [
  '{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-27T18:40:06.132Z","sessionId":"4d369ef0-f68c-42c0-9acd-98d9b39f33b5"}',
  '{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"run echo hi"},"uuid":"a35ab7aa-4fa6-4e1a-8b17-e0f7beb1fb84","timestamp":"2026-11-27T18:40:06.238Z","cwd":"/tmp/sdk/work","sessionId":"4d369ef0-f68c-42c0-9acd-98d9b39f33b5","version":"2.1.332"}',
  '{"parentUuid":"a35ab7aa-4fa6-4e1a-8b17-e0f7beb1fb84","isSidechain":false,"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1E+2,"output_tokens":3}},"uuid":"b1","timestamp":"2026-11-27T18:40:07.000Z","cwd":"/tmp/sdk/work","sessionId":"4d369ef0-f68c-42c0-9acd-98d9b39f33b5"}',
  '{"type":"cost-state","costUSD":1.50}',
]
const ENTRIES = LINES.map((l) => JSON.parse(l))

test('the hook appends, loads, lists and deletes on the synchronous Store', (t) => {
  for (const [engine, where] of locations(t, 'sync')) {
    const store = lib.Store.open(where)
    try {
      const hook = store[HOOK]
      assert.equal(typeof hook, 'function', engine)
      // internal: not a listed method
      assert.ok(!Object.keys(store).includes(String(HOOK)))
      assert.ok(!Object.getOwnPropertyDescriptor(lib.Store.prototype, HOOK).enumerable)
      const r = store[HOOK]('append', KEY, ENTRIES.slice(0, 2), { mtime: 5, summary: { a: 1 } })
      assert.deepEqual({ ...r, skipped: r.skipped }, { sessionId: KEY.sessionId, created: true, newRecords: 2, skipped: [] }, engine)
      store[HOOK]('append', KEY, ENTRIES.slice(2), { mtime: 9, summary: { a: 2 } })
      // a retry of a batch with uuids adds nothing
      assert.equal(store[HOOK]('append', KEY, ENTRIES.slice(1, 3)).newRecords, 0)
      assert.deepStrictEqual(store[HOOK]('load', KEY), ENTRIES, engine)
      assert.equal(store[HOOK]('load', { ...KEY, sessionId: 'nope' }), null)
      assert.deepStrictEqual(store[HOOK]('sessions', KEY.projectKey), [{ sessionId: KEY.sessionId, mtime: 9, summary: { a: 2 } }])
      assert.deepStrictEqual(store[HOOK]('sessions', '-elsewhere'), [])
      const sub = { ...KEY, subpath: 'subagents/agent-a1b2' }
      store[HOOK]('append', sub, [{ type: 'agent_metadata', agentType: 'Explore' }])
      assert.deepStrictEqual(store[HOOK]('subkeys', KEY.sessionId), ['subagents/agent-a1b2'])
      assert.deepStrictEqual(store[HOOK]('load', sub), [{ type: 'agent_metadata', agentType: 'Explore' }])
      const info = store.openSession(KEY.sessionId).info
      assert.equal(info.project, '/tmp/sdk/work')
      assert.equal(info.metadata.importedFrom.format, 'claude-code')
      // the session reads as any imported one
      assert.equal(store.openSession(KEY.sessionId).messages.length, 2)
      store[HOOK]('delete', KEY)
      assert.equal(store[HOOK]('load', KEY), null)
      assert.equal(store[HOOK]('load', sub), null)
      store[HOOK]('delete', KEY)
    } finally {
      store.close()
    }
  }
})

test('the hook on the promise Store runs the same steps on the thread pool, queued', async (t) => {
  for (const [engine, where] of locations(t, 'promise')) {
    const store = await promise.Store.open(where)
    try {
      // called back to back: queued in order, so the load sees both appends
      const a = store[HOOK]('append', KEY, ENTRIES.slice(0, 1))
      const b = store[HOOK]('append', KEY, ENTRIES.slice(1))
      const loaded = store[HOOK]('load', KEY)
      assert.ok(a instanceof Promise)
      await a
      assert.equal((await b).newRecords, 3)
      assert.deepStrictEqual(await loaded, ENTRIES, engine)
      assert.deepStrictEqual((await store[HOOK]('sessions', KEY.projectKey)).map((s) => s.sessionId), [KEY.sessionId])
      assert.deepStrictEqual(await store[HOOK]('subkeys', KEY.sessionId), [])
      await store[HOOK]('delete', KEY)
      assert.equal(await store[HOOK]('load', KEY), null)
      await expectRejection(store[HOOK]('load', { projectKey: 'p' }), 'INVALID_INPUT', 'key.sessionId')
    } finally {
      await store.close()
    }
  }
})

test('a refused entry is reported, kept, and the rest stored; bad calls are INVALID_INPUT', (t) => {
  const store = lib.Store.open(path.join(tmpDir(t), 'a.db'))
  try {
    const entries = [ENTRIES[1], 'not an object', { no: 'type' }, ENTRIES[2]]
    const r = store[HOOK]('append', KEY, entries)
    assert.deepEqual(r.skipped.map((s) => s.index), [1, 2])
    assert.match(r.skipped[0].reason, /entries\[1\]: expected an object, got a string/)
    assert.deepStrictEqual(store[HOOK]('load', KEY), entries)
    expectError(() => store[HOOK]('nope', KEY), 'INVALID_INPUT', "op: expected 'append'")
    expectError(() => store[HOOK]('append', KEY, {}), 'INVALID_INPUT', 'entries: expected an array')
    expectError(() => store[HOOK]('append', null, []), 'INVALID_INPUT', 'key: expected an object')
    expectError(() => store[HOOK]('append', { ...KEY, subpath: '' }, []), 'INVALID_INPUT', 'key.subpath: must not be empty')
    expectError(() => store[HOOK]('sessions', 3), 'INVALID_INPUT', 'projectKey')
    // nothing stored by a refused call
    assert.equal(store[HOOK]('load', { ...KEY, sessionId: 'other' }), null)
  } finally {
    store.close()
  }
})

test('an append to a session another live process writes is SESSION_LOCKED, its sidecar not stored either', { timeout: 60_000 }, async (t) => {
  for (const [engine, where] of locations(t, 'locked')) {
    const store = lib.Store.open(where)
    try {
      store[HOOK]('append', KEY, ENTRIES.slice(0, 2), { mtime: 1 })
      // The mirror keeps the session claimed between appends: let go, so the child can take it.
      store[HOOK]('release', KEY)
      const child = spawn(process.execPath, [CRASH_WRITER, where, KEY.sessionId, 'holder'], { stdio: ['ignore', 'pipe', 'pipe'] })
      let out = ''
      child.stdout.on('data', (d) => { out += d })
      const exited = new Promise((resolve) => child.on('exit', resolve))
      try {
        while (!out.includes('\nS ') && !out.includes('\nB ')) await sleep(5)
        expectError(() => store[HOOK]('append', KEY, ENTRIES.slice(2), { mtime: 2 }), 'SESSION_LOCKED')
        // one transaction: neither the entries nor the sidecar
        assert.equal(store[HOOK]('sessions', KEY.projectKey)[0].mtime, 1, engine)
        assert.ok(!store[HOOK]('load', KEY).some((e) => e.uuid === 'b1'), engine)
      } finally {
        child.kill('SIGKILL')
        await exited
      }
      // the writer gone, the SDK's retry lands
      store[HOOK]('append', KEY, ENTRIES.slice(2), { mtime: 2 })
      assert.equal(store[HOOK]('sessions', KEY.projectKey)[0].mtime, 2, engine)
    } finally {
      store.close()
    }
  }
})
