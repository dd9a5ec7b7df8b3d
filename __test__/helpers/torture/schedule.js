'use strict'
// The seeded schedule: the next op for a free lane of a worker, drawn from the seed and the
// model's state. A worker writes the sessions it holds (its "home" sessions) and takes over
// sessions nobody holds (their owner closed them or was killed); now and then it writes one that
// another live worker holds (SESSION_LOCKED expected). Sessions are created, deleted and created
// again with the same id, forked and rewound; reads go through every kind of reader.

const { tag, token } = require('./content')

const WEIGHTS = [
  ['append', 28], ['many', 10], ['stream', 5], ['rewind', 2], ['fork', 2], ['delete', 3],
  ['create', 4], ['release', 2], ['read', 30], ['list', 5], ['search', 5],
]
const MAX_RECORDS = 250 // a session this long is deleted (reads stay cheap)
const MAX_FORKS = 6

class Schedule {
  constructor(rng, model, { sessions }) {
    this.rng = rng
    this.model = model
    this.recent = [] // { key, t } of the last acknowledged records, for searches
    this.graveyard = [] // the same, of deleted incarnations
    for (let n = 0; n < sessions; n++) model.session(`s${n}`)
    this.total = WEIGHTS.reduce((a, [, w]) => a + w, 0)
  }

  pick(list) {
    return list.length ? list[Math.floor(this.rng() * list.length)] : null
  }

  kind() {
    let r = this.rng() * this.total
    for (const [k, w] of WEIGHTS) if ((r -= w) < 0) return k
    return 'read'
  }

  sessions(filter) {
    return [...this.model.sessions.values()].filter(filter)
  }

  // A session worker `w` may write: its own mostly, else one nobody holds, rarely another's.
  writable(w, alive) {
    const live = (s) => s.phase === 'live'
    const mine = this.sessions((s) => live(s) && s.home === w.id)
    const free = this.sessions((s) => live(s) && (s.home === null || !alive(s.home)))
    const r = this.rng()
    if (r < 0.03) return this.pick(this.sessions((s) => live(s) && s.home !== w.id && alive(s.home))) || this.pick(mine)
    if (r < 0.8 && mine.length) return this.pick(mine)
    return this.pick(free) || this.pick(mine)
  }

  // The next op for lane `lane` of worker `w` (i: its index, now: the controller's clock).
  next(w, lane, i, now, alive) {
    const unknown = this.sessions((s) => s.phase === 'unknown')[0]
    if (unknown) {
      unknown.phase = 'resolving'
      return { i, kind: 'resolve', sid: unknown.sid }
    }
    const releasing = this.sessions((s) => s.phase === 'releasing' && s.release.has(`${w.id}:${lane}`))[0]
    if (releasing) return { i, kind: 'release', sid: releasing.sid }
    const kind = this.kind()
    if (kind === 'read' || kind === 'list' || kind === 'search') return this.read(kind, i)
    if (kind === 'create') return this.create(w, i, now) || this.read('read', i)
    const long = this.sessions((s) => s.phase === 'live' && s.home === w.id && s.cur.recs.size > MAX_RECORDS)
    const forks = this.sessions((s) => s.phase === 'live' && s.fork)
    const s = kind === 'delete' && long.length ? long[0] : kind === 'delete' && forks.length > MAX_FORKS ? forks[0] : this.writable(w, alive)
    if (!s) return this.create(w, i, now) || this.read('read', i)
    const x = s.cur
    const op = { i, kind, sid: s.sid, inc: x.inc }
    const acked = [...x.recs.values()].filter((a) => a.ty !== 'stream')
    if (kind === 'append') {
      op.uuid = this.rng() < 0.5
      this.model.attempt(op, [tag(s.sid, x.inc, w.id, i, 0)], now)
    } else if (kind === 'many') {
      op.n = 2 + Math.floor(this.rng() * 4)
      op.uuid = this.rng() < 0.5
      this.model.attempt(op, Array.from({ length: op.n }, (_, p) => tag(s.sid, x.inc, w.id, i, p)), now)
    } else if (kind === 'stream') {
      this.model.attempt(op, [tag(s.sid, x.inc, w.id, i, 0)], now)
    } else if (kind === 'rewind' && acked.length) {
      op.to = this.pick(acked).u
      x.rewinds++
      this.model.attempt(op, [], now)
    } else if (kind === 'fork' && acked.length && forks.length <= MAX_FORKS) {
      op.at = this.rng() < 0.5 ? this.pick(acked).u : null
      this.model.attempt(op, [], now)
    } else if (kind === 'delete') {
      s.phase = 'busy'
      x.deletes.push({ sent: now, done: null, i })
      this.model.attempt(op, [], now)
    } else if (kind === 'release' && s.home === w.id) {
      s.phase = 'releasing'
      s.release = new Set(w.lanes.map((_, n) => `${w.id}:${n}`)) // this lane's goes when done
    } else {
      return this.read('read', i)
    }
    if (s.home === null || !alive(s.home)) s.home = w.id
    return op
  }

  create(w, i, now) {
    const s = this.pick(this.sessions((x) => x.phase === 'dead' && !x.fork))
    if (!s) return null
    const op = { i, kind: 'create', sid: s.sid, inc: s.last + 1 }
    this.model.addInc(s.sid, op.inc, now)
    this.model.attempt(op, [], now)
    s.phase = 'busy'
    s.home = w.id
    return op
  }

  read(kind, i) {
    if (kind === 'list') return { i, kind, ro: this.rng() < 0.5 }
    if (kind === 'search') {
      const from = this.rng() < 0.75 || !this.graveyard.length ? this.recent : this.graveyard
      const target = this.pick(from)
      if (!target) return this.read('list', i)
      const p = target.t.split('|')
      return { i, kind, ro: this.rng() < 0.5, token: token(Number(p[4]), Number(p[5])), target }
    }
    const known = [...this.model.sessions.values()]
    const live = known.filter((s) => s.phase === 'live')
    const s = this.rng() < 0.8 && live.length ? this.pick(live) : this.pick(known)
    return { i, kind, sid: s.sid, ro: this.rng() < 0.4, cached: this.rng() < 0.4, what: this.rng() < 0.25 ? 'msg' : 'env' }
  }

  // Bookkeeping for searches.
  acked(key, recs) {
    for (const r of recs) if (r.t) this.recent.push({ key, t: r.t })
    if (this.recent.length > 64) this.recent.splice(0, this.recent.length - 64)
  }

  deleted(x) {
    for (const t of [...x.recs.keys()].slice(-8)) this.graveyard.push({ key: x.key, t })
    if (this.graveyard.length > 64) this.graveyard.splice(0, this.graveyard.length - 64)
    this.recent = this.recent.filter((r) => r.key !== x.key)
  }
}

module.exports = { Schedule }
