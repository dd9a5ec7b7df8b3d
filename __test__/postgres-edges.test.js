'use strict'
// PostgreSQL at its edges (issue 23): a password never shows (store.path, the messages of
// refused URLs, the authentication error), whatever the URL's form or case.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')

const { lib } = require('./helpers/util')
const promise = require('../promise.js')

const { Store } = lib
const BUSY = 1500
const SECRET = 's3cret-Pw-91'

function noPassword(text, what) {
  assert.ok(!String(text).includes(SECRET), `${what} shows the password: ${text}`)
}

// The test server's state (scripts/postgres.js), or null (said) when there is none of ours.
function ourServer(t) {
  const url = process.env.THREADLINE_TEST_POSTGRES
  const state = process.env.THREADLINE_TEST_POSTGRES_STATE
  if (!url || !state) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but there is no server of ours (run through `npm test`)')
    t.diagnostic('no PostgreSQL server of ours (THREADLINE_TEST_POSTGRES_STATE): run through `npm test`')
    return null
  }
  return { url, ...JSON.parse(fs.readFileSync(state, 'utf8')) }
}

let schemas = 0
function withSchema(url, name) {
  return `${url}${url.includes('?') ? '&' : '?'}schema=edges_${name}_${process.pid}_${schemas++}`
}

test('URLs the parser refuses say what is wrong without the password', () => {
  const pw = SECRET
  for (const [url, code, says] of [
    // a password holding '@', ':' and '/' unencoded
    [`postgres://me:p@ss:w/rd-${pw}@127.0.0.1:5432/db`, 'INVALID_INPUT', /%40/],
    [`postgres://me:${pw}/x@127.0.0.1:5432/db`, 'INVALID_INPUT', /%2F/],
    [`postgres://me:${pw}@127.0.0.1:99999/db`, 'INVALID_INPUT', /port.*99999.*1 to 65535/],
    [`postgres://me:${pw}@[::1/db`, 'INVALID_INPUT', /host.*\]/],
    [`postgres://me:${pw}@h1:5432,h2:5432/db?target_session_attrs=read-write`, 'INVALID_INPUT', /several hosts.*not supported yet/],
    [`postgres://me@127.0.0.1/db?host=h1,h2&password=${pw}`, 'INVALID_INPUT', /several hosts.*not supported yet/],
    [`postgres://me@127.0.0.1/db?password=${pw}&sslmode=sometimes`, 'INVALID_INPUT', /sslmode/],
    [`postgres://me@127.0.0.1/db?password=${pw}&passfile=/x`, 'INVALID_INPUT', /passfile.*not supported/],
    [`postgres://me:${pw}%zz@127.0.0.1/db`, 'INVALID_INPUT', /password: a '%' must be followed by two hex digits/],
    // other cases of the scheme are URLs, not file paths (port 1: nobody listens)
    [`POSTGRES://me:${pw}@127.0.0.1:1/db`, 'STORE_IO', /POSTGRES:\/\/me:\*\*\*@127\.0\.0\.1:1\/db/],
    [`PostgreSQL://me:${pw}@127.0.0.1:1/db`, 'STORE_IO', /PostgreSQL:\/\/me:\*\*\*@/],
    [`postgresql://me@127.0.0.1:1/db?password=${pw}`, 'STORE_IO', /password=\*\*\*/],
  ]) {
    let e
    try {
      Store.open(url, { busyTimeoutMs: BUSY }).close()
    } catch (err) {
      e = err
    }
    assert.ok(e, `${url}: opened`)
    assert.equal(e.code, code, `${url}: ${e.message}`)
    assert.match(e.message, says, url)
    noPassword(e.message, url)
    noPassword(e.stack, url)
  }
})

test('store.path and the authentication error show no password, given in the URL or as ?password=', async (t) => {
  const server = ourServer(t)
  if (!server) return
  // scripts/postgres.js: threadline_scram logs in with password scram-secret, over TLS only
  const base = withSchema(server.url, 'pw').replace('postgres@', 'threadline_scram@')
  for (const url of [`${base}&password=scram-secret`, base.replace('threadline_scram@', 'threadline_scram:scram-secret@')]) {
    const store = Store.open(url)
    assert.ok(!store.path.includes('scram-secret'), store.path)
    assert.match(store.path, /\*\*\*/)
    store.close()
    const p = await promise.Store.open(url)
    assert.ok(!p.path.includes('scram-secret'), p.path)
    await p.close()
  }
  for (const url of [`${base}&password=${SECRET}`, base.replace('threadline_scram@', `threadline_scram:${SECRET}@`), `${base.replace('postgres://', 'POSTGRESQL://')}&password=${SECRET}`]) {
    let e
    try {
      Store.open(url).close()
    } catch (err) {
      e = err
    }
    assert.equal(e?.code, 'STORE_IO', `${url}: ${e?.message}`)
    assert.match(e.message, /password authentication failed/)
    noPassword(e.message, url)
  }
})
