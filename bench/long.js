'use strict'
// Long sessions: compactionPlan, compact, buildContext, turns and messages on one session of 20k
// and of 200k records, each against the floor measured in the same run (reading and JSON.parse-ing
// the same records as a JSONL file), and the 200k/20k scaling (10x is proportional).
//
//   node --expose-gc bench/long.js            (about 2 minutes; also run at the end of npm run bench)
//
// The session: turns of a prompt, an assistant tool call, its result and an assistant answer
// (about 200 bytes of JSON per record), so 200k records are about 40 MB.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const SIZES = [20_000, 200_000]
const REPS = 3

function turn(i) {
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

function records(n) {
  const out = []
  for (let i = 0; out.length < n; i++) out.push(...turn(i))
  return out.slice(0, n)
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

function time(fn) {
  const samples = []
  let result
  for (let r = 0; r < REPS; r++) {
    if (global.gc) global.gc()
    const t0 = process.hrtime.bigint()
    result = fn()
    samples.push(Number(process.hrtime.bigint() - t0) / 1e6)
  }
  return { ms: median(samples), result }
}

// One size, in its own process (so one size's heap does not weigh on the other's timings).
function child(n) {
  const { Store } = require('..')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-long-'))
  try {
    const recs = records(n)
    const jsonl = path.join(dir, 'session.jsonl')
    fs.writeFileSync(jsonl, recs.map((m) => JSON.stringify({ type: m.role, message: m })).join('\n') + '\n')
    const store = Store.open(path.join(dir, 'store.db'))
    const session = store.createSession({ id: 'long', contextWindow: 200_000 })
    const t0 = process.hrtime.bigint()
    session.restoreMessages(recs)
    const restoreMs = Number(process.hrtime.bigint() - t0) / 1e6
    const out = { n, restoreMs, bytes: fs.statSync(jsonl).size }
    out.floor = time(() => fs.readFileSync(jsonl, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))).ms
    out.messages = time(() => session.messages.length).ms
    out.turns = time(() => session.turns.length).ms
    out.buildContext = time(() => session.buildContext({ target: 'anthropic' }).messages.length).ms
    out.buildContextBudget = time(() => session.buildContext({ target: 'anthropic', maxTokens: 50_000 }).messages.length).ms
    out.compactionPlan = time(() => session.compactionPlan({ targetTokens: 50_000 }).turnsSummarised).ms
    const plan = session.compactionPlan({ targetTokens: 50_000 })
    const t1 = process.hrtime.bigint()
    session.compact({ summary: 'The work so far: modules fixed one by one.', firstKeptUuid: plan.firstKeptUuid })
    out.compact = Number(process.hrtime.bigint() - t1) / 1e6
    out.afterCompact = time(() => session.buildContext({ target: 'anthropic' }).messages.length).ms
    store.close()
    process.stdout.write(JSON.stringify(out))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function run({ log = console.log } = {}) {
  const results = []
  for (const n of SIZES) {
    const r = spawnSync(process.execPath, ['--expose-gc', __filename, '--child', String(n)], { encoding: 'utf8', maxBuffer: 1 << 20 })
    if (r.status !== 0) throw new Error(`long-session child (${n}) failed: ${r.stderr}`)
    const res = JSON.parse(r.stdout)
    results.push(res)
    log(`  ${n} records: restore ${res.restoreMs.toFixed(0)} ms; JSONL floor ${res.floor.toFixed(0)} ms; ` +
      `messages ${res.messages.toFixed(0)}, turns ${res.turns.toFixed(1)}, buildContext ${res.buildContext.toFixed(0)}, ` +
      `compactionPlan ${res.compactionPlan.toFixed(0)}, compact ${res.compact.toFixed(0)} ms`)
  }
  return results
}

function format(results) {
  const ops = [
    ['messages', 'messages (all of the current context)'],
    ['turns', 'turns'],
    ['buildContext', "buildContext({ target: 'anthropic' })"],
    ['buildContextBudget', 'buildContext, maxTokens 50k'],
    ['compactionPlan', 'compactionPlan({ targetTokens: 50k })'],
    ['compact', 'compact (one call, writes the compaction)'],
    ['afterCompact', 'buildContext after the compaction'],
  ]
  const [a, b] = results
  const lines = [
    `| operation | ${a.n / 1000}k records: ms | vs JSONL floor | ${b.n / 1000}k records: ms | vs JSONL floor | ${b.n / 1000}k / ${a.n / 1000}k |`,
    '|---|---|---|---|---|---|',
    `| JSONL floor: read + JSON.parse every line | ${a.floor.toFixed(1)} | 1.00x | ${b.floor.toFixed(1)} | 1.00x | ${(b.floor / a.floor).toFixed(1)}x |`,
  ]
  for (const [k, label] of ops) {
    lines.push(`| ${label} | ${a[k].toFixed(1)} | ${(a[k] / a.floor).toFixed(2)}x | ${b[k].toFixed(1)} | ${(b[k] / b.floor).toFixed(2)}x | ${(b[k] / a[k]).toFixed(1)}x |`)
  }
  return lines.join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  if (process.argv[2] === '--child') child(Number(process.argv[3]))
  else {
    const results = run()
    console.log(format(results))
    fs.writeFileSync(path.join(__dirname, 'results-long.json'), JSON.stringify(results, null, 2))
  }
}
