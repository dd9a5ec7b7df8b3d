'use strict'
// Failover (issue 30): a pg_auto_failover formation on loopback (scripts/failover.js: a monitor,
// a primary and a secondary with synchronous replication), a store opened by the formation's
// multi-host URL (`pg_autoctl show uri`: target_session_attrs=read-write). Writer processes
// append, each to a session of its own, retrying a failed append with the same uuid, while
//   1. the primary's node dies: SIGKILL of its keeper and its postmaster (the keeper would
//      restart a postmaster killed alone), and the monitor promotes the secondary;
//   2. after the old primary rejoins as a secondary, `pg_autoctl perform failover` fails back.
// After each, a checker in this process compares every acknowledged record with what the new
// primary holds: 0 lost, 0 stored twice, every session's seqs contiguous and its chain unbroken.
// The figures (acknowledged, lost, duplicated, and seconds to recover: the longest pause between
// two acknowledged appends of a writer across the failure) are reported as diagnostics.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const { lib } = require('./helpers/util')

const { Store } = lib
const WRITER = path.join(__dirname, 'helpers', 'failover-writer.js')
const WRITERS = 4

function installed(t) {
  if (spawnSync('pg_autoctl', ['version']).status === 0) return true
  assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but pg_autoctl is not installed (.ci/run installs postgresql-NN-auto-failover)')
  t.diagnostic('pg_autoctl is not installed: apt-get install postgresql-15-auto-failover')
  return false
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
  const { start } = require('../scripts/failover.js')
  const began = Date.now()
  const f = await start()
  t.after(() => f.stop())
  const formed = (Date.now() - began) / 1000
  // `pg_autoctl show uri` names no user: the servers' superuser (trust on loopback).
  const user = process.getuid?.() === 0 ? 'threadline-pg' : os.userInfo().username
  const uri = f.uri()
  assert.match(uri, /^postgres:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/threadline_test\?target_session_attrs=read-write/)
  const url = `${uri.replace('postgres://', `postgres://${user}@`)}&schema=failover`
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
  t.diagnostic(`primary killed (SIGKILL of its keeper and postmaster): ${killed.acknowledged} acknowledged, ${killed.lost} lost, ${killed.duplicated} duplicated, ${killed.retries} retries, ${(killed.recovered / 1000).toFixed(1)} s to recover (a writer's longest pause)`)
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
