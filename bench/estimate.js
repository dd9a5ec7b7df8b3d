'use strict'
// How good buildContext's token estimate is, measured on the real Claude Code sessions in
// fixtures/claude-code/ (no timing; a few seconds).
//
//   node bench/estimate.js
//
// Also run by `npm run bench` (bench/run.js; BENCH_ESTIMATE=0 skips it there). Alone, it prints
// its table and writes bench/results-estimate.json (BENCH_RESULTS=file writes elsewhere).
//
// For each fixture, the records are appended one at a time to one in-memory session, as Claude
// Code wrote them. Right before the first record of each assistant response that carries usage,
// the session holds exactly the history that request was built from, and:
//   reported     input_tokens + cache_read_input_tokens + cache_creation_input_tokens of that
//                response: what the provider counted for the request (system prompt and tool
//                definitions included, which the session never sees)
//   calibrated   buildContext({ target: 'anthropic' }).stats.estimatedTokens, no budget, no system
//                prompt: characters of the messages' JSON x tokensPerChar, calibrated on the
//                latest reported usage in the context (stats.calibrated says whether it was)
//   plain        characters of the same messages' JSON / 4 (the uncalibrated estimate)
//   consistent   what `calibrated` would be if the calibration counted the same text as the
//                estimate (computed here, as information): the previous response's reported
//                tokens / characters of the built context it answered, times the characters now
//   tracker      session.tokenTracker.contextTokens (latest usage + output + JSON bytes / 4 of the
//                messages since), as information
// and the error of each is |estimate - reported| / reported. A Claude Code response split over
// several records (same message.id, same usage) is one response; responses reporting no input
// tokens are left out. The headline figures are over the responses after the first of each
// session (the first has no usage before it to calibrate on). Appending one record at a time is
// checked against restoring each prefix from scratch (restoreMessages into a fresh session) at a
// few points.

const fs = require('fs')
const path = require('path')
const { THREADLINE_DIR } = require('./engines.js')
const { Store } = require(THREADLINE_DIR)

const FIXTURES = path.resolve(__dirname, '../fixtures/claude-code')
const VARIANTS = ['calibrated', 'plain', 'consistent', 'tracker']
const EARLY = 5 // responses reported one by one at the start of each session and after a compaction

function quantile(xs, q) {
  const s = Float64Array.from(xs).sort()
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]
}
function median(xs) {
  const s = Float64Array.from(xs).sort()
  if (s.length === 0) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const chars = (v) => { let n = 0; for (const _ of JSON.stringify(v)) n++; return n } // code points, as the Rust side counts

function reportedOf(u) {
  return (u.input_tokens || 0) + (u.cache_read_input_tokens || 0) + (u.cache_creation_input_tokens || 0)
}

function measure(store, lines, name) {
  const session = store.createSession({ title: `estimate ${name}` })
  const seen = new Set()
  const points = []
  let compactionAt = null
  let appendFailures = 0
  for (let i = 0; i < lines.length; i++) {
    const r = JSON.parse(lines[i])
    const m = r.message
    if (r.type === 'system' && r.subtype === 'compact_boundary') compactionAt = points.length
    if (m && m.role === 'assistant' && m.usage && m.id && !seen.has(m.id)) {
      seen.add(m.id)
      const reported = reportedOf(m.usage)
      if (reported > 0) {
        const ctx = session.buildContext({ target: 'anthropic' })
        const c = ctx.messages.reduce((a, x) => a + chars(x), 0)
        points.push({
          index: points.length,
          record: i,
          responses: seen.size,
          afterCompaction: compactionAt !== null,
          sinceCompaction: compactionAt === null ? null : points.length - compactionAt,
          reported,
          calibrated: ctx.stats.estimatedTokens,
          isCalibrated: ctx.stats.calibrated,
          tokensPerChar: ctx.stats.tokensPerChar,
          plain: Math.ceil(c / 4),
          tracker: session.tokenTracker.contextTokens,
          messages: ctx.messages.length,
          chars: c,
          charsFromStats: ctx.stats.estimatedTokens / ctx.stats.tokensPerChar,
        })
      }
    }
    try { session.append(r) } catch (e) { appendFailures++ }
  }
  // what the calibration would give if it counted the same text as the estimate (the built
  // context): the previous response's reported tokens / characters of the context it was sent
  // with, same clamp, times the characters now; plain where the previous response is not in the
  // current context (none yet, or before a compaction)
  for (const p of points) {
    const q = points[p.index - 1]
    const same = q && q.afterCompaction === p.afterCompaction && q.chars > 0
    p.consistent = same ? Math.ceil(Math.min(2, Math.max(0.02, q.reported / q.chars)) * p.chars) : p.plain
  }
  for (const p of points) for (const k of VARIANTS) p[`${k}Error`] = Math.abs(p[k] - p.reported) / p.reported
  return { points, appendFailures, records: lines.length, session }
}

// restoring the prefix before a point from scratch gives the same estimate as the session that
// had the records appended one at a time
function crossCheck(store, lines, points, name) {
  if (points.length === 0) return []
  const picks = [...new Set([0, 1, points.length >> 1, points.length - 1].filter((i) => i < points.length))]
  return picks.map((k) => {
    const p = points[k]
    const s = store.createSession({ title: `estimate ${name} prefix ${p.record}` })
    const prefix = lines.slice(0, p.record)
    if (prefix.length) s.restoreMessages(prefix)
    const est = s.buildContext({ target: 'anthropic' }).stats.estimatedTokens
    if (est !== p.calibrated) throw new Error(`${name}: before record ${p.record}, restored from scratch: estimate ${est}, appended one by one: ${p.calibrated}`)
    return { record: p.record, estimate: est }
  })
}

function stats(points) {
  const out = { n: points.length }
  for (const k of VARIANTS) {
    const e = points.map((p) => p[`${k}Error`])
    out[k] = { median: median(e), p90: quantile(e, 0.9), max: e.length ? Math.max(...e) : NaN }
  }
  out.uncalibrated = points.filter((p) => !p.isCalibrated).length
  return out
}

function run({ log = (...a) => process.stderr.write(a.join(' ') + '\n') } = {}) {
  const t0 = Date.now()
  const files = fs.readdirSync(FIXTURES).filter((f) => f.endsWith('.jsonl')).sort()
  const store = Store.open(':memory:')
  const out = { generatedAt: new Date().toISOString(), fixtures: {} }
  const all = []
  for (const f of files) {
    const lines = fs.readFileSync(path.join(FIXTURES, f), 'utf8').split('\n').filter(Boolean)
    const { points, appendFailures, records } = measure(store, lines, f)
    const checked = crossCheck(store, lines, points, f)
    const later = points.slice(1)
    const maxCharsDrift = Math.max(0, ...points.map((p) => Math.abs(p.charsFromStats - p.chars) / p.chars))
    out.fixtures[f] = { records, appendFailures, responses: points.length, all: stats(points), afterFirst: stats(later), points, crossChecked: checked, maxCharsDrift }
    all.push(...later)
    log(`  ${f}: ${records} records, ${points.length} responses with usage; after the first: calibrated median ${pc(out.fixtures[f].afterFirst.calibrated.median)}, plain ${pc(out.fixtures[f].afterFirst.plain.median)}`)
  }
  store.close()
  out.overall = stats(all)
  // where the error is large: by position in the session
  const pts = Object.values(out.fixtures).flatMap((x) => x.points.slice(1))
  const bucket = (lo, hi) => stats(pts.filter((p) => p.index >= lo && p.index <= hi && !(p.afterCompaction && p.sinceCompaction < EARLY)))
  out.byPosition = {
    'responses 2-5': bucket(1, 4),
    'responses 6-20': bucket(5, 19),
    'responses 21+': bucket(20, Infinity),
    [`first ${EARLY} after a compaction`]: stats(pts.filter((p) => p.afterCompaction && p.sinceCompaction < EARLY)),
  }
  out.elapsedSeconds = (Date.now() - t0) / 1000
  return out
}

// ---------- report ----------
const pc = (x) => (Number.isFinite(x) ? (x * 100).toFixed(1) + '%' : '-')

function table(head, body) {
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => String(b[i]).length)))
  const row = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ')
  return [row(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(row)]
}

function format(res) {
  const lines = ['']
  lines.push('Token estimates on the real Claude Code sessions: |estimate - reported| / reported, where reported = input + cache read + cache creation tokens of the response')
  lines.push('calibrated: buildContext stats.estimatedTokens (no system prompt given); plain: message JSON characters / 4; information: consistent: calibrated on the built text, not the stored records; tracker: tokenTracker.contextTokens')
  const row = (name, s) => [name, s.n, s.uncalibrated, ...VARIANTS.flatMap((k) => [pc(s[k].median), pc(s[k].p90)])]
  const head = (first) => [first, 'n', 'uncalibrated', ...VARIANTS.flatMap((k) => [`${k} median`, `${k} p90`])]
  lines.push(...table(
    head('responses after the first'),
    [...Object.entries(res.fixtures).map(([f, x]) => row(f, x.afterFirst)), row('all', res.overall)]))
  lines.push('')
  lines.push('by position (responses after the first, all fixtures):')
  lines.push(...table(head('position'),
    Object.entries(res.byPosition).map(([k, s]) => row(k, s))))
  lines.push('')
  lines.push(`the first ${EARLY} responses of each session and after a compaction: reported tokens, estimates (error)`)
  const early = []
  for (const [f, x] of Object.entries(res.fixtures)) {
    const c = x.points.findIndex((p) => p.afterCompaction)
    const picks = x.points.slice(0, EARLY).concat(c > 0 ? x.points.slice(c, c + EARLY) : [])
    for (const p of picks) {
      early.push([`${f} #${p.index + 1}${p.afterCompaction ? ` (${p.sinceCompaction + 1} after compaction)` : ''}`, p.reported, p.chars,
        `${p.calibrated} (${pc(p.calibratedError)})${p.isCalibrated ? '' : ' u'}`, p.tokensPerChar.toFixed(3), `${p.plain} (${pc(p.plainError)})`, `${p.consistent} (${pc(p.consistentError)})`, `${p.tracker} (${pc(p.trackerError)})`])
    }
  }
  lines.push(...table(['response', 'reported', 'message chars', 'calibrated (u: not)', 'tokens/char', 'plain', 'consistent', 'tracker'], early))
  const checks = Object.entries(res.fixtures).map(([f, x]) => `${f} ${x.crossChecked.length}`).join(', ')
  lines.push(`checked: estimates with the history appended record by record equal those of each prefix restored from scratch (${checks} points); appends refused: ${Object.values(res.fixtures).reduce((a, x) => a + x.appendFailures, 0)}`)
  return lines.join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  const res = run()
  const file = path.resolve(process.env.BENCH_RESULTS || path.join(__dirname, 'results-estimate.json'))
  fs.writeFileSync(file, JSON.stringify(res, null, 2) + '\n')
  console.log(format(res))
  console.log(`results in ${path.relative(process.cwd(), file) || file}`)
}
