'use strict'
// PostgreSQL at its edges (issue 23, findings 7 and 8): every wait on the server is bounded by
// busyTimeoutMs (a server that accepts and never answers, one frozen mid-session with SIGSTOP,
// the CLI against a silent server), and a password never shows (store.path, the messages of
// refused URLs, the authentication error), whatever the URL's form or case.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { spawn } = require('node:child_process')

const { lib } = require('./helpers/util')
const promise = require('../promise.js')

const { Store } = lib
const CLI = path.join(__dirname, '..', 'bin', 'threadline.js')
const BUSY = 1500
// What "about busyTimeoutMs" allows on a loaded 2-core machine.
const SLACK = 3000
const SECRET = 's3cret-Pw-91'

// A loopback server that takes connections and never says a word (`answer` may say a first
// word: 'S' accepts TLS, and then nothing more comes). Closed when the test ends.
async function silentServer(t, answer) {
  const sockets = new Set()
  const server = net.createServer((s) => {
    sockets.add(s)
    s.on('error', () => {})
    if (answer) s.once('data', () => s.write(answer))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const s of sockets) s.destroy()
    server.close()
  })
  return server.address().port
}

// Runs `fn`, returning [the error it threw or rejected with, the milliseconds it took].
async function timed(fn) {
  const t0 = Date.now()
  try {
    await fn()
  } catch (e) {
    return [e, Date.now() - t0]
  }
  assert.fail(`expected an error, got none after ${Date.now() - t0} ms`)
}

function noPassword(text, what) {
  assert.ok(!String(text).includes(SECRET), `${what} shows the password: ${text}`)
}

test('a server that accepts and never answers: every open gives up within busyTimeoutMs, STORE_BUSY, saying it was connecting', async (t) => {
  const silent = await silentServer(t)
  const tls = await silentServer(t, 'S') // agrees to TLS, then no handshake
  const cases = [
    [`postgres://me:${SECRET}@127.0.0.1:${silent}/db`, 'sslmode=prefer'],
    [`postgres://me:${SECRET}@127.0.0.1:${silent}/db?sslmode=disable`, 'the startup'],
    [`postgres://me:${SECRET}@127.0.0.1:${tls}/db?sslmode=require`, 'the TLS handshake'],
  ]
  for (const [url, what] of cases) {
    for (const [api, open] of [
      ['Store.open', () => Store.open(url, { busyTimeoutMs: BUSY })],
      ['Store.openAsync', () => Store.openAsync(url, { busyTimeoutMs: BUSY })],
      ['promise Store.open', () => promise.Store.open(url, { busyTimeoutMs: BUSY })],
    ]) {
      const [e, ms] = await timed(open)
      t.diagnostic(`${api}, ${what}: ${e.code} after ${ms} ms`)
      assert.equal(e.code, 'STORE_BUSY', `${api}, ${what}: ${e.message}`)
      assert.ok(ms < BUSY + SLACK, `${api}, ${what}: gave up after ${ms} ms`)
      assert.ok(ms >= BUSY - 100, `${api}, ${what}: gave up after ${ms} ms, before busyTimeoutMs`)
      assert.match(e.message, /connecting/, `${api}, ${what}`)
      assert.match(e.message, new RegExp(`${BUSY} ms`), `${api}, ${what}`)
      noPassword(e.message, `${api}, ${what}`)
    }
  }
})

test('connect_timeout in the URL bounds the whole connection (TCP, TLS, startup) as libpq does, instead of busyTimeoutMs', async (t) => {
  const silent = await silentServer(t)
  const [e, ms] = await timed(() => Store.open(`postgres://me@127.0.0.1:${silent}/db?connect_timeout=2`, { busyTimeoutMs: 60_000 }))
  assert.equal(e.code, 'STORE_BUSY', e.message)
  assert.ok(ms >= 1900 && ms < 2000 + SLACK, `gave up after ${ms} ms`)
  assert.match(e.message, /2000 ms/)
})

test('the CLI against a silent server exits non-zero within busyTimeoutMs with one line, no password', async (t) => {
  const port = await silentServer(t)
  const url = `postgres://me:${SECRET}@127.0.0.1:${port}/db`
  const t0 = Date.now()
  const child = spawn(process.execPath, [CLI, '--store', url, 'ls'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { err += d })
  const code = await new Promise((resolve) => child.on('exit', resolve))
  const ms = Date.now() - t0
  t.diagnostic(`the CLI exited ${code} after ${ms} ms`)
  // The CLI opens with the default busyTimeoutMs, 5000; node's start counts too.
  assert.ok(ms < 5000 + SLACK, `the CLI took ${ms} ms`)
  assert.equal(code, 1, `exit code; stderr: ${err}`)
  assert.equal(out, '')
  assert.match(err, /^threadline: STORE_BUSY: open postgres:\/\/me:\*\*\*@127\.0\.0\.1:\d+\/db: .*connecting.*\n$/)
  noPassword(err, 'the CLI')
})

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

// The postmaster's pid and its children's (the backends, and the server's own processes).
function serverPids(dataDir) {
  const postmaster = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
  const pids = [postmaster]
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let stat
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue // gone meanwhile
    }
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
    if (ppid === postmaster) pids.push(Number(entry))
  }
  return pids
}

function signal(pids, sig) {
  for (const pid of pids) {
    try {
      process.kill(pid, sig)
    } catch (e) {
      if (e.code !== 'ESRCH') throw e
    }
  }
}

test('a server frozen mid-session (SIGSTOP): append, a read and a new open fail within busyTimeoutMs; after SIGCONT the same store works again', { timeout: 60_000 }, async (t) => {
  const server = ourServer(t)
  if (!server) return
  const url = withSchema(server.url, 'frozen')
  const store = Store.open(url, { busyTimeoutMs: BUSY })
  const s = store.createSession({ id: 'frozen' })
  // The append the freeze fails: the server may still run it once thawed (it was sent), so it
  // is retried with its uuid after, and stored once either way.
  const DURING = { message: { role: 'user', content: 'during the freeze' }, uuid: '0b7a3c52-8d1e-4f6a-9c2b-5e4d3f2a1b0c' }
  s.append('before the freeze')
  const pids = serverPids(server.data)
  assert.ok(pids.length > 2, `the postmaster and its backends: ${pids}`)
  // Should a call hang after all (this process blocked, the test timed out), a process of its
  // own thaws the server, so the rest of the suite still has one.
  const watchdog = spawn(process.execPath, ['-e', `setTimeout(() => { for (const p of ${JSON.stringify(pids)}) try { process.kill(p, 'SIGCONT') } catch {} }, 30000)`], { detached: true, stdio: 'ignore' })
  watchdog.unref()
  signal(pids, 'SIGSTOP')
  let stopped = true
  const thaw = () => {
    if (stopped) signal(serverPids(server.data), 'SIGCONT')
    stopped = false
    watchdog.kill()
  }
  t.after(thaw)
  try {
    const [e, ms] = await timed(() => s.append(DURING))
    t.diagnostic(`append: ${e.code} after ${ms} ms: ${e.message}`)
    assert.ok(['STORE_BUSY', 'STORE_IO'].includes(e.code), `append: ${e.code} ${e.message}`)
    assert.ok(ms < BUSY + SLACK, `append gave up after ${ms} ms`)
    assert.match(e.message, /PostgreSQL/)
    // The connection that timed out is not waited on again: a read connects anew, and gives up.
    const [r, rms] = await timed(() => store.listSessions())
    t.diagnostic(`listSessions: ${r.code} after ${rms} ms`)
    assert.ok(['STORE_BUSY', 'STORE_IO'].includes(r.code), `listSessions: ${r.code} ${r.message}`)
    assert.ok(rms < BUSY + SLACK, `listSessions gave up after ${rms} ms`)
    const [o, oms] = await timed(() => promise.Store.open(url, { busyTimeoutMs: BUSY }))
    t.diagnostic(`promise Store.open: ${o.code} after ${oms} ms`)
    assert.equal(o.code, 'STORE_BUSY', o.message)
    assert.ok(oms < BUSY + SLACK, `open gave up after ${oms} ms`)
  } finally {
    thaw()
  }
  // The same store and session work again; the append that failed is stored once if retried.
  s.append(DURING)
  s.append('after the freeze')
  assert.deepEqual(store.listSessions().map((i) => i.id), ['frozen'])
  const again = Store.open(url)
  const text = (m) => (typeof m.content === 'string' ? m.content : m.content.map((b) => b.text).join(''))
  assert.deepEqual(again.openSession('frozen').messages.map(text), ['before the freeze', 'during the freeze', 'after the freeze'])
  again.close()
  store.close()
})

// A search indexes what was committed since the last one, in transactions of 500 records. The
// indexing process stopped inside one (SIGSTOP, a debugger) must not hold up the appends of the
// process that writes the session being indexed: an indexer's lock is its own, and the
// session's row (which every append updates) is written with the COMMIT, in one round trip.
test('a process stopped while its search indexes a session holds up none of that session\'s appends', { timeout: 120_000 }, async (t) => {
  const server = ourServer(t)
  if (!server) return
  const url = withSchema(server.url, 'indexer')
  const store = Store.open(url, { busyTimeoutMs: 2000 })
  t.after(() => store.close())
  const s = store.createSession({ id: 'held' })
  store.search('quokkas') // the index made (its own transaction, once a store), nothing to index
  for (let k = 0; k < 40; k++) s.appendMany(Array.from({ length: 500 }, (_, n) => ({ role: 'user', content: `note ${k * 500 + n} about quokkas` })))
  const { Client } = require('pg')
  const admin = new Client({ connectionString: server.url })
  await admin.connect()
  t.after(() => admin.end())
  // The indexer: searches until everything is indexed, then prints what it found.
  const script = `const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const store = Store.open(process.argv[1], { busyTimeoutMs: 30000 });
    process.stdout.write('searching\\n');
    let page; do { page = store.search('quokkas', { limit: 1 }) } while (page.unindexed > 0);
    process.stdout.write(JSON.stringify({ hits: page.hits.length }) + '\\n'); store.close()`
  const child = spawn(process.execPath, ['-e', script, `${url}&application_name=stopped-indexer`], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  let code = null
  const exited = new Promise((resolve) => child.on('exit', (c) => resolve((code = c))))
  t.after(() => child.kill('SIGKILL'))
  while (!out.includes('searching') && code === null) await new Promise((r) => setTimeout(r, 5))
  assert.equal(code, null, 'the indexer exited before it searched')
  // Stopped inside an indexing transaction: its backend idle in one (tried again until it is).
  const inTransaction = async () => (await admin.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'stopped-indexer' AND state = 'idle in transaction'")).rowCount > 0
  let caught = false
  for (let tries = 0; tries < 200 && !caught; tries++) {
    await new Promise((r) => setTimeout(r, 3 + (tries % 7)))
    child.kill('SIGSTOP')
    await new Promise((r) => setTimeout(r, 20))
    caught = await inTransaction()
    if (!caught) child.kill('SIGCONT')
  }
  assert.ok(caught, 'the indexer was never stopped inside a transaction')
  try {
    const t0 = Date.now()
    s.append('written while the indexer is stopped')
    const ms = Date.now() - t0
    t.diagnostic(`append during the stop: ${ms} ms`)
    assert.ok(ms < 1000, `the append waited ${ms} ms for the stopped indexer`)
    assert.ok(await inTransaction(), 'the indexer stayed stopped inside its transaction')
  } finally {
    child.kill('SIGCONT')
  }
  assert.equal(await exited, 0)
  assert.equal(JSON.parse(out.split('\n')[1]).hits, 1)
  assert.equal(s.messages.length, 20_001)
})

test('URLs the parser refuses say what is wrong without the password', () => {
  const pw = SECRET
  for (const [url, code, says] of [
    // a password holding '@', ':' and '/' unencoded
    [`postgres://me:p@ss:w/rd-${pw}@127.0.0.1:5432/db`, 'INVALID_INPUT', /%40/],
    [`postgres://me:${pw}/x@127.0.0.1:5432/db`, 'INVALID_INPUT', /%2F/],
    [`postgres://me:${pw}@127.0.0.1:99999/db`, 'INVALID_INPUT', /port.*99999.*1 to 65535/],
    [`postgres://me:${pw}@[::1/db`, 'INVALID_INPUT', /host.*\]/],
    [`postgres://me:${pw}@127.0.0.1:5432/db?target_session_attrs=standby`, 'INVALID_INPUT', /target_session_attrs: 'standby' is not one of any, read-write, primary, read-only/],
    [`postgres://me:${pw}@h1:5432,h2:5432,h3/db?port=1,2`, 'INVALID_INPUT', /port: 2 ports for 3 hosts/],
    // several hosts, none there: each named, the password in none
    [`postgres://me:${pw}@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write`, 'STORE_IO', /none of the 2 hosts took the connection \(target_session_attrs=read-write\): 127\.0\.0\.1 port 1: .*; 127\.0\.0\.1 port 2: /],
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
