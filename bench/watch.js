'use strict'
// Live watch (docs/live.md): how long after an append is acknowledged in a writer process a
// watcher in another process sees the record, against the way a JSONL transcript is followed
// today: a writer doing JSON.stringify + fs.appendFileSync of the same message, and a watcher with
// fs.watch on the file that reads the new bytes and parses each line. Both processes stamp with
// one clock (performance.timeOrigin + performance.now()); latency = seen - acknowledged.
//
// Each run: the session (or file) is made with one record, the watcher process started and ready
// (it has seen that record), the writer process started with the store open; then
//   idle    the watcher's CPU time (process.cpuUsage, user + system) over idleMs with nothing
//           written (the writer open, idle), from SETTLE_MS after the writer's open (the CPU of
//           that span reported too): the goal is none between writes;
//   steady  STEADY appends, one every EVERY_MS;
//   bursts  BURSTS bursts of BURST appends back to back, PAUSE_MS apart.
// Kinds: Threadline on SQLite (a file, durability 'process', the default), Threadline on
// PostgreSQL (THREADLINE_TEST_POSTGRES, else a throwaway server from scripts/postgres.js; none
// available: skipped), and the JSONL baseline. Runs rotate the kinds' order; ratios are
// Threadline / JSONL within a repetition, the median over repetitions.
//
//   node bench/watch.js            (BENCH_QUICK=1: a small smoke run; BENCH_WATCH_PG=0: no PostgreSQL;
//                                  BENCH_WATCH_TRACE=1: SQLite's latency split, see split();
//                                  BENCH_WATCH_DURABILITY=power: the writer's store so opened)
// Writes bench/results-watch.json (BENCH_RESULTS=file). Also run by `npm run bench`
// (BENCH_WATCH=0 skips it there).

const fs = require('fs')
const os = require('os')
const path = require('path')
const readline = require('readline')
const { spawn, execFileSync } = require('child_process')

const { Store } = require('..')
const { generate } = require('./workload.js')

const QUICK = !!process.env.BENCH_QUICK && process.env.BENCH_QUICK !== '0'
const CFG = QUICK
  ? { reps: 1, idleMs: 1000, plan: { steady: 300, everyMs: 2, bursts: 3, burst: 100, pauseMs: 50 } }
  : { reps: 3, idleMs: 5000, plan: { steady: 2000, everyMs: 2, bursts: 20, burst: 100, pauseMs: 50 } }

const CHILD = path.join(__dirname, 'watch-child.js')
// The span after the writer's open before the idle span: longer than the SQLite watch's re-reads
// after a change (lib/watch.js, about 1 s).
const SETTLE_MS = 1500

function quantile(xs, q) {
  const s = Float64Array.from(xs).sort()
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]
}
function median(xs) {
  const s = Float64Array.from(xs).sort()
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const stats = (xs) => ({ p50: quantile(xs, 0.5), p99: quantile(xs, 0.99), max: Math.max(...xs), n: xs.length })

/** A child process of watch-child.js with its stdout as a queue of JSON lines. */
function child(args) {
  const p = spawn(process.execPath, [CHILD, ...args], { stdio: ['pipe', 'pipe', 'inherit'] })
  const it = readline.createInterface({ input: p.stdout })[Symbol.asyncIterator]()
  const exited = new Promise((resolve) => p.on('exit', resolve))
  return {
    async read() {
      const { value, done } = await it.next()
      if (done) throw new Error(`${args.slice(0, 2).join(' ')}: the process ended (exit ${await exited})`)
      return JSON.parse(value)
    },
    send: (line) => p.stdin.write(line + '\n'),
    exited,
    kill: () => p.kill('SIGKILL'),
  }
}

const cpuUs = (u) => u.user + u.system

async function oneRun(kind, location, sessionId) {
  const total = 1 + CFG.plan.steady + CFG.plan.bursts * CFG.plan.burst
  const w = child(['watcher', kind, location, sessionId, String(total)])
  let wr = null
  try {
    if ((await w.read()) !== 'ready') throw new Error(`${kind}: the watcher did not say ready`)
    wr = child(['writer', kind, location, sessionId, JSON.stringify(CFG.plan)])
    if ((await wr.read()) !== 'open') throw new Error(`${kind}: the writer did not say open`)
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
    w.send('cpu')
    const opened = (await w.read()).cpu
    // The SQLite watch reads again for about 1 s after a change (the writer's open made some):
    // that second apart, then the idle span.
    await sleep(SETTLE_MS)
    w.send('cpu')
    const first = (await w.read()).cpu
    // What answering one 'cpu' costs the watcher, measured back to back: the idle figure holds it.
    w.send('cpu')
    const before = (await w.read()).cpu
    await sleep(CFG.idleMs)
    w.send('cpu')
    const after = (await w.read()).cpu
    wr.send('go')
    const { acks } = await wr.read()
    const { seen, events } = await w.read()
    await Promise.all([w.exited, wr.exited])
    const lat = acks.map((t, i) => seen[i + 1] - t)
    const out = {
      idleCpuMs: (cpuUs(after) - cpuUs(before)) / 1000,
      probeCpuMs: (cpuUs(before) - cpuUs(first)) / 1000,
      settleCpuMs: (cpuUs(first) - cpuUs(opened)) / 1000,
      steady: stats(lat.slice(0, CFG.plan.steady)),
      bursts: stats(lat.slice(CFG.plan.steady)),
    }
    if (events.length) out.trace = split(acks, seen, events)
    if (process.env.BENCH_WATCH_TRACE === '1') out.latencies = lat
    return out
  } catch (e) {
    w.kill()
    wr?.kill()
    throw e
  }
}

// BENCH_WATCH_TRACE=1: each record's latency in two: from its acknowledgement to the first change
// of the store's files after it (the commit that holds it, as inotify reports it), and from there
// to the watcher yielding it (wake, read, parse).
function split(acks, seen, events) {
  const commit = []
  const read = []
  let j = 0
  for (let i = 0; i < acks.length; i++) {
    while (j < events.length && events[j] < acks[i]) j++
    if (j === events.length) break
    commit.push(events[j] - acks[i])
    read.push(seen[i + 1] - events[j])
  }
  const phase = (from, to) => ({ commit: stats(commit.slice(from, to)), read: stats(read.slice(from, to)) })
  return { steady: phase(0, CFG.plan.steady), bursts: phase(CFG.plan.steady, commit.length), events: events.length }
}

// Where each kind's run keeps its records: record 0 written, so the watcher's first read finds it.
function prepare(kind, dir, pgBase, n) {
  const first = generate(1)[0]
  if (kind === 'jsonl') {
    const file = path.join(dir, `w${n}.jsonl`)
    fs.writeFileSync(file, JSON.stringify(first) + '\n')
    return { location: file, sessionId: '-' }
  }
  const location = kind === 'sqlite' ? path.join(dir, `w${n}.db`) : `${pgBase}${pgBase.includes('?') ? '&' : '?'}schema=bench_watch_${process.pid}_${n}`
  const store = Store.open(location)
  const s = store.createSession({ title: 'watch' })
  s.append(first)
  store.close()
  return { location, sessionId: s.id }
}

// Both clients in the clear unless the URL says otherwise (as bench/postgres.js).
function clear(url) {
  return /[?&]sslmode=/.test(url) ? url : `${url}${url.includes('?') ? '&' : '?'}sslmode=disable`
}

async function withServer(fn) {
  if (process.env.BENCH_WATCH_PG === '0') return fn(null)
  if (process.env.THREADLINE_TEST_POSTGRES) return fn(clear(process.env.THREADLINE_TEST_POSTGRES))
  const pg = require('../scripts/postgres.js')
  let server
  try {
    server = await pg.start()
  } catch (e) {
    console.error(`no PostgreSQL server (${e.message}): PostgreSQL not measured`)
    return fn(null)
  }
  try {
    return await fn(clear(server.url))
  } finally {
    pg.stop(server.file)
  }
}

async function run({ log = console.error } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-watch-'))
  try {
    return await withServer(async (pgBase) => {
      const kinds = pgBase ? ['sqlite', 'postgres', 'jsonl'] : ['sqlite', 'jsonl']
      const runs = Object.fromEntries(kinds.map((k) => [k, []]))
      let n = 0
      for (let r = 0; r < CFG.reps; r++) {
        const order = kinds.slice(r % kinds.length).concat(kinds.slice(0, r % kinds.length))
        for (const kind of order) {
          const { location, sessionId } = prepare(kind, dir, pgBase, n++)
          const res = await oneRun(kind === 'jsonl' ? 'jsonl' : 'threadline', location, sessionId)
          runs[kind].push(res)
          log(`  watch rep ${r + 1}/${CFG.reps} ${kind}: steady p50 ${res.steady.p50.toFixed(3)} p99 ${res.steady.p99.toFixed(3)} ms, bursts p50 ${res.bursts.p50.toFixed(3)} p99 ${res.bursts.p99.toFixed(3)} ms, idle CPU ${res.idleCpuMs.toFixed(3)} ms (of which answering the probe ${res.probeCpuMs.toFixed(3)} ms), ${res.settleCpuMs.toFixed(3)} ms in the ${SETTLE_MS} ms after the writer's open`)
          if (res.trace) {
            const t = res.trace
            log(`    split (${t.events} file events): steady commit p50 ${t.steady.commit.p50.toFixed(3)} p99 ${t.steady.commit.p99.toFixed(3)} + read p50 ${t.steady.read.p50.toFixed(3)} p99 ${t.steady.read.p99.toFixed(3)} ms; bursts commit p50 ${t.bursts.commit.p50.toFixed(3)} p99 ${t.bursts.commit.p99.toFixed(3)} + read p50 ${t.bursts.read.p50.toFixed(3)} p99 ${t.bursts.read.p99.toFixed(3)} ms`)
          }
        }
      }
      const out = { quick: QUICK, config: CFG, kinds: {} }
      for (const kind of kinds) {
        const rs = runs[kind]
        const k = (out.kinds[kind] = { runs: rs, idleCpuMs: median(rs.map((x) => x.idleCpuMs)), probeCpuMs: median(rs.map((x) => x.probeCpuMs)), settleCpuMs: median(rs.map((x) => x.settleCpuMs)) })
        for (const phase of ['steady', 'bursts']) {
          k[phase] = { p50: median(rs.map((x) => x[phase].p50)), p99: median(rs.map((x) => x[phase].p99)) }
          if (kind !== 'jsonl') {
            const ratio = (q) => median(rs.map((x, i) => x[phase][q] / runs.jsonl[i][phase][q]))
            k[phase].ratio = { p50: ratio('p50'), p99: ratio('p99') }
          }
        }
      }
      return out
    })
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function format(r) {
  const f = (x) => Number(x).toFixed(3)
  const p = r.config.plan
  const lines = [
    `live watch (bench/watch.js): ms from an append's acknowledgement in a writer process to a watcher process seeing it; steady: ${p.steady} appends, one every ${p.everyMs} ms; bursts: ${p.bursts} x ${p.burst} back to back; median of ${r.config.reps} runs`,
    '| watcher | steady p50 | steady p99 | bursts p50 | bursts p99 | p50 / p99 vs JSONL, steady | bursts | idle CPU in ' + r.config.idleMs / 1000 + ' s (ms) |',
    '|---|---|---|---|---|---|---|---|',
  ]
  const probe = Math.max(...Object.values(r.kinds).map((k) => k.probeCpuMs))
  const names = { sqlite: 'Threadline, SQLite', postgres: 'Threadline, PostgreSQL', jsonl: 'JSONL + fs.watch' }
  for (const [kind, k] of Object.entries(r.kinds)) {
    const ratio = (ph) => (k[ph].ratio ? `${k[ph].ratio.p50.toFixed(2)}x / ${k[ph].ratio.p99.toFixed(2)}x` : '-')
    lines.push(`| ${names[kind]} | ${f(k.steady.p50)} | ${f(k.steady.p99)} | ${f(k.bursts.p50)} | ${f(k.bursts.p99)} | ${ratio('steady')} | ${ratio('bursts')} | ${f(k.idleCpuMs)} |`)
  }
  lines.push('', `idle CPU: user + system time of the watcher process over the idle span (process.cpuUsage), which includes answering the measurement's own request (up to ${f(probe)} ms measured back to back), starting ${SETTLE_MS} ms after the writer opened the store; in those ${SETTLE_MS} ms: ` + Object.entries(r.kinds).map(([k, x]) => `${names[k]} ${f(x.settleCpuMs)} ms`).join(', '))
  return lines.join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  run().then((r) => {
    const out = process.env.BENCH_RESULTS || path.join(__dirname, 'results-watch.json')
    r.commit = (() => { try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim() } catch { return null } })()
    fs.writeFileSync(out, JSON.stringify(r, null, 2) + '\n')
    console.log(format(r))
  }).catch((e) => { console.error(e); process.exitCode = 1 })
}
