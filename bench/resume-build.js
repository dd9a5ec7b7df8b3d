'use strict'
// Builds the sessions that bench/resume.js resumes:
//
//   node bench/resume-build.js <dir> [historyCopies] [keptRecords]
//
// The history is the real Claude Code session fixtures/claude-code/tool_heavy.jsonl (39
// records, 22 messages, 6 tool calls) repeated with fresh ids (uuids, toolu_, msg_ and req_ ids
// rewritten per copy, as in bench/recovery-build.js), stored with restoreMessages.
//
//   resume-big.db     one session: `historyCopies` whole copies and the first 25 records of one
//                     more (98,032 records with the defaults), then the `keptRecords` records kept
//                     (2,000: from a prompt, record 25 of a copy, to a tool result, record 35 of a
//                     later copy), then session.compact({ summary, firstKeptUuid }) naming the
//                     first kept record: 100,033 records, of which the compaction leaves 2,000
//                     (and the summary)
//   resume-small.db   one session of only those 2,000 records (the same JSON lines, same ids),
//                     not compacted: there is nothing before them to summarise (compact() refuses
//                     a firstKeptUuid that starts the context), so its context is the same
//                     messages without the summary (16 KB less than the big session's)
//   resume-big.jsonl, resume-small.jsonl
//                     the records of each session (session.envelopes(), the compaction record
//                     included) as JSON lines: the JSONL baseline
// The summary is the real one Claude Code wrote in fixtures/claude-code/
// compacted-session.jsonl (the user record with isCompactSummary, 16,009 characters).
// Prints one JSON line describing the files.

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { THREADLINE_DIR } = require('./engines.js')
const { Store } = require(THREADLINE_DIR)

const FIXTURES = path.resolve(__dirname, '../fixtures/claude-code')
const MODEL = 'claude-sonnet-4-5-20250929'
const ID_RE = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|toolu_[A-Za-z0-9]+|msg_[A-Za-z0-9]+|req_[A-Za-z0-9]+/g
// where the kept part starts and ends within a copy of the fixture: record 25 is a prompt, record
// 35 the tool result answering record 33 (the session then waits for the next response)
const KEPT_FIRST = 25

function freshId(id, copy) {
  const h = crypto.createHash('sha256').update(`${copy}:${id}`).digest('hex')
  if (id.startsWith('toolu_') || id.startsWith('msg_') || id.startsWith('req_')) {
    const prefix = id.slice(0, id.indexOf('_') + 1)
    return prefix + Buffer.from(h, 'hex').toString('base64').replace(/[^A-Za-z0-9]/g, '').slice(0, id.length - prefix.length)
  }
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`
}

const fixtureLines = fs.readFileSync(path.join(FIXTURES, 'tool_heavy.jsonl'), 'utf8').split('\n').filter(Boolean)

// JSON lines from record `from` of copy `copy` on, `count` of them, copies following each other
function lines(copy, from, count) {
  const out = []
  for (let c = copy, j = from; out.length < count; j++) {
    if (j === fixtureLines.length) { j = 0; c++ }
    out.push(fixtureLines[j].replace(ID_RE, (id) => freshId(id, c)))
  }
  return out
}

function summaryText() {
  const text = fs.readFileSync(path.join(FIXTURES, 'compacted-session.jsonl'), 'utf8')
  for (const line of text.split('\n')) {
    if (!line.includes('isCompactSummary')) continue
    const r = JSON.parse(line)
    if (r.isCompactSummary) {
      const c = r.message.content
      return typeof c === 'string' ? c : c.map((b) => b.text || '').join('\n')
    }
  }
  throw new Error('no compact summary in compacted-session.jsonl')
}

// firstKeptIndex null: no compaction
// file: a SQLite path or a postgres:// URL (bench/postgres.js; its schema must be new)
function build(file, history, firstKeptIndex, summary, jsonl) {
  const isFile = !/^postgres(ql)?:\/\//.test(file)
  if (isFile) for (const x of ['', '-wal', '-shm']) fs.rmSync(file + x, { force: true })
  const store = Store.open(file)
  const s = store.createSession({ project: 'bench-resume', model: MODEL, contextWindow: 200000 })
  const t0 = process.hrtime.bigint()
  const r = s.restoreMessages(history)
  if (r.skipped.length) throw new Error(`restore skipped records: ${JSON.stringify(r.skipped.slice(0, 3))}`)
  const restoreMs = Number(process.hrtime.bigint() - t0) / 1e6
  const firstKeptUuid = firstKeptIndex === null ? null : JSON.parse(history[firstKeptIndex]).uuid
  const t1 = process.hrtime.bigint()
  const env = firstKeptUuid === null ? null : s.compact({ summary, firstKeptUuid })
  const compactMs = Number(process.hrtime.bigint() - t1) / 1e6
  // the records as JSON lines, a page at a time
  const fd = fs.openSync(jsonl, 'w')
  let records = 0
  for (let from = 0; ; ) {
    const page = s.envelopes({ fromSeq: from, limit: 5000 })
    if (!page.length) break
    fs.writeSync(fd, page.map((e) => JSON.stringify(e)).join('\n') + '\n')
    records += page.length
    from = page[page.length - 1].seq + 1
  }
  fs.closeSync(fd)
  const info = { file, jsonl, sessionId: s.id, records, messages: r.messageCount, turns: r.turnCount, firstKeptUuid, compactionSeq: env ? env.seq : null, restoreMs, compactMs }
  store.close()
  info.dbBytes = isFile ? fs.statSync(file).size : null
  info.walBytes = isFile && fs.existsSync(file + '-wal') ? fs.statSync(file + '-wal').size : 0
  info.jsonlBytes = fs.statSync(jsonl).size
  return info
}

// The histories of the big session (prefix + keep, compacted at prefix.length) and the small one.
function histories(copies, kept) {
  if ((kept - (35 - KEPT_FIRST + 1)) % fixtureLines.length !== 0) throw new Error(`keptRecords must be 11 + a multiple of ${fixtureLines.length} (to end on a tool result)`)
  const prefix = lines(0, 0, copies * fixtureLines.length + KEPT_FIRST)
  const keep = lines(copies, KEPT_FIRST, kept)
  return { prefix, keep }
}

function main() {
  const [dir, copiesArg, keptArg] = process.argv.slice(2)
  const { prefix, keep } = histories(Number(copiesArg || 2513), Number(keptArg || 2000))
  const summary = summaryText()
  const big = build(path.join(dir, 'resume-big.db'), prefix.concat(keep), prefix.length, summary, path.join(dir, 'resume-big.jsonl'))
  const small = build(path.join(dir, 'resume-small.db'), keep, null, summary, path.join(dir, 'resume-small.jsonl'))
  process.stdout.write(JSON.stringify({ fixtureRecords: fixtureLines.length, prefixRecords: prefix.length, keptRecords: keep.length, summaryChars: summary.length, big, small }) + '\n')
}

if (require.main === module) main()

module.exports = { build, histories, summaryText }
