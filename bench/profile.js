'use strict'
// Runs one Threadline operation of the benchmark in a loop, alone, for a profiler.
//
//   node bench/profile.js append [messages=10000] [rounds=2]
//   node bench/profile.js restore [messages=10000] [rounds=8]
//
// Setup (generating the workload, writing the store to restore) is kept out of the profile: with
// PERF_CTL=<fifo> the measured part is bracketed by 'enable' / 'disable' on perf's control fifo:
//
//   mkfifo /tmp/perf.ctl
//   PERF_CTL=/tmp/perf.ctl perf record -D -1 --control fifo:/tmp/perf.ctl -F 999 \
//       --call-graph dwarf,16384 -o /tmp/append.perf.data \
//       node --perf-basic-prof --logfile=/tmp/v8.log --no-logfile-per-isolate bench/profile.js append
//   perf script -i /tmp/append.perf.data | python3 bench/perf-breakdown.py append
//
// (--perf-basic-prof writes /tmp/perf-<pid>.map for perf to name JS frames, and a V8 log, sent to
// /tmp/v8.log here instead of isolate-*.log files in the current directory.)
//
// Without PERF_CTL it just runs (e.g. under `node --cpu-prof`, where setup shows up separately).

const fs = require('fs')
const os = require('os')
const path = require('path')
const { generate, messages } = require('./workload.js')
const { Store } = require(path.resolve(process.env.BENCH_THREADLINE || path.join(__dirname, '..')))

const [op = 'append', nArg, roundsArg] = process.argv.slice(2)
const n = Number(nArg || 10000)
const ctl = process.env.PERF_CTL
const perf = (cmd) => { if (ctl) fs.writeFileSync(ctl, cmd + '\n') }
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-profile-'))

try {
  if (op === 'append') {
    const rounds = Number(roundsArg || 2)
    const msgs = generate(n)
    const store = Store.open(path.join(dir, 'p.db'))
    const t0 = process.hrtime.bigint()
    perf('enable')
    for (let r = 0; r < rounds; r++) {
      const s = store.createSession()
      for (let i = 0; i < n; i++) s.append(msgs[i])
    }
    perf('disable')
    const us = Number(process.hrtime.bigint() - t0) / 1e3 / (n * rounds)
    store.close()
    console.log(`append: ${n * rounds} appends, ${us.toFixed(1)} µs each on average`)
  } else if (op === 'restore') {
    const rounds = Number(roundsArg || 8)
    const file = path.join(dir, 'p.db')
    const store = Store.open(file)
    const s = store.createSession()
    const it = messages()
    for (let i = 0; i < n; i += 500) {
      const batch = []
      for (let j = 0; j < 500 && i + j < n; j++) batch.push(it.next().value)
      s.appendMany(batch)
    }
    const id = s.id
    store.close()
    const times = []
    perf('enable')
    for (let r = 0; r < rounds; r++) {
      const a = process.hrtime.bigint()
      const st = Store.open(file)
      const got = st.openSession(id).messages
      st.close()
      times.push(Number(process.hrtime.bigint() - a) / 1e6)
      if (got.length !== n) throw new Error(`restored ${got.length} of ${n}`)
    }
    perf('disable')
    console.log(`restore of ${n}: ${times.map((t) => t.toFixed(0)).join(' ')} ms`)
  } else {
    throw new Error(`unknown operation ${op}: append | restore`)
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
