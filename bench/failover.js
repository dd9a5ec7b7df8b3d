'use strict'
// Failover (issue 30): a pg_auto_failover formation on loopback (scripts/failover.js: a monitor, a
// primary and a secondary with synchronous replication) against a single server
// (scripts/postgres.js), in the same run:
//   append     median µs of one append through the formation's multi-host URL and through the
//              single server's URL, interleaved append by append; the ratio formation / single
//              is taken within each run, then the median of the runs
//   recover    the time from the primary's death (SIGKILL of its keeper, postmaster and backends) to the
//              first acknowledged append on the new primary, by a writer that retries STORE_IO and
//              STORE_BUSY at once (busyTimeoutMs 10000); several kills (the killed node rejoins
//              as a secondary between them), median and each
//
//   node --expose-gc bench/failover.js [append,recover]
//
// Needs pg_autoctl (apt-get install postgresql-NN-auto-failover); says so and exits 0 without it.
// BENCH_QUICK=1: a small smoke run. Writes bench/results-failover.json (BENCH_RESULTS=file).
// Standalone: not part of `npm run bench` (the formation takes a minute to start).

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')

const { Store } = require('..')

const QUICK = !!process.env.BENCH_QUICK
const CFG = QUICK ? { appends: 200, runs: 2, kills: 1 } : { appends: 2000, runs: 3, kills: 5 }
const RESULTS = path.resolve(process.env.BENCH_RESULTS || path.join(__dirname, 'results-failover.json'))
const now = () => process.hrtime.bigint()
const us = (a, b) => Number(b - a) / 1e3
function median(xs) {
  const s = Float64Array.from(xs).sort()
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const transient = (e) => e.code === 'STORE_IO' || e.code === 'STORE_BUSY'

function message(i) {
  const role = i % 2 ? 'assistant' : 'user'
  return { role, content: [{ type: 'text', text: `message ${i}: ${'lorem ipsum dolor sit amet '.repeat(8)}` }] }
}

function appendLatency(formationUrl, singleUrl) {
  const runs = []
  for (let r = 0; r < CFG.runs; r++) {
    const stores = [Store.open(formationUrl), Store.open(singleUrl)]
    const sessions = stores.map((s) => s.createSession({ id: `append-${r}` }))
    const times = [[], []]
    for (let i = 0; i < CFG.appends; i++) {
      // interleaved, alternating which goes first
      for (const k of i % 2 ? [0, 1] : [1, 0]) {
        const t0 = now()
        sessions[k].append(message(i))
        times[k].push(us(t0, now()))
      }
    }
    for (const s of stores) s.close()
    const [formation, single] = times.map(median)
    runs.push({ formationUs: formation, singleUs: single, ratio: formation / single })
    console.log(`append run ${r + 1}: formation ${formation.toFixed(0)} µs, single ${single.toFixed(0)} µs, ratio ${(formation / single).toFixed(2)}`)
  }
  return {
    appends: CFG.appends,
    runs,
    formationUs: median(runs.map((r) => r.formationUs)),
    singleUs: median(runs.map((r) => r.singleUs)),
    ratio: median(runs.map((r) => r.ratio)),
  }
}

async function until(ok) {
  const end = Date.now() + 120_000
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out waiting for the formation')
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

async function recover(f, url) {
  const store = Store.open(url, { busyTimeoutMs: 10_000 })
  const session = store.createSession({ id: 'recover' })
  const times = []
  for (let k = 0; k < CFG.kills; k++) {
    await f.settle()
    for (let i = 0; i < 20; i++) session.append(message(i))
    const primary = f.primary()
    const died = Date.now()
    f.kill(primary)
    let retries = 0
    for (;;) {
      try {
        session.append(message(k))
        break
      } catch (e) {
        if (!transient(e) || Date.now() - died > 120_000) throw e
        retries++
      }
    }
    const ms = Date.now() - died
    times.push(ms)
    console.log(`kill ${k + 1}: ${primary.name} killed, first acknowledged append on the new primary after ${(ms / 1000).toFixed(2)} s (${retries} failed tries)`)
    f.revive(primary)
    await until(() => f.primary()?.name !== primary.name)
  }
  store.close()
  return { kills: CFG.kills, ms: times, medianMs: median(times) }
}

async function main() {
  if (spawnSync('pg_autoctl', ['version']).status !== 0) {
    console.log('bench/failover.js: pg_autoctl is not installed (apt-get install postgresql-15-auto-failover): skipped')
    return
  }
  const sections = (process.argv[2] || 'append,recover').split(',')
  const pg = require('../scripts/postgres.js')
  const single = await pg.start()
  const f = await require('../scripts/failover.js').start()
  const user = process.getuid?.() === 0 ? 'threadline-pg' : os.userInfo().username
  const formationUrl = `${f.uri().replace('postgres://', `postgres://${user}@`)}&schema=bench_failover`
  const singleUrl = `${single.url}?schema=bench_failover`
  const results = {
    commit: spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim(),
    date: new Date().toISOString(),
    quick: QUICK,
    synchronousStandbyNames: f.sql(f.primary(), 'SHOW synchronous_standby_names'),
  }
  try {
    if (sections.includes('append')) results.append = appendLatency(formationUrl, singleUrl)
    if (sections.includes('recover')) results.recover = await recover(f, formationUrl)
  } finally {
    f.stop()
    pg.stop(single.file)
  }
  if (results.append) console.log(`append: formation ${results.append.formationUs.toFixed(0)} µs, single server ${results.append.singleUs.toFixed(0)} µs: ${results.append.ratio.toFixed(2)}x (median of ${CFG.runs} runs of ${CFG.appends})`)
  if (results.recover) console.log(`recover: ${(results.recover.medianMs / 1000).toFixed(2)} s median over ${CFG.kills} kills (${results.recover.ms.map((m) => (m / 1000).toFixed(2)).join(', ')} s)`)
  fs.writeFileSync(RESULTS, JSON.stringify(results, null, 2) + '\n')
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
