'use strict'
// A fleet on one PostgreSQL store: 8 writer processes on 16 sessions for a bounded time, each
// appending to a session it picks, then closing it; one writer is SIGKILLed at random every
// ~700 ms (and replaced), and the server is restarted (`pg_ctl restart -m fast`) twice during the
// appends. Then a verifier, in this process: every acknowledged record is stored, none twice,
// every session's seqs contiguous and its parent chain unbroken; writers met SESSION_LOCKED on
// sessions held by another live process; a writer killed holding a session (one more, alone on
// a session of its own, killed last) leaves it interrupted.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const { lib } = require('./helpers/util')
const { mulberry32 } = require('./helpers/seeded')

const { Store } = lib
const WRITER = path.join(__dirname, 'helpers', 'fleet-writer.js')
const HOLDER = path.join(__dirname, 'helpers', 'crash-writer.js')
const POSTGRES = path.join(__dirname, '..', 'scripts', 'postgres.js')
const WRITERS = 8
const SESSIONS = 16
const SECONDS = Number(process.env.THREADLINE_FLEET_SECONDS) || 20

function server(t) {
  const url = process.env.THREADLINE_TEST_POSTGRES
  const state = process.env.THREADLINE_TEST_POSTGRES_STATE
  if (!url || !state) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but there is no server of ours (run through `npm test`)')
    t.diagnostic('no PostgreSQL server of ours (THREADLINE_TEST_POSTGRES_STATE): run through `npm test`')
    return null
  }
  return `${url}${url.includes('?') ? '&' : '?'}schema=fleet_${process.pid}`
}

function startWriter(url, tag) {
  const child = spawn(process.execPath, [WRITER, url, tag, String(SESSIONS)], { stdio: ['ignore', 'pipe', 'pipe'] })
  const w = { tag, child, out: '', err: '', exit: null }
  child.stdout.on('data', (d) => { w.out += d })
  child.stderr.on('data', (d) => { w.err += d })
  w.exited = new Promise((resolve) => child.on('exit', (code, signal) => { w.exit = { code, signal }; resolve() }))
  return w
}

async function restartServer() {
  const child = spawn(process.execPath, [POSTGRES, 'restart'], { stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  child.stderr.on('data', (d) => { err += d })
  const [code] = await new Promise((resolve) => child.on('exit', (...a) => resolve(a)))
  assert.equal(code, 0, `pg_ctl restart: ${err}`)
}

test(`${WRITERS} writer processes on ${SESSIONS} sessions, SIGKILLs and server restarts: nothing acknowledged lost or duplicated`, { timeout: 240_000 }, async (t) => {
  const url = server(t)
  if (!url) return
  const seed = Number(process.env.THREADLINE_FLEET_SEED) || (Date.now() % 1e9)
  t.diagnostic(`seed ${seed}`)
  const random = mulberry32(seed)
  const init = Store.open(url)
  for (let i = 0; i <= SESSIONS; i++) init.createSession({ id: `s${i}` }) // s16: the holder's
  init.close()

  const writers = []
  let next = 0
  for (let i = 0; i < WRITERS; i++) writers.push(startWriter(url, `w${next++}`))
  const all = [...writers]
  const end = Date.now() + SECONDS * 1000
  const restartsAt = [end - SECONDS * 667, end - SECONDS * 333]
  let kills = 0
  let restarts = 0
  while (Date.now() < end) {
    await sleep(400 + random() * 600)
    for (const w of writers) assert.equal(w.exit, null, `writer ${w.tag} stopped by itself: ${w.err}`)
    const i = Math.floor(random() * WRITERS)
    writers[i].child.kill('SIGKILL')
    await writers[i].exited
    kills++
    writers[i] = startWriter(url, `w${next++}`)
    all.push(writers[i])
    if (restarts < restartsAt.length && Date.now() >= restartsAt[restarts]) {
      await restartServer()
      restarts++
    }
  }
  // The fleet's writers may all be between sessions at the final kill (hopping from one locked
  // session to the next): one more writer, alone on a session of its own, is killed holding it.
  const holder = spawn(process.execPath, [HOLDER, url, `s${SESSIONS}`, 'holder'], { stdio: ['ignore', 'pipe', 'inherit'] })
  let held = ''
  holder.stdout.on('data', (d) => { held += d })
  const holderExited = new Promise((resolve) => holder.on('exit', resolve))
  while (!/\n[SB] /.test(held)) {
    assert.equal(holder.exitCode, null, 'the holder runs')
    await sleep(5)
  }
  for (const w of writers) w.child.kill('SIGKILL')
  holder.kill('SIGKILL')
  await Promise.all([...writers.map((w) => w.exited), holderExited])
  kills += writers.length + 1

  // What the writers were told: only whole lines count (a line cut by the kill was not said).
  const acked = new Map() // uuid -> session
  let locked = 0
  let retried = 0
  for (const w of all) {
    assert.equal(w.exit.signal, 'SIGKILL', `writer ${w.tag} ended by itself: ${w.err}`)
    const lines = w.out.split('\n')
    lines.pop()
    for (const line of lines) {
      const [kind, session, uuid] = line.split(' ')
      if (kind === 'A') acked.set(uuid, session)
      if (kind === 'L') locked++
      if (kind === 'R') retried++
    }
  }

  const store = Store.open(url)
  let records = 0
  const stored = new Map()
  // the holder's acknowledged records (crash-writer.js: "S uuid" or "B batch uuid,uuid,...")
  const heldLines = held.split('\n')
  heldLines.pop()
  for (const line of heldLines) {
    const [kind, a, b] = line.split(' ')
    if (kind === 'S') acked.set(a, `s${SESSIONS}`)
    if (kind === 'B') for (const u of b.split(',')) acked.set(u, `s${SESSIONS}`)
  }
  for (let i = 0; i <= SESSIONS; i++) {
    const envs = store.openSession(`s${i}`).envelopes()
    records += envs.length
    envs.forEach((e, seq) => {
      assert.equal(e.seq, seq, `s${i}: seqs contiguous`)
      if (seq > 0) assert.equal(e.parentUuid, envs[seq - 1].uuid, `s${i}: chain unbroken at seq ${seq}`)
      assert.ok(!stored.has(e.uuid), `s${i}: ${e.uuid} stored once`)
      stored.set(e.uuid, `s${i}`)
    })
  }
  let lost = 0
  for (const [uuid, session] of acked) {
    if (stored.get(uuid) !== session) lost++
  }
  assert.equal(lost, 0, 'no acknowledged record is lost')
  assert.ok(acked.size > 100, `the writers got to append (${acked.size})`)
  assert.ok(locked > 0, 'writers met SESSION_LOCKED on sessions another live process held')
  assert.equal(restarts, 2, 'the server was restarted twice during the appends')
  assert.ok(retried > 0, 'the restarts reached the writers (STORE_IO / STORE_BUSY, then a retry)')
  // Sessions left held by killed writers are interrupted (no live process holds any now), the
  // holder's among them, and this process can take them over.
  const interrupted = store.interruptedSessions().map((i) => i.id)
  assert.ok(interrupted.includes(`s${SESSIONS}`), `the killed holder's session is interrupted (${interrupted})`)
  for (const id of interrupted) store.openSession(id).append('Taking over after the fleet.')
  assert.deepEqual(store.interruptedSessions(), [])
  store.close()
  t.diagnostic(`${all.length} writer processes, ${kills} SIGKILLs, ${restarts} server restarts, ${acked.size} acknowledged appends (${records} stored: the rest were in flight at a kill), ${locked} SESSION_LOCKED, ${retried} retries, lost: ${lost}`)
})
