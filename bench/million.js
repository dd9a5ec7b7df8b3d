'use strict'
// A session of 1,000,000 records: buildContext, compactionPlan and the first search, each timed
// and its extra peak memory measured, against the goal of issue 23 (each within 3 s and 512 MiB).
//
//   node --expose-gc bench/million.js [--engine sqlite|postgres] [--only SESSIONS] [--ops OPS] [--records N]
//   BENCH_MILLION=1 npm run bench        (runs it at the end of the full run, SQLite)
//
// The sessions are made once and kept in bench/.data/ (gitignored; about 4 GB, several minutes to make), then reused:
//   - `compacted`: the seeded coding-agent workload (bench/workload.js: prompts, assistant
//     messages with thinking, text and tool calls, tool results, about 2.4 KB of JSON a record),
//     compacted as an agent does when its context fills: every 250 records (about 150k tokens),
//     `compactionPlan` then `compact` keeping the last 2 turns;
//   - `small`: 1,000,000 small records (a prompt, a tool call, its result, an answer; about 200
//     bytes of JSON each), never compacted: the shape of the finding (1,000,000 appends), where
//     even the whole session is a request that a process can hold;
//   - `bare`: 1,000,000 appends of a line of text, user and assistant in turn, with no usage (a
//     plain chat loop; the estimates cannot be calibrated).
// On PostgreSQL (`--engine postgres` with THREADLINE_TEST_POSTGRES=<url>, e.g. under
// `node scripts/postgres.js run -- ...`) each is made on the server, in a schema of its own.
//
// Each operation runs in a fresh child process (the store opened, the session opened, then the
// call), so one operation's heap never weighs on another's figures: time of the call, and extra
// peak RSS = the process's peak RSS during the call (VmHWM, reset just before it) minus its RSS
// just before it. The first search runs on a copy of the store whose search index is empty (as
// after the appends, before any search: every record waits to be indexed).
//
// Prints a table and writes bench/results-million.json.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const DATA = path.join(__dirname, '.data')
const args = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : dflt
}
const RECORDS = Number(opt('--records', 1_000_000))
const COMPACT_EVERY = 250
const MiB = 1 << 20

// ---- the sessions ----------------------------------------------------------------------------

function smallTurn(i) {
  const id = `toolu_${String(i).padStart(8, '0')}`
  return [
    { role: 'user', content: [{ type: 'text', text: `step ${i}: look at src/module_${i % 97}.ts and fix the failing test` }] },
    { role: 'assistant', id: `msg_${i}a`, content: [{ type: 'tool_use', id, name: 'Read', input: { file_path: `/repo/src/module_${i % 97}.ts` } }],
      usage: { input_tokens: 1000 + (i % 500), output_tokens: 40 } },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: `export function f${i}() {\n  return ${i}\n}\n`.repeat(2) }] },
    { role: 'assistant', id: `msg_${i}b`, content: [{ type: 'text', text: `Fixed module_${i % 97}: the function returned the wrong value.` }],
      usage: { input_tokens: 1100 + (i % 500), output_tokens: 25 } },
  ]
}

function* smallMessages() {
  for (let i = 0; ; i++) yield* smallTurn(i)
}

// `bare`: 1,000,000 appends of a line of text each, user and assistant in turn, no usage: a
// session as a plain chat loop (or a test) makes it.
function* bareMessages() {
  for (let k = 0; ; k++) {
    yield k % 2 === 0
      ? { role: 'user', content: `message ${k}: please look at file_${k % 97}.ts` }
      : { role: 'assistant', content: [{ type: 'text', text: `reply ${k}: done with file_${k % 97}.ts` }] }
  }
}

const storeFile = (kind, n) => path.join(DATA, `million-${kind}-${n}.db`)

// Makes session `s` of `kind` with `n` records (appendMany in chunks; compactions for
// `compacted`), in the SQLite file kept in bench/.data, or at `location` (PostgreSQL) when given.
function build(kind, n, location) {
  const { Store } = require(ROOT)
  const file = storeFile(kind, n)
  if (!location && fs.existsSync(file)) return file
  let target = location
  if (!location) {
    fs.mkdirSync(DATA, { recursive: true })
    target = file + '.part'
    for (const f of [target, target + '-wal', target + '-shm']) fs.rmSync(f, { force: true })
  }
  const store = Store.open(target)
  try {
    store.openSession('s')
    store.close()
    return location
  } catch (e) {
    if (e.code !== 'NOT_FOUND') throw e
  }
  const session = store.createSession({ id: 's', title: `${kind} ${n}`, project: 'bench', contextWindow: 200_000 })
  const it = kind === 'small' ? smallMessages() : kind === 'bare' ? bareMessages() : require('./workload.js').messages()
  const t0 = Date.now()
  let written = 0
  let sinceCompaction = 0
  while (written < n) {
    const chunk = []
    const size = Math.min(kind === 'compacted' ? COMPACT_EVERY - sinceCompaction : 1000, n - written)
    for (let i = 0; i < size; i++) chunk.push(it.next().value)
    session.appendMany(chunk)
    written += chunk.length
    sinceCompaction += chunk.length
    if (kind === 'compacted' && sinceCompaction >= COMPACT_EVERY && written < n) {
      const plan = session.compactionPlan({ targetTokens: 20_000, keepTurns: 2 })
      if (plan.firstKeptUuid) {
        session.compact({ summary: `Summary of ${plan.turnsSummarised} turns: ${plan.text.slice(0, 400)}`, firstKeptUuid: plan.firstKeptUuid, trigger: 'auto' })
        written += 1
      }
      sinceCompaction = 0
    }
    if (written % 50_000 < size + 1) process.stderr.write(`  ${kind}: ${written} records, ${((Date.now() - t0) / 1000).toFixed(0)} s\n`)
  }
  store.close()
  if (location) return location
  fs.renameSync(target, file)
  return file
}

// ---- one operation, measured in a child ---------------------------------------------------------

function status(key) {
  const m = fs.readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'))
  return Number(m[1]) * 1024
}

const OPS = {
  buildContext: (s) => s.buildContext({ target: 'anthropic' }).messages.length,
  buildContextBudget: (s) => s.buildContext({ target: 'anthropic', maxTokens: 150_000 }).messages.length,
  buildContextOpenAI: (s) => s.buildContext({ target: 'openai-responses', maxTokens: 150_000 }).messages.length,
  compactionPlan: (s) => s.compactionPlan({ targetTokens: 50_000 }).records.length,
  search: (s, store) => store.search('session render').hits.length,
}

function child(location, op) {
  const { Store } = require(ROOT)
  const store = Store.open(location)
  const session = store.openSession('s')
  if (global.gc) { global.gc(); global.gc() }
  const before = status('VmRSS')
  // Resets VmHWM (the peak) to the current RSS.
  fs.writeFileSync('/proc/self/clear_refs', '5')
  const t0 = process.hrtime.bigint()
  const result = OPS[op](session, store)
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  const peak = status('VmHWM')
  store.close()
  process.stdout.write(JSON.stringify({ ms, extraMiB: (peak - before) / MiB, result }))
}

function runChild(location, op) {
  const r = spawnSync(process.execPath, ['--expose-gc', '--max-old-space-size=16384', __filename, '--child', location, op],
    { encoding: 'utf8', maxBuffer: 1 << 20, env: process.env })
  if (r.status !== 0) return { error: (r.stderr || '').trim().split('\n').slice(-3).join(' ') }
  return JSON.parse(r.stdout)
}

// A copy of the store with an empty search index (as after the appends, before any search).
function unindexedCopy(file) {
  const copy = file.replace(/\.db$/, '.search.db')
  for (const f of [copy, copy + '-wal', copy + '-shm']) fs.rmSync(f, { force: true })
  fs.copyFileSync(file, copy)
  const Database = require('better-sqlite3')
  const db = new Database(copy)
  db.exec("DROP TABLE IF EXISTS search; UPDATE sessions SET indexed = 0")
  db.close()
  return copy
}

// ---- PostgreSQL: each session made on the server, in a schema of its own --------------------------

function pgLocation(url, kind, n) {
  const u = new URL(url)
  u.searchParams.set('schema', `million_${kind}_${n}`)
  return u.toString()
}

// ---- the run -------------------------------------------------------------------------------------

const PLAN = [
  ['compacted', ['buildContext', 'buildContextBudget', 'buildContextOpenAI', 'compactionPlan', 'search']],
  ['small', ['buildContext', 'buildContextBudget', 'compactionPlan', 'search']],
  ['bare', ['buildContextBudget', 'compactionPlan', 'search']],
]

function run({ log = (...a) => console.error(...a), engine = opt('--engine', 'sqlite'), only = opt('--only', null), opOnly = opt('--ops', null) } = {}) {
  const results = []
  const url = process.env.THREADLINE_TEST_POSTGRES
  if (engine === 'postgres' && !url) throw new Error('--engine postgres needs THREADLINE_TEST_POSTGRES')
  for (const [kind, ops] of PLAN) {
    if (only && !only.split(',').includes(kind)) continue
    const file = engine === 'postgres' ? null : build(kind, RECORDS)
    const location = engine === 'postgres' ? build(kind, RECORDS, pgLocation(url, kind, RECORDS)) : file
    for (const op of ops.filter((o) => !opOnly || opOnly.split(',').includes(o))) {
      let at = location
      if (op === 'search') at = engine === 'postgres' ? pgResetIndex(location) : unindexedCopy(file)
      const r = runChild(at, op)
      if (op === 'search' && engine !== 'postgres') for (const f of [at, at + '-wal', at + '-shm']) fs.rmSync(f, { force: true })
      const row = { engine, kind, records: RECORDS, op, ...r }
      results.push(row)
      log(`  ${engine} ${kind} ${op}: ${r.error ? 'error ' + r.error : `${r.ms.toFixed(0)} ms, +${r.extraMiB.toFixed(0)} MiB (${r.result})`}`)
    }
  }
  return results
}

// Empties a PostgreSQL store's search index (the first search then indexes every record).
function pgResetIndex(location) {
  const u = new URL(location)
  const schema = u.searchParams.get('schema')
  u.searchParams.delete('schema')
  const sql = `SET search_path TO ${schema}; DELETE FROM search; UPDATE sessions SET indexed = 0;`
  const r = spawnSync(process.execPath, ['-e', `
    const { Client } = require('pg'); const c = new Client({ connectionString: ${JSON.stringify(u.toString())} });
    c.connect().then(() => c.query(${JSON.stringify(sql)})).then(() => c.end()).catch((e) => { console.error(e); process.exit(1) })`],
  { cwd: ROOT, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`resetting the index failed: ${r.stderr}`)
  return location
}

const LABELS = {
  buildContext: "buildContext({ target: 'anthropic' })",
  buildContextBudget: "buildContext({ target: 'anthropic', maxTokens: 150_000 })",
  buildContextOpenAI: "buildContext({ target: 'openai-responses', maxTokens: 150_000 })",
  compactionPlan: 'compactionPlan({ targetTokens: 50_000 })',
  search: "first store.search('session render'), index empty",
}

function format(results) {
  const lines = ['| engine | session | operation | time, ms | extra peak RSS, MiB | within 3 s and 512 MiB |', '|---|---|---|---|---|---|']
  for (const r of results) {
    const ok = r.error ? 'error' : r.ms <= 3000 && r.extraMiB <= 512 ? 'yes' : 'no'
    lines.push(`| ${r.engine} | ${r.kind} | ${LABELS[r.op]} | ${r.error ? '-' : r.ms.toFixed(0)} | ${r.error ? r.error : r.extraMiB.toFixed(0)} | ${ok} |`)
  }
  return lines.join('\n')
}

module.exports = { run, format, build }

if (require.main === module) {
  if (args[0] === '--child') child(args[1], args[2])
  else if (args[0] === '--build') build(args[1], RECORDS)
  else {
    const results = run()
    console.log(format(results))
    const out = path.join(__dirname, `results-million${opt('--engine', 'sqlite') === 'postgres' ? '-postgres' : ''}.json`)
    fs.writeFileSync(out, JSON.stringify(results, null, 2))
  }
}
