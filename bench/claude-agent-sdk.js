'use strict'
// threadline/claude-agent-sdk against the SDK's own local JSONL transcript.
//
//   node --expose-gc bench/claude-agent-sdk.js [--runs N]
//
// The entries are the real Claude Code transcripts in fixtures/ (compacted-session.jsonl and the
// project with subagents), repeated with fresh uuids to 10,000 entries. Two ways the SDK appends:
// - 'batched' (its default): batches of 20 entries (a turn's worth);
// - 'eager': one entry per append call.
// Baseline per batch: JSON.stringify of each entry and one fs.appendFileSync of the lines, as
// Claude Code writes its file. Threadline: `await sessionStore.append(key, batch)` (a SQLite
// file store, the default durability), one transaction per call.
// Load: `await sessionStore.load(key)` of the 10,000 entries against reading the JSONL file and
// JSON.parse-ing every line. Runs are interleaved; ratio = Threadline / baseline, the median of
// the per-run ratios. Prints a table and writes bench/results-claude-agent-sdk.json.

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')

const ROOT = path.join(__dirname, '..')
const { Store } = require(ROOT)
const { ThreadlineSessionStore } = require(path.join(ROOT, 'adapters', 'claude-agent-sdk'))

const args = process.argv.slice(2)
const QUICK = process.env.BENCH_QUICK === '1'
const RUNS = Number(args[args.indexOf('--runs') + 1] || (QUICK ? 3 : 7))
const ENTRIES = QUICK ? 2000 : 10000
const BATCH = 20

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const now = () => process.hrtime.bigint()
const ms = (t0) => Number(now() - t0) / 1e6

/** `count` real transcript entries, uuids made fresh per copy (and per run) so none repeats. */
function workload(count, sessionId) {
  const files = [
    path.join(ROOT, 'fixtures', 'claude-code', 'compacted-session.jsonl'),
    path.join(ROOT, 'fixtures', 'claude-code', 'tool_heavy.jsonl'),
  ]
  const source = files.flatMap((f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean))
  const out = []
  for (let copy = 0; out.length < count; copy++) {
    const renamed = new Map()
    for (const line of source) {
      if (out.length === count) break
      const e = JSON.parse(line)
      if (typeof e.uuid === 'string') {
        renamed.set(e.uuid, crypto.randomUUID())
        e.uuid = renamed.get(e.uuid)
      }
      if (typeof e.parentUuid === 'string') e.parentUuid = renamed.get(e.parentUuid) ?? null
      if ('sessionId' in e) e.sessionId = sessionId
      out.push(e)
    }
  }
  return out
}

function batches(entries, size) {
  const out = []
  for (let i = 0; i < entries.length; i += size) out.push(entries.slice(i, i + size))
  return out
}

/** One run of the appends of `size`-entry batches: [threadline µs/entry, jsonl µs/entry]. */
async function appendRun(dir, run, size) {
  const sessionId = crypto.randomUUID()
  const entries = workload(ENTRIES, sessionId)
  const list = batches(entries, size)
  const store = Store.open(path.join(dir, `append-${run}-${size}.db`))
  const sessions = new ThreadlineSessionStore(store)
  const key = { projectKey: '-bench', sessionId }
  const file = path.join(dir, `append-${run}-${size}.jsonl`)
  let ours = 0n
  let theirs = 0n
  // Interleaved batch by batch, the order alternating, so both see the same machine.
  for (let i = 0; i < list.length; i++) {
    const b = list[i]
    const jsonl = () => {
      const t0 = now()
      fs.appendFileSync(file, `${b.map((e) => JSON.stringify(e)).join('\n')}\n`)
      theirs += now() - t0
    }
    const mirror = async () => {
      const t0 = now()
      await sessions.append(key, b)
      ours += now() - t0
    }
    if (i % 2) {
      jsonl()
      await mirror()
    } else {
      await mirror()
      jsonl()
    }
  }
  store.close()
  const per = (ns) => Number(ns) / 1e3 / entries.length
  return { threadline: per(ours), jsonl: per(theirs), file, store: path.join(dir, `append-${run}-${size}.db`), key }
}

/** One load of the session a batched run wrote: [threadline ms, jsonl ms]. */
async function loadRun(written) {
  global.gc?.()
  const store = Store.open(written.store)
  const sessions = new ThreadlineSessionStore(store)
  let t0 = now()
  const ours = await sessions.load(written.key)
  const threadline = ms(t0)
  global.gc?.()
  t0 = now()
  const theirs = fs.readFileSync(written.file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
  const jsonl = ms(t0)
  store.close()
  if (ours.length !== theirs.length) throw new Error(`load gave ${ours.length} entries, the file has ${theirs.length}`)
  return { threadline, jsonl }
}

async function run({ log = console.log } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-cas-'))
  const rows = { batched: [], eager: [], load: [] }
  try {
    for (let r = 0; r < RUNS; r++) {
      const batched = await appendRun(dir, r, BATCH)
      rows.batched.push(batched)
      rows.eager.push(await appendRun(dir, r, 1))
      rows.load.push(await loadRun(batched))
      log(`  run ${r + 1}/${RUNS}: batched ${(batched.threadline / batched.jsonl).toFixed(2)}x, eager ${(rows.eager[r].threadline / rows.eager[r].jsonl).toFixed(2)}x, load ${(rows.load[r].threadline / rows.load[r].jsonl).toFixed(2)}x`)
    }
  } finally {
    if (process.env.BENCH_KEEP !== '1') fs.rmSync(dir, { recursive: true, force: true })
  }
  const summary = (list) => ({
    threadline: median(list.map((x) => x.threadline)),
    jsonl: median(list.map((x) => x.jsonl)),
    ratio: median(list.map((x) => x.threadline / x.jsonl)),
  })
  return { entries: ENTRIES, batch: BATCH, runs: RUNS, batched: summary(rows.batched), eager: summary(rows.eager), load: summary(rows.load) }
}

function format(r) {
  const f = (x, d = 1) => x.toFixed(d)
  return [
    `Claude Agent SDK SessionStore (${r.entries} real transcript entries, median of ${r.runs} runs)`,
    '| operation | Threadline | SDK local JSONL | ratio | goal |',
    '|---|---|---|---|---|',
    `| append, batches of ${r.batch} ('batched') | ${f(r.batched.threadline, 2)} µs/entry | ${f(r.batched.jsonl, 2)} µs/entry | ${f(r.batched.ratio, 2)}x | 1.5x |`,
    `| append, one entry per call ('eager') | ${f(r.eager.threadline, 2)} µs/entry | ${f(r.eager.jsonl, 2)} µs/entry | ${f(r.eager.ratio, 2)}x | 1.5x |`,
    `| load of ${r.entries} entries | ${f(r.load.threadline)} ms | ${f(r.load.jsonl)} ms (read + JSON.parse) | ${f(r.load.ratio, 2)}x | 1.5x |`,
  ].join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  run().then((r) => {
    fs.writeFileSync(path.join(__dirname, 'results-claude-agent-sdk.json'), `${JSON.stringify(r, null, 2)}\n`)
    console.log(format(r))
  })
}
