'use strict'
// libpq's multi-host URLs (issue 30): the hosts are tried in order, target_session_attrs=read-write
// passes over a server whose sessions are read-only, and a connection lost mid-run is made anew
// to whichever host can write, within busyTimeoutMs. Against the suite's server and a second one
// started here whose database defaults to read-only transactions, as a standby's sessions are
// (scripts/postgres.js start({ readOnly: true })).

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')

const { lib } = require('./helpers/util')
const promise = require('../promise.js')
const postgres = require('../scripts/postgres.js')

const { Store } = lib

function live(t) {
  const url = process.env.THREADLINE_TEST_POSTGRES
  if (!url) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `npm test` for PostgreSQL')
    return null
  }
  // postgres://user@host:port/db
  const m = /^postgres:\/\/([^@]+)@([^/]+)(\/[^?]*)/.exec(url)
  return { user: m[1], hostport: m[2], db: m[3] }
}

const text = (m) => (typeof m.content === 'string' ? m.content : m.content.map((b) => b.text).join(''))

function sql(url, statement) {
  const r = spawnSync('psql', [url, '-v', 'ON_ERROR_STOP=1', '-qAtc', statement], { encoding: 'utf8' })
  assert.equal(r.status, 0, `psql: ${r.stderr}`)
  return r.stdout.trim()
}

async function readOnlyServer(t) {
  const s = await postgres.start({ readOnly: true })
  t.after(() => postgres.stop(s.file))
  const admin = s.url.replace('/threadline_test', '/postgres')
  return {
    hostport: `127.0.0.1:${s.port}`,
    writable: (yes) => sql(admin, `ALTER DATABASE threadline_test SET default_transaction_read_only = ${yes ? 'off' : 'on'}`),
    // what a failing primary does to its connections; waits until they are gone
    cutOff: () => {
      sql(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'threadline_test'")
      while (sql(admin, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'threadline_test'") !== '0') { /* wait */ }
    },
  }
}

test('a URL naming a dead port first and the live server second opens and works, on both APIs', async (t) => {
  const s = live(t)
  if (!s) return
  const url = `postgres://${s.user}@127.0.0.1:1,${s.hostport}${s.db}?schema=hosts_dead_${process.pid}&connect_timeout=2`
  const store = Store.open(url, { busyTimeoutMs: 5000 })
  const session = store.createSession({ id: 'a' })
  session.append('hello')
  session.append({ role: 'assistant', content: 'hi' })
  store.close()
  const p = await promise.Store.open(url)
  const again = await p.openSession('a')
  await again.append('and the promise API')
  await p.close()
  // on the live server, read through its own URL
  const alone = Store.open(`postgres://${s.user}@${s.hostport}${s.db}?schema=hosts_dead_${process.pid}`)
  assert.deepEqual(alone.openSession('a').messages.map(text), ['hello', 'hi', 'and the promise API'])
  alone.close()
})

test('target_session_attrs=read-write passes over a read-only server; a reconnection waits for a host that can write', async (t) => {
  const s = live(t)
  if (!s) return
  const ro = await readOnlyServer(t)
  const schema = `hosts_rw_${process.pid}`
  const url = `postgres://${s.user}@${ro.hostport},${s.hostport}${s.db}?schema=${schema}&target_session_attrs=read-write`
  const store = Store.open(url)
  store.createSession({ id: 'rw' }).append('on the writable one')
  store.close()
  const alone = Store.open(`postgres://${s.user}@${s.hostport}${s.db}?schema=${schema}`)
  assert.deepEqual(alone.openSession('rw').messages.map(text), ['on the writable one'])
  alone.close()
  // any: the read-only server is kept, and the store's schema cannot be made there
  assert.throws(() => Store.open(url.replace('read-write', 'any')), (e) => e.code === 'STORE_IO' && /read-only transaction/.test(e.message))
  // read-write with only the read-only server: refused, saying why
  assert.throws(() => Store.open(`postgres://${s.user}@${ro.hostport}${s.db}?schema=${schema}&target_session_attrs=read-write`),
    (e) => e.code === 'STORE_IO' && /its sessions are read-only, and the URL asks for target_session_attrs=read-write/.test(e.message))

  // The second server can write; it then drops the store's connection and can no longer write
  // (a failing primary), and can again a moment later (a promoted standby): the next append
  // waits for it, within busyTimeoutMs, and is stored once.
  ro.writable(true)
  const failover = `postgres://${s.user}@127.0.0.1:1,${ro.hostport}${s.db}?schema=moving&target_session_attrs=read-write`
  const moving = await promise.Store.open(failover, { busyTimeoutMs: 10_000 })
  const session = await moving.createSession({ id: 'm' })
  await session.append('before')
  ro.writable(false)
  ro.cutOff()
  const appended = session.append({ role: 'assistant', content: 'after' })
  await new Promise((resolve) => setTimeout(resolve, 700))
  ro.writable(true)
  await appended
  await session.append('and on')
  assert.deepEqual((await session.messages()).map(text), ['before', 'after', 'and on'])
  await moving.close()
})
