'use strict'
// A process of bench/watch.js: the watcher or the writer of one run, talking JSON lines over
// stdin/stdout. The clock both share: performance.timeOrigin + performance.now() (ms since the
// epoch, sub-ms resolution), so a writer's acknowledgement and a watcher's sight compare.
//
//   node bench/watch-child.js watcher <kind> <location> <sessionId> <records>
//     follows the session (session.watch from seq 0) or the JSONL file (fs.watch, reading the
//     new bytes and parsing each line) until it has seen <records> records; prints 'ready' when
//     it has seen record 0 (written before it started, so its watch is registered), answers
//     'cpu' on stdin with its process.cpuUsage(), and prints { seen: [ms per record] } at the end.
//   node bench/watch-child.js writer <kind> <location> <sessionId> <plan JSON>
//     opens the store (or nothing for JSONL), prints 'open', waits for 'go', appends the plan's
//     messages (steady: one every plan.everyMs; then bursts of plan.burst back to back,
//     plan.pauseMs apart) and prints { acks: [ms per record] }.
// kind: threadline (a file or a postgres:// URL) or jsonl.

const fs = require('fs')
const path = require('path')
const readline = require('readline')
const { StringDecoder } = require('string_decoder')
const { generate } = require('./workload.js')

const clock = () => performance.timeOrigin + performance.now()
const say = (x) => process.stdout.write(JSON.stringify(x) + '\n')
const lines = readline.createInterface({ input: process.stdin })

const [role, kind, location, sessionId, arg] = process.argv.slice(2)

async function watcher() {
  const total = Number(arg)
  const seen = new Float64Array(total)
  let count = 0
  lines.on('line', (l) => {
    if (l === 'cpu') say({ cpu: process.cpuUsage() })
  })
  /** @returns {boolean} whether all were seen */
  const saw = (i) => {
    seen[i] = clock()
    count++
    if (i === 0) say('ready')
    return count === total
  }
  // BENCH_WATCH_TRACE=1 (SQLite): also stamp every change of the store's file or its -wal file,
  // from a watch of the directory of its own, to split the latency into the commit's (ack ->
  // the -wal file written) and the watch's (-wal written -> record yielded).
  /** @type {number[]} */
  const events = []
  let trace = null
  if (process.env.BENCH_WATCH_TRACE === '1' && kind !== 'jsonl' && !/^postgres/i.test(location)) {
    const base = path.basename(location)
    trace = fs.watch(path.dirname(location), (_e, name) => {
      if (name === base || name === `${base}-wal`) events.push(clock())
    })
  }
  if (kind === 'jsonl') {
    await new Promise((resolve, reject) => {
      const fd = fs.openSync(location, 'r')
      const decoder = new StringDecoder('utf8')
      const buf = Buffer.allocUnsafe(1 << 20)
      let off = 0
      let text = ''
      let line = 0
      let done = false
      // What a tail viewer does: on each change, read the bytes after what it read, parse each
      // complete line.
      const readNew = () => {
        for (;;) {
          const n = fs.readSync(fd, buf, 0, buf.length, off)
          if (n === 0) break
          off += n
          text += decoder.write(buf.subarray(0, n))
        }
        let nl
        while (!done && (nl = text.indexOf('\n')) >= 0) {
          JSON.parse(text.slice(0, nl))
          text = text.slice(nl + 1)
          if (saw(line++)) done = true
        }
        if (done) {
          w.close()
          fs.closeSync(fd)
          resolve(undefined)
        }
      }
      const w = fs.watch(location, { persistent: true }, readNew)
      w.on('error', reject)
      readNew()
    })
  } else {
    const { Store } = require('..')
    const store = Store.open(location)
    const session = store.openSession(sessionId)
    for await (const r of session.watch({ fromSeq: 0 })) {
      if (saw(r.seq)) break
    }
    store.close()
  }
  trace?.close()
  say({ seen: Array.from(seen), events })
  lines.close()
}

async function writer() {
  const plan = JSON.parse(arg)
  const messages = generate(plan.steady + plan.bursts * plan.burst)
  let append
  let close = () => {}
  if (kind === 'jsonl') {
    // As the JSONL engine of the other benches (bench/engines.js): JSON.stringify + appendFileSync.
    append = (m) => fs.appendFileSync(location, JSON.stringify(m) + '\n')
  } else {
    const { Store } = require('..')
    // BENCH_WATCH_DURABILITY=power (a diagnosis): each append commits before it returns, no batch.
    const durability = process.env.BENCH_WATCH_DURABILITY
    const store = Store.open(location, durability ? { durability } : undefined)
    const session = store.openSession(sessionId)
    append = (m) => session.append(m)
    close = () => store.close()
  }
  say('open')
  await new Promise((resolve) => lines.once('line', resolve))
  const acks = []
  const sleepUntil = (t) => new Promise((resolve) => setTimeout(resolve, Math.max(0, t - clock())))
  let i = 0
  const start = clock()
  for (let k = 0; k < plan.steady; k++, i++) {
    await sleepUntil(start + k * plan.everyMs)
    append(messages[i])
    acks.push(clock())
  }
  for (let b = 0; b < plan.bursts; b++) {
    await sleepUntil(clock() + plan.pauseMs)
    for (let k = 0; k < plan.burst; k++, i++) {
      append(messages[i])
      acks.push(clock())
    }
  }
  close()
  say({ acks })
  lines.close()
}

;(role === 'watcher' ? watcher() : writer()).catch((e) => {
  console.error(e)
  process.exit(1)
})
