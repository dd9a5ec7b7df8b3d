'use strict'
// PostgreSQL through the JS API, against the real server `npm test` starts (scripts/postgres.js):
// the same operations on the real fixtures give what SQLite gives, through both APIs; a session
// moves SQLite -> PostgreSQL -> SQLite with the same snapshot; writers SIGKILLed mid-append lose
// no acknowledged record; a second live writer in another process gets SESSION_LOCKED, and a
// killed one's session is interrupted.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const { lib, tmpDir, readJsonl, expectError, pgUrl } = require('./helpers/util')
const promise = require('../promise.js')

const { Store } = lib
const FIXTURES = ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']
const CRASH_WRITER = path.join(__dirname, 'helpers', 'crash-writer.js')


function stable(info) {
  const { id, createdAt, updatedAt, ...rest } = info
  return rest
}

// What a user reads back of a session, for comparing engines.
function readout(s) {
  const untimed = (calls) => calls.map(({ requestedAt, startedAt, endedAt, ...c }) => c)
  return {
    messages: s.messages,
    allMessages: s.allMessages,
    turns: s.turns,
    tokenTracker: s.tokenTracker,
    contextFill: s.contextFill,
    info: stable(s.info),
    toolCalls: untimed(s.toolCalls()),
    pendingRepairs: s.pendingRepairs(),
    branches: s.branches(),
    contexts: ['anthropic', 'openai-chat', 'openai-responses'].map((target) => s.buildContext({ target, maxTokens: 20_000 })),
    verify: s.verify(),
  }
}

// Every hit of a search, every page read; ranking is each engine's own (bm25, ts_rank), so the
// hits are compared as a set.
function allHits(store, query, options = {}) {
  const out = []
  let cursor
  do {
    const page = store.search(query, { ...options, cursor })
    for (const h of page.hits) out.push(`${h.sessionId} ${h.seq} ${h.field} ${h.role} ${h.snippet}`)
    cursor = page.nextCursor ?? undefined
  } while (cursor)
  return out.sort()
}

test('the real sessions read back from PostgreSQL as from SQLite, through both APIs', async (t) => {
  const url = pgUrl(t, 'parity')
  if (!url) return
  const lite = Store.open(path.join(tmpDir(t), 'lite.db'))
  const pg = Store.open(url)
  assert.ok(!pg.path.includes('password'), 'the path shows no password')
  for (const name of FIXTURES) {
    const lines = readJsonl(name)
    const a = lite.createSession({ id: name, title: name, project: 'p' })
    const b = pg.createSession({ id: name, title: name, project: 'p' })
    assert.deepEqual(b.restoreMessages(lines), a.restoreMessages(lines), name)
    assert.deepEqual(readout(b), readout(a), `${name}: read in the same handle`)
  }
  pg.close()
  // A new connection reads what was acknowledged.
  const again = Store.open(url)
  for (const name of FIXTURES) {
    assert.deepEqual(readout(again.openSession(name)), readout(lite.openSession(name)), `${name}: after reopening`)
  }
  assert.deepEqual(again.listSessions().map((i) => i.id), lite.listSessions().map((i) => i.id))
  for (const [query, options] of [['phoenix server', {}], ['compil*', { fields: ['tool_output'] }], ['"mix phx.server" -credo', { roles: ['assistant'] }]]) {
    const hits = allHits(lite, query, options)
    assert.ok(hits.length > 0, `${query}: found on SQLite`)
    assert.deepEqual(allHits(again, query, options), hits, `${query}: the same records found`)
  }
  // The recall tools read and search on PostgreSQL too.
  const tools = again.recallTools()
  const read = await tools.handle({ name: 'session_read', input: { session_id: 'short.jsonl' } })
  assert.equal(read.is_error, undefined, JSON.stringify(read).slice(0, 300))
  assert.match(JSON.stringify(read.content), /phx\.server/)
  const found = await tools.handle({ name: 'session_search', input: { query: 'phoenix' } })
  assert.equal(found.is_error, undefined, JSON.stringify(found).slice(0, 300))
  assert.match(found.content, /session tool_heavy\.jsonl/)
  assert.deepEqual(again.verify().damaged, [])
  again.close()
  // The promise API on PostgreSQL.
  const p = await promise.Store.open(url)
  const s = await p.openSession('tool_heavy.jsonl')
  assert.deepEqual(await s.messages(), lite.openSession('tool_heavy.jsonl').messages)
  const env = await s.append('One more question.')
  assert.equal(env.seq, lite.openSession('tool_heavy.jsonl').envelopes().length)
  await p.close()
  lite.close()
})

test('a session moves SQLite -> PostgreSQL -> SQLite with the same snapshot', (t) => {
  const url = pgUrl(t, 'moves')
  if (!url) return
  const dir = tmpDir(t)
  const first = Store.open(path.join(dir, 'first.db'))
  const s = first.createSession({ id: 'moving', title: 'moves' })
  s.restoreMessages(readJsonl('compacted-session.jsonl'))
  const snapshot = s.snapshot()
  const pg = Store.open(url)
  const onPg = pg.importSnapshot(snapshot)
  assert.equal(onPg.snapshot(), snapshot)
  const last = Store.open(path.join(dir, 'last.db'))
  const back = last.importSnapshot(onPg.snapshot())
  assert.equal(back.snapshot(), snapshot)
  for (const st of [first, pg, last]) st.close()
})

test('an unreachable server is STORE_IO within busyTimeoutMs, and no file is made', (t) => {
  const dir = tmpDir(t)
  const cwd = process.cwd()
  process.chdir(dir)
  t.after(() => process.chdir(cwd))
  const started = Date.now()
  // port 1: nothing listens there
  expectError(() => Store.open('postgres://me@127.0.0.1:1/db', { busyTimeoutMs: 1000 }), 'STORE_IO')
  assert.ok(Date.now() - started < 5000, 'refused promptly')
  assert.deepEqual(require('node:fs').readdirSync(dir), [])
})

test('over TLS checked against the server\'s CA (sslmode=verify-full) a session is written and read back in a new process, through both APIs; a certificate the CA did not sign is STORE_IO saying why', async (t) => {
  const url = pgUrl(t, 'tls')
  if (!url) return
  const ca = process.env.THREADLINE_TEST_POSTGRES_CA
  assert.ok(ca, 'npm test sets THREADLINE_TEST_POSTGRES_CA beside the server it starts')
  const verified = `${url}&sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`
  const lines = readJsonl('short.jsonl')
  const store = Store.open(verified)
  const s = store.createSession({ project: 'tls' })
  s.restoreMessages(lines)
  const want = s.messages
  store.close()
  const child = require('node:child_process').spawnSync(process.execPath, ['-e', `
    const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const s = Store.open(process.argv[1]).openSession(process.argv[2])
    process.stdout.write(JSON.stringify(s.messages))`, verified, s.id], { encoding: 'utf8' })
  assert.equal(child.status, 0, child.stderr)
  assert.deepEqual(JSON.parse(child.stdout), want)
  assert.ok(want.length > 0)
  const p = await promise.Store.open(verified)
  const ps = await p.openSession(s.id)
  assert.deepEqual(await ps.messages(), want)
  await p.close()
  // The operating system's roots did not sign the test server's certificate.
  expectError(() => Store.open(`${url}&sslrootcert=system`), 'STORE_IO', 'certificate', 'UnknownIssuer')
})

// Runs crash-writer.js on the store at `url` until it has acknowledged `minAcks` lines, then
// SIGKILLs it; resolves with the lines it acknowledged.
async function writeUntilKilled(url, sessionId, tag, minAcks, extraMs) {
  const child = spawn(process.execPath, [CRASH_WRITER, url, sessionId, tag], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { err += d })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  const end = Date.now() + 20_000
  while (out.split('\n').length - 2 < minAcks) {
    if (Date.now() > end || child.exitCode !== null) throw new Error(`writer ${tag} stalled: ${err}`)
    await sleep(2)
  }
  await sleep(extraMs)
  child.kill('SIGKILL')
  await exited
  // Only complete lines were acknowledged (a line cut by the kill was not).
  const lines = out.split('\n')
  lines.pop()
  return lines.filter((l) => l !== 'ready')
}

test('writers SIGKILLed mid-append on PostgreSQL lose no acknowledged record and half-write no batch', { timeout: 180_000 }, async (t) => {
  const url = pgUrl(t, 'kills')
  if (!url) return
  const init = Store.open(url)
  init.createSession({ id: 'crash' })
  init.close()
  const acked = []
  const KILLS = 12
  for (let k = 0; k < KILLS; k++) {
    acked.push(...await writeUntilKilled(url, 'crash', String(k), 5 + (k % 4) * 10, (k * 7) % 23))
    // Checked by this process, a new connection, after each kill.
    const store = Store.open(url)
    const envs = store.openSession('crash').envelopes()
    const byUuid = new Map(envs.map((e) => [e.uuid, e]))
    envs.forEach((e, i) => assert.equal(e.seq, i, `kill ${k}: seqs contiguous`))
    for (let i = 1; i < envs.length; i++) assert.equal(envs[i].parentUuid, envs[i - 1].uuid, `kill ${k}: chain unbroken`)
    for (const line of acked) {
      const [kind, a, b] = line.split(' ')
      const uuids = kind === 'S' ? [a] : b.split(',')
      for (const u of uuids) assert.ok(byUuid.has(u), `kill ${k}: acknowledged ${u} is there`)
    }
    const batches = new Map()
    for (const e of envs) {
      const batch = e.metadata?.batch
      if (batch) batches.set(batch, (batches.get(batch) ?? 0) + 1)
    }
    for (const e of envs) {
      if (e.metadata?.batch) assert.equal(batches.get(e.metadata.batch), e.metadata.size, `kill ${k}: batch ${e.metadata.batch} whole`)
    }
    assert.deepEqual(store.interruptedSessions().map((i) => i.id), ['crash'], `kill ${k}: the killed writer's session is interrupted`)
    store.close()
  }
  t.diagnostic(`${KILLS} kills, ${acked.length} acknowledged appends, 0 lost`)
})

test('a second live writer in another process gets SESSION_LOCKED on PostgreSQL; after the kill it takes over', { timeout: 60_000 }, async (t) => {
  const url = pgUrl(t, 'locked')
  if (!url) return
  const init = Store.open(url)
  init.createSession({ id: 'held' })
  init.close()
  const child = spawn(process.execPath, [CRASH_WRITER, url, 'held', 'holder'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  while (!out.includes('\nS ') && !out.includes('\nB ')) await sleep(5)
  const store = Store.open(url)
  const session = store.openSession('held')
  expectError(() => session.append('Is anyone there?'), 'SESSION_LOCKED', 'held')
  assert.deepEqual(store.interruptedSessions(), [], 'a live writer is not interrupted')
  assert.ok(session.envelopes().length > 0, 'readers are not blocked')
  child.kill('SIGKILL')
  await exited
  assert.deepEqual(store.interruptedSessions().map((i) => i.id), ['held'])
  // The take-over's record goes right after the last one, with no gap and nothing twice. (A
  // COMMIT the killed writer had sent may still land on the server after the kill: it was never
  // acknowledged, so counting the records before the append would race with it.)
  const env = session.append('Taking over.')
  const seqs = session.envelopes().map((e) => e.seq)
  assert.deepEqual(seqs, seqs.map((_, i) => i))
  assert.equal(env.seq, seqs.at(-1))
  assert.equal(session.envelopes().at(-1).uuid, env.uuid)
  assert.deepEqual(store.interruptedSessions(), [])
  store.close()
})
