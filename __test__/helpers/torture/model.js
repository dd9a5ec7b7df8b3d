'use strict'
// The model of the fault test: what the store must hold, as far as the controller knows it.
// Times are the controller's clock (performance.now()): an ack counts from when the controller
// received it, a read from when the controller asked for it, so "acked before the read" is causal.
//
// A session id has incarnations: `s3/1` is created, written, deleted; `s3/2` is created with the
// same id. A fork is a session of its own whose lineage includes the incarnation it was forked
// from (its copies carry that incarnation's tags).

const { parseTag } = require('./content')

class Inc {
  constructor(sid, inc, createSent, lineage = []) {
    this.sid = sid
    this.inc = inc
    this.key = `${sid}/${inc}`
    this.createSent = createSent
    this.createAcked = null
    this.deletes = [] // attempts: { sent, done (null while in flight or unknown), ok }
    this.deleted = null // when a delete was acknowledged (or found done after a kill)
    this.lineage = new Set([this.key, ...lineage])
    this.recs = new Map() // tag (and uuid, for a fork's copy of a stream record) -> acknowledged record { u, s, p, t, ts, ty, at, via }
    this.bySeq = new Map() // seq -> tag of the acknowledged record there
    this.rewinds = 0 // rewinds attempted
    this.rewound = new Map() // toUuid -> rewinds acknowledged
  }

  // Whether a delete of this incarnation was attempted during [from, to] (or before, unfinished).
  deleteDuring(from, to) {
    return this.deletes.some((d) => d.sent <= to && (d.done === null || d.done >= from))
  }

  // Live for the whole of [from, to]: created (acknowledged) before, no delete attempt in it.
  liveThrough(from, to) {
    return this.createAcked !== null && this.createAcked <= from && this.deleted === null && !this.deleteDuring(from, to)
  }
}

class Model {
  constructor() {
    this.sessions = new Map() // sid -> { sid, incs: Map<inc, Inc>, cur: Inc|null, last, phase, home, fork }
    this.incs = new Map() // key -> Inc
    this.attempts = new Map() // tag -> { i, kind, key, n, status: 'sent'|'acked'|'failed'|'unknown' }
    this.ops = new Map() // op index -> { kind, tags, key }
    this.acked = 0
    this.searches = [] // writable searches: { sent, done }
  }

  session(sid, fork = false) {
    let s = this.sessions.get(sid)
    if (!s) {
      s = { sid, incs: new Map(), cur: null, last: 0, phase: 'dead', home: null, fork }
      this.sessions.set(sid, s)
    }
    return s
  }

  inc(sid, inc) {
    return this.incs.get(`${sid}/${inc}`)
  }

  addInc(sid, inc, sent, lineage) {
    const s = this.session(sid)
    const x = new Inc(sid, inc, sent, lineage)
    s.incs.set(inc, x)
    s.last = Math.max(s.last, inc)
    this.incs.set(x.key, x)
    return x
  }

  // An op is sent: its tags are attempted from now on.
  attempt(op, tags, sent) {
    this.ops.set(op.i, { kind: op.kind, tags, key: `${op.sid}/${op.inc}`, n: tags.length, sent })
    for (const t of tags) this.attempts.set(t, { i: op.i, kind: op.kind, key: `${op.sid}/${op.inc}`, n: tags.length, status: 'sent' })
  }

  // An op's outcome: 'acked', 'failed' (with the error's code) or 'unknown' (killed meanwhile).
  settle(i, status, code) {
    const o = this.ops.get(i)
    if (!o) return
    for (const t of o.tags) {
      const a = this.attempts.get(t)
      if (a && a.status === 'sent') Object.assign(a, { status, code })
    }
  }

  // Acknowledged records of incarnation `x`; returns the conflicts (R1: two records at one seq,
  // R4: one tag acknowledged twice under different uuids).
  ackRecords(x, recs, at, via) {
    const problems = []
    for (const r of recs) {
      // A fork copies a streamed response's `stream` records too; they carry its tag.
      const key = r.ty === 'stream' ? `${r.t}#${r.u}` : r.t
      const prev = x.recs.get(key)
      if (prev && (prev.u !== r.u || prev.s !== r.s)) problems.push({ rule: 'R4', msg: `${x.key}: ${r.t} acknowledged twice (${prev.u}@${prev.s}, ${r.u}@${r.s})` })
      const other = x.bySeq.get(r.s)
      // (An append acknowledged while its session was being deleted is left to the reads: R2.)
      const deleting = x.deleted !== null || x.deletes.some((d) => d.done === null)
      if (other !== undefined && other !== key && !deleting) problems.push({ rule: 'R1', msg: `${x.key}: seq ${r.s} acknowledged for two records (${other}, ${r.t})` })
      if (prev) continue
      x.recs.set(key, { ...r, at, via })
      x.bySeq.set(r.s, key)
      this.acked++
    }
    return problems
  }

  // A session a reader found that the model does not know: a fork whose op was attempted and
  // whose acknowledgement a kill lost (its title names the op). From now on it is known.
  unknownFork(info, now) {
    const m = /^fork\|(\d+)$/.exec(info.title || '')
    const op = m && this.ops.get(Number(m[1]))
    if (!op || op.kind !== 'fork' || op.fid) return false
    op.fid = info.id
    const src = this.incs.get(op.key)
    const s = this.session(info.id, true)
    const x = this.addInc(info.id, 1, op.sent, src ? [...src.lineage] : [])
    x.createAcked = now
    x.source = src
    s.cur = x
    s.phase = 'live'
    return true
  }

  // A writable search indexes what was committed before it: records acknowledged before
  // `sent` are indexed once it is done.
  searched(sent, done) {
    this.searches.push({ sent, done })
  }

  // Records acknowledged before the returned time are indexed by the time `t`.
  indexedBy(t) {
    let upTo = -Infinity
    for (const s of this.searches) if (s.done < t && s.sent > upTo) upTo = s.sent
    return upTo
  }

  // The incarnation a tag was appended to.
  incOfTag(t) {
    const p = parseTag(t)
    return p && this.incs.get(p.key)
  }
}

module.exports = { Model, Inc }
