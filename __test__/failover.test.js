'use strict'
// Failover (issue 30): a pg_auto_failover formation on loopback (scripts/failover.js: a monitor,
// a primary and a secondary with synchronous replication), a store opened by the formation's
// multi-host URL (`pg_autoctl show uri`: target_session_attrs=read-write). Writer processes
// append, each to a session of its own, retrying a failed append with the same uuid, while
//   1. the primary's node dies: SIGKILL of its keeper, its postmaster and backends (the keeper would
//      restart a postmaster killed alone), and the monitor promotes the secondary;
//   2. after the old primary rejoins as a secondary, `pg_autoctl perform failover` fails back.
// After each, a checker in this process compares every acknowledged record with what the new
// primary holds: 0 lost, 0 stored twice, every session's seqs contiguous and its chain unbroken.
// The figures (acknowledged, lost, duplicated, and seconds to recover: the longest pause between
// two acknowledged appends of a writer across the failure) are reported as diagnostics.
// Then leases across a failover: a writer stopped through a failover, whose session another
// process took over on the new primary meanwhile, gets SESSION_LOCKED and writes nothing more.
// Last, the fault test (__test__/torture.test.js) once against the formation, its failovers as
// the server faults.
// One formation for the file: starting it is most of the file's time.

const test = require('node:test')
const { after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const { lib } = require('./helpers/util')
const torture = require('./helpers/torture/controller')
const { summaryLine, violationLines, byRule } = require('./helpers/torture/report')

const { Store } = lib
const WRITER = path.join(__dirname, 'helpers', 'failover-writer.js')
const DRIVEN = path.join(__dirname, 'helpers', 'lease-writer.js')
const WRITERS = 4

function installed(t) {
  if (spawnSync('pg_autoctl', ['version']).status === 0) return true
  assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but pg_autoctl is not installed (.ci/run installs postgresql-NN-auto-failover)')
  t.diagnostic('pg_autoctl is not installed: apt-get install postgresql-15-auto-failover')
  return false
}

// The file's formation, started by the first test that needs it, stopped after the last.
let formation = null
async function theFormation() {
  formation ??= require('../scripts/failover.js').start()
  return formation
}
// Driven writers still running when a test failed are killed, so the file ends.
const driven = new Set()
after(async () => {
  for (const child of driven) child.kill('SIGKILL')
  if (formation) (await formation).stop()
})

// The formation's URL with a user (`pg_autoctl show uri` names none: the servers' superuser,
// trust on loopback) and `schema`.
function urlOf(f, schema) {
  return `${userUrl(f)}&schema=${schema}`
}

function userUrl(f) {
  const user = process.getuid?.() === 0 ? 'threadline-pg' : os.userInfo().username
  return f.uri().replace('postgres://', `postgres://${user}@`)
}

// A writer driven line by line (helpers/lease-writer.js): `ask(command)` gives its answer.
function startDriven(url, id) {
  const child = spawn(process.execPath, [DRIVEN, url, id], { stdio: ['pipe', 'pipe', 'pipe'] })
  driven.add(child)
  child.on('exit', () => driven.delete(child))
  const lines = []
  const waiting = []
  let buf = ''
  let err = ''
  child.stderr.on('data', (d) => { err += d })
  child.stdout.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      if (waiting.length) waiting.shift()(line)
      else lines.push(line)
    }
  })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const next = () => new Promise((resolve, reject) => {
    if (lines.length) return resolve(lines.shift())
    waiting.push(resolve)
    exited.then((e) => reject(new Error(`writer ${id} exited (${JSON.stringify(e)}): ${err}`)))
  })
  return {
    child,
    ready: next(),
    ask(command) {
      child.stdin.write(command + '\n')
      return next()
    },
    async exit() {
      child.stdin.write('exit\n')
      assert.deepEqual(await exited, { code: 0, signal: null }, `writer ${id}: ${err}`)
    },
  }
}

// The uuid of an acknowledged append's answer (`A <uuid> <seq>`).
function acked(line) {
  const m = /^A (\S+) \d+$/.exec(line)
  assert.ok(m, `acknowledged: ${line}`)
  return m[1]
}

function startWriter(url, id, stop) {
  const child = spawn(process.execPath, [WRITER, url, id, stop], { stdio: ['ignore', 'pipe', 'pipe'] })
  const w = { id, child, out: '', err: '', exit: null }
  child.stdout.on('data', (d) => { w.out += d })
  child.stderr.on('data', (d) => { w.err += d })
  w.exited = new Promise((resolve) => child.on('exit', (code, signal) => { w.exit = { code, signal }; resolve() }))
  return w
}

// Each writer's whole lines: acknowledged uuids with their times, and retries.
function said(w) {
  const lines = w.out.split('\n')
  lines.pop()
  const acks = []
  let retries = 0
  for (const l of lines) {
    const [kind, a, b] = l.split(' ')
    if (kind === 'A') acks.push({ uuid: a, ms: Number(b) })
    if (kind === 'R') retries++
  }
  return { acks, retries }
}

async function until(ok, what, ms = 120_000) {
  const end = Date.now() + ms
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

// Writers append through `fail()`; returns the figures once the checker has compared.
async function round(t, url, sessions, fail) {
  const stop = path.join(os.tmpdir(), `threadline-failover-stop-${process.pid}-${Date.now()}`)
  const writers = sessions.map((id) => startWriter(url, id, stop))
  const acked = () => {
    for (const w of writers) assert.equal(w.exit, null, `writer ${w.id} stopped: ${w.err}`)
    return writers.map((w) => said(w).acks)
  }
  await until(() => acked().every((a) => a.length >= 20), 'the writers to append')
  const failedAt = Date.now()
  await fail()
  // every writer appends again, on the new primary
  await until(() => acked().every((a) => a.filter((x) => x.ms > failedAt).length >= 20), 'the writers to go on after the failover')
  fs.writeFileSync(stop, '')
  await Promise.all(writers.map((w) => w.exited))
  fs.rmSync(stop, { force: true })
  for (const w of writers) assert.deepEqual(w.exit, { code: 0, signal: null }, `writer ${w.id}: ${w.err}`)
  // the outage as the writers saw it: the longest pause between two acknowledged appends of a
  // writer, across the failure
  let recovered = 0
  for (const w of writers) {
    const acks = said(w).acks
    for (let i = 1; i < acks.length; i++) {
      if (acks[i].ms > failedAt) recovered = Math.max(recovered, acks[i].ms - acks[i - 1].ms)
    }
  }
  const retries = writers.reduce((n, w) => n + said(w).retries, 0)

  // The checker: what the new primary holds against what the writers were told.
  const store = Store.open(url)
  const stored = new Map()
  let duplicated = 0
  for (const id of sessions) {
    const envs = store.openSession(id).envelopes()
    envs.forEach((e, seq) => {
      assert.equal(e.seq, seq, `${id}: seqs contiguous`)
      if (seq > 0) assert.equal(e.parentUuid, envs[seq - 1].uuid, `${id}: chain unbroken at seq ${seq}`)
      if (stored.has(e.uuid)) duplicated++
      stored.set(e.uuid, id)
    })
  }
  store.close()
  let acknowledged = 0
  let lost = 0
  writers.forEach((w, i) => {
    for (const a of said(w).acks) {
      acknowledged++
      if (stored.get(a.uuid) !== sessions[i]) lost++
    }
  })
  return { acknowledged, lost, duplicated, retries, recovered }
}

test('a formation loses its primary, then fails back: every acknowledged record is on the new primary, once', { timeout: 600_000 }, async (t) => {
  if (!installed(t)) return
  const began = Date.now()
  const f = await theFormation()
  const formed = (Date.now() - began) / 1000
  assert.match(f.uri(), /^postgres:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/threadline_test\?target_session_attrs=read-write/)
  const url = urlOf(f, 'failover')
  const first = f.primary()
  assert.notEqual(f.sql(first, 'SHOW synchronous_standby_names'), '', 'synchronous replication is on')

  const sessions = Array.from({ length: WRITERS }, (_, i) => `w${i}`)
  const init = Store.open(url)
  for (const id of sessions) init.createSession({ id })
  init.close()

  // 1. the primary's node dies
  const killed = await round(t, url, sessions, async () => {
    f.kill(first)
  })
  const second = f.primary()
  assert.ok(second && second.name !== first.name, 'the secondary was promoted')
  t.diagnostic(`primary killed (SIGKILL of its keeper, postmaster and backends): ${killed.acknowledged} acknowledged, ${killed.lost} lost, ${killed.duplicated} duplicated, ${killed.retries} retries, ${(killed.recovered / 1000).toFixed(1)} s to recover (a writer's longest pause)`)
  assert.equal(killed.lost, 0, 'no acknowledged record is lost')
  assert.equal(killed.duplicated, 0, 'no record is stored twice')

  // 2. the old primary rejoins as a secondary; fail back to it
  f.revive(first)
  await f.settle()
  assert.notEqual(f.sql(second, 'SHOW synchronous_standby_names'), '', 'synchronous replication is on again')
  const back = await round(t, url, sessions, () => f.failover())
  assert.equal(f.primary().name, first.name, 'failed back to the first primary')
  t.diagnostic(`pg_autoctl perform failover: ${back.acknowledged} acknowledged, ${back.lost} lost, ${back.duplicated} duplicated, ${back.retries} retries, ${(back.recovered / 1000).toFixed(1)} s to recover (a writer's longest pause)`)
  assert.equal(back.lost, 0, 'no acknowledged record is lost')
  assert.equal(back.duplicated, 0, 'no record is stored twice')
  t.diagnostic(`formation started in ${formed.toFixed(1)} s; the whole test ${((Date.now() - began) / 1000).toFixed(1)} s`)
})

test('a writer cut off by a failover writes nothing to a session another process took over on the new primary', { timeout: 300_000 }, async (t) => {
  if (!installed(t)) return
  const f = await theFormation()
  await f.settle()
  const url = urlOf(f, 'failover_lease')
  const init = Store.open(url)
  init.createSession({ id: 'lease' })
  init.close()

  const a = startDriven(url, 'lease')
  assert.equal(await a.ready, 'ready')
  const byA = []
  for (let i = 0; i < 3; i++) byA.push(acked(await a.ask(`append a${i}`)))
  // A is cut off: stopped while the primary fails over, its connection to the old one ended.
  a.child.kill('SIGSTOP')
  const byB = []
  let b
  try {
    const before = f.primary()
    await f.failover()
    const now = f.primary()
    assert.notEqual(now.name, before.name, 'the secondary was promoted')
    // A runs on this host (stopped), so another process here would wait for its exit; a writer
    // on another host that stops renewing loses its lease after REMOTE_STALE_MS (60 s). A's row
    // on the new primary is made to say that much: held from another host, renewed long ago.
    f.sql(now, "UPDATE failover_lease.sessions SET owner_host = 'cut-off-host', heartbeat_ms = 0 WHERE id = 'lease'")
    // B takes the session over on the new primary.
    b = startDriven(url, 'lease')
    assert.equal(await b.ready, 'ready')
    for (let i = 0; i < 3; i++) byB.push(acked(await b.ask(`append b${i}`)))
  } finally {
    a.child.kill('SIGCONT')
  }
  // A goes on: its next append is refused, and B still holds the session.
  const refused = await a.ask('append a-after')
  assert.match(refused, /^E SESSION_LOCKED /)
  byB.push(acked(await b.ask('append b3')))
  await a.exit()
  await b.exit()

  // The checker, a new process: A's records, then B's, nothing of A's after B's.
  const c = startDriven(url, 'lease')
  assert.equal(await c.ready, 'ready')
  const stored = await c.ask('envelopes')
  await c.exit()
  assert.deepEqual(stored.replace(/^S /, '').split(','), [...byA, ...byB])
})

// The fault test (__test__/torture.test.js) once against the formation: its workers, ops,
// readers and checks, with the formation's failovers as the server faults: `pg_autoctl perform
// failover` a third of the way in, the primary's node killed (SIGKILL, scripts/failover.js
// kill()) two thirds in, the run going on across both. Each is a server fault to the controller,
// as a restart is: ops cut off by it (STORE_IO, STORE_BUSY) may or may not have happened, and R5
// leaves out the stops it overlaps. The formation's servers are not restarted or frozen (those
// faults touch scripts/postgres.js's server).
const TORTURE_OPS = 900
test(`the fault test, ${TORTURE_OPS} ops across a failover and the primary's death, breaks no rule`, { timeout: 600_000 }, async (t) => {
  if (!installed(t)) return
  const f = await theFormation()
  await f.settle()
  const seed = Number(process.env.THREADLINE_TORTURE_SEED) || Date.now() % 1e9
  t.diagnostic(`seed ${seed} (THREADLINE_TORTURE_SEED=${seed})`)
  const primaries = [f.primary().name]
  const windows = []
  const timed = (kind, fn) => async (serving) => {
    const began = Date.now()
    try {
      return await fn(serving)
    } catch (e) {
      return `${kind}: ${e.message}`
    } finally {
      windows.push(`${kind} ${((Date.now() - began) / 1000).toFixed(1)} s`)
      primaries.push(f.primary()?.name)
    }
  }
  const failover = timed('failover', async () => {
    await f.failover()
    return null
  })
  // Once the monitor has promoted the secondary, the run goes on against it, and the dead
  // node's keeper is started again: the window lasts until it has rejoined as a secondary and
  // synchronous replication is on again (commits wait for it meanwhile: part of the failover).
  const kill = timed('primary-kill', async (serving) => {
    const old = f.primary()
    f.kill(old)
    await until(() => { const p = f.primary(); return p && p.name !== old.name }, 'the secondary to be promoted')
    serving()
    f.revive(old)
    await f.settle()
    return null
  })
  const rates = { kill: 1 / 60, stop: 1 / 60, restartEvery: 0, freeze: 0, proc: 1 / 100 }
  const serverFaults = [{ at: Math.floor(TORTURE_OPS / 3), kind: 'failover', fn: failover }, { at: Math.floor((2 * TORTURE_OPS) / 3), kind: 'primary-kill', fn: kill }]
  const s = await torture.run({ engine: 'postgres', ops: TORTURE_OPS, seed, workers: 4, lanes: 3, paths: 'mixed', busyTimeoutMs: 300, rates, postgres: userUrl(f), serverFaults })
  // the formation whole again for the next test
  await f.settle()
  t.diagnostic(summaryLine(s))
  t.diagnostic(`server faults: ${windows.join(', ')}; primaries ${primaries.join(' -> ')}`)
  const lines = violationLines(s, 5)
  for (const line of lines) t.diagnostic(line)
  // The run did what it says: both failovers, each to the other node, in the middle of the run.
  assert.equal(s.stats.faults.failover, 1, 'pg_autoctl perform failover')
  assert.equal(s.stats.faults['primary-kill'], 1, 'the primary killed')
  assert.ok(primaries[1] !== primaries[0] && primaries[2] !== primaries[1], `each moved the primary (${primaries})`)
  assert.ok(s.stats.faults.kill >= 5 && s.stats.faults.stop >= 5, 'workers were killed and stopped')
  assert.ok(s.stats.ops.delete >= 1 && s.stats.ops.stream >= 5, 'deletes and streamed responses')
  assert.ok(s.acked > 300, `records were acknowledged (${s.acked})`)
  assert.deepEqual(byRule(s.violations), byRule([]), `violations (seed ${seed}):\n${lines.join('\n')}`)
})
