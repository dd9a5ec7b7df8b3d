'use strict'
// npm run bench  (node --expose-gc bench/run.js)
//
// One seeded coding-agent workload (bench/workload.js) run through Threadline and, in the same run,
// through the two baselines a user would pick instead (bench/engines.js): better-sqlite3 (WAL,
// synchronous=NORMAL, one JSON row per message) and a JSONL file written with fs.appendFileSync.
// Engines are interleaved (message by message, batch by batch, restore by restore, in rotating
// order) and every phase is repeated; ratios are Threadline / baseline, computed within each
// repetition and then the median taken. Results: a table on stdout and bench/results.json.
//
// Environment: BENCH_QUICK=1 for a small smoke run; BENCH_KEEP=1 keeps the temp dir;
// BENCH_RESULTS=file writes the results elsewhere; BENCH_THREADLINE=dir measures another build.
//
// Then the recovery sections (bench/recovery.js: streaming persistence per chunk, recover() on a
// 10k-message session), also runnable alone: node --expose-gc bench/recovery.js [stream,paced,recover].
// BENCH_RECOVERY=0 skips them here. Then resuming a compacted session (bench/resume.js: 100k
// records compacted to 2k vs 2k; BENCH_RESUME=0 skips it) and the accuracy of token estimates
// on the real Claude Code fixtures (bench/estimate.js, no timing; BENCH_ESTIMATE=0 skips it),
// long sessions (bench/long.js; BENCH_LONG=0), search (bench/search.js; BENCH_SEARCH=0) and the
// engines against their bare clients (bench/postgres.js, SQLite and PostgreSQL; BENCH_POSTGRES=0;
// it starts a throwaway PostgreSQL server unless THREADLINE_TEST_POSTGRES names one), and import
// throughput and the command line (bench/interop.js; BENCH_INTEROP=0), and the framework adapters
// against their frameworks' own stores (bench/claude-agent-sdk.js, ai-sdk.js, openai-agents.js,
// anthropic.js; BENCH_ADAPTERS=0), live watch's latency against fs.watch on a JSONL file
// (bench/watch.js; BENCH_WATCH=0), the Python adapter against openai-agents' SQLiteSession and a
// JSONL file (python/bench/sessions.py; BENCH_PYTHON=0). BENCH_MILLION=1 adds a
// session of 1,000,000 records (bench/million.js: buildContext, compactionPlan and the first
// search against 3 s and 512 MiB each; minutes, and about 4 GB kept in bench/.data).

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')
const { spawn, execFileSync } = require('child_process')
const readline = require('readline')

// Restore children are started by a launcher process started now, while this process is small:
// Linux carries peak RSS (maxRSS) over fork + exec (see bench/launcher.js).
const launcher = spawn(process.execPath, [path.join(__dirname, 'launcher.js')], { stdio: ['pipe', 'pipe', 'inherit'] })
const launcherLines = readline.createInterface({ input: launcher.stdout })[Symbol.asyncIterator]()

const { messages, generate, DEFAULT_SEED } = require('./workload.js')
const { ENGINES, THREADLINE_DIR, open, restore, fileOf, diskBytes } = require('./engines.js')

const QUICK = process.env.BENCH_QUICK === '1'
// The framework adapters (bench/<name>.js each): BENCH_ADAPTERS=0 skips them.
const ADAPTER_BENCHES = ['claude-agent-sdk', 'ai-sdk', 'openai-agents', 'anthropic']
const RESULTS = path.resolve(process.env.BENCH_RESULTS || path.join(__dirname, 'results.json'))
const CONFIG = QUICK
  ? {
      seed: DEFAULT_SEED,
      append: { messages: 1000, reps: 2, warmup: 200 },
      power: { messages: 200, reps: 2 },
      appendMany: { messages: 2000, batch: 100, reps: 2 },
      restore: { sizes: [1000, 10000], reps: { 1000: 3, 10000: 3 } },
      populateBatch: 500,
    }
  : {
      seed: DEFAULT_SEED,
      append: { messages: 10000, reps: 5, warmup: 500 },
      power: { messages: 600, reps: 5 },
      appendMany: { messages: 10000, batch: 100, reps: 3 },
      restore: { sizes: [1000, 10000, 100000], reps: { 1000: 15, 10000: 21, 100000: 5 } },
      populateBatch: 500,
    }

const TARGETS = [
  { id: 'append-median', what: 'append median <= 1.0x JSONL appendFileSync', row: 'append.median', baseline: 'jsonl', max: 1.0 },
  { id: 'restore-10k', what: 'full restore of 10k <= 0.7x JSONL restore', row: 'restore.10000.ms', baseline: 'jsonl', max: 0.7 },
  { id: 'restore-100k-memory', what: 'extra peak memory of 100k restore <= 0.6x JSONL', row: 'restore.100000.extraPeakMB', baseline: 'jsonl', max: 0.6 },
]

const BASELINES = ['jsonl', 'sqlite']
const BIG_BYTES = 10240
const now = () => process.hrtime.bigint()
const gc = () => { if (global.gc) { global.gc(); global.gc() } }
const log = (...a) => process.stderr.write(a.join(' ') + '\n')

// ---------- statistics ----------
function sorted(xs) { return Float64Array.from(xs).sort() }
function quantile(s, q) { return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] }
function median(xs) {
  const s = sorted(xs)
  if (s.length === 0) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
function summary(samples) {
  const s = sorted(samples)
  return { n: s.length, median: median(s), p99: quantile(s, 0.99), mean: s.reduce((a, b) => a + b, 0) / s.length, max: s[s.length - 1] }
}
// engines in an order that rotates with i, so no engine always goes first
function rotation(i) {
  const k = i % ENGINES.length
  return ENGINES.slice(k).concat(ENGINES.slice(0, k))
}

// ---------- machine ----------
function machine() {
  let cpu = 'unknown'
  try {
    const m = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m)
    if (m) cpu = m[1].trim()
  } catch {}
  return {
    nproc: os.availableParallelism ? os.availableParallelism() : os.cpus().length,
    cpu,
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    memoryGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    tmpdir: os.tmpdir(),
    betterSqlite3: require('better-sqlite3/package.json').version,
  }
}

// Which Threadline build was measured: the checkout, its commit, uncommitted library changes and
// the native module's hash (the library may be rebuilt while the benchmark runs: checked again at
// the end).
function build() {
  const git = (...args) => {
    try { return execFileSync('git', args, { cwd: THREADLINE_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).replace(/\s+$/, '') } catch { return null }
  }
  const node = fs.readdirSync(THREADLINE_DIR).find((f) => f.endsWith('.node'))
  const file = node && path.join(THREADLINE_DIR, node)
  return {
    dir: THREADLINE_DIR,
    version: require(path.join(THREADLINE_DIR, 'package.json')).version,
    commit: git('rev-parse', '--short', 'HEAD'),
    commitSubject: git('log', '-1', '--format=%s'),
    uncommittedLibraryFiles: (git('status', '--porcelain', '--', 'src', 'crates', 'index.js', 'native.js') || '').split('\n').filter(Boolean),
    nativeModule: node || null,
    nativeSha256: file ? crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex').slice(0, 16) : null,
    nativeMtime: file ? fs.statSync(file).mtime.toISOString() : null,
    // library sources edited after the native module was built (it may not include those edits)
    sourcesNewerThanNative: file ? newerThan(fs.statSync(file).mtimeMs, ['src', 'crates/threadline/src'].map((d) => path.join(THREADLINE_DIR, d))) : [],
  }
}

function newerThan(ms, dirs) {
  const out = []
  for (const d of dirs) {
    let names = []
    try { names = fs.readdirSync(d) } catch {}
    for (const n of names) {
      const f = path.join(d, n)
      if (n.endsWith('.rs') && fs.statSync(f).mtimeMs > ms) out.push(path.relative(THREADLINE_DIR, f))
    }
  }
  return out
}

// ---------- phases ----------

// Per-message append latency, engines interleaved message by message. Returns per-rep summaries.
// Also per size class: messages of more than 10 KB of JSON (Threadline's blob threshold) and the rest.
function appendLatency(msgs, count, reps, durability, dir, warmup, sizes) {
  const out = Object.fromEntries(ENGINES.map((e) => [e, []]))
  if (warmup) {
    const hs = ENGINES.map((e) => open(e, fileOf(e, dir, `warm-${durability}`), durability))
    for (let i = 0; i < warmup; i++) for (const h of hs) h.append(msgs[i])
    hs.forEach((h) => h.close())
  }
  for (let r = 0; r < reps; r++) {
    gc()
    const handles = Object.fromEntries(ENGINES.map((e) => [e, open(e, fileOf(e, dir, `append-${durability}-${r}`), durability)]))
    const t = Object.fromEntries(ENGINES.map((e) => [e, new Float64Array(count)]))
    for (let i = 0; i < count; i++) {
      const m = msgs[i]
      for (const e of rotation(i + r)) {
        const h = handles[e]
        const a = now()
        h.append(m)
        t[e][i] = Number(now() - a) / 1e3 // µs
      }
    }
    for (const e of ENGINES) {
      const file = handles[e].file
      let walBytes = 0
      try { walBytes = fs.statSync(file + '-wal').size } catch {}
      const bytesOnDisk = diskBytes(file)
      handles[e].close()
      const big = [], small = []
      for (let i = 0; i < count; i++) (sizes[i] > BIG_BYTES ? big : small).push(t[e][i])
      out[e].push({ ...summary(t[e]), big: summary(big), small: summary(small), walBytes, bytesOnDisk })
    }
    log(`  ${durability} append rep ${r + 1}/${reps}: ` + ENGINES.map((e) => `${e} median ${out[e][r].median.toFixed(1)} µs p99 ${out[e][r].p99.toFixed(1)} µs`).join(', '))
  }
  return out
}

// appendMany in batches, engines interleaved batch by batch. Per rep: µs per message (total time /
// messages) for each engine.
function appendManyThroughput(msgs, count, batch, reps, dir, bytes) {
  const out = Object.fromEntries(ENGINES.map((e) => [e, []]))
  for (let r = 0; r < reps; r++) {
    gc()
    const handles = Object.fromEntries(ENGINES.map((e) => [e, open(e, fileOf(e, dir, `many-${r}`))]))
    const total = Object.fromEntries(ENGINES.map((e) => [e, 0]))
    const per = Object.fromEntries(ENGINES.map((e) => [e, []]))
    for (let b = 0, i = 0; i < count; b++, i += batch) {
      const slice = msgs.slice(i, Math.min(count, i + batch))
      for (const e of rotation(b + r)) {
        const a = now()
        handles[e].appendMany(slice)
        const us = Number(now() - a) / 1e3
        total[e] += us
        per[e].push(us)
      }
    }
    for (const e of ENGINES) {
      handles[e].close()
      out[e].push({
        usPerMessage: total[e] / count,
        messagesPerSecond: count / (total[e] / 1e6),
        mbPerSecond: bytes / 1e6 / (total[e] / 1e6),
        batchMedianMs: median(per[e]) / 1e3,
      })
    }
    log(`  appendMany rep ${r + 1}/${reps}: ` + ENGINES.map((e) => `${e} ${out[e][r].usPerMessage.toFixed(1)} µs/msg`).join(', '))
  }
  return out
}

// Writes the restore datasets (every size, every engine) from one pass over the workload, with
// appendMany in batches (Threadline), transactions (better-sqlite3), joined lines (JSONL).
function populate(sizes, batchSize, dir, seed) {
  const max = Math.max(...sizes)
  const sets = {}
  const loadUs = Object.fromEntries(ENGINES.map((e) => [e, 0]))
  for (const n of sizes) {
    sets[n] = Object.fromEntries(ENGINES.map((e) => [e, open(e, fileOf(e, dir, `restore-${n}`))]))
  }
  const it = messages(seed)
  let bytes = 0
  let genMs = 0
  for (let i = 0, b = 0; i < max; i += batchSize, b++) {
    const g = now()
    const batch = []
    for (let j = 0; j < batchSize && i + j < max; j++) batch.push(it.next().value)
    genMs += Number(now() - g) / 1e6
    for (const m of batch) bytes += Buffer.byteLength(JSON.stringify(m))
    for (const n of sizes) {
      if (i >= n) continue
      const part = i + batch.length <= n ? batch : batch.slice(0, n - i)
      for (const e of rotation(b)) {
        const a = now()
        sets[n][e].appendMany(part)
        if (n === max) loadUs[e] += Number(now() - a) / 1e3
      }
    }
  }
  const files = {}
  for (const n of sizes) {
    files[n] = {}
    for (const e of ENGINES) {
      const h = sets[n][e]
      h.close()
      files[n][e] = { file: h.file, sessionId: h.sessionId, diskBytes: diskBytes(h.file) }
    }
  }
  return { files, jsonBytes: bytes, genMs, loadMs: Object.fromEntries(ENGINES.map((e) => [e, loadUs[e] / 1e3])) }
}

async function restoreInChild(engine, file, sessionId, n) {
  const child = path.join(__dirname, 'restore-child.js')
  launcher.stdin.write(JSON.stringify(['--expose-gc', child, engine, file, String(sessionId), String(n)]) + '\n')
  const { value, done } = await launcherLines.next()
  if (done) throw new Error('the launcher process exited')
  const res = JSON.parse(value)
  if (res.error) throw new Error(`${engine} restore of ${n} failed: ${res.error}\n${res.stderr || ''}`)
  const r = JSON.parse(res.stdout.trim().split('\n').pop())
  if (r.error) throw new Error(`${engine} restore of ${n}: ${r.error}`)
  return r
}

async function restores(files, sizes, repsBySize) {
  const out = {}
  for (const n of sizes) {
    out[n] = Object.fromEntries(ENGINES.map((e) => [e, []]))
    const reps = repsBySize[n]
    for (let r = 0; r < reps; r++) {
      for (const e of rotation(r)) {
        const f = files[n][e]
        out[n][e].push(await restoreInChild(e, f.file, f.sessionId, n))
      }
      const fp = new Set(ENGINES.map((e) => `${out[n][e][r].count}/${out[n][e][r].lastId}/${out[n][e][r].lastBytes}`))
      if (fp.size !== 1) throw new Error(`restore of ${n}: engines read different data: ${[...fp].join(' | ')}`)
    }
    log(`  restore ${n}: ` + ENGINES.map((e) => `${e} ${median(out[n][e].map((x) => x.ms)).toFixed(1)} ms +${(median(out[n][e].map((x) => x.extraPeak)) / 2 ** 20).toFixed(0)} MiB`).join(', '))
  }
  return out
}

// Threadline must give back exactly what it was given (and so must the baselines) for the
// comparison to mean anything: checked on the smallest restore set.
function losslessCheck(files, n, seed) {
  const expect = JSON.stringify(generate(n, seed))
  const res = {}
  for (const e of ENGINES) {
    const r = restore(e, files[n][e].file, files[n][e].sessionId)
    res[e] = JSON.stringify(r.messages) === expect
    r.close()
  }
  return res
}

// ---------- report ----------
function ratioRows(perRep, pick) {
  // perRep: { engine: [value per rep] } -> median over reps of TL/baseline per rep
  const out = {}
  for (const b of BASELINES) {
    const rs = perRep.threadline.map((v, i) => pick(v) / pick(perRep[b][i]))
    out[b] = { median: median(rs), perRep: rs }
  }
  return out
}

async function main() {
  const t0 = Date.now()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-'))
  const mach = machine()
  log(`threadline bench: ${mach.nproc} cores, ${mach.cpu}, node ${mach.node}${QUICK ? ' (QUICK)' : ''}; temp dir ${dir}`)
  const results = { generatedAt: new Date().toISOString(), quick: QUICK, machine: mach, build: build(), config: CONFIG, rows: {}, targets: [] }
  log(`threadline ${results.build.commit} (${results.build.commitSubject}), native ${results.build.nativeSha256} ${results.build.nativeMtime}${results.build.uncommittedLibraryFiles.length ? ', uncommitted: ' + results.build.uncommittedLibraryFiles.join(' ') : ''}`)

  const nMem = Math.max(CONFIG.append.messages + CONFIG.append.warmup, CONFIG.appendMany.messages, CONFIG.power.messages)
  const msgs = generate(nMem, CONFIG.seed)
  const sizes = msgs.map((m) => Buffer.byteLength(JSON.stringify(m)))
  const bytesOf = (n) => sizes.slice(0, n).reduce((a, b) => a + b, 0)
  const nStat = Math.min(10000, nMem)
  results.workload = {
    seed: CONFIG.seed,
    sample: { messages: nStat, jsonBytes: bytesOf(nStat), meanBytes: bytesOf(nStat) / nStat },
    withNonAscii: msgs.slice(0, nStat).filter((m) => /[^\x00-\x7f]/.test(JSON.stringify(m))).length,
  }

  try {
    log('append latency (durability process / WAL NORMAL / appendFileSync)')
    const ap = appendLatency(msgs, CONFIG.append.messages, CONFIG.append.reps, 'process', dir, CONFIG.append.warmup, sizes)
    log('append latency (durability power / synchronous=FULL / appendFileSync + fsyncSync)')
    const pw = appendLatency(msgs, CONFIG.power.messages, CONFIG.power.reps, 'power', dir, 50, sizes)
    log(`appendMany throughput (batches of ${CONFIG.appendMany.batch})`)
    const am = appendManyThroughput(msgs, CONFIG.appendMany.messages, CONFIG.appendMany.batch, CONFIG.appendMany.reps, dir, bytesOf(CONFIG.appendMany.messages))
    gc()

    log(`writing restore sets ${CONFIG.restore.sizes.join(' / ')} (appendMany in batches of ${CONFIG.populateBatch})`)
    const pop = populate(CONFIG.restore.sizes, CONFIG.populateBatch, dir, CONFIG.seed)
    log(`  ${(pop.jsonBytes / 2 ** 20).toFixed(1)} MiB of JSON generated in ${pop.genMs.toFixed(0)} ms; bulk load of ${Math.max(...CONFIG.restore.sizes)}: ` + ENGINES.map((e) => `${e} ${pop.loadMs[e].toFixed(0)} ms`).join(', '))
    const lossless = losslessCheck(pop.files, Math.min(...CONFIG.restore.sizes), CONFIG.seed)
    log(`  lossless round trip of ${Math.min(...CONFIG.restore.sizes)} messages: ` + JSON.stringify(lossless))
    gc()

    log('full restore, each in a fresh child process')
    const rs = await restores(pop.files, CONFIG.restore.sizes, CONFIG.restore.reps)

    // ---- rows ----
    const rows = results.rows
    const engAbs = (perRep, pick) => Object.fromEntries(ENGINES.map((e) => [e, median(perRep[e].map(pick))]))
    rows['append.median'] = { label: 'append, median (µs)', unit: 'µs', abs: engAbs(ap, (s) => s.median), ratio: ratioRows(ap, (s) => s.median), perRep: ap }
    rows['append.p99'] = { label: 'append, p99 (µs)', unit: 'µs', abs: engAbs(ap, (s) => s.p99), ratio: ratioRows(ap, (s) => s.p99) }
    results.appendFiles = Object.fromEntries(ENGINES.map((e) => [e, { walMiB: median(ap[e].map((x) => x.walBytes)) / 2 ** 20, onDiskMiB: median(ap[e].map((x) => x.bytesOnDisk)) / 2 ** 20 }]))
    rows['append.small.p99'] = { label: `append, p99 of messages <= 10 KB (µs)`, unit: 'µs', abs: engAbs(ap, (s) => s.small.p99), ratio: ratioRows(ap, (s) => s.small.p99) }
    rows['append.big.median'] = { label: `append, median of messages > 10 KB (µs)`, unit: 'µs', abs: engAbs(ap, (s) => s.big.median), ratio: ratioRows(ap, (s) => s.big.median) }
    rows['appendMany'] = { label: `appendMany, batches of ${CONFIG.appendMany.batch} (µs/message)`, unit: 'µs/msg', abs: engAbs(am, (s) => s.usPerMessage), ratio: ratioRows(am, (s) => s.usPerMessage), perRep: am, mbPerSecond: engAbs(am, (s) => s.mbPerSecond) }
    rows['power.median'] = { label: "append, durability 'power', median (µs)", unit: 'µs', abs: engAbs(pw, (s) => s.median), ratio: ratioRows(pw, (s) => s.median), perRep: pw }
    rows['power.p99'] = { label: "append, durability 'power', p99 (µs)", unit: 'µs', abs: engAbs(pw, (s) => s.p99), ratio: ratioRows(pw, (s) => s.p99) }
    for (const n of CONFIG.restore.sizes) {
      const per = rs[n]
      rows[`restore.${n}.ms`] = { label: `full restore ${n / 1000}k messages (ms)`, unit: 'ms', abs: engAbs(per, (x) => x.ms), ratio: ratioRows(per, (x) => x.ms), samples: per }
      if (n === Math.max(...CONFIG.restore.sizes)) {
        rows[`restore.${n}.extraPeakMB`] = { label: `extra peak RSS, restore ${n / 1000}k (MiB)`, unit: 'MiB', abs: engAbs(per, (x) => x.extraPeak / 2 ** 20), ratio: ratioRows(per, (x) => x.extraPeak) }
        // how much of the RSS growth is file-backed pages (SQLite's mmap of the store file)
        rows[`restore.${n}.fileBackedMB`] = { label: `  of which file-backed (mmap) at end (MiB)`, unit: 'MiB', abs: engAbs(per, (x) => (x.rssFileAfter - x.rssFileBefore) / 2 ** 20), ratio: ratioRows(per, (x) => Math.max(1, x.rssFileAfter - x.rssFileBefore)), info: true }
      }
    }
    results.bulkLoad = { messages: Math.max(...CONFIG.restore.sizes), batch: CONFIG.populateBatch, ms: pop.loadMs, jsonBytes: pop.jsonBytes }
    results.diskBytes = Object.fromEntries(CONFIG.restore.sizes.map((n) => [n, Object.fromEntries(ENGINES.map((e) => [e, pop.files[n][e].diskBytes]))]))
    results.lossless = lossless

    for (const t of TARGETS) {
      const row = rows[t.row]
      if (!row) { results.targets.push({ ...t, measured: null, pass: null, note: 'not measured in this run' }); continue }
      const measured = row.ratio[t.baseline].median
      results.targets.push({ ...t, measured, pass: measured <= t.max })
    }

    if (process.env.BENCH_RECOVERY !== '0') {
      log('recovery (bench/recovery.js): streaming persistence and recover()')
      results.recovery = await require('./recovery.js').run({ quick: QUICK, log })
    }
    if (process.env.BENCH_RESUME !== '0') {
      log('resume (bench/resume.js): open + buildContext, 100k records compacted to 2k vs 2k')
      results.resume = await require('./resume.js').run({ quick: QUICK, log })
      results.targets.push(require('./resume.js').target(results.resume))
    }
    if (process.env.BENCH_ESTIMATE !== '0') {
      log('token estimates (bench/estimate.js) on the real Claude Code fixtures')
      results.estimate = require('./estimate.js').run({ log })
    }
    if (process.env.BENCH_LONG !== '0' && !QUICK) {
      log('long sessions (bench/long.js): 20k and 200k records')
      results.long = require('./long.js').run({ log })
    }
    if (process.env.BENCH_POSTGRES !== '0') {
      log('engines (bench/postgres.js): SQLite and PostgreSQL against their bare clients')
      results.postgres = await require('./postgres.js').run({ log })
    }
    if (process.env.BENCH_INTEROP !== '0') {
      log('import and the command line (bench/interop.js)')
      results.interop = await require('./interop.js').run({ log })
    }
    if (process.env.BENCH_ADAPTERS !== '0') {
      // Each adapter against its framework's own store, on the same scripted run.
      results.adapters = {}
      for (const name of ADAPTER_BENCHES) {
        log(`adapter ${name} (bench/${name}.js)`)
        results.adapters[name] = await require(`./${name}.js`).run({ log })
      }
    }
    if (process.env.BENCH_PYTHON !== '0') {
      // The Python package installed in .tools/py (npm test installs the current build there).
      log('python (python/bench/sessions.py): ThreadlineSession against SQLiteSession and JSONL')
      const py = path.join(__dirname, '..', '.tools', 'py', 'bin', 'python')
      execFileSync(py, [path.join(__dirname, '..', 'python', 'bench', 'sessions.py')], { stdio: ['ignore', 2, 2] })
      results.python = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'python', 'bench', 'results-sessions.json'), 'utf8')).summary
    }
    if (process.env.BENCH_WATCH !== '0') {
      log('live watch (bench/watch.js): append to a watcher in another process, against fs.watch on JSONL')
      results.watch = await require('./watch.js').run({ log })
    }
    if (process.env.BENCH_SEARCH !== '0' && !QUICK) {
      // BENCH_SEARCH_BASELINE=<a build before the index>.node adds appends without the index
      log('search (bench/search.js): appends with the index, a store of 1,000,000 real records')
      results.search = require('./search.js').run({ log })
    }
    if (process.env.BENCH_MILLION === '1') {
      log('a session of 1,000,000 records (bench/million.js): buildContext, compactionPlan, the first search')
      results.million = require('./million.js').run({ log, engine: 'sqlite', only: null })
    }
  } finally {
    launcher.stdin.end()
    if (process.env.BENCH_KEEP !== '1') fs.rmSync(dir, { recursive: true, force: true })
    else log(`kept ${dir}`)
  }
  results.elapsedSeconds = (Date.now() - t0) / 1000
  const end = build()
  results.buildChangedDuringRun = end.nativeSha256 !== results.build.nativeSha256 || end.commit !== results.build.commit
  if (results.buildChangedDuringRun) log(`WARNING: the Threadline build changed during the run (${results.build.nativeSha256} -> ${end.nativeSha256}); results mix builds`)
  fs.writeFileSync(RESULTS, JSON.stringify(results, null, 2) + '\n')
  printTable(results)
}

function fmt(x, unit) {
  if (!Number.isFinite(x)) return '-'
  if (unit === 'ratio') return x.toFixed(2) + 'x'
  if (x >= 1000) return x.toFixed(0)
  if (x >= 100) return x.toFixed(1)
  return x.toFixed(2)
}

function printTable(results) {
  const m = results.machine
  const w = results.workload
  const lines = []
  lines.push('')
  lines.push(`Threadline benchmark: ${m.nproc} cores, ${m.cpu}, node ${m.node}, better-sqlite3 ${m.betterSqlite3}${results.quick ? ' (QUICK run)' : ''}`)
  const b = results.build
  lines.push(`threadline ${b.commit || '?'} "${b.commitSubject || ''}", native module sha256 ${b.nativeSha256}${b.uncommittedLibraryFiles.length ? ' (uncommitted library changes)' : ''}${results.buildChangedDuringRun ? ' WARNING: build changed during the run' : ''}`)
  lines.push(`workload seed ${w.seed}: first ${w.sample.messages} messages = ${(w.sample.jsonBytes / 2 ** 20).toFixed(1)} MiB of JSON, ${w.sample.meanBytes.toFixed(0)} B/message, ${w.withNonAscii} with non-ASCII`)
  lines.push('ratios are Threadline / baseline (lower is better), median over repetitions of same-repetition ratios')
  lines.push('')
  const head = ['operation', 'threadline', 'jsonl', 'sqlite', 'TL/jsonl', 'TL/sqlite']
  const body = Object.values(results.rows).map((r) => [
    r.label, fmt(r.abs.threadline), fmt(r.abs.jsonl), fmt(r.abs.sqlite), r.info ? '' : fmt(r.ratio.jsonl.median, 'ratio'), r.info ? '' : fmt(r.ratio.sqlite.median, 'ratio'),
  ])
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)))
  const row = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')
  lines.push(row(head))
  lines.push(widths.map((x) => '-'.repeat(x)).join('  '))
  body.forEach((b) => lines.push(row(b)))
  lines.push('')
  lines.push('targets:')
  for (const t of results.targets) {
    lines.push(`  ${t.pass === null ? 'n/a ' : t.pass ? 'PASS' : 'FAIL'}  ${t.what}: measured ${fmt(t.measured, 'ratio')}`)
  }
  lines.push('')
  lines.push(`bulk load ${results.bulkLoad.messages} messages (batches of ${results.bulkLoad.batch}): ` + Object.entries(results.bulkLoad.ms).map(([e, ms]) => `${e} ${ms.toFixed(0)} ms`).join(', '))
  for (const [n, d] of Object.entries(results.diskBytes)) {
    lines.push(`on disk, ${n} messages: ` + Object.entries(d).map(([e, b]) => `${e} ${(b / 2 ** 20).toFixed(1)} MiB`).join(', '))
  }
  lines.push(`after ${results.config.append.messages} single appends (before close): ` + Object.entries(results.appendFiles).map(([e, f]) => `${e} ${f.onDiskMiB.toFixed(1)} MiB on disk (WAL ${f.walMiB.toFixed(1)} MiB)`).join(', '))
  lines.push(`lossless round trip: ${JSON.stringify(results.lossless)}`)
  if (results.recovery) lines.push(require('./recovery.js').format(results.recovery), '')
  if (results.resume) lines.push(require('./resume.js').format(results.resume), '')
  if (results.estimate) lines.push(require('./estimate.js').format(results.estimate), '')
  if (results.long) lines.push(require('./long.js').format(results.long), '')
  if (results.search) lines.push(require('./search.js').format(results.search), '')
  if (results.postgres) lines.push(require('./postgres.js').format(results.postgres), '')
  if (results.interop) lines.push(require('./interop.js').format(results.interop), '')
  for (const [name, r] of Object.entries(results.adapters ?? {})) lines.push(require(`./${name}.js`).format(r), '')
  if (results.watch) lines.push(require('./watch.js').format(results.watch), '')
  lines.push(`elapsed ${results.elapsedSeconds.toFixed(0)} s; results in ${path.relative(process.cwd(), RESULTS) || RESULTS}`)
  console.log(lines.join('\n'))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
