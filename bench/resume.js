'use strict'
// The cost of resuming a long compacted session: Store.open + openSession + buildContext on a
// session of 100,000 records whose latest compaction leaves 2,000, against the same on a session
// of only those 2,000 records, and against a JSONL store of the same records, which must read
// and parse its whole file to find the compaction point.
//
//   node --expose-gc bench/resume.js          # about 60 s
//
// Also run by `npm run bench` (bench/run.js) after its own sections (BENCH_RESUME=0 skips it
// there). Alone, it prints its table and writes bench/results-resume.json (BENCH_RESULTS=file
// writes elsewhere). BENCH_QUICK=1: a small smoke run (about 20,000 records). BENCH_KEEP=1 keeps
// the temp dir.
//
// The sessions (bench/resume-build.js): the real Claude Code session
// fixtures/claude-code/tool_heavy.jsonl repeated with fresh ids; the big one holds
// 98,032 records of history, then the 2,000 records kept, then a compaction record
// (session.compact({ summary, firstKeptUuid }) naming the first kept record; the summary is the
// real one from compacted-session.jsonl, 15,743 characters). The small one holds only those 2,000
// records, not compacted (compact() refuses to compact with nothing before the first kept
// record), so the two contexts are the same messages, the big one with the summary before them
// (checked on every round): the big session's context is about 1% larger, and the comparison
// isolates what the 98,032 older records cost. Each store is its own file (189 MiB and 3.8 MiB),
// closed after the build; the files are warm in the page cache.
//
// Every measurement runs in a fresh process (bench/resume-child.js): modules loaded and the heap
// settled, then timed: Store.open + openSession + buildContext({ target: 'anthropic', maxTokens:
// 180000, system }) the first time in the process ("cold": SQLite's cache empty, V8 not warmed
// up), then a few more times on a fresh Store.open each ("warm"). Processes are interleaved
// round by round in rotating order; a ratio is computed within a round, and the median of the
// rounds is reported. session.messages (and session.allMessages where the build has it) is timed
// once per process, as information.

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')
const { execFileSync } = require('child_process')
const { THREADLINE_DIR } = require('./engines.js')

const TARGET = { id: 'resume-100k-compacted', what: 'resume (open + buildContext) of 100k records compacted to 2k <= 2.0x the 2k session', max: 2.0 }
const CASES = ['threadline-big', 'threadline-small', 'jsonl-big', 'jsonl-small']
const SYSTEM = Array.from({ length: 120 }, (_, i) =>
  `Rule ${i + 1}: you are a coding agent working in the user's repository; read files before editing them, run the tests after a change, and say what you did.`).join('\n')

function config(quick) {
  return quick
    ? { copies: 500, kept: 2000, rounds: 3, warmReps: 2, jsonlBigWarmReps: 1, maxTokens: 180000 }
    : { copies: 2513, kept: 2000, rounds: 9, warmReps: 4, jsonlBigWarmReps: 1, maxTokens: 180000 }
}

function median(xs) {
  const s = Float64Array.from(xs).sort()
  if (s.length === 0) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const range = (xs) => [Math.min(...xs), Math.max(...xs)]

function buildInfo() {
  const git = (...args) => { try { return execFileSync('git', args, { cwd: THREADLINE_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() } catch { return null } }
  const node = fs.readdirSync(THREADLINE_DIR).find((f) => f.endsWith('.node'))
  const file = node && path.join(THREADLINE_DIR, node)
  return {
    commit: git('rev-parse', '--short', 'HEAD'),
    uncommittedLibraryFiles: (git('status', '--porcelain', '--', 'src', 'crates', 'index.js', 'native.js') || '').split('\n').filter(Boolean),
    nativeSha256: file ? crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex').slice(0, 16) : null,
    nativeMtime: file ? fs.statSync(file).mtime.toISOString() : null,
  }
}

function child(spec) {
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'resume-child.js'), JSON.stringify(spec)], { encoding: 'utf8', maxBuffer: 1 << 24 })
  const r = JSON.parse(out.trim().split('\n').pop())
  if (r.error) throw new Error(`resume ${spec.engine} ${spec.file}: ${r.error}`)
  return r
}

async function run({ quick = false, log = (...a) => process.stderr.write(a.join(' ') + '\n') } = {}) {
  const cfg = config(quick)
  const t0 = Date.now()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-resume-'))
  const out = { generatedAt: new Date().toISOString(), quick, build: buildInfo(), config: cfg }
  try {
    const b0 = Date.now()
    const built = JSON.parse(execFileSync(process.execPath, [path.join(__dirname, 'resume-build.js'), dir, String(cfg.copies), String(cfg.kept)], { encoding: 'utf8', maxBuffer: 1 << 24 }).trim().split('\n').pop())
    out.sessions = built
    log(`  built in ${((Date.now() - b0) / 1000).toFixed(1)} s: big ${built.big.records} records (${built.big.messages} messages, ${(built.big.dbBytes / 2 ** 20).toFixed(0)} MiB; JSONL ${(built.big.jsonlBytes / 2 ** 20).toFixed(0)} MiB), small ${built.small.records} records (${built.small.messages} messages, ${(built.small.dbBytes / 2 ** 20).toFixed(1)} MiB)`)
    const specs = {
      'threadline-big': { engine: 'threadline', file: built.big.file, sessionId: built.big.sessionId, warmReps: cfg.warmReps },
      'threadline-small': { engine: 'threadline', file: built.small.file, sessionId: built.small.sessionId, warmReps: cfg.warmReps },
      'jsonl-big': { engine: 'jsonl', file: built.big.jsonl, warmReps: cfg.jsonlBigWarmReps },
      'jsonl-small': { engine: 'jsonl', file: built.small.jsonl, warmReps: cfg.warmReps },
    }
    for (const s of Object.values(specs)) Object.assign(s, { maxTokens: cfg.maxTokens, system: SYSTEM })
    const rounds = []
    for (let r = 0; r < cfg.rounds; r++) {
      const k = r % CASES.length
      const round = {}
      for (const c of CASES.slice(k).concat(CASES.slice(0, k))) round[c] = child(specs[c])
      // both sessions must have given the same context but for the summary, which goes first in
      // the big session's first message; JSONL the same messages
      const [big, small] = [round['threadline-big'].cold, round['threadline-small'].cold]
      const sameTail = big.firstBlocks.slice(big.firstBlocks.length - small.firstBlocks.length).join() === small.firstBlocks.join()
      if (big.rest !== small.rest || !sameTail || big.firstBlocks.length !== small.firstBlocks.length + 1) throw new Error(`the two sessions built different contexts: ${JSON.stringify(big.stats)} vs ${JSON.stringify(small.stats)}`)
      if (!big.stats.compacted || big.stats.keptRecords !== round['jsonl-big'].cold.messages) throw new Error(`unexpected context: ${JSON.stringify(big.stats)}, JSONL ${round['jsonl-big'].cold.messages} messages`)
      if (small.stats.keptRecords !== round['jsonl-small'].cold.messages) throw new Error(`unexpected context: ${JSON.stringify(small.stats)}, JSONL ${round['jsonl-small'].cold.messages} messages`)
      rounds.push(round)
      const tot = (c) => round[c].cold.time.total
      log(`  round ${r + 1}/${cfg.rounds}: cold open+buildContext big ${tot('threadline-big').toFixed(1)} ms, small ${tot('threadline-small').toFixed(1)} ms (${(tot('threadline-big') / tot('threadline-small')).toFixed(2)}x); JSONL big ${tot('jsonl-big').toFixed(0)} ms, small ${tot('jsonl-small').toFixed(1)} ms`)
    }
    out.rounds = rounds
    out.summary = summarise(rounds)
    out.target = target(out)
  } finally {
    if (process.env.BENCH_KEEP !== '1') fs.rmSync(dir, { recursive: true, force: true })
    else log(`kept ${dir}`)
  }
  out.elapsedSeconds = (Date.now() - t0) / 1000
  out.buildChangedDuringRun = buildInfo().nativeSha256 !== out.build.nativeSha256
  if (out.buildChangedDuringRun) log('WARNING: the Threadline build changed during the run')
  return out
}

function summarise(rounds) {
  const warmOf = (x) => median(x.warm.map((w) => w.total))
  const per = (c, f) => rounds.map((r) => f(r[c]))
  const stat = (xs) => ({ median: median(xs), range: range(xs) })
  const s = {}
  for (const c of CASES) {
    const steps = Object.keys(rounds[0][c].cold.time)
    s[c] = {
      cold: Object.fromEntries(steps.map((k) => [k, stat(per(c, (x) => x.cold.time[k]))])),
      warm: stat(per(c, warmOf)),
    }
    if (c.startsWith('threadline')) {
      for (const m of ['messages', 'allMessages']) if (rounds[0][c][m]) s[c][m] = { count: rounds[0][c][m].count, readMs: stat(per(c, (x) => x[m].readMs)) }
      s[c].context = { messages: rounds[0][c].cold.messages, stats: rounds[0][c].cold.stats }
    } else {
      s[c].records = rounds[0][c].cold.records
    }
  }
  const ratio = (a, b, f) => { const xs = rounds.map((r) => f(r[a]) / f(r[b])); return { median: median(xs), range: range(xs), perRound: xs } }
  s.ratio = {
    coldBigVsSmall: ratio('threadline-big', 'threadline-small', (x) => x.cold.time.total),
    warmBigVsSmall: ratio('threadline-big', 'threadline-small', warmOf),
    buildContextColdBigVsSmall: ratio('threadline-big', 'threadline-small', (x) => x.cold.time.buildContext),
    coldBigVsJsonlBig: ratio('threadline-big', 'jsonl-big', (x) => x.cold.time.total),
    warmBigVsJsonlBig: ratio('threadline-big', 'jsonl-big', warmOf),
    jsonlBigVsSmall: ratio('jsonl-big', 'jsonl-small', (x) => x.cold.time.total),
    messagesBigVsSmall: ratio('threadline-big', 'threadline-small', (x) => x.messages.readMs),
  }
  if (rounds[0]['threadline-big'].allMessages) s.ratio.allMessagesBigVsSmall = ratio('threadline-big', 'threadline-small', (x) => x.allMessages.readMs)
  return s
}

// The target: cold resume of the big session / of the small one, median of same-round ratios.
function target(res) {
  if (!res.summary) return { ...TARGET, measured: null, pass: null, note: 'not measured in this run' }
  const measured = res.summary.ratio.coldBigVsSmall.median
  return { ...TARGET, measured, pass: measured <= TARGET.max, warm: res.summary.ratio.warmBigVsSmall.median }
}

// ---------- report ----------
const f2 = (x) => (!Number.isFinite(x) ? '-' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
const fx = (x) => (Number.isFinite(x) ? x.toFixed(2) + 'x' : '-')
const rng = (s) => `${f2(s.median)} (${f2(s.range[0])}-${f2(s.range[1])})`

function table(head, body) {
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => String(b[i]).length)))
  const row = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ')
  return [row(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(row)]
}

function format(res) {
  const lines = ['']
  const b = res.sessions
  const s = res.summary
  lines.push(`Resume benchmark${res.quick ? ' (QUICK run)' : ''}: threadline ${res.build.commit}, native ${res.build.nativeSha256}${res.build.uncommittedLibraryFiles.length ? ' (uncommitted library changes)' : ''}`)
  lines.push(`big: ${b.big.records} records (${b.prefixRecords} of history, ${b.keptRecords} kept, the compaction record; ${b.big.messages} messages, ${(b.big.dbBytes / 2 ** 20).toFixed(0)} MiB store, ${(b.big.jsonlBytes / 2 ** 20).toFixed(0)} MiB JSONL); ` +
    `small: ${b.small.records} records (only the ${b.keptRecords} kept, not compacted; ${(b.small.dbBytes / 2 ** 20).toFixed(1)} MiB store, ${(b.small.jsonlBytes / 2 ** 20).toFixed(1)} MiB JSONL)`)
  const ctx = s['threadline-big'].context
  const sctx = s['threadline-small'].context
  lines.push(`context built: big: summary (${b.summaryChars} chars) + ${ctx.stats.keptRecords - 1} messages of the kept records, merged into ${ctx.messages} messages, estimated ${ctx.stats.estimatedTokens} tokens; ` +
    `small: the same without the summary, ${sctx.messages} messages, estimated ${sctx.stats.estimatedTokens} tokens; system ${SYSTEM.length} chars, maxTokens ${res.config.maxTokens}`)
  lines.push(`ms, median of ${res.rounds.length} fresh processes (min-max); cold: first time in the process; warm: median of ${res.config.warmReps} more (fresh Store.open each)`)
  const all = !!s['threadline-big'].allMessages
  lines.push(...table(
    ['session', 'Store.open', 'openSession', 'buildContext', 'total, cold', 'total, warm', 'session.messages [count]', ...(all ? ['session.allMessages [count]'] : [])],
    ['threadline-big', 'threadline-small'].map((c) => [
      c === 'threadline-big' ? `Threadline, ${b.big.records} records` : `Threadline, ${b.small.records} records`,
      rng(s[c].cold.storeOpen), rng(s[c].cold.openSession), rng(s[c].cold.buildContext), rng(s[c].cold.total), rng(s[c].warm),
      `${rng(s[c].messages.readMs)} [${s[c].messages.count}]`, ...(all ? [`${rng(s[c].allMessages.readMs)} [${s[c].allMessages.count}]`] : []),
    ])))
  lines.push(...table(
    ['JSONL baseline', 'read', 'JSON.parse', 'find + collect', 'total, cold', 'total, warm'],
    ['jsonl-big', 'jsonl-small'].map((c) => [
      `JSONL, ${s[c].records} lines`, rng(s[c].cold.read), rng(s[c].cold.parse), rng(s[c].cold.find), rng(s[c].cold.total), rng(s[c].warm),
    ])))
  const r = s.ratio
  lines.push(`ratios (median of same-round ratios, min-max): Threadline big / small: cold ${fx(r.coldBigVsSmall.median)} (${fx(r.coldBigVsSmall.range[0])}-${fx(r.coldBigVsSmall.range[1])}), warm ${fx(r.warmBigVsSmall.median)}, buildContext alone (cold) ${fx(r.buildContextColdBigVsSmall.median)}; ` +
    `Threadline big / JSONL big: cold ${fx(r.coldBigVsJsonlBig.median)}, warm ${fx(r.warmBigVsJsonlBig.median)}; JSONL big / small ${fx(r.jsonlBigVsSmall.median)}; session.messages big / small ${fx(r.messagesBigVsSmall.median)}${r.allMessagesBigVsSmall ? `, allMessages ${fx(r.allMessagesBigVsSmall.median)}` : ''}`)
  const t = res.target
  lines.push(`target: ${t.pass === null ? 'n/a ' : t.pass ? 'PASS' : 'FAIL'}  ${t.what}: measured ${fx(t.measured)} (cold; warm ${fx(t.warm)})`)
  lines.push(`elapsed ${res.elapsedSeconds.toFixed(0)} s`)
  return lines.join('\n')
}

module.exports = { run, format, target }

if (require.main === module) {
  run({ quick: process.env.BENCH_QUICK === '1' }).then((res) => {
    const file = path.resolve(process.env.BENCH_RESULTS || path.join(__dirname, 'results-resume.json'))
    fs.writeFileSync(file, JSON.stringify(res, null, 2) + '\n')
    console.log(format(res))
    console.log(`results in ${path.relative(process.cwd(), file) || file}`)
  }).catch((e) => { console.error(e); process.exit(1) })
}
