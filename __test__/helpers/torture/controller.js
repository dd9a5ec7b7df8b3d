'use strict'
// The controller of the fault test: starts worker processes on one store, runs the seeded
// schedule over their lanes, injects faults (SIGKILL, SIGSTOP/SIGCONT, and on PostgreSQL server
// restarts and freezes), reads through every kind of reader, and ends with every worker gone and
// a final read in fresh processes (readonly, then writable with store.verify()). Returns a
// summary with the violations found (checker.js says what each rule checks).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')

const { mulberry32 } = require('../seeded')
const { Model } = require('./model')
const { Schedule } = require('./schedule')
const { apply, readByProcess } = require('./results')
const check = require('./checker')
const faults = require('./faults')

// How many ops are sent while the PostgreSQL server restarts (see heldForRestart).
const RESTART_OPS = 24

const ROOT = path.join(__dirname, '..', '..', '..')
const WORKER = path.join(__dirname, 'worker.js')
const READER = path.join(__dirname, 'reader.js')
const now = () => performance.now()
// An outcome, shortened for the trace.
const brief = (r) => ({ ...r, recs: r.recs && r.recs.map((x) => `${x.s} ${x.u} ${x.t}`), msgs: r.msgs && r.msgs.length, list: r.list && r.list.length })

class Controller {
  constructor(opts) {
    this.opts = opts
    this.rng = mulberry32(opts.seed)
    this.model = new Model()
    this.schedule = new Schedule(this.rng, this.model, { sessions: opts.workers * 3 })
    this.engine = opts.engine
    this.workers = new Map()
    this.inflight = new Map() // op index -> { op, w, lane, sent, via }
    this.violations = []
    this.timeline = [] // every op's outcome: { w, kind, write, sent, done, ok, code, lat, busy }
    this.stops = []
    this.serverFaults = []
    this.opened = new Map()
    this.stats = { ops: {}, errors: {}, faults: { kill: 0, stop: 0, restart: 0, freeze: 0, full: 0 }, busyWrites: 0, busyOther: 0, busyRetried: 0, locked: 0, procReads: 0, workers: 0, readonly: 0, paths: new Set(), missingVia: {} }
    this.issued = 0
    this.nextWorker = 0
    this.wake = null
    this.selfExits = 0
  }

  add(rule, i, msg, vias) {
    this.violations.push({ rule, i, msg })
    for (const v of vias || []) this.stats.missingVia[v] = (this.stats.missingVia[v] || 0) + 1
  }

  signal() {
    if (this.wake) this.wake()
  }

  via(name) {
    return this.paths.variants[name]
  }

  spawnWorker() {
    const id = `w${this.nextWorker++}`
    const names = Object.keys(this.paths.variants)
    const pickVia = () => (this.opts.paths === 'real' ? 'real' : names[Math.floor(this.rng() * names.length)])
    const n = 1 + Math.floor(this.rng() * this.opts.lanes)
    const lanes = Array.from({ length: n }, (_, k) => ({ via: pickVia(), roVia: pickVia(), ackFile: path.join(this.dir, 'acks', `${id}-${k}.jsonl`), busy: null }))
    const cfg = { writer: id, root: ROOT, busyTimeoutMs: this.opts.busyTimeoutMs, lanes: lanes.map((l) => ({ path: this.via(l.via), roPath: this.via(l.roVia), ackFile: l.ackFile })) }
    const proc = spawn(process.execPath, [WORKER, JSON.stringify(cfg)], { cwd: this.dir, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
    const w = { id, proc, lanes, ready: false, dead: false, stopped: null, err: '' }
    proc.stderr.on('data', (d) => { w.err = (w.err + d).slice(-4000) })
    proc.on('message', (m) => this.onMessage(w, m))
    w.gone = Promise.all([new Promise((r) => proc.on('exit', r)), new Promise((r) => proc.on('disconnect', r))]).then(() => this.onDeath(w))
    this.workers.set(id, w)
    this.stats.workers++
    return w
  }

  onMessage(w, m) {
    if (m.t === 'ready') w.ready = true
    else if (m.t === 'fatal') this.add('ERR', this.issued, `${w.id}: ${m.message}`)
    else if (m.t === 'done') this.finish(w, m.i, m.r)
    this.signal()
  }

  finish(w, i, r) {
    const e = this.inflight.get(i)
    if (!e || e.w !== w) return
    this.inflight.delete(i)
    w.lanes[e.lane].busy = null
    const t = now()
    if (this.trace) this.log({ i, w: w.id, lane: e.lane, via: e.via, op: e.op, sent: e.sent, done: t, r: brief(r) })
    apply(this, w, e, r, t)
  }

  log(entry) {
    if (this.trace) fs.writeSync(this.trace, JSON.stringify(entry) + '\n')
  }

  // A worker is gone (killed, or exited at the end): what it acknowledged is in its ack files;
  // what it had in flight may or may not have happened.
  onDeath(w) {
    w.dead = true
    if (!w.killing && !this.ending) {
      this.add('ERR', this.issued, `${w.id} exited by itself: ${w.err.slice(-1500)}`)
      if (++this.selfExits > 5) this.abort = new Error(`workers keep exiting by themselves: ${w.err.slice(-1500)}`)
    }
    if (w.stopped) this.endStop(w)
    for (const l of w.lanes) {
      let text = ''
      try {
        text = fs.readFileSync(l.ackFile, 'utf8')
      } catch {}
      for (const line of text.split('\n').slice(0, -1)) {
        const a = JSON.parse(line)
        if (this.inflight.has(a.i)) this.finish(w, a.i, { ok: true, ...a })
      }
    }
    for (const [i, e] of this.inflight) {
      if (e.w !== w) continue
      this.inflight.delete(i)
      this.log({ i, w: w.id, lane: e.lane, op: e.op, sent: e.sent, lost: now() })
      this.model.settle(i, 'unknown')
      const s = e.op.sid !== undefined && this.model.sessions.get(e.op.sid)
      // On PostgreSQL the server may still commit what the worker sent before its kill: the
      // session is resolved once the worker's backends have ended (settle).
      if (s && ['create', 'delete', 'resolve'].includes(e.op.kind)) s.phase = this.engine === 'postgres' ? 'settling' : 'unknown'
      if (e.op.kind === 'fork') this.model.ops.get(i).unknown = true
    }
    for (const s of this.model.sessions.values()) {
      if (s.home === w.id) s.home = null
      if (s.phase === 'releasing') {
        w.lanes.forEach((_, n) => s.release.delete(`${w.id}:${n}`))
        if (!s.release.size) s.phase = 'live'
      }
    }
    if (!this.ending) this.spawnWorker()
    if (this.engine === 'postgres') this.settle().then(() => this.signal())
    this.signal()
  }

  // PostgreSQL: waits until no backend of a killed worker runs (faults.orphanBackends), at most
  // 10 s (a server restart or freeze ends them or holds them that long at most), then lets the
  // sessions it left in doubt be resolved.
  async settle() {
    const ports = faults.serverPorts(this.opts.postgres)
    const until = now() + 10_000
    while (faults.orphanBackends(ports) > 0 && now() < until) await new Promise((r) => setTimeout(r, 5))
    for (const s of this.model.sessions.values()) if (s.phase === 'settling') s.phase = 'unknown'
  }

  alive(id) {
    const w = this.workers.get(id)
    return !!w && !w.dead
  }

  send(w, lane, op) {
    const l = w.lanes[lane]
    this.stats.paths.add(op.ro ? l.roVia : l.via)
    if (op.ro) this.stats.readonly++
    l.busy = op.i
    this.inflight.set(op.i, { op, w, lane, sent: now(), via: op.ro ? l.roVia : l.via })
    // A worker that died a moment ago (its exit not seen yet) loses the op: its exit settles
    // what it had in flight; the send's EPIPE goes to the callback, not thrown.
    w.proc.send({ t: 'op', lane, op }, () => {})
  }

  fill() {
    for (const w of this.workers.values()) {
      if (!w.ready || w.dead || w.killing) continue
      w.lanes.forEach((l, lane) => {
        if (l.busy !== null || this.issued >= this.opts.ops || this.heldForRestart()) return
        const op = this.schedule.next(w, lane, this.issued, now(), (id) => this.alive(id))
        this.send(w, lane, op)
        this.issued++
        this.maybeFault()
      })
    }
  }

  maybeFault() {
    const r = this.rates
    const live = [...this.workers.values()].filter((w) => !w.dead && !w.killing)
    if (this.rng() < r.kill && live.length) {
      const w = live[Math.floor(this.rng() * live.length)]
      w.killing = true
      this.stats.faults.kill++
      this.log({ fault: 'kill', w: w.id, i: this.issued, at: now() })
      setTimeout(() => w.proc.kill('SIGKILL'), Math.floor(this.rng() * 20))
    }
    const stoppable = live.filter((w) => w.ready)
    if (this.rng() < r.stop && !this.stops.some((s) => s.end === null) && stoppable.length) {
      const w = stoppable[Math.floor(this.rng() * stoppable.length)]
      const ms = 10 + Math.floor(this.rng() * 490)
      w.stopped = { w: w.id, i: this.issued, start: now(), end: null }
      this.stops.push(w.stopped)
      this.stats.faults.stop++
      this.log({ fault: 'stop', w: w.id, i: this.issued, at: now(), ms })
      w.proc.kill('SIGSTOP')
      if (this.engine !== 'postgres') this.noteInCommit(w, w.stopped)
      else if (!this.opts.postgres.includes(',')) this.noteWaits(w.stopped) // one server: no formation
      setTimeout(() => this.endStop(w), ms)
    }
    // Server faults the caller brings (a failover of a formation), each at its op count: treated
    // as a restart is (a window of its own: R5 leaves out the stops it overlaps; the ops beyond
    // RESTART_OPS wait for its end).
    const due = this.engine === 'postgres' && !this.serverFault && (this.opts.serverFaults || []).find((f) => !f.done && this.issued >= f.at)
    if (due) {
      due.done = true
      this.serverFaulted(due.kind, due.fn)
    } else if (this.engine === 'postgres' && !this.serverFault) {
      // Restarts at fixed op counts (every `restartEvery` ops), freezes at random.
      if (r.restartEvery && this.issued % r.restartEvery === Math.floor(r.restartEvery / 2)) this.serverFaulted('restart', () => faults.restartServer())
      else if (this.rng() < r.freeze) this.serverFaulted('freeze', () => faults.freezeServer(100 + Math.floor(this.rng() * 400)))
    }
    if (this.smallDisk && !this.diskFull && this.rng() < (r.full || 0)) {
      // The disk is full for 20 to 300 ms: writes fail (STORE_IO), nothing acknowledged may go.
      const ms = 20 + Math.floor(this.rng() * 280)
      const f = { kind: 'full', i: this.issued, start: now(), end: null }
      this.stats.faults.full++
      this.log({ fault: 'full', i: this.issued, at: now(), ms })
      this.diskFull = faults.fill(path.dirname(this.paths.real), ms).then(() => {
        f.end = now()
        this.diskFull = null
      })
    }
    if (this.rng() < r.proc && !this.procRead) this.procRead = this.readInProcess(this.rng() < 0.5, false).finally(() => { this.procRead = null })
  }

  // Notes whether the worker stopped holding SQLite's write lock (inside a commit), once it is
  // stopped: such a stop holds up the others' commits until it ends, as SQLite's lock does.
  noteInCommit(w, stop) {
    if (stop.end !== null || w.dead) return
    if (!faults.isStopped(w.proc.pid)) {
      // Until the kernel has stopped it (on a busy machine that can take a while), for as long as
      // the stop lasts.
      setTimeout(() => this.noteInCommit(w, stop), 1)
      return
    }
    const real = fs.realpathSync(this.paths.real)
    stop.inCommit = faults.holdsWriteLock(w.proc.pid, real)
    stop.locks = faults.locksHeld(w.proc.pid, real)
    // Who holds the write lock while the stop lasts (looked at every 20 ms): a running process
    // that holds it for long holds the others' appends up, whatever the stopped one holds.
    const look = () => {
      if (stop.end !== null) return
      for (const pid of faults.writeLockHolders(real)) {
        const holder = [...this.workers.values()].find((x) => x.proc.pid === pid)
        const who = holder ? holder.id : `pid ${pid}`
        stop.writers = stop.writers || new Map()
        stop.writers.set(who, (stop.writers.get(who) || 0) + 1)
      }
      stop.looks = (stop.looks || 0) + 1
      setTimeout(look, 20)
    }
    look()
  }

  // PostgreSQL: which statements wait for a lock while the stop lasts, and what the backend
  // holding it last ran (looked at every 20 ms), for R5's message.
  noteWaits(stop) {
    const look = async () => {
      if (stop.end !== null) return
      try {
        if (!this.admin) {
          const { Client } = require('pg')
          this.admin = new Client({ connectionString: this.opts.postgres })
          this.admin.on('error', () => { this.admin = null })
          await this.admin.connect()
        }
        const { rows } = await this.admin.query(`SELECT left(a.query, 90) AS q, a.wait_event_type || ':' || a.wait_event AS ev, b.state, left(b.query, 90) AS bq
          FROM pg_stat_activity a JOIN pg_stat_activity b ON b.pid = ANY(pg_blocking_pids(a.pid))`)
        for (const r of rows) (stop.waits = stop.waits || new Set()).add(`[${r.q}] waits (${r.ev}) for a backend ${r.state} after [${r.bq}]`)
      } catch {
        this.admin = null
      }
      setTimeout(look, 20)
    }
    look()
  }

  endStop(w) {
    if (!w.stopped) return
    w.stopped.end = now()
    w.stopped = null
    if (!w.dead) w.proc.kill('SIGCONT')
  }

  // While the server restarts, every op fails at once (STORE_IO), and `pg_ctl restart` takes from
  // 0.2 s to several seconds on a busy machine: left to run, the ops of a run would be spent
  // against a server that is down. RESTART_OPS ops meet the restart; the rest wait for its end.
  // The same for a server fault of the caller's (a failover), until it says the server serves
  // again (its window may go on: a formation settling); not for a freeze (it is short).
  heldForRestart() {
    const f = this.serverFault && this.serverFaults[this.serverFaults.length - 1]
    return !!f && f.kind !== 'freeze' && !f.serving && this.issued - f.i >= RESTART_OPS
  }

  serverFaulted(kind, fn) {
    const f = { kind, i: this.issued, start: now(), end: null }
    this.stats.faults[kind] = (this.stats.faults[kind] || 0) + 1
    this.log({ fault: kind, i: this.issued, at: now() })
    this.serverFaults.push(f)
    const serving = () => {
      f.serving = now()
      this.signal()
    }
    this.serverFault = fn(serving).then((err) => {
      if (err) this.add('ERR', f.i, err)
      f.end = now()
      this.serverFault = null
      this.signal()
    })
  }

  // A reader in a new process: readonly or not, through a random path; lists and reads every
  // session. `final`: after every worker is gone (missing records are lost, not stale).
  async readInProcess(ro, final, verify = false) {
    const names = Object.keys(this.paths.variants)
    const via = this.opts.paths === 'real' || final ? 'real' : names[Math.floor(this.rng() * names.length)]
    const out = path.join(this.dir, `read-${this.stats.procReads++}.json`)
    const cfg = { root: ROOT, path: this.via(via), ro, busyTimeoutMs: this.opts.busyTimeoutMs, out, verify }
    const i = this.issued
    const win = { sent: now(), done: null }
    const proc = spawn(process.execPath, [READER, JSON.stringify(cfg)], { cwd: this.dir, stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    proc.stderr.on('data', (d) => { err += d })
    const code = await new Promise((r) => proc.on('exit', r))
    win.done = now()
    const who = `${final ? 'final ' : ''}${ro ? 'readonly ' : ''}reader process via ${via}`
    if (code !== 0) return this.add('ERR', i, `${who} failed: ${err.slice(-1000)}`)
    const res = JSON.parse(fs.readFileSync(out, 'utf8'))
    fs.rmSync(out)
    readByProcess(this, res, win, { i, who, final: final && !ro, last: final })
  }

  async loop() {
    let lastLog = 0
    while (this.issued < this.opts.ops) {
      if (this.abort) throw this.abort
      this.fill()
      await new Promise((resolve) => {
        this.wake = resolve
        setTimeout(resolve, 20)
      })
      if (this.opts.log && this.issued - lastLog >= this.opts.ops / 10) {
        lastLog = this.issued
        this.opts.log(`  ${this.issued} ops, ${this.model.acked} records acknowledged, ${this.violations.length} violations, ${this.stats.workers} workers`)
      }
    }
  }

  // The end: half the workers are killed in the middle of their ops, the others finish theirs
  // and exit (closing their stores); then the final reads, readonly first (it replays nothing),
  // then writable, with store.verify().
  async end() {
    this.ending = true
    const live = [...this.workers.values()].filter((w) => !w.dead)
    for (const w of live) {
      this.endStop(w)
      if (this.rng() < 0.5) w.proc.kill('SIGKILL')
    }
    const until = now() + 30_000
    while (this.inflight.size && now() < until) await new Promise((r) => setTimeout(r, 20))
    // A worker killed above may have lost its channel before its exit event marks it dead, or
    // lose it while the message is on its way (EPIPE, given to the callback, not thrown).
    for (const w of live) if (!w.dead && w.proc.connected) w.proc.send({ t: 'exit' }, () => {})
    const timer = setTimeout(() => live.forEach((w) => w.dead || w.proc.kill('SIGKILL')), 15_000)
    await Promise.all(live.map((w) => w.gone))
    clearTimeout(timer)
    await this.procRead
    await this.serverFault
    await this.diskFull
    if (this.engine === 'postgres') await this.settle()
    await this.readInProcess(true, true)
    await this.readInProcess(false, true, true)
  }
}

// Runs the fault test. opts: { engine, ops, seed, workers, lanes, busyTimeoutMs, paths ('mixed'
// or 'real'), rates: { kill, stop, freeze, proc } per op and restartEvery (ops), postgres (the
// server's URL), serverFaults (on PostgreSQL, faults of the caller's: [{ at (op count), kind,
// fn (serving) => Promise<error message or null> }], e.g. a formation's failover: the window
// lasts until the promise settles; ops wait from RESTART_OPS on until it calls serving()), log,
// keep (the store and a trace of every op are left in `dir`) }.
async function run(opts) {
  const c = new Controller(opts)
  c.rates = opts.rates
  c.dir = opts.dir || fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-torture-'))
  fs.mkdirSync(path.join(c.dir, 'acks'), { recursive: true })
  // --keep: every op and its outcome, in the order the controller learned them
  c.trace = opts.keep ? fs.openSync(path.join(c.dir, 'trace.jsonl'), 'w') : null
  if (opts.engine === 'postgres') c.paths = faults.postgresUrls(opts.postgres, `torture_${process.pid}_${opts.seed}`)
  else {
    // A full disk among the faults where a small file system can be mounted (root).
    c.smallDisk = !!opts.rates.full && faults.canFill()
    c.paths = faults.sqlitePaths(c.dir, { smallDisk: c.smallDisk })
  }
  const started = now()
  // No worker outlives the controller (one left stopped would stay so): at exit, and on SIGINT
  // or SIGTERM. (Killed with SIGKILL, the controller leaves a worker stopped at that moment.)
  const cleanup = () => c.workers.forEach((w) => w.dead || (w.proc.kill('SIGCONT'), w.proc.kill('SIGKILL')))
  const interrupted = (sig) => {
    cleanup()
    if (c.smallDisk) faults.unmountSmall(path.dirname(c.paths.real))
    if (!opts.keep) fs.rmSync(c.dir, { recursive: true, force: true })
    process.kill(process.pid, sig)
  }
  process.on('exit', cleanup)
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, interrupted)
  try {
    for (let n = 0; n < opts.workers; n++) c.spawnWorker()
    await c.loop()
    await c.end()
  } finally {
    if (c.admin) c.admin.end().catch(() => {})
    cleanup()
    process.removeListener('exit', cleanup)
    for (const sig of ['SIGINT', 'SIGTERM']) process.removeListener(sig, interrupted)
  }
  const { busy, worst, inCommit, unlocked } = check.r5(c.stops, c.timeline, c.serverFaults, (rule, i, msg) => c.add(rule, i, msg))
  if (c.smallDisk && !opts.keep) faults.unmountSmall(path.dirname(c.paths.real))
  if (!opts.keep) fs.rmSync(c.dir, { recursive: true, force: true })
  return {
    engine: opts.engine,
    seed: opts.seed,
    ops: c.issued,
    ms: now() - started,
    acked: c.model.acked,
    recreated: [...c.model.incs.values()].filter((x) => x.inc > 1 && x.createAcked !== null).length,
    stats: c.stats,
    stopBusy: busy,
    worstStopLatency: worst,
    stopsInCommit: inCommit,
    stopsUnlocked: unlocked,
    diskFull: c.smallDisk ? 'simulated' : opts.engine === 'postgres' ? 'n/a' : 'not simulated (needs root to mount a tmpfs)',
    violations: c.violations,
    dir: c.dir,
  }
}

module.exports = { run }
