'use strict'
// What record checksums cost: reads (every record's CRC32C-style checksum checked, blobs
// checked against theirs) and appends (the checksum computed and written with the record).
//
//   node --expose-gc bench/checksum.js [--baseline PATH.node] [--runs N] [--messages N]
//
// Each run is a fresh process with a fresh store: restoreMessages of the workload's first N
// messages (bench/workload.js, default 10,000), then, timed, `reps` reads of each kind (messages,
// allMessages, envelopes(), buildContext for 'anthropic', turns), then 500 single appends. A run prints
// one JSON line of medians. The parent alternates the builds run by run (this checkout's binary,
// then the baseline's, ...) so the machine's drift falls on both, and reports the median of the
// runs' medians and the ratio checked / baseline.
//
// The baseline is a build of the commit before checksums, loaded with NAPI_RS_NATIVE_LIBRARY_PATH
// (the facade, index.js, is this checkout's; it differs only in how a page's parse error is
// reported). Make one with:
//   git worktree add /tmp/base <commit> && (cd /tmp/base && ln -s $PWD/node_modules . &&
//   npx napi build --platform --release --js native.js --dts native.d.ts)
// Without --baseline, only this build is measured. With --migration (and --baseline): what the
// first open of a version 3 store costs, the migration that computes every record's checksum.

const path = require('path')
const fs = require('fs')
const os = require('os')
const { execFileSync } = require('child_process')

const args = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : dflt
}

if (args[0] === '--child') {
  child(Number(opt('--messages', 10000)), Number(opt('--reps', 7)))
} else if (args[0] === '--make-store') {
  makeStore(args[1], Number(args[2]))
} else if (args[0] === '--time-open') {
  timeOpen(args[1], Number(args[2]))
} else if (args.includes('--migration')) {
  migration()
} else {
  parent()
}

// A store of n workload messages at `file`, written by whichever build is loaded.
function makeStore(file, n) {
  const { Store } = require(path.join(__dirname, '..'))
  const { generate } = require('./workload.js')
  const store = Store.open(file)
  store.createSession({ id: 'bench' }).restoreMessages(generate(n))
  store.close()
}

// The first Store.open of `file` (a migration, if the store is older), then a check of it.
function timeOpen(file, n) {
  const { Store } = require(path.join(__dirname, '..'))
  const t0 = process.hrtime.bigint()
  const store = Store.open(file)
  const openMs = Number(process.hrtime.bigint() - t0) / 1e6
  const s = store.openSession('bench')
  if (s.allMessages.length !== n) throw new Error('messages lost')
  if (!s.verify().ok) throw new Error('verify failed after the migration')
  store.close()
  console.log(JSON.stringify({ openMs }))
}

// node bench/checksum.js --migration --baseline PATH.node [--messages N] [--runs N]:
// the first open of a store written by the baseline (schema version 3) with this build (which
// migrates it to version 4: checksums computed for every record), against the first open of a
// store this build wrote.
function migration() {
  const baseline = opt('--baseline', null)
  if (!baseline) throw new Error('--migration needs --baseline PATH.node (a build of the commit before checksums)')
  const n = opt('--messages', '10000')
  const runs = Number(opt('--runs', 3))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-migrate-'))
  const node = (env, ...a) => execFileSync(process.execPath, [__filename, ...a], { env: { ...process.env, ...env }, encoding: 'utf8' })
  try {
    const v3 = path.join(dir, 'v3.db')
    const v4 = path.join(dir, 'v4.db')
    node({ NAPI_RS_NATIVE_LIBRARY_PATH: path.resolve(baseline) }, '--make-store', v3, n)
    node({}, '--make-store', v4, n)
    const size = fs.statSync(v3).size
    const migrate = []
    const plain = []
    for (let r = 0; r < runs; r++) {
      for (const [from, out] of [[v3, migrate], [v4, plain]]) {
        const copy = path.join(dir, `copy-${r}.db`)
        fs.copyFileSync(from, copy)
        out.push(JSON.parse(node({}, '--time-open', copy, n).trim()).openMs)
        fs.rmSync(copy, { force: true })
      }
    }
    const round = (x) => Math.round(x * 10) / 10
    console.log(JSON.stringify({
      messages: Number(n),
      storeMiB: round(size / (1 << 20)),
      firstOpenMs: { migratingV3: round(median(migrate)), v4: round(median(plain)) },
      migrationMs: round(median(migrate) - median(plain)),
    }, null, 2))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

function child(n, reps) {
  const { Store } = require(path.join(__dirname, '..'))
  const { generate } = require('./workload.js')
  const gc = () => { if (global.gc) { global.gc(); global.gc() } }
  const now = () => process.hrtime.bigint()
  const ms = (a, b) => Number(b - a) / 1e6
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-checksum-'))
  try {
    const file = path.join(dir, 's.db')
    const msgs = generate(n)
    let store = Store.open(file)
    let s = store.createSession({ id: 'bench' })
    gc()
    const t = now()
    const c = process.cpuUsage()
    s.restoreMessages(msgs)
    const wall = ms(t, now())
    const d = process.cpuUsage(c)
    const restore = { wall, cpu: (d.user + d.system) / 1000 }
    store.close()
    store = Store.open(file)
    s = store.openSession('bench')
    // Wall time, and CPU time of the process (all threads: the read-ahead thread included),
    // which other work on a shared machine disturbs far less than wall time.
    const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000 }
    const time = (fn) => {
      const wall = []
      const cpu = []
      fn() // warm: SQLite's cache and V8's code
      for (let i = 0; i < reps; i++) {
        gc()
        const c0 = cpuMs()
        const t0 = now()
        fn()
        wall.push(ms(t0, now()))
        cpu.push(cpuMs() - c0)
      }
      return { wall: median(wall), cpu: median(cpu) }
    }
    let count = 0
    const read = {
      messages: time(() => { count = s.messages.length }),
      allMessages: time(() => s.allMessages),
      envelopes: time(() => s.envelopes()),
      buildContext: time(() => s.buildContext({ target: 'anthropic', maxTokens: 200000 })),
      turns: time(() => s.turns),
    }
    if (count !== n) throw new Error(`read ${count} messages, expected ${n}`)
    // Appends: one record per transaction, the cost a live agent pays per message.
    const more = generate(n + 500).slice(n)
    const per = []
    const perCpu = []
    for (const m of more) {
      const c0 = process.cpuUsage()
      const t0 = now()
      s.append(m)
      per.push(ms(t0, now()) * 1000)
      const d = process.cpuUsage(c0)
      perCpu.push(d.user + d.system)
    }
    const append = { wall: median(per), cpu: median(perCpu) }
    // verify(): absent from the baseline's binary (the facade's method then throws a TypeError).
    let verify = null
    try {
      gc()
      const t0 = now()
      const r = s.verify()
      verify = { wall: ms(t0, now()), cpu: null }
      if (!r.ok) throw new Error('verify found damage in a fresh store')
    } catch (e) {
      if (!(e instanceof TypeError)) throw e
    }
    store.close()
    console.log(JSON.stringify({ restore, read, appendUs: append, verify }))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function parent() {
  const runs = Number(opt('--runs', 5))
  const n = opt('--messages', '10000')
  const baseline = opt('--baseline', null)
  const builds = [['checked', null]]
  if (baseline) builds.push(['baseline', path.resolve(baseline)])
  const results = Object.fromEntries(builds.map(([name]) => [name, []]))
  for (let r = 0; r < runs; r++) {
    for (const [name, lib] of r % 2 ? [...builds].reverse() : builds) {
      const env = { ...process.env }
      if (lib) env.NAPI_RS_NATIVE_LIBRARY_PATH = lib
      else delete env.NAPI_RS_NATIVE_LIBRARY_PATH
      const out = execFileSync(process.execPath, ['--expose-gc', __filename, '--child', '--messages', n], { env, encoding: 'utf8' })
      const line = JSON.parse(out.trim().split('\n').pop())
      results[name].push(line)
      process.stderr.write(`run ${r + 1}/${runs} ${name}: ${JSON.stringify(line)}\n`)
    }
  }
  const summary = {}
  for (const clock of ['cpu', 'wall']) {
    summary[clock] = {}
    for (const [name] of builds) {
      const rs = results[name]
      const pick = (f) => Math.round(median(rs.map(f)) * 100) / 100
      summary[clock][name] = {
        restoreMs: pick((x) => x.restore[clock]),
        messagesMs: pick((x) => x.read.messages[clock]),
        allMessagesMs: pick((x) => x.read.allMessages[clock]),
        envelopesMs: pick((x) => x.read.envelopes[clock]),
        buildContextMs: pick((x) => x.read.buildContext[clock]),
        turnsMs: pick((x) => x.read.turns[clock]),
        appendUs: pick((x) => x.appendUs[clock]),
        verifyMs: rs[0].verify === null || clock === 'cpu' ? null : pick((x) => x.verify[clock]),
      }
    }
    if (baseline) {
      const c = summary[clock].checked, b = summary[clock].baseline
      summary[clock].ratio = {}
      for (const k of Object.keys(c)) {
        if (typeof c[k] === 'number' && typeof b[k] === 'number') summary[clock].ratio[k] = Math.round((c[k] / b[k]) * 1000) / 1000
      }
    }
  }
  console.log(JSON.stringify({ messages: Number(n), runs, summary }, null, 2))
}
