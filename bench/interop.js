'use strict'
// Import and the command line.
//
//   node --expose-gc bench/interop.js [--runs N]
//
// 1. Import throughput: every session file in fixtures/ (Claude Code files and subagents, Codex
//    rollouts, pi sessions, an fspec data directory) imported into a fresh store, against the
//    floor of reading the same files and JSON.parse-ing every line (a manifest whole) in this
//    process; interleaved, the median of N runs. Ratio = import time / floor time (MB/s of each).
// 2. `threadline ls` on a store of 10,000 sessions, and `threadline show` of a 10,000-record
//    session (the real fixtures' records, repeated), each a new process writing to a pipe, against
//    a new node process that only starts (`node -e 0`): the cost of the command over the process.
//
// Prints a table and writes bench/results-interop.json.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFileSync } = require('child_process')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'threadline.js')
const args = process.argv.slice(2)
const RUNS = Number(args[args.indexOf('--runs') + 1] || (process.env.BENCH_QUICK === '1' ? 3 : 7))
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6

/** The fixture files of each format, and their bytes. */
function sources() {
  const out = []
  const walk = (dir, keep) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name)
      if (e.isDirectory()) walk(p, keep)
      else if (keep(e.name)) out.push(p)
    }
  }
  const formats = []
  for (const [format, dirs, keep] of [
    ['claude-code', ['claude-code', 'claude-code-subagents', 'claude-code-log'], (n) => n.endsWith('.jsonl')],
    ['codex', ['codex'], (n) => n.startsWith('rollout-') && n.endsWith('.jsonl')],
    ['pi', ['pi'], (n) => n.endsWith('.jsonl')],
    ['fspec', [path.join('fspec', 'data')], (n) => n === 'messages.jsonl' || n.endsWith('.json')],
  ]) {
    for (const d of dirs) {
      const dir = path.join(ROOT, 'fixtures', d)
      if (!fs.existsSync(dir)) continue
      const before = out.length
      walk(dir, keep)
      if (out.length > before) formats.push({ format, dir, files: out.slice(before) })
    }
  }
  return formats
}

function floor(files) {
  let n = 0
  for (const f of files) {
    // a manifest is one JSON document; the rest are JSON lines
    if (f.endsWith('.json')) {
      JSON.parse(fs.readFileSync(f, 'utf8'))
      n++
      continue
    }
    for (const line of fs.readFileSync(f, 'utf8').split('\n')) {
      if (line.trim() === '') continue
      try {
        JSON.parse(line)
        n++
      } catch {}
    }
  }
  return n
}

async function importThroughput(lib, dir, log) {
  const formats = sources()
  const files = formats.flatMap((f) => f.files)
  const bytes = files.reduce((n, f) => n + fs.statSync(f).size, 0)
  const imp = []
  const base = []
  for (let r = 0; r < RUNS; r++) {
    global.gc && global.gc()
    let t0 = process.hrtime.bigint()
    floor(files)
    base.push(ms(t0))
    const store = lib.Store.open(path.join(dir, `import-${r}.db`))
    t0 = process.hrtime.bigint()
    for (const f of formats) await store.import({ format: f.format, path: f.dir })
    imp.push(ms(t0))
    store.close()
  }
  const mbps = (t) => bytes / 1e6 / (t / 1000)
  const ratios = imp.map((t, i) => t / base[i])
  log(`  import: ${files.length} files, ${(bytes / 1e6).toFixed(2)} MB: ${median(imp).toFixed(1)} ms vs parse ${median(base).toFixed(1)} ms`)
  return {
    files: files.length,
    bytes,
    formats: formats.map((f) => `${f.format}: ${path.relative(ROOT, f.dir)} (${f.files.length})`),
    importMs: median(imp),
    parseMs: median(base),
    importMBps: mbps(median(imp)),
    parseMBps: mbps(median(base)),
    ratio: median(ratios),
  }
}

/** A store of `n` sessions (two messages each), and one session of 10,000 records. */
function bigStore(lib, file) {
  const store = lib.Store.open(file)
  for (let i = 0; i < 10000; i++) {
    const s = store.createSession({ id: `s${i}`, project: `p${i % 20}`, title: `session ${i}` })
    s.appendMany(['What is in src/?', { role: 'assistant', content: [{ type: 'text', text: `Reply ${i}` }] }])
    s.close()
  }
  const lines = fs.readFileSync(path.join(ROOT, 'fixtures', 'claude-code', 'tool_heavy.jsonl'), 'utf8').split('\n').filter(Boolean)
  const long = store.createSession({ id: 'long' })
  const records = []
  while (records.length < 10000) {
    for (const l of lines) {
      const r = JSON.parse(l)
      delete r.uuid
      delete r.parentUuid
      if (records.length < 10000) records.push(r)
    }
  }
  for (let i = 0; i < records.length; i += 500) long.appendMany(records.slice(i, i + 500))
  const n = long.envelopes().length
  store.close()
  return n
}

function commandTimes(dir, log) {
  const file = path.join(dir, 'big.db')
  const records = bigStore(require(ROOT), file)
  const run = (argv) => {
    const t0 = process.hrtime.bigint()
    execFileSync(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 30 })
    return ms(t0)
  }
  const node = []
  const ls = []
  const show = []
  for (let r = 0; r < RUNS; r++) {
    node.push(run(['-e', '0']))
    ls.push(run([BIN, 'ls', '--store', file, '--limit', '10000']))
    show.push(run([BIN, 'show', 'long', '--store', file]))
  }
  log(`  ls 10,000 sessions: ${median(ls).toFixed(0)} ms; show ${records} records: ${median(show).toFixed(0)} ms; node -e 0: ${median(node).toFixed(0)} ms`)
  return {
    sessions: 10000,
    showRecords: records,
    nodeMs: median(node),
    lsMs: median(ls),
    showMs: median(show),
    lsRatio: median(ls.map((t, i) => t / node[i])),
    showRatio: median(show.map((t, i) => t / node[i])),
  }
}

async function run({ log = console.error } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-interop-'))
  try {
    const lib = require(ROOT)
    return { runs: RUNS, import: await importThroughput(lib, dir, log), commands: commandTimes(dir, log) }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function format(r) {
  const i = r.import
  const c = r.commands
  return [
    `Import and the command line (bench/interop.js, median of ${r.runs} runs)`,
    `  import of the fixtures (${i.files} files, ${(i.bytes / 1e6).toFixed(2)} MB): ${i.importMBps.toFixed(1)} MB/s; reading + JSON.parse alone ${i.parseMBps.toFixed(1)} MB/s; ratio ${i.ratio.toFixed(2)}x`,
    `  threadline ls, 10,000 sessions: ${c.lsMs.toFixed(0)} ms (${c.lsRatio.toFixed(2)}x a bare node start, ${c.nodeMs.toFixed(0)} ms)`,
    `  threadline show, ${c.showRecords} records: ${c.showMs.toFixed(0)} ms (${c.showRatio.toFixed(2)}x a bare node start)`,
  ].join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  run().then((r) => {
    console.log(format(r))
    fs.writeFileSync(path.join(__dirname, 'results-interop.json'), JSON.stringify(r, null, 2) + '\n')
  })
}
