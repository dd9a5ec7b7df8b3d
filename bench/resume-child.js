'use strict'
// One resume measurement in a fresh process (run by bench/resume.js):
//   node --expose-gc bench/resume-child.js '<spec as JSON>'
// spec: { engine: 'threadline' | 'jsonl', file, sessionId, warmReps, maxTokens, system }
// Prints one JSON line. Modules are loaded and the heap settled before anything is timed.
//
// threadline  cold: the first Store.open + openSession + buildContext of this process (SQLite's
//             cache empty, the code paths not yet compiled by V8); warm: `warmReps` more, each
//             on a fresh Store.open; then, once each, a fresh Store.open + openSession +
//             session.messages, and the same with session.allMessages where the build has it
//             (information: what reading the messages costs)
// jsonl       what a JSONL store must do for the same context: read the whole file, JSON.parse
//             every line, find the latest compaction record (if any) and its first kept record,
//             and collect the summary and the messages from there on (no merging, pairing or
//             budget: a lower bound); cold, then `warmReps` more

const fs = require('fs')
const crypto = require('crypto')
const { THREADLINE_DIR } = require('./engines.js')
const { Store } = require(THREADLINE_DIR)

const spec = JSON.parse(process.argv[2])
const now = () => process.hrtime.bigint()
const ms = (a, b) => Number(b - a) / 1e6
const gc = () => { if (global.gc) { global.gc(); global.gc() } }
const sha = (s) => crypto.createHash('sha256').update(s).digest('hex').slice(0, 16)

function threadlineResume() {
  gc()
  const t0 = now()
  const store = Store.open(spec.file)
  const t1 = now()
  const s = store.openSession(spec.sessionId)
  const t2 = now()
  const ctx = s.buildContext({ target: 'anthropic', maxTokens: spec.maxTokens, system: spec.system })
  const t3 = now()
  store.close()
  return {
    time: { storeOpen: ms(t0, t1), openSession: ms(t1, t2), buildContext: ms(t2, t3), total: ms(t0, t3) },
    // what was built, to check that both sessions give the same context (the big session's
    // first message has the summary before the blocks of the small one's)
    fingerprint: sha(JSON.stringify([ctx.system, ctx.messages])),
    rest: sha(JSON.stringify([ctx.system, ctx.messages.slice(1), ctx.messages[0].role])),
    firstBlocks: ctx.messages[0].content.map((b) => sha(JSON.stringify(b))),
    messages: ctx.messages.length,
    stats: { ...ctx.stats, previewed: ctx.stats.previewed.length, unpaired: ctx.stats.unpaired.length },
  }
}

function jsonlResume() {
  gc()
  const t0 = now()
  const text = fs.readFileSync(spec.file, 'utf8')
  const t1 = now()
  const records = []
  for (const line of text.split('\n')) if (line) records.push(JSON.parse(line))
  const t2 = now()
  let cp = records.length - 1
  while (cp >= 0 && records[cp].type !== 'compaction') cp--
  const c = cp >= 0 ? records[cp].compaction : null
  const from = c ? records.findIndex((r) => r.uuid === c.firstKeptUuid) : 0
  if (from < 0) throw new Error('first kept record not found')
  const messages = c ? [{ role: 'user', content: [{ type: 'text', text: c.summary }] }] : []
  for (let i = from; i < records.length; i++) {
    const r = records[i]
    if (r.message && r.includeInContext !== false) messages.push(r.message)
  }
  const t3 = now()
  return {
    time: { read: ms(t0, t1), parse: ms(t1, t2), find: ms(t2, t3), total: ms(t0, t3) },
    records: records.length,
    messages: messages.length,
  }
}

const one = spec.engine === 'threadline' ? threadlineResume : jsonlResume
const cold = one()
const warm = []
for (let i = 0; i < spec.warmReps; i++) warm.push(one())
const out = { engine: spec.engine, cold, warm: warm.map((w) => w.time) }
if (warm.some((w) => (w.fingerprint || w.messages) !== (cold.fingerprint || cold.messages))) out.error = 'repetitions built different contexts'
// session.messages, and session.allMessages where the build has it (every message across
// compactions), each on a fresh Store.open
function read(member) {
  gc()
  const t0 = now()
  const store = Store.open(spec.file)
  const s = store.openSession(spec.sessionId)
  if (!(member in s)) { store.close(); return null }
  const t1 = now()
  const n = s[member].length
  const t2 = now()
  store.close()
  return { openMs: ms(t0, t1), readMs: ms(t1, t2), count: n }
}
if (spec.engine === 'threadline') {
  out.messages = read('messages')
  out.allMessages = read('allMessages')
}
process.stdout.write(JSON.stringify(out) + '\n')
