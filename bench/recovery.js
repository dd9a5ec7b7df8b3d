'use strict'
// The cost of recovery: streaming persistence per chunk, and recover() on a long session.
//
//   node --expose-gc bench/recovery.js                     # all three sections, about 40 s
//   node --expose-gc bench/recovery.js stream,recover      # only some: stream, paced, recover
//
// Also run by `npm run bench` (bench/run.js) after its own sections (BENCH_RECOVERY=0 skips it
// there). Alone, it prints its table and writes bench/results-recovery.json (BENCH_RESULTS=file
// writes elsewhere). BENCH_QUICK=1: a small smoke run. BENCH_KEEP=1 keeps the temp dir.
//
// stream   writer.push(chunk) for one long response (2,000 text_delta events of about 20 bytes
//          over two text blocks, 300 thinking_delta, 200 input_json_delta over two tool calls:
//          2,512 Anthropic raw stream events; the same content as 2,501 simple chunks), pushed as
//          fast as possible, interleaved chunk by chunk with two baselines: (a) a naive JSONL
//          writer that persists every chunk, fs.appendFileSync(file, JSON.stringify(chunk) + '\n'),
//          and (b) JSON.stringify(chunk) alone, the floor. Then finish(), against appending the
//          final message as one JSON line.
// paced    the same for a shorter response (152 raw events) arriving one event every 40 ms, as
//          from a model streaming about 25 events a second: the writer then also persists every
//          200 ms within a block, as it would in use.
// recover  crash states built by bench/recovery-build.js (a child killed with SIGKILL): a
//          10,000-message and a 100-message session from the real Claude Code fixture, ending
//          with four unanswered tool calls (one with a recorded outcome, two started, one never
//          started), or with a response cut off mid-stream. Each run recovers a fresh copy of the
//          store file: Store.open, interruptedSessions(), openSession + pendingRepairs() on one
//          copy, openSession + recover() on another. Baseline: what a JSONL store must do to find
//          the dangling calls, reading and parsing its whole file of the same records.

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')
const { spawn, execFileSync } = require('child_process')
const readline = require('readline')
const { THREADLINE_DIR } = require('./engines.js')
const { Store, validateMessages } = require(THREADLINE_DIR)
const { prng } = require('./workload.js')

const SECTIONS = ['stream', 'paced', 'recover']
const now = () => process.hrtime.bigint()
const gc = () => { if (global.gc) { global.gc(); global.gc() } }
const sleeper = new Int32Array(new SharedArrayBuffer(4))
const sleep = (ms) => Atomics.wait(sleeper, 0, 0, ms)

function config(quick) {
  return quick
    ? { stream: { reps: 2, scale: 0.2 }, paced: { reps: 1, gapMs: 40, scale: 0.03 }, recover: { sizes: [100, 10000], reps: 3, unsyncedReps: 1 } }
    : { stream: { reps: 7, scale: 1 }, paced: { reps: 3, gapMs: 40, scale: 0.06 }, recover: { sizes: [100, 10000], reps: 9, unsyncedReps: 3 } }
}

// ---------- statistics ----------
function median(xs) {
  const s = Float64Array.from(xs).sort()
  if (s.length === 0) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
function quantile(xs, q) {
  const s = Float64Array.from(xs).sort()
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]
}
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
const summary = (xs) => ({ median: median(xs), mean: mean(xs), p99: quantile(xs, 0.99), max: Math.max(...xs), total: xs.reduce((a, b) => a + b, 0) })

// ---------- the streamed response ----------
const MODEL = 'claude-sonnet-4-5-20250929'
const WORDS = ('the session list re-renders when a tool result arrives because stream resets every row ' +
  'so we keep the stream and insert only the new message then run the tests again to check that ' +
  'nothing else calls reset and the scroll position stays where the user left it').split(' ')
const ODD = [' → ', ' ✓ ', ' — ', ' `reset: true` ', '\n\n', '\n- ', ' (see lib/spotter_web/live/session_live.ex:142) ']

// A text of `pieces` pieces of 16 to 24 characters (about 20 bytes), cut by code point.
function pieces(rnd, count) {
  let text = ''
  while (text.length < count * 24) text += (rnd.chance(0.08) ? rnd.pick(ODD) : ' ') + rnd.pick(WORDS)
  const cps = Array.from(text.trimStart())
  const out = []
  for (let at = 0; out.length < count; ) {
    const n = rnd.int(16, 24)
    out.push(cps.slice(at, at + n).join(''))
    at += n
  }
  return out
}
function cutJson(value, size) {
  const cps = Array.from(JSON.stringify(value))
  const out = []
  for (let i = 0; i < cps.length; i += size) out.push(cps.slice(i, i + size).join(''))
  return out
}

// One response as blocks: thinking, two text blocks, two tool calls. `scale` shrinks every block.
function responsePlan(seed, scale) {
  const rnd = prng(seed)
  const k = (n) => Math.max(2, Math.round(n * scale))
  const code = pieces(rnd, k(150)).join('')
  const edit = { file_path: '/home/USER/projects/spotter/lib/spotter_web/live/session_live.ex', old_string: code.slice(0, code.length >> 1), new_string: code.slice(code.length >> 1) }
  const bash = { command: 'mix test test/spotter_web/live/session_live_test.exs --trace ' + '--only stream '.repeat(Math.max(1, Math.round(45 * scale))), description: 'Run the session view tests' }
  return {
    id: `msg_01${crypto.createHash('sha256').update(String(seed)).digest('hex').slice(0, 22)}`,
    blocks: [
      { kind: 'thinking', pieces: pieces(rnd, k(300)), signature: crypto.createHash('sha512').update(String(seed)).digest('base64').repeat(5) },
      { kind: 'text', pieces: pieces(rnd, k(1200)) },
      { kind: 'text', pieces: pieces(rnd, k(800)) },
      { kind: 'tool', id: `toolu_01Bash${seed}`, name: 'Bash', pieces: cutJson(bash, Math.max(8, Math.round(JSON.stringify(bash).length / k(40)))) },
      { kind: 'tool', id: `toolu_01Edit${seed}`, name: 'Edit', pieces: cutJson(edit, Math.max(8, Math.round(JSON.stringify(edit).length / k(160)))) },
    ],
  }
}

// Anthropic raw stream events, as @anthropic-ai/sdk yields them (shape of
// __test__/fixtures/anthropic-stream-events.json).
function rawEvents(plan) {
  const ev = [{ type: 'message_start', message: { id: plan.id, type: 'message', role: 'assistant', model: MODEL, content: [], stop_reason: null, stop_sequence: null, stop_details: null, usage: { input_tokens: 4, cache_creation_input_tokens: 1822, cache_read_input_tokens: 41230, cache_creation: { ephemeral_5m_input_tokens: 1822, ephemeral_1h_input_tokens: 0 }, output_tokens: 3, service_tier: 'standard' } } }, { type: 'ping' }]
  plan.blocks.forEach((b, index) => {
    if (b.kind === 'thinking') {
      ev.push({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } })
      for (const p of b.pieces) ev.push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: p } })
      ev.push({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: b.signature } })
    } else if (b.kind === 'text') {
      ev.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } })
      for (const p of b.pieces) ev.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: p } })
    } else {
      ev.push({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } })
      for (const p of b.pieces) ev.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: p } })
    }
    ev.push({ type: 'content_block_stop', index })
  })
  ev.push({ type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null, stop_details: null }, usage: { input_tokens: 4, cache_creation_input_tokens: 1822, cache_read_input_tokens: 41230, output_tokens: 10412 } })
  ev.push({ type: 'message_stop' })
  return ev
}

// The same content in the simple chunk form (the two text blocks become one: simple text chunks
// in a row make one block).
function simpleChunks(plan) {
  const out = []
  for (const b of plan.blocks) {
    if (b.kind === 'thinking') {
      for (const p of b.pieces) out.push({ type: 'reasoning', text: p })
      out.push({ type: 'reasoning', text: '', signature: b.signature })
    } else if (b.kind === 'text') {
      for (const p of b.pieces) out.push({ type: 'text', text: p })
    } else {
      b.pieces.forEach((p, i) => out.push(i === 0 ? { type: 'tool_call_delta', id: b.id, name: b.name, delta: p } : { type: 'tool_call_delta', id: b.id, delta: p }))
    }
  }
  return out
}

function describeChunks(chunks) {
  const count = {}
  for (const c of chunks) {
    const k = c.type === 'content_block_delta' ? c.delta.type : c.type
    count[k] = (count[k] || 0) + 1
  }
  return { chunks: chunks.length, bytes: chunks.reduce((a, c) => a + Buffer.byteLength(JSON.stringify(c)), 0), byType: count }
}

const STREAM_ENGINES = ['threadline', 'jsonl', 'stringify']

// One response per repetition, engines interleaved chunk by chunk in rotating order.
function streamPhase(name, dir, makeChunks, reps, gapMs, log) {
  const store = Store.open(path.join(dir, `${name}.db`))
  const session = store.createSession({ title: `bench ${name}`, model: MODEL })
  const jsonlFile = path.join(dir, `${name}.jsonl`)
  let sink = 0
  const perRep = []
  let shape = null
  for (let r = 0; r < reps; r++) {
    const { chunks, plan } = makeChunks(r)
    if (!shape) shape = describeChunks(chunks)
    gc()
    const prompt = session.append(`Fix the flicker (${name} ${r})`)
    const writer = session.beginResponse({ requestId: `req_bench_${name}_${r}`, model: MODEL })
    const t = Object.fromEntries(STREAM_ENGINES.map((e) => [e, new Float64Array(chunks.length)]))
    const wall0 = Date.now()
    for (let i = 0; i < chunks.length; i++) {
      const c = chunks[i]
      const k = (i + r) % STREAM_ENGINES.length
      for (let j = 0; j < STREAM_ENGINES.length; j++) {
        const e = STREAM_ENGINES[(k + j) % STREAM_ENGINES.length]
        const a = now()
        if (e === 'threadline') writer.push(c)
        else if (e === 'jsonl') fs.appendFileSync(jsonlFile, JSON.stringify(c) + '\n')
        else sink += JSON.stringify(c).length
        t[e][i] = Number(now() - a) / 1e3
      }
      if (gapMs) sleep(gapMs)
    }
    const wallMs = Date.now() - wall0
    // the end of the response: the complete message, against one more JSON line
    const f0 = now()
    const env = writer.finish()
    const finishUs = Number(now() - f0) / 1e3
    const j0 = now()
    fs.appendFileSync(jsonlFile, JSON.stringify(env.message) + '\n')
    const jsonlFinishUs = Number(now() - j0) / 1e3
    // what the writer persisted: stream records (one commit each) and the final record
    const records = session.envelopes({ fromSeq: prompt.seq + 1 })
    const streamRecords = records.filter((x) => x.type === 'stream' && x.stream && x.stream.id === writer.id)
    const persistedChunks = streamRecords.reduce((a, x) => a + x.stream.chunks.length, 0)
    const streamBytes = streamRecords.reduce((a, x) => a + Buffer.byteLength(JSON.stringify(x)), 0)
    const finalBytes = Buffer.byteLength(JSON.stringify(env))
    if (!env.message || !Array.isArray(env.message.content)) throw new Error(`${name}: finish() stored no message`)
    const toolUses = env.message.content.filter((b) => b.type === 'tool_use')
    if (plan && toolUses.length !== plan.blocks.filter((b) => b.kind === 'tool').length) throw new Error(`${name}: the assembled message lost tool calls`)
    // answer the calls (untimed) so that the next response starts a clean turn
    if (toolUses.length) session.append({ role: 'user', content: toolUses.map((b) => ({ type: 'tool_result', tool_use_id: b.id, content: 'ok' })) })
    const rep = {
      chunks: chunks.length, wallMs, finishUs, jsonlFinishUs,
      streamRecords: streamRecords.length, persistedChunks, streamBytes, finalBytes,
      commits: streamRecords.length + 1,
      ...Object.fromEntries(STREAM_ENGINES.map((e) => [e, summary(t[e])])),
    }
    rep.ratio = {
      medianVsJsonl: rep.threadline.median / rep.jsonl.median,
      medianVsStringify: rep.threadline.median / rep.stringify.median,
      meanVsJsonl: rep.threadline.mean / rep.jsonl.mean,
      meanVsStringify: rep.threadline.mean / rep.stringify.mean,
    }
    perRep.push(rep)
    log(`  ${name} rep ${r + 1}/${reps}: push median ${rep.threadline.median.toFixed(2)} µs mean ${rep.threadline.mean.toFixed(2)} µs; ` +
      `jsonl ${rep.jsonl.median.toFixed(2)} / ${rep.jsonl.mean.toFixed(2)} µs; stringify ${rep.stringify.median.toFixed(2)} µs; ` +
      `${rep.streamRecords} stream records; finish ${(finishUs / 1000).toFixed(2)} ms; ${wallMs} ms`)
  }
  store.close()
  if (sink < 0) log('')
  return { shape, gapMs, perRep, agg: aggregate(perRep) }
}

function aggregate(perRep) {
  const m = (f) => median(perRep.map(f))
  const out = { reps: perRep.length }
  for (const e of STREAM_ENGINES) out[e] = { median: m((r) => r[e].median), mean: m((r) => r[e].mean), p99: m((r) => r[e].p99), max: m((r) => r[e].max) }
  out.ratio = Object.fromEntries(Object.keys(perRep[0].ratio).map((k) => [k, { median: m((r) => r.ratio[k]), perRep: perRep.map((r) => r.ratio[k]) }]))
  for (const k of ['finishUs', 'jsonlFinishUs', 'streamRecords', 'commits', 'persistedChunks', 'streamBytes', 'finalBytes', 'wallMs']) out[k] = m((r) => r[k])
  out.streamRecordsRange = [Math.min(...perRep.map((r) => r.streamRecords)), Math.max(...perRep.map((r) => r.streamRecords))]
  out.responseMs = { threadline: m((r) => (r.threadline.total + r.finishUs) / 1e3), jsonl: m((r) => (r.jsonl.total + r.jsonlFinishUs) / 1e3) }
  return out
}

// ---------- recover ----------
function copyFresh(src, dst, sync, withWal = false) {
  for (const x of ['', '-wal', '-shm']) {
    fs.rmSync(dst + x, { force: true })
    if (x && !withWal) continue
    fs.copyFileSync(src + x, dst + x)
    if (sync) {
      // A fresh copy is dirty in the page cache: the first fsync on this file system (SQLite
      // syncs the WAL header when it starts a new WAL, i.e. at the first commit) would write it
      // back, and that would be timed.
      const fd = fs.openSync(dst + x, 'r+')
      fs.fsyncSync(fd)
      fs.closeSync(fd)
    }
  }
}

async function buildCrashStates(dir, sizes) {
  const child = spawn(process.execPath, [path.join(__dirname, 'recovery-build.js'), dir, ...sizes.map(String)], { stdio: ['ignore', 'pipe', 'inherit'] })
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const exited = new Promise((resolve) => child.on('exit', resolve))
  const { value, done } = await lines.next()
  child.kill('SIGKILL') // the crash: stores left open, sessions 'active', owner gone
  await exited
  if (done || !value) throw new Error('bench/recovery-build.js printed nothing')
  const built = JSON.parse(value)
  const Database = require('better-sqlite3')
  for (const c of built.cases) {
    // 1. the store as the killed process left it: main file, WAL and -shm
    c.asLeft = c.file.replace(/\.db$/, '.as-left.db')
    for (const x of ['', '-wal', '-shm']) if (fs.existsSync(c.file + x)) fs.copyFileSync(c.file + x, c.asLeft + x)
    c.walBytesAtCrash = fs.existsSync(c.file + '-wal') ? fs.statSync(c.file + '-wal').size : 0
    // 2. the same, checkpointed into one file: the figures then do not depend on how far the
    //    background checkpoint had got before the kill
    const db = new Database(c.file)
    db.pragma('wal_checkpoint(TRUNCATE)')
    db.close()
    c.dbBytes = fs.statSync(c.file).size
  }
  return built
}

// What a JSONL store does to find the calls a crash left dangling: read and parse the whole file,
// then match tool_use blocks with tool_result blocks.
function jsonlDangling(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n')
  const open = new Map()
  let records = 0
  for (const line of lines) {
    if (!line) continue
    const r = JSON.parse(line)
    records++
    const content = r.message && r.message.content
    if (!Array.isArray(content)) continue
    for (const b of content) {
      if (b.type === 'tool_use') open.set(b.id, b)
      else if (b.type === 'tool_result') open.delete(b.tool_use_id)
    }
  }
  return { records, dangling: [...open.keys()] }
}

async function recoverPhase(dir, cfg, log) {
  const t0 = Date.now()
  const built = await buildCrashStates(dir, cfg.sizes)
  log(`  crash states built in ${((Date.now() - t0) / 1000).toFixed(1)} s: ` + built.cases.map((c) => `${c.n} ${c.variant} ${(c.dbBytes / 2 ** 20).toFixed(1)} MiB (WAL left by the crash ${(c.walBytesAtCrash / 2 ** 20).toFixed(1)} MiB)`).join(', '))
  const copy = path.join(dir, 'copy.db')
  const samples = Object.fromEntries(built.cases.map((c) => [`${c.n}-${c.variant}`, []]))
  const jsonl = Object.fromEntries(built.cases.filter((c) => c.jsonl).map((c) => [c.n, []]))
  const checks = {}
  const ms = (a, b) => Number(b - a) / 1e6
  // one untimed warm-up round, then cfg.reps timed rounds, cases in rotating order
  for (let r = -1; r < cfg.reps; r++) {
    const k = (r + 1) % built.cases.length
    const order = built.cases.slice(k).concat(built.cases.slice(0, k))
    for (const c of order) {
      // the plan: what recover() would do; writes nothing
      copyFresh(c.file, copy, true)
      gc()
      const a0 = now()
      const store = Store.open(copy)
      const a1 = now()
      const interrupted = store.interruptedSessions()
      const a2 = now()
      const s = store.openSession(c.sessionId)
      const a3 = now()
      const plan = s.pendingRepairs()
      const a4 = now()
      store.close()
      // the repair, on another fresh copy
      copyFresh(c.file, copy, true)
      gc()
      const store2 = Store.open(copy)
      const b1 = now()
      const s2 = store2.openSession(c.sessionId)
      const b2 = now()
      const report = await s2.recover()
      const b3 = now()
      if (r === -1) checks[`${c.n}-${c.variant}`] = check(c, interrupted, plan, report, s2)
      store2.close()
      // the repair on the store as the killed process left it (WAL not checkpointed)
      copyFresh(c.asLeft, copy, true, true)
      gc()
      const c0 = now()
      const store3 = Store.open(copy)
      const c1 = now()
      const s3 = store3.openSession(c.sessionId)
      const report3 = await s3.recover()
      const c2 = now()
      if (r === -1) check(c, interrupted, plan, report3, s3)
      store3.close()
      if (r >= 0) {
        samples[`${c.n}-${c.variant}`].push({
          storeOpen: ms(a0, a1), interruptedSessions: ms(a1, a2), openSession: ms(a2, a3), pendingRepairs: ms(a3, a4),
          openSessionPlusPending: ms(a2, a4), openSessionPlusRecover: ms(b1, b3), recover: ms(b2, b3),
          asLeftStoreOpen: ms(c0, c1), asLeftOpenSessionPlusRecover: ms(c1, c2),
        })
      }
      if (c.jsonl) {
        gc()
        const j0 = now()
        const found = jsonlDangling(c.jsonl)
        const j1 = now()
        if (found.dangling.length !== 4) throw new Error(`jsonl baseline found ${found.dangling.length} dangling calls, expected 4`)
        if (r >= 0) jsonl[c.n].push(ms(j0, j1))
      }
    }
  }
  // recover() on copies that were not synced first: its first commit syncs the new WAL, and on
  // ext4 that fsync also writes back the freshly copied store file (why the copies are synced)
  const unsynced = []
  const big = built.cases.find((c) => c.n === Math.max(...cfg.sizes) && c.variant === 'tools')
  for (let r = 0; r < cfg.unsyncedReps; r++) {
    copyFresh(big.file, copy, false)
    const store = Store.open(copy)
    const b1 = now()
    const s = store.openSession(big.sessionId)
    await s.recover()
    unsynced.push(ms(b1, now()))
    store.close()
  }
  for (const x of ['', '-wal', '-shm']) fs.rmSync(copy + x, { force: true })

  const cases = {}
  for (const c of built.cases) {
    const key = `${c.n}-${c.variant}`
    const xs = samples[key]
    const med = Object.fromEntries(Object.keys(xs[0]).map((f) => [f, median(xs.map((x) => x[f]))]))
    const range = Object.fromEntries(Object.keys(xs[0]).map((f) => [f, [Math.min(...xs.map((x) => x[f])), Math.max(...xs.map((x) => x[f]))]]))
    cases[key] = { n: c.n, variant: c.variant, messages: c.messages, records: c.records, dbBytes: c.dbBytes, walBytesAtCrash: c.walBytesAtCrash, median: med, range, samples: xs, check: checks[key] }
  }
  const jsonlOut = Object.fromEntries(Object.entries(jsonl).map(([n, xs]) => {
    const c = built.cases.find((x) => x.n === Number(n) && x.jsonl)
    return [n, { records: c.records, bytes: c.jsonlBytes, medianMs: median(xs), range: [Math.min(...xs), Math.max(...xs)], samples: xs }]
  }))
  return { fixtureMessages: built.fixtureMessages, reps: cfg.reps, cases, jsonl: jsonlOut, unsyncedRecoverMs: { n: big.n, variant: 'tools', median: median(unsynced), samples: unsynced } }
}

// The plan and the repair are what the crash state calls for, and the repaired session has no
// dangling call left at its end.
function check(c, interrupted, plan, report, s) {
  const kinds = (rs) => rs.reduce((a, x) => ((a[x.kind] = (a[x.kind] || 0) + 1), a), {})
  const want = JSON.stringify(Object.fromEntries(Object.entries(c.expect).sort()))
  const gotPlan = JSON.stringify(Object.fromEntries(Object.entries(kinds(plan)).sort()))
  const gotRepairs = JSON.stringify(Object.fromEntries(Object.entries(kinds(report.repairs)).sort()))
  if (gotPlan !== want || gotRepairs !== want) throw new Error(`${c.n} ${c.variant}: expected ${want}, plan ${gotPlan}, repairs ${gotRepairs}`)
  if (!interrupted.some((i) => i.id === c.sessionId)) throw new Error(`${c.n} ${c.variant}: not listed by interruptedSessions()`)
  const messages = s.messages
  // the fixture's own history holds Claude Code's split records (reported as roles_not_alternating
  // and, where a response's records are interleaved with results, as tool problems): only the
  // messages from the crashed response on are checked
  const from = c.variant === 'tools' ? c.messages - 1 : c.messages
  const problems = validateMessages(messages).filter((p) => p.index >= from)
  if (problems.length) throw new Error(`${c.n} ${c.variant}: after recover(): ${JSON.stringify(problems)}`)
  return { plan: kinds(plan), recordsWritten: report.recordsWritten, messagesAfter: messages.length }
}

// ---------- run ----------
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

async function run({ quick = false, sections = SECTIONS, log = (...a) => process.stderr.write(a.join(' ') + '\n') } = {}) {
  const cfg = config(quick)
  const t0 = Date.now()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-recovery-'))
  const out = { generatedAt: new Date().toISOString(), quick, sections, build: buildInfo(), config: cfg }
  try {
    if (sections.includes('stream')) {
      log('streaming: writer.push per chunk, one long response per repetition, as fast as possible')
      const plans = Array.from({ length: cfg.stream.reps }, (_, r) => responsePlan(1000 + r, cfg.stream.scale))
      out.stream = {
        raw: streamPhase('stream-raw', dir, (r) => ({ plan: plans[r], chunks: rawEvents(plans[r]) }), cfg.stream.reps, 0, log),
        simple: streamPhase('stream-simple', dir, (r) => ({ plan: plans[r], chunks: simpleChunks(plans[r]) }), cfg.stream.reps, 0, log),
      }
    }
    if (sections.includes('paced')) {
      log(`streaming, paced: one raw event every ${cfg.paced.gapMs} ms`)
      const plans = Array.from({ length: cfg.paced.reps }, (_, r) => responsePlan(2000 + r, cfg.paced.scale))
      out.paced = { raw: streamPhase('paced-raw', dir, (r) => ({ plan: plans[r], chunks: rawEvents(plans[r]) }), cfg.paced.reps, cfg.paced.gapMs, log) }
    }
    if (sections.includes('recover')) {
      log(`recover(): sessions of ${cfg.recover.sizes.join(' and ')} messages, a fresh copy of the store for every run`)
      out.recover = await recoverPhase(dir, cfg.recover, log)
    }
  } finally {
    if (process.env.BENCH_KEEP !== '1') fs.rmSync(dir, { recursive: true, force: true })
    else log(`kept ${dir}`)
  }
  out.elapsedSeconds = (Date.now() - t0) / 1000
  const end = buildInfo()
  out.buildChangedDuringRun = end.nativeSha256 !== out.build.nativeSha256
  if (out.buildChangedDuringRun) log(`WARNING: the Threadline build changed during the run`)
  return out
}

// ---------- report ----------
const f2 = (x) => (!Number.isFinite(x) ? '-' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
const fx = (x) => (Number.isFinite(x) ? x.toFixed(x < 0.1 ? 3 : 2) + 'x' : '-')

function table(head, body) {
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => String(b[i]).length)))
  const row = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ')
  return [row(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(row)]
}

function format(res) {
  const lines = ['']
  lines.push(`Recovery benchmark${res.quick ? ' (QUICK run)' : ''}: threadline ${res.build.commit}, native ${res.build.nativeSha256}${res.build.uncommittedLibraryFiles.length ? ' (uncommitted library changes)' : ''}`)
  const streams = []
  if (res.stream) streams.push(['raw events', res.stream.raw], ['simple chunks', res.stream.simple])
  if (res.paced) streams.push([`raw, one every ${res.paced.raw.gapMs} ms`, res.paced.raw])
  if (streams.length) {
    lines.push('')
    lines.push('streaming: µs per chunk (median over repetitions of each repetition\'s median / mean); ratios are Threadline / baseline')
    lines.push(...table(
      ['stream', 'chunks', 'push med', 'push mean', 'jsonl med', 'jsonl mean', 'stringify med', 'TL/jsonl med', 'TL/jsonl mean', 'TL/stringify med', 'stream recs', 'finish µs', 'jsonl final µs'],
      streams.map(([name, s]) => [
        name, s.shape.chunks, f2(s.agg.threadline.median), f2(s.agg.threadline.mean), f2(s.agg.jsonl.median), f2(s.agg.jsonl.mean), f2(s.agg.stringify.median),
        fx(s.agg.ratio.medianVsJsonl.median), fx(s.agg.ratio.meanVsJsonl.median), fx(s.agg.ratio.medianVsStringify.median),
        s.agg.streamRecordsRange[0] === s.agg.streamRecordsRange[1] ? s.agg.streamRecordsRange[0] : s.agg.streamRecordsRange.join('-'),
        f2(s.agg.finishUs), f2(s.agg.jsonlFinishUs),
      ])))
    for (const [name, s] of streams) {
      lines.push(`  ${name}: ${JSON.stringify(s.shape.byType)}, ${(s.shape.bytes / 1024).toFixed(0)} KiB of chunk JSON; ` +
        `whole response ${f2(s.agg.responseMs.threadline)} ms (pushes + finish) vs JSONL ${f2(s.agg.responseMs.jsonl)} ms; ` +
        `persisted ${(s.agg.streamBytes / 1024).toFixed(0)} KiB of stream records + ${(s.agg.finalBytes / 1024).toFixed(0)} KiB final record; push p99 ${f2(s.agg.threadline.p99)} µs, max ${f2(s.agg.threadline.max)} µs`)
    }
  }
  if (res.recover) {
    const r = res.recover
    lines.push('')
    lines.push(`recover(): ms, median of ${r.reps} fresh copies of each crash state (min-max); sessions built from ${r.fixtureMessages}-message copies of tool_heavy.jsonl`)
    lines.push('checkpointed: the store checkpointed into one file after the crash, so the first commit starts a new WAL; as left: main file + WAL + -shm as the killed process left them')
    const rng = (c, k) => `${f2(c.median[k])} (${f2(c.range[k][0])}-${f2(c.range[k][1])})`
    lines.push(...table(
      ['session', 'messages', 'MiB', 'Store.open', 'interruptedSessions', 'openSession+pendingRepairs', 'openSession+recover', 'as left: Store.open', 'as left: openSession+recover', 'JSONL read+find'],
      Object.values(r.cases).map((c) => [
        `${c.n} ${c.variant}`, c.messages, (c.dbBytes / 2 ** 20).toFixed(1), f2(c.median.storeOpen), f2(c.median.interruptedSessions),
        rng(c, 'openSessionPlusPending'), rng(c, 'openSessionPlusRecover'),
        `${rng(c, 'asLeftStoreOpen')} [WAL ${(c.walBytesAtCrash / 2 ** 20).toFixed(1)} MiB]`, rng(c, 'asLeftOpenSessionPlusRecover'),
        c.variant === 'tools' && r.jsonl[c.n] ? `${rng({ median: { x: r.jsonl[c.n].medianMs }, range: { x: r.jsonl[c.n].range } }, 'x')} [${r.jsonl[c.n].records} lines, ${(r.jsonl[c.n].bytes / 2 ** 20).toFixed(1)} MiB]` : '',
      ])))
    const sizes = Object.values(r.cases).map((c) => c.n)
    const at = (n, v) => r.cases[`${n}-${v}`]
    const [lo, hi] = [Math.min(...sizes), Math.max(...sizes)]
    for (const v of ['tools', 'stream']) {
      const [a, b] = [at(lo, v), at(hi, v)]
      if (!a || !b) continue
      const ratio = (k) => fx(b.median[k] / a.median[k])
      lines.push(`  ${v}, ${hi} / ${lo} messages: openSession+pendingRepairs ${ratio('openSessionPlusPending')}, openSession+recover ${ratio('openSessionPlusRecover')} (as left ${ratio('asLeftOpenSessionPlusRecover')})` +
        (v === 'tools' && r.jsonl[hi] ? `; at ${hi}, Threadline / JSONL read+find: openSession+pendingRepairs ${fx(b.median.openSessionPlusPending / r.jsonl[hi].medianMs)}, openSession+recover ${fx(b.median.openSessionPlusRecover / r.jsonl[hi].medianMs)}, as left Store.open+openSession+recover ${fx((b.median.asLeftStoreOpen + b.median.asLeftOpenSessionPlusRecover) / r.jsonl[hi].medianMs)}` : ''))
    }
    lines.push(`  openSession+recover on a checkpointed copy not synced first (${r.unsyncedRecoverMs.n} ${r.unsyncedRecoverMs.variant}): ${r.unsyncedRecoverMs.samples.map(f2).join(', ')} ms`)
  }
  lines.push(`elapsed ${res.elapsedSeconds.toFixed(0)} s`)
  return lines.join('\n')
}

module.exports = { run, format, SECTIONS, responsePlan, rawEvents, simpleChunks }

if (require.main === module) {
  const arg = process.argv.slice(2).find((a) => !a.startsWith('-'))
  const sections = arg ? arg.split(',') : SECTIONS
  for (const s of sections) if (!SECTIONS.includes(s)) { console.error(`unknown section ${s}; sections: ${SECTIONS.join(', ')}`); process.exit(2) }
  run({ quick: process.env.BENCH_QUICK === '1', sections }).then((res) => {
    const file = path.resolve(process.env.BENCH_RESULTS || path.join(__dirname, 'results-recovery.json'))
    fs.writeFileSync(file, JSON.stringify(res, null, 2) + '\n')
    console.log(format(res))
    console.log(`results in ${path.relative(process.cwd(), file) || file}`)
  }).catch((e) => { console.error(e); process.exit(1) })
}
