'use strict'
// What search costs and what it buys.
//
//   node --expose-gc bench/search.js [--baseline PATH.node] [--records N] [--runs N]
//   node --expose-gc bench/search.js --appends-only --baseline PATH.node [--runs N]
//       (part 1 alone: this build's appends against another build's, e.g. before a change to
//       the append path)
//
// 1. Appends with the index against without: each run is a fresh process appending the
//    workload's first 2,000 messages (bench/workload.js) one by one to a fresh store, and the
//    same messages to a JSONL file with fs.appendFileSync, interleaved; it prints the median
//    append of each. The runs alternate this build and the baseline (the build before the index,
//    loaded with NAPI_RS_NATIVE_LIBRARY_PATH; see bench/checksum.js for how to make one).
// 2. A store of N records (default 1,000,000) made of the real Claude Code sessions in
//    fixtures/claude-code, restored again and again as new sessions; the same sessions written
//    as JSONL files. Then: building the index of that store as a store from before the index
//    gets it at its first search (time, and the index's size against the file's), and query
//    latency (p50, p99) for single common and rare words, phrases and prefixes, against a LIKE
//    scan of the stored messages (what goose's chatrecall does) and against ripgrep over the
//    JSONL files (what people do with Codex's), when `rg` is on the PATH.
//
// Prints a table and writes bench/results-search.json.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFileSync, spawnSync } = require('child_process')

const ROOT = path.join(__dirname, '..')
const args = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : dflt
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN
}
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))]
}
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6

const FIXTURES = ['compacted-session.jsonl', 'tool_heavy.jsonl', 'short.jsonl'].map((f) => path.join(ROOT, 'fixtures', 'claude-code', f))

// ---- 1. appends, with and without the index ------------------------------------------------------

function appendChild() {
  const { Store } = require(ROOT)
  const { generate } = require('./workload.js')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-search-append-'))
  const store = Store.open(path.join(dir, 's.db'))
  const s = store.createSession({ id: 'a' })
  const jsonl = path.join(dir, 's.jsonl')
  const msgs = generate(2000)
  const tl = []
  const js = []
  msgs.forEach((m, i) => {
    if (i % 2) {
      let t0 = process.hrtime.bigint(); s.append(m); tl.push(ms(t0))
      t0 = process.hrtime.bigint(); fs.appendFileSync(jsonl, JSON.stringify(m) + '\n'); js.push(ms(t0))
    } else {
      let t0 = process.hrtime.bigint(); fs.appendFileSync(jsonl, JSON.stringify(m) + '\n'); js.push(ms(t0))
      t0 = process.hrtime.bigint(); s.append(m); tl.push(ms(t0))
    }
  })
  store.close()
  fs.rmSync(dir, { recursive: true, force: true })
  process.stdout.write(JSON.stringify({ append: median(tl.slice(200)), jsonl: median(js.slice(200)) }) + '\n')
}

function appends(baseline, runs) {
  const of = (lib) => {
    const env = { ...process.env }
    if (lib) env.NAPI_RS_NATIVE_LIBRARY_PATH = lib
    const out = execFileSync(process.execPath, [__filename, '--append-child'], { env, encoding: 'utf8' })
    return JSON.parse(out.trim().split('\n').pop())
  }
  const indexed = []
  const before = []
  for (let r = 0; r < runs; r++) {
    indexed.push(of(null))
    if (baseline) before.push(of(baseline))
  }
  const ratio = (xs) => median(xs.map((x) => x.append / x.jsonl))
  const out = {
    messages: 2000,
    runs,
    indexedUs: median(indexed.map((x) => x.append)) * 1000,
    indexedVsJsonl: ratio(indexed),
  }
  if (baseline) {
    out.withoutUs = median(before.map((x) => x.append)) * 1000
    out.withoutVsJsonl = ratio(before)
    // same-run ratio: each run's own JSONL is the yardstick, so the drift of the machine cancels
    out.indexedVsWithout = out.indexedVsJsonl / out.withoutVsJsonl
  }
  return out
}

// ---- 2. a large store of real sessions -------------------------------------------------------------

function build(dir, target) {
  const { Store } = require(ROOT)
  const lines = FIXTURES.map((f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean))
  const store = Store.open(path.join(dir, 'big.db'))
  const jsonlDir = path.join(dir, 'jsonl')
  fs.mkdirSync(jsonlDir)
  let records = 0
  let n = 0
  const t0 = process.hrtime.bigint()
  while (records < target) {
    const i = n % lines.length
    const s = store.createSession({ id: `s${n}`, project: `p${n % 20}` })
    s.restoreMessages(lines[i])
    records += lines[i].length // a record a line (the exact count is read from the store after)
    fs.copyFileSync(FIXTURES[i], path.join(jsonlDir, `s${n}.jsonl`))
    n++
  }
  store.close()
  return { sessions: n, buildMs: ms(t0) }
}

function countRecords(file) {
  const Database = require('better-sqlite3')
  const db = new Database(file, { readonly: true })
  const n = db.prepare('SELECT count(*) AS n FROM records').get().n
  const indexBytes = db.prepare("SELECT sum(pgsize) AS b FROM dbstat WHERE name LIKE 'search%'").get().b
  db.close()
  return { records: n, indexBytes }
}

// The store as a store from before the index has it: no index, to be built at the first search.
function dropIndex(file) {
  const Database = require('better-sqlite3')
  const db = new Database(file)
  db.exec('DROP TABLE search; UPDATE sessions SET indexed = 0; VACUUM')
  db.close()
}

const QUERIES = {
  'common word': ['session', 'phoenix', 'test', 'file', 'error', 'server', 'elixir', 'live', 'transcript', 'update'],
  'rare word': ['JSONSerializer', 'AshComputer', 'tidewave', 'xterm', 'capybara', 'PKCE', 'okapi', 'bae407b', 'dov', 'Pseudo'],
  phrase: ['"start phoenix"', '"session live"', '"shared transcript"', '"mix phx.server"', '"the linter"', '"web search"', '"existing tests"', '"in background"', '"let me"', '"tool result"'],
  prefix: ['trans*', 'phoe*', 'serial*', 'comp*', 'liv*', 'render*', 'exp*', 'tid*', 'sess*', 'work*'],
}

function likeTerm(q) {
  return q.replace(/^"|"$/g, '').replace(/\*$/, '')
}

function queries(file, jsonlDir) {
  const { Store } = require(ROOT)
  const store = Store.open(file)
  const out = {}
  for (const [kind, qs] of Object.entries(QUERIES)) {
    const times = []
    let hits = 0
    for (let rep = 0; rep < 10; rep++) {
      for (const q of qs) {
        const t0 = process.hrtime.bigint()
        hits += store.search(q).hits.length
        times.push(ms(t0))
      }
    }
    out[kind] = { p50: median(times), p99: pct(times, 0.99), queries: times.length, hitsPerQuery: hits / times.length }
  }
  store.close()
  // The LIKE scan and ripgrep: three of each kind's queries, once each (each reads everything).
  const Database = require('better-sqlite3')
  const db = new Database(file, { readonly: true })
  // the newest 20 matches, as goose's chatrecall asks (a scan of every record)
  const like = db.prepare("SELECT id FROM records WHERE CAST(message AS TEXT) LIKE ? ORDER BY timestamp DESC LIMIT 20")
  const rg = spawnSync('rg', ['--version']).status === 0
  for (const [kind, qs] of Object.entries(QUERIES)) {
    const l = []
    const g = []
    for (const q of qs.slice(0, 3)) {
      const term = likeTerm(q)
      let t0 = process.hrtime.bigint()
      like.all(`%${term}%`)
      l.push(ms(t0))
      if (rg) {
        t0 = process.hrtime.bigint()
        spawnSync('rg', ['-i', '-F', '-l', term, jsonlDir], { maxBuffer: 1 << 28 })
        g.push(ms(t0))
      }
    }
    out[kind].likeMs = median(l)
    if (rg) out[kind].ripgrepMs = median(g)
  }
  db.close()
  return out
}

function run({ log = console.log } = {}) {
  const baseline = opt('--baseline', process.env.BENCH_SEARCH_BASELINE)
  const target = Number(opt('--records', process.env.BENCH_SEARCH_RECORDS || 1_000_000))
  const runs = Number(opt('--runs', 5))
  const results = { commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim() }
  log(`appends with the index${baseline ? ' and without (baseline build)' : ''}: ${runs} runs of 2,000`)
  results.append = appends(baseline, runs)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-search-big-'))
  try {
    log(`a store of ${target.toLocaleString('en')} records from the real fixtures`)
    const file = path.join(dir, 'big.db')
    results.build = build(dir, target)
    const before = countRecords(file)
    dropIndex(file)
    const fileBytes = fs.statSync(file).size
    const { Store } = require(ROOT)
    log('building the index at the first search')
    const store = Store.open(file)
    const t0 = process.hrtime.bigint()
    store.search('phoenix')
    const indexMs = ms(t0)
    store.close()
    const after = countRecords(file)
    results.index = { records: before.records, storeBytesWithoutIndex: fileBytes, indexBytes: after.indexBytes, indexFraction: after.indexBytes / fileBytes, buildMs: indexMs, usPerRecord: (indexMs * 1000) / before.records }
    log('queries')
    results.queries = queries(file, path.join(dir, 'jsonl'))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  fs.writeFileSync(path.join(__dirname, 'results-search.json'), JSON.stringify(results, null, 2) + '\n')
  return results
}

function format(r) {
  const f = (x, d = 1) => (x === undefined ? '-' : Number(x).toFixed(d))
  const lines = ['Search (bench/search.js)', '']
  const a = r.append
  lines.push(`append, ${a.messages} workload messages, median of ${a.runs} runs: with the index ${f(a.indexedUs, 0)} µs (${f(a.indexedVsJsonl, 2)}x JSONL)` +
    (a.withoutUs === undefined ? '' : `; without ${f(a.withoutUs, 0)} µs (${f(a.withoutVsJsonl, 2)}x JSONL); with / without ${f(a.indexedVsWithout, 2)}x`))
  const i = r.index
  lines.push(`index of ${i.records.toLocaleString('en')} records (store ${f(i.storeBytesWithoutIndex / 2 ** 20, 0)} MiB without it): built in ${f(i.buildMs / 1000, 1)} s (${f(i.usPerRecord, 1)} µs a record), ${f(i.indexBytes / 2 ** 20, 0)} MiB = ${f(i.indexFraction * 100, 1)}% of the store`)
  lines.push('', '| query | search p50 | search p99 | hits | LIKE scan | ripgrep | LIKE / search | ripgrep / search |', '|---|---|---|---|---|---|---|---|')
  for (const [kind, q] of Object.entries(r.queries)) {
    lines.push(`| ${kind} | ${f(q.p50, 2)} ms | ${f(q.p99, 2)} ms | ${f(q.hitsPerQuery, 1)} | ${f(q.likeMs, 0)} ms | ${q.ripgrepMs === undefined ? '-' : `${f(q.ripgrepMs, 0)} ms`} | ${f(q.likeMs / q.p50, 0)}x | ${q.ripgrepMs === undefined ? '-' : `${f(q.ripgrepMs / q.p50, 0)}x`} |`)
  }
  return lines.join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  if (args[0] === '--append-child') appendChild()
  else if (args.includes('--appends-only')) console.log(JSON.stringify(appends(opt('--baseline', process.env.BENCH_SEARCH_BASELINE), Number(opt('--runs', 5))), null, 2))
  else console.log(format(run()))
}
