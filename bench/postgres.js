'use strict'
// Threadline on each engine against a bare client of that engine, in the same run:
//   SQLite      Threadline on a file         vs better-sqlite3 (WAL, NORMAL, one JSON row per message)
//   PostgreSQL  Threadline on a postgres:// URL vs the `pg` client (one INSERT per message, a
//               table (session, seq, body) with its primary key; restore = SELECT + JSON.parse)
// Sections:
//   append     median µs of one append (the workload's messages; engines interleaved message by
//              message; the baselines' times include their JSON.stringify)
//   restore    10,000 messages: a fresh Store.open + openSession + messages, against SELECT of the
//              same rows + JSON.parse
//   writers    aggregate appends per second with 1, 4 and 8 writer processes, each on a session
//              of its own, for a fixed time (bench/postgres-writer.js); BENCH_WRITERS_WATCHED=1:
//              while a watch of the store listens
//   growth     one session of 4,000 appends: the median append of the last 500 against the
//              first 500, Threadline's and the bare client's (interleaved)
//   resume     PostgreSQL: open + buildContext of a 100k-record session compacted to 2k, against
//              the 2k session alone (the sessions of bench/resume.js, built on the server)
//
//   node --expose-gc bench/postgres.js [append,restore,writers,growth,resume]
//
// Uses THREADLINE_TEST_POSTGRES if set, else starts a throwaway server (scripts/postgres.js).
// BENCH_QUICK=1: a small smoke run. Writes bench/results-postgres.json (BENCH_RESULTS=file).
// Also run by `npm run bench` (BENCH_POSTGRES=0 skips it there).

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn, execFileSync } = require('child_process')

const { Store } = require('..')
const Database = require('better-sqlite3')
const { Client } = require('pg')
const { generate } = require('./workload.js')

const QUICK = !!process.env.BENCH_QUICK
const CFG = QUICK
  ? { appends: 300, appendRuns: 2, restoreRecords: 1000, restoreRuns: 3, writerSeconds: 1, copies: 100, resumeRounds: 2, growth: 600, growthWindow: 100 }
  : { appends: 2000, appendRuns: 3, restoreRecords: 10000, restoreRuns: 7, writerSeconds: 4, copies: 2513, resumeRounds: 5, growth: 4000, growthWindow: 500 }

const now = () => process.hrtime.bigint()
const us = (a, b) => Number(b - a) / 1e3
const ms = (a, b) => Number(b - a) / 1e6
const gc = () => { if (global.gc) { global.gc(); global.gc() } }
function median(xs) {
  const s = Float64Array.from(xs).sort()
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

let schemas = 0
function schemaUrl(base, name) {
  return `${base}${base.includes('?') ? '&' : '?'}schema=bench_${name}_${process.pid}_${schemas++}`
}

// The bare clients, each with a table of (session, seq, body).
function bareSqlite(file) {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.exec('CREATE TABLE IF NOT EXISTS messages(id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, body TEXT NOT NULL)')
  const insert = db.prepare('INSERT INTO messages(session_id, body) VALUES (?, ?)')
  const select = db.prepare('SELECT body FROM messages WHERE session_id = ? ORDER BY id')
  return {
    append: (session, m) => insert.run(session, JSON.stringify(m)),
    restore: (session) => select.all(session).map((r) => JSON.parse(r.body)),
    close: () => db.close(),
  }
}

async function barePg(url) {
  const client = new Client({ connectionString: url.replace(/[?&]schema=[^&]*/, '') })
  await client.connect()
  const schema = new URL(url).searchParams.get('schema') + '_bare'
  await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`)
  await client.query(`CREATE TABLE IF NOT EXISTS ${schema}.messages(session_id TEXT NOT NULL, seq BIGINT NOT NULL, body TEXT NOT NULL, PRIMARY KEY(session_id, seq))`)
  const seqs = new Map()
  return {
    append: async (session, m) => {
      const seq = seqs.get(session) ?? 0
      seqs.set(session, seq + 1)
      await client.query({ name: 'insert', text: `INSERT INTO ${schema}.messages(session_id, seq, body) VALUES ($1, $2, $3)`, values: [session, seq, JSON.stringify(m)] })
    },
    restore: async (session) => {
      const r = await client.query({ name: 'select', text: `SELECT body FROM ${schema}.messages WHERE session_id = $1 ORDER BY seq`, values: [session] })
      return r.rows.map((row) => JSON.parse(row.body))
    },
    close: () => client.end(),
  }
}

function engines(dir, pgBase) {
  return [
    { name: 'sqlite', location: () => path.join(dir, `t${schemas++}.db`), bare: async () => bareSqlite(path.join(dir, `bare${schemas++}.db`)) },
    {
      name: 'postgres',
      location: () => schemaUrl(pgBase, 'tl'),
      bare: async () => barePg(schemaUrl(pgBase, 'bare')),
      // Threadline over TLS as well, when the URL is ours to change (the test server speaks it)
      tlsLocation: /[?&]sslmode=disable/.test(pgBase) ? () => schemaUrl(pgBase.replace('sslmode=disable', 'sslmode=require'), 'tls') : null,
    },
  ]
}

// Interleaved message by message, each run in fresh stores: Threadline, the bare client, and on
// PostgreSQL Threadline over TLS (sslmode=require), whose cost is given against Threadline in the
// clear.
async function appendSection(engine, messages) {
  const ratios = []
  const tlsRatios = []
  const medians = { threadline: [], bare: [], tls: [] }
  for (let run = 0; run < CFG.appendRuns; run++) {
    const store = Store.open(engine.location())
    const tlsStore = engine.tlsLocation ? Store.open(engine.tlsLocation()) : null
    const sessions = { threadline: store.createSession({ title: 'bench' }), tls: tlsStore?.createSession({ title: 'bench' }) }
    const bare = await engine.bare()
    const who = tlsStore ? ['threadline', 'bare', 'tls'] : ['threadline', 'bare']
    const t = { threadline: [], bare: [], tls: [] }
    for (let i = 0; i < messages.length; i++) {
      const k = (i + run) % who.length
      for (const w of [...who.slice(k), ...who.slice(0, k)]) {
        const t0 = now()
        if (w === 'bare') await bare.append('bench', messages[i])
        else sessions[w].append(messages[i])
        t[w].push(us(t0, now()))
      }
    }
    store.close()
    tlsStore?.close()
    await bare.close()
    const a = median(t.threadline)
    const b = median(t.bare)
    medians.threadline.push(a)
    medians.bare.push(b)
    ratios.push(a / b)
    if (tlsStore) {
      medians.tls.push(median(t.tls))
      tlsRatios.push(median(t.tls) / a)
    }
  }
  const tls = tlsRatios.length ? { tlsUs: median(medians.tls), tlsVsClear: median(tlsRatios) } : {}
  return { threadlineUs: median(medians.threadline), bareUs: median(medians.bare), ratio: median(ratios), ...tls, runs: CFG.appendRuns, appends: messages.length }
}

// Whether an append costs more as its session grows: one session of CFG.growth appends, the
// bare client's interleaved; the median of the last window against the first, for each.
async function growthSection(engine, messages) {
  const store = Store.open(engine.location())
  const session = store.createSession({ title: 'growth' })
  const bare = await engine.bare()
  const t = { threadline: [], bare: [] }
  for (let i = 0; i < messages.length; i++) {
    const order = i % 2 ? ['threadline', 'bare'] : ['bare', 'threadline']
    for (const w of order) {
      const t0 = now()
      if (w === 'bare') await bare.append('growth', messages[i])
      else session.append(messages[i])
      t[w].push(us(t0, now()))
    }
  }
  store.close()
  await bare.close()
  const k = CFG.growthWindow
  const ends = (xs) => ({ firstUs: median(xs.slice(0, k)), lastUs: median(xs.slice(-k)) })
  const out = { appends: messages.length, window: k, threadline: ends(t.threadline), bare: ends(t.bare) }
  out.threadline.growth = out.threadline.lastUs / out.threadline.firstUs
  out.bare.growth = out.bare.lastUs / out.bare.firstUs
  return out
}

async function restoreSection(engine, messages) {
  const location = engine.location()
  const store = Store.open(location)
  const s = store.createSession({ title: 'restore' })
  for (let i = 0; i < messages.length; i += 500) s.appendMany(messages.slice(i, i + 500))
  store.close()
  const bare = await engine.bare()
  for (const m of messages) await bare.append('restore', m)
  const ratios = []
  const times = { threadline: [], bare: [] }
  for (let run = 0; run < CFG.restoreRuns; run++) {
    for (const who of run % 2 ? ['threadline', 'bare'] : ['bare', 'threadline']) {
      gc()
      const t0 = now()
      let n
      if (who === 'threadline') {
        const st = Store.open(location)
        n = st.openSession(s.id).messages.length
        st.close()
      } else {
        n = (await bare.restore('restore')).length
      }
      times[who].push(ms(t0, now()))
      if (n !== messages.length) throw new Error(`${engine.name} ${who}: restored ${n} of ${messages.length}`)
    }
    ratios.push(times.threadline.at(-1) / times.bare.at(-1))
  }
  await bare.close()
  return { threadlineMs: median(times.threadline), bareMs: median(times.bare), ratio: median(ratios), runs: CFG.restoreRuns, messages: messages.length }
}

// Aggregate appends per second of `n` writer processes started together, each on its own session.
// BENCH_WRITERS_WATCHED=1: while a watch of another session of the store listens (on PostgreSQL
// writers notify only then, docs/live.md).
async function writers(location, n) {
  const init = Store.open(location)
  const ids = Array.from({ length: n }, (_, i) => init.createSession({ title: `w${i}` }).id)
  let watch = null
  if (process.env.BENCH_WRITERS_WATCHED === '1') {
    const s = init.createSession({ title: 'watched' })
    watch = s.watch({ fromSeq: 0 })
    s.append({ role: 'user', content: 'watched' })
    await watch.next() // its listener is registered
    watch.next().catch(() => {})
  } else {
    init.close()
  }
  const children = ids.map((id) => spawn(process.execPath, [path.join(__dirname, 'postgres-writer.js'), location, id, String(CFG.writerSeconds)], { stdio: ['pipe', 'pipe', 'inherit'] }))
  const outs = children.map((c) => new Promise((resolve) => {
    let out = ''
    c.stdout.on('data', (d) => { out += d })
    c.on('exit', (code) => resolve(code === 0 ? JSON.parse(out) : { appends: NaN, seconds: 1 }))
  }))
  const results = await Promise.all(outs)
  if (watch) {
    await watch.return()
    init.close()
  }
  const seconds = Math.max(...results.map((r) => r.seconds))
  return results.reduce((sum, r) => sum + r.appends, 0) / seconds
}

async function writersSection(engine) {
  const out = {}
  for (const n of [1, 4, 8]) {
    out[n] = Math.round(await writers(engine.location(), n))
  }
  return out
}

function resumeChild(spec) {
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'resume-child.js'), JSON.stringify(spec)], { encoding: 'utf8', maxBuffer: 1 << 24 })
  const r = JSON.parse(out.trim().split('\n').pop())
  if (r.error) throw new Error(`resume ${spec.file}: ${r.error}`)
  return r
}

async function resumeSection(pgBase, dir) {
  const { build, histories, summaryText } = require('./resume-build.js')
  const { prefix, keep } = histories(CFG.copies, 2000)
  const summary = summaryText()
  const t0 = now()
  const big = build(schemaUrl(pgBase, 'resume_big'), prefix.concat(keep), prefix.length, summary, path.join(dir, 'big.jsonl'))
  const small = build(schemaUrl(pgBase, 'resume_small'), keep, null, summary, path.join(dir, 'small.jsonl'))
  const buildS = ms(t0, now()) / 1000
  const SYSTEM = 'You are a coding agent.'
  const spec = (b) => ({ engine: 'threadline', file: b.file, sessionId: b.sessionId, maxTokens: 180000, system: SYSTEM, warmReps: 2 })
  const ratios = { cold: [], warm: [] }
  const times = { big: [], small: [], bigWarm: [], smallWarm: [] }
  const warm = (r) => median(r.warm.map((w) => w.total))
  for (let r = 0; r < CFG.resumeRounds; r++) {
    const [a, b] = r % 2 ? [resumeChild(spec(big)), resumeChild(spec(small))] : [resumeChild(spec(small)), resumeChild(spec(big))].reverse()
    times.big.push(a.cold.time.total)
    times.small.push(b.cold.time.total)
    times.bigWarm.push(warm(a))
    times.smallWarm.push(warm(b))
    ratios.cold.push(a.cold.time.total / b.cold.time.total)
    ratios.warm.push(warm(a) / warm(b))
  }
  return {
    bigRecords: big.records, smallRecords: small.records, rounds: CFG.resumeRounds, buildSeconds: buildS,
    bigMs: median(times.big), smallMs: median(times.small), ratio: median(ratios.cold),
    bigWarmMs: median(times.bigWarm), smallWarmMs: median(times.smallWarm), warmRatio: median(ratios.warm),
  }
}

// Both clients in the clear (the test server also speaks TLS, which Threadline would prefer and
// pg would not use), unless the URL says otherwise.
function clear(url) {
  return /[?&]sslmode=/.test(url) ? url : `${url}${url.includes('?') ? '&' : '?'}sslmode=disable`
}

async function withServer(fn) {
  if (process.env.THREADLINE_TEST_POSTGRES) return fn(clear(process.env.THREADLINE_TEST_POSTGRES))
  const pg = require('../scripts/postgres.js')
  const server = await pg.start()
  try {
    return await fn(clear(server.url))
  } finally {
    pg.stop(server.file)
  }
}

function format(r) {
  const f = (x, d = 1) => Number(x).toFixed(d)
  const lines = ['| engine | append median (µs): Threadline / bare | ratio | restore 10k (ms): Threadline / bare | ratio | appends/s, 1 / 4 / 8 writer processes |', '|---|---|---|---|---|---|']
  for (const e of ['sqlite', 'postgres']) {
    const x = r.engines[e]
    if (!x) continue
    lines.push(`| ${e} | ${x.append ? `${f(x.append.threadlineUs)} / ${f(x.append.bareUs)}` : '-'} | ${x.append ? `${f(x.append.ratio, 2)}x` : '-'} | ${x.restore ? `${f(x.restore.threadlineMs)} / ${f(x.restore.bareMs)}` : '-'} | ${x.restore ? `${f(x.restore.ratio, 2)}x` : '-'} | ${x.writers ? `${x.writers[1]} / ${x.writers[4]} / ${x.writers[8]}` : '-'} |`)
  }
  for (const e of ['sqlite', 'postgres']) {
    const g = r.engines[e]?.growth
    if (g) lines.push('', `${e}, one session of ${g.appends} appends, median of the first and the last ${g.window}: Threadline ${f(g.threadline.firstUs)} -> ${f(g.threadline.lastUs)} µs (${f(g.threadline.growth, 2)}x), bare ${f(g.bare.firstUs)} -> ${f(g.bare.lastUs)} µs (${f(g.bare.growth, 2)}x)`)
  }
  const tls = r.engines.postgres?.append
  if (tls?.tlsUs) {
    lines.push('', `PostgreSQL append over TLS (sslmode=require), interleaved with the above: ${f(tls.tlsUs)} µs, ${f(tls.tlsVsClear, 2)}x Threadline in the clear`)
  }
  if (r.resume) {
    const x = r.resume
    lines.push('', `PostgreSQL resume (Store.open + openSession + buildContext, median of ${x.rounds} rounds): ${x.bigRecords} records compacted to 2k against the ${x.smallRecords}-record session: cold ${f(x.bigMs)} / ${f(x.smallMs)} ms = ${f(x.ratio, 2)}x, warm ${f(x.bigWarmMs)} / ${f(x.smallWarmMs)} ms = ${f(x.warmRatio, 2)}x (sessions built in ${f(x.buildSeconds, 0)} s)`)
  }
  return lines.join('\n')
}

async function run({ sections = ['append', 'restore', 'writers', 'growth', 'resume'], log = console.error } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-pg-'))
  try {
    return await withServer(async (pgBase) => {
      const results = { quick: QUICK, config: CFG, engines: {} }
      const messages = generate(Math.max(CFG.appends, CFG.restoreRecords))
      for (const engine of engines(dir, pgBase)) {
        const e = (results.engines[engine.name] = {})
        if (sections.includes('append')) { log(`${engine.name}: append`); e.append = await appendSection(engine, messages.slice(0, CFG.appends)) }
        if (sections.includes('restore')) { log(`${engine.name}: restore`); e.restore = await restoreSection(engine, messages.slice(0, CFG.restoreRecords)) }
        if (sections.includes('writers')) { log(`${engine.name}: writers`); e.writers = await writersSection(engine) }
        if (sections.includes('growth')) { log(`${engine.name}: growth`); e.growth = await growthSection(engine, generate(CFG.growth)) }
      }
      if (sections.includes('resume')) { log('postgres: resume'); results.resume = await resumeSection(pgBase, dir) }
      return results
    })
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

module.exports = { run, format }

if (require.main === module) {
  const sections = process.argv[2] ? process.argv[2].split(',') : undefined
  run({ sections }).then((r) => {
    const out = process.env.BENCH_RESULTS || path.join(__dirname, 'results-postgres.json')
    r.commit = (() => { try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim() } catch { return null } })()
    fs.writeFileSync(out, JSON.stringify(r, null, 2) + '\n')
    console.log(format(r))
  }).catch((e) => { console.error(e); process.exitCode = 1 })
}
