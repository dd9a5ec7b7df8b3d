'use strict'
// What the controller does with an op's outcome: moves the model on (sessions created, deleted,
// taken over; records acknowledged) and hands reads to the checker. `run` is the controller's
// state: { model, schedule, add, stats, timeline, engine, opened }.

const check = require('./checker')

const TRANSIENT = new Set(['STORE_BUSY', 'STORE_IO'])
const WRITES = new Set(['append', 'many', 'stream'])

// An error no op of the test should get (a code the situation does not explain).
function unexpected(run, op, r) {
  run.add('ERR', op.i, `${op.kind}${op.sid ? ` ${op.sid}/${op.inc ?? '?'}` : ''}: ${r.code} ${r.message}`)
}

// The outcome `r` of op `e.op`, sent at `e.sent` to lane `e.lane` of worker `w`; `now` is when it
// came back (from the worker, or from its ack file after a kill).
function apply(run, w, e, r, now) {
  const { model, stats } = run
  const op = e.op
  const win = { sent: e.sent, done: now }
  const s = op.sid !== undefined ? model.sessions.get(op.sid) : null
  const x = s && op.inc !== undefined ? model.inc(op.sid, op.inc) : null
  stats.ops[op.kind] = (stats.ops[op.kind] || 0) + 1
  if (r.busy) stats.busyRetried += r.busy
  if (!r.ok) {
    stats.errors[r.code] = (stats.errors[r.code] || 0) + 1
    if (r.code === 'STORE_BUSY') stats[WRITES.has(op.kind) ? 'busyWrites' : 'busyOther']++
    if (r.code === 'SESSION_LOCKED') stats.locked++
  }
  run.timeline.push({ w: w.id, kind: op.kind, sid: op.sid, write: WRITES.has(op.kind), sent: e.sent, done: now, ok: r.ok, code: r.code, lat: r.lat ?? now - e.sent, busy: r.busy || 0 })
  const ctx = { i: op.i, who: `${op.kind} by ${w.id}:${e.lane}${op.ro ? ' (readonly)' : ''}${op.cached ? ' (kept handle)' : ''} via ${e.via}` }
  const add = (rule, i, msg, vias) => run.add(rule, i, msg, vias)

  switch (op.kind) {
    case 'create':
      if (r.ok) {
        x.createAcked = now
        Object.assign(s, { cur: x, phase: 'live', home: w.id })
      } else {
        s.phase = 'unknown' // resolved by the next free lane
        if (r.code === 'INVALID_INPUT') add([...s.incs.values()].some((i) => i.deleted !== null) ? 'R2' : 'R4', op.i, `create ${x.key}: ${r.message}`)
        else if (!TRANSIENT.has(r.code)) unexpected(run, op, r)
      }
      break
    case 'append':
    case 'many':
    case 'stream':
    case 'rewind':
      if (r.ok) {
        model.settle(op.i, 'acked')
        if (r.recs) {
          for (const p of model.ackRecords(x, r.recs, now, e.via)) add(p.rule, op.i, p.msg)
          run.schedule.acked(x.key, r.recs)
        }
        if (s.phase === 'live' && s.cur === x) s.home = w.id
      } else {
        // On PostgreSQL a commit cut off by the server may have happened: not a failure then.
        model.settle(op.i, run.engine === 'postgres' && TRANSIENT.has(r.code) ? 'unknown' : 'failed', r.code)
        if (r.code === 'SESSION_LOCKED' && s.home === w.id) s.home = null
        else if (r.code === 'NOT_FOUND' && x.liveThrough(win.sent, win.done)) add('R3', op.i, `${ctx.who}: ${x.key} not found by its writer`)
        else if (!TRANSIENT.has(r.code) && r.code !== 'SESSION_LOCKED' && r.code !== 'NOT_FOUND') unexpected(run, op, r)
      }
      break
    case 'fork':
      if (r.ok) forked(run, w, e, r, now, win, ctx)
      else if (r.code === 'SESSION_LOCKED' || TRANSIENT.has(r.code)) break
      else if (r.code === 'NOT_FOUND' && x.liveThrough(win.sent, win.done)) add('R3', op.i, `${ctx.who}: ${x.key} or its record not found`)
      else if (r.code !== 'NOT_FOUND') unexpected(run, op, r)
      break
    case 'delete': {
      const d = x.deletes.find((a) => a.i === op.i)
      // On PostgreSQL a delete cut off by the server may have committed: found out by a resolve.
      const maybe = run.engine === 'postgres' && TRANSIENT.has(r.code)
      if (!maybe) d.done = now
      if (r.ok) {
        x.deleted = now
        Object.assign(s, { cur: null, phase: 'dead', home: null })
        run.schedule.deleted(x)
      } else {
        s.phase = !maybe && (TRANSIENT.has(r.code) || r.code === 'SESSION_LOCKED') ? 'live' : 'unknown'
        if (r.code === 'SESSION_LOCKED' && s.home === w.id) s.home = null
        if (!TRANSIENT.has(r.code) && r.code !== 'SESSION_LOCKED' && r.code !== 'NOT_FOUND') unexpected(run, op, r)
      }
      break
    }
    case 'release':
      s.release.delete(`${w.id}:${e.lane}`)
      if (s.phase === 'releasing' && !s.release.size) Object.assign(s, { phase: 'live', home: null })
      break
    case 'resolve':
      if (r.ok) resolved(run, s, r.inc, now, op)
      else if (TRANSIENT.has(r.code)) s.phase = 'unknown'
      else {
        unexpected(run, op, r)
        s.phase = 'broken' // left alone from now on (reads still try it)
      }
      break
    case 'read':
      // A handle kept from before a delete of its session may show the deleted one as empty.
      ctx.stale = op.cached && r.fresh === false && deletedSince(run, op.sid, run.opened.get(`${w.id}:${e.lane}:${op.ro}:${op.sid}`))
      if (r.ok && op.what === 'msg') check.checkMessages(model, op.sid, r, win, ctx, add)
      else if (r.ok) check.checkEnvelopes(model, op.sid, r, win, ctx, add)
      else if (r.code === 'NOT_FOUND') notFound(run, w, e, r, win, ctx)
      else if (!TRANSIENT.has(r.code)) unexpected(run, op, r)
      if (r.ok && r.fresh && op.cached) run.opened.set(`${w.id}:${e.lane}:${op.ro}:${op.sid}`, e.sent)
      break
    case 'list':
      if (r.ok) check.checkList(model, r.list, win, ctx, add)
      else if (!TRANSIENT.has(r.code)) unexpected(run, op, r)
      break
    case 'search':
      if (r.ok && !op.ro) model.searched(win.sent, win.done)
      if (r.ok) check.checkSearch(model, op.target, r.hits, win, { ...ctx, ro: op.ro }, add)
      else if (!TRANSIENT.has(r.code)) unexpected(run, op, r)
      break
  }
}

function forked(run, w, e, r, now, win, ctx) {
  const { model } = run
  const src = model.inc(e.op.sid, e.op.inc)
  const known = model.ops.get(e.op.i)
  known.fid = r.fid
  const s = model.session(r.fid, true)
  const x = model.inc(r.fid, 1) || model.addInc(r.fid, 1, e.sent, [...src.lineage])
  x.createAcked = x.createAcked ?? now
  Object.assign(s, { cur: x, phase: 'live', home: w.id })
  if (!r.recs) return
  check.checkFork(model, src, r.recs, e.op.at, win, ctx, (...a) => run.add(...a))
  for (const p of model.ackRecords(x, r.recs, now, e.via)) run.add(p.rule, e.op.i, p.msg)
}

// A session whose create or delete a kill cut short, found (incarnation `inc`) or not (null).
function resolved(run, s, inc, now, op) {
  const { model } = run
  if (inc === null) {
    if (s.cur && s.cur.deleted === null) {
      s.cur.deleted = now
      for (const d of s.cur.deletes) if (d.done === null) d.done = now
      run.schedule.deleted(s.cur)
    }
    return void Object.assign(s, { cur: null, phase: 'dead', home: null })
  }
  const x = model.inc(s.sid, inc)
  if (!x) {
    run.add('R4', op.i, `resolve ${s.sid}: incarnation ${inc} was never created`)
    return void (s.phase = 'dead')
  }
  x.createAcked = x.createAcked ?? now
  for (const d of x.deletes) if (d.done === null) d.done = now // it did not happen
  Object.assign(s, { cur: x, phase: 'live', home: null })
}

// NOT_FOUND from a read: a violation unless the session was in flux, or the reader's handle was
// kept from before a delete of that id.
function notFound(run, w, e, r, win, ctx) {
  const { op } = e
  if (ctx.stale) return
  check.checkNotFound(run.model, op.sid, win, ctx, (...a) => run.add(...a))
}

// What a reader in a process of its own saw (reader.js): the list, then every session listed.
// ctx: { i, who, final (the final writable read), last (either final read) }.
function readByProcess(run, res, win, ctx) {
  const add = (...a) => run.add(...a)
  const fatal = (code) => ctx.last || !TRANSIENT.has(code)
  if (res.open) return void (fatal(res.open.code) && add('ERR', ctx.i, `${ctx.who}: open: ${res.open.code} ${res.open.message}`))
  if (!res.list.ok) return void (fatal(res.list.code) && add('ERR', ctx.i, `${ctx.who}: listSessions: ${res.list.code} ${res.list.message}`))
  check.checkList(run.model, res.list.list, win, ctx, add)
  for (const [sid, r] of Object.entries(res.sessions)) {
    if (r.ok) check.checkEnvelopes(run.model, sid, r, win, ctx, add)
    else if (r.code === 'NOT_FOUND') check.checkNotFound(run.model, sid, win, ctx, add)
    else if (fatal(r.code)) add('ERR', ctx.i, `${ctx.who} of ${sid}: ${r.code} ${r.message}`)
  }
  if (res.verify && !res.verify.ok) add('R1', ctx.i, `${ctx.who}: store.verify() reports damage: ${JSON.stringify(res.verify.damaged.slice(0, 3))}`)
}

// Whether a delete of `sid` may have landed after a handle was opened at `opened`: one sent later,
// or one already in flight then that ended later (the handle opened the incarnation it deleted).
function deletedSince(run, sid, opened) {
  const s = run.model.sessions.get(sid)
  const t = opened ?? 0
  return !!s && [...s.incs.values()].some((x) => x.deletes.some((d) => d.sent >= t || d.done === null || d.done >= t))
}

module.exports = { apply, readByProcess }
