'use strict'
// Appends as a new user would time them: one process appends the workload's messages
// (bench/workload.js), each with the envelope fields an agent writes beside it (uuid, parentUuid,
// timestamp, cwd, version, gitBranch, requestId), one by one to a Threadline store, and the same
// records as lines of a JSONL file with fs.appendFileSync (Claude Code's way), interleaved record
// by record. Prints the median append of each and their ratio.
//
//   node --expose-gc bench/append.js [--messages 5000] [--runs 5] [--baseline PATH.node]
//
// Each run is a fresh process with a fresh store. With --baseline, the runs alternate between
// this build and another (loaded with NAPI_RS_NATIVE_LIBRARY_PATH; bench/checksum.js says how to
// make one), and the ratio of the two builds is printed too.

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')
const { execFileSync } = require('child_process')
const { parseArgs } = require('util')

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '5000' },
    runs: { type: 'string', default: '5' },
    baseline: { type: 'string' },
    child: { type: 'boolean', default: false },
  },
})
// The middle value (the mean of the two middle ones for an even count).
function median(xs) {
  const sorted = Float64Array.from(xs).sort()
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

function child(n) {
  const { Store } = require(path.join(__dirname, '..'))
  const { generate } = require('./workload.js')
  const msgs = generate(n)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-append-'))
  try {
    const store = Store.open(path.join(dir, 'a.db'))
    const session = store.createSession({ id: 'bench' })
    const jsonl = path.join(dir, 'a.jsonl')
    const tl = []
    const line = []
    let parent = null
    for (const m of msgs) {
      const envelope = {
        uuid: crypto.randomUUID(), parentUuid: parent, timestamp: new Date().toISOString(),
        cwd: '/home/dev/project', version: '2.1.3', gitBranch: 'main', userType: 'external',
      }
      if (m.role === 'assistant') envelope.requestId = `req_${crypto.randomBytes(12).toString('hex')}`
      parent = envelope.uuid
      let t = process.hrtime.bigint()
      session.append(m, envelope)
      tl.push(Number(process.hrtime.bigint() - t) / 1000)
      t = process.hrtime.bigint()
      fs.appendFileSync(jsonl, JSON.stringify({ ...envelope, sessionId: 'bench', type: m.role, message: m }) + '\n')
      line.push(Number(process.hrtime.bigint() - t) / 1000)
    }
    store.close()
    return { threadlineUs: median(tl), jsonlUs: median(line) }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function run(n, lib) {
  const env = { ...process.env }
  if (lib) env.NAPI_RS_NATIVE_LIBRARY_PATH = path.resolve(lib)
  const out = execFileSync(process.execPath, ['--expose-gc', __filename, '--child', '--messages', String(n)], { env, encoding: 'utf8' })
  return JSON.parse(out)
}

function main() {
  const n = Number(args.messages)
  if (args.child) {
    process.stdout.write(JSON.stringify(child(n)))
    return
  }
  const runs = Number(args.runs)
  const baseline = args.baseline
  const mine = []
  const theirs = []
  for (let r = 0; r < runs; r++) {
    mine.push(run(n))
    if (baseline) theirs.push(run(n, baseline))
  }
  const summary = (rs) => ({
    threadlineUs: median(rs.map((r) => r.threadlineUs)),
    jsonlUs: median(rs.map((r) => r.jsonlUs)),
    vsJsonl: median(rs.map((r) => r.threadlineUs / r.jsonlUs)),
    vsJsonlEachRun: rs.map((r) => Number((r.threadlineUs / r.jsonlUs).toFixed(2))),
  })
  const out = { messages: n, runs, build: summary(mine) }
  if (baseline) {
    out.baseline = summary(theirs)
    out.buildVsBaseline = out.build.vsJsonl / out.baseline.vsJsonl
  }
  console.log(JSON.stringify(out, null, 2))
}

main()
