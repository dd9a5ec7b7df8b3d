'use strict'
// The checker: compares what a reader saw with the model (model.js) and reports violations of
// the rules (docs/recovery.md, "The fault test"):
//   R1 an acknowledged record keeps its seq, uuid, parent and content; seqs have no gaps
//   R2 a deleted incarnation's records never come back, in any session
//   R3 a read that starts after an acknowledgement shows it (STORE_BUSY excepted)
//   R4 nothing appears that was never attempted (or that failed); appendMany is all or nothing;
//      no record appears twice
//   R5 a stopped process does not block the others' appends for the whole stop (see r5())
//   R6 the final read (through the real path) lacks no record written through another path
// `win` is the read's window on the controller's clock: { sent, done }. `ctx`: { i (op index),
// who (the reader), final (the final read in a fresh writable process) }. `add(rule, i, msg,
// vias)`: vias, for missing records, the paths their writers reached the store through (R6).

const { parseTag } = require('./content')

const first = (list, n = 3) => list.slice(0, n).join(', ') + (list.length > n ? `, ... (${list.length})` : '')

// Records the read should show and does not: R3 (stale), or in the final read (through the real
// path, after every writer is gone) lost: R6 if written through another path, else R1.
function missing(x, present, win, ctx, add) {
  const absent = new Map()
  for (const [t, a] of x.recs) {
    if (a.at >= win.sent || present(a)) continue
    const rule = !ctx.final ? 'R3' : a.via === 'real' ? 'R1' : 'R6'
    if (!absent.has(rule)) absent.set(rule, [])
    absent.get(rule).push(a)
  }
  for (const [rule, list] of absent) {
    const names = list.map((a) => `${a.t} seq ${a.s} (via ${a.via})`)
    add(rule, ctx.i, `${ctx.who} of ${x.key}: ${list.length} acknowledged records missing${rule === 'R6' ? ', written through another path' : ''}: ${first(names)}`, list.map((a) => a.via))
  }
}

// A record tagged `t` in incarnation `x`: appended there (or copied by a fork from its lineage),
// attempted, and not by an op that failed.
function checkTag(model, x, t, where, ctx, add, ty) {
  const p = parseTag(t)
  if (!p) return add('R4', ctx.i, `${where}: a record the test never wrote`), null
  if (!x.lineage.has(p.key)) {
    const src = model.incs.get(p.key)
    const rule = src && (src.deleted !== null || src.deletes.length) ? 'R2' : 'R4'
    return add(rule, ctx.i, `${where}: ${t} belongs to ${p.key}${rule === 'R2' ? ', deleted' : ''}`), null
  }
  const a = model.attempts.get(t)
  if (!a) return add('R4', ctx.i, `${where}: ${t} was never attempted`), null
  // A streamed response's chunks are stored as they arrive (`stream` records), before it ends:
  // a stream whose end failed leaves them.
  const partial = ty === 'stream' && a.kind === 'stream'
  if (a.status === 'failed' && !partial) add('R4', ctx.i, `${where}: ${t} is stored, but op ${a.i} failed (${a.code})`)
  return a
}

// Which incarnation of `sid` a read shows: the one its own records are tagged with, else `inc`
// (from the session's metadata).
function identify(model, sid, tags, inc, ctx, add) {
  const own = new Map()
  for (const t of tags) {
    const p = parseTag(t)
    if (p && p.sid === sid) own.set(p.inc, (own.get(p.inc) || 0) + 1)
  }
  if (own.size > 1) add('R2', ctx.i, `${ctx.who} of ${sid}: one read holds records of incarnations ${[...own.keys()]}`)
  const k = own.size ? [...own.entries()].sort((a, b) => b[1] - a[1])[0][0] : inc
  return k === null || k === undefined ? null : model.inc(sid, k) || (add('R4', ctx.i, `${ctx.who} of ${sid}: incarnation ${k} was never created`), null)
}

function checkDeleted(x, win, ctx, add, what) {
  if (x.deleted !== null && x.deleted < win.sent) add('R2', ctx.i, `${ctx.who}: ${x.key} was deleted before the read began, and ${what}`)
}

// A session's envelopes ({ inc, recs } from lane.read).
function checkEnvelopes(model, sid, res, win, ctx, add) {
  const x = identify(model, sid, res.recs.map((r) => r.t), res.inc, ctx, add)
  if (!x) return
  if (res.recs.length) checkDeleted(x, win, ctx, add, `the read shows ${res.recs.length} of its records`)
  const byUuid = new Map()
  const tags = new Map()
  let rewinds = 0
  let gap = null
  res.recs.forEach((r, idx) => {
    if (r.s !== idx && gap === null) gap = `seq ${r.s} at position ${idx}`
    if (byUuid.has(r.u)) add('R4', ctx.i, `${ctx.who} of ${x.key}: uuid ${r.u} stored twice`)
    byUuid.set(r.u, r)
    if (r.ty === 'rewind') return void rewinds++
    const where = `${ctx.who} of ${x.key} seq ${r.s}`
    const a = checkTag(model, x, r.t, where, ctx, add, r.ty)
    if (!a || r.ty === 'stream') return
    if (tags.has(r.t)) add('R4', ctx.i, `${where}: ${r.t} stored twice (also seq ${tags.get(r.t).s})`)
    tags.set(r.t, r)
    if (!r.ok) add('R1', ctx.i, `${where}: the content of ${r.t} is not what was appended`)
  })
  if (gap) add('R1', ctx.i, `${ctx.who} of ${x.key}: seqs not 0..n-1 (${gap})`)
  if (rewinds > x.rewinds) add('R4', ctx.i, `${ctx.who} of ${x.key}: ${rewinds} rewind records, ${x.rewinds} rewinds attempted`)
  checkGroups(model, x, tags, ctx, add)
  for (const a of x.recs.values()) {
    const r = byUuid.get(a.u)
    if (r && (r.s !== a.s || r.p !== a.p || r.t !== a.t)) add('R1', ctx.i, `${ctx.who} of ${x.key}: ${a.t} acknowledged as ${a.u} seq ${a.s} parent ${a.p}, read as ${r.t} seq ${r.s} parent ${r.p}`)
  }
  if (liveFor(x, win, ctx)) missing(x, (a) => byUuid.has(a.u), win, ctx, add)
}

// A read must show everything acknowledged before it unless a delete of the incarnation was
// attempted meanwhile (the final read comes after every op).
function liveFor(x, win, ctx) {
  if (ctx.stale) return false
  return ctx.final ? x.deleted === null && !x.deletes.some((d) => d.done === null) : x.deleted === null && !x.deleteDuring(win.sent, win.done)
}

// appendMany: all of its records or none, at consecutive seqs, in order.
function checkGroups(model, x, tags, ctx, add) {
  const groups = new Map()
  for (const [t, r] of tags) {
    const p = parseTag(t)
    const a = model.attempts.get(t)
    if (p.key !== x.key || a.kind !== 'many') continue
    if (!groups.has(a.i)) groups.set(a.i, { n: a.n, parts: [] })
    groups.get(a.i).parts[p.part] = r.s
  }
  for (const [i, g] of groups) {
    const seqs = g.parts.filter((s) => s !== undefined)
    const whole = seqs.length === g.n && g.parts.every((s, j) => s === g.parts[0] + j)
    if (!whole) add('R4', ctx.i, `${ctx.who} of ${x.key}: appendMany op ${i} of ${g.n} records shows parts at seqs [${g.parts.map((s) => s ?? '-')}]`)
  }
}

// `session.messages` ({ msgs: [{ t, ok }] }): no incarnation in its records, so only a session
// with one incarnation live for the whole read, and (for the records it must show) no rewinds.
function checkMessages(model, sid, res, win, ctx, add) {
  let x = identify(model, sid, res.msgs.map((m) => m.t), null, ctx, add)
  if (!x) {
    const s = model.sessions.get(sid)
    const live = s ? [...s.incs.values()].filter((i) => i.liveThrough(win.sent, win.done)) : []
    if (live.length !== 1) return
    x = live[0]
  }
  if (res.msgs.length) checkDeleted(x, win, ctx, add, `session.messages shows ${res.msgs.length} of its messages`)
  const seen = new Set()
  for (const m of res.msgs) {
    const where = `${ctx.who} (messages) of ${x.key}`
    if (!checkTag(model, x, m.t, where, ctx, add)) continue
    if (seen.has(m.t)) add('R4', ctx.i, `${where}: ${m.t} twice`)
    seen.add(m.t)
    if (!m.ok) add('R1', ctx.i, `${where}: the content of ${m.t} is not what was appended`)
  }
  if (x.rewinds === 0 && liveFor(x, win, ctx)) {
    const msgs = new Map([...x.recs].filter(([, a]) => a.ty !== 'stream'))
    missing({ key: x.key, recs: msgs }, (a) => seen.has(a.t), win, ctx, add)
  }
}

// A read that found no session `sid`.
function checkNotFound(model, sid, win, ctx, add) {
  const s = model.sessions.get(sid)
  for (const x of s ? s.incs.values() : []) {
    if (x.liveThrough(win.sent, win.done)) add(ctx.final ? 'R1' : 'R3', ctx.i, `${ctx.who}: ${sid} not found, but ${x.key} was created and not deleted`)
  }
}

// listSessions ({ list: [{ id, inc, n, up, title }] }).
function checkList(model, list, win, ctx, add) {
  const listed = new Set()
  for (const e of list) {
    if (!model.sessions.has(e.id) && !model.unknownFork(e, win.done)) {
      add('R4', ctx.i, `${ctx.who}: session ${e.id} (${e.title}) was never created`)
      continue
    }
    const x = model.inc(e.id, e.inc)
    if (!x) {
      add('R4', ctx.i, `${ctx.who}: ${e.id} incarnation ${e.inc} was never created`)
      continue
    }
    listed.add(x.key)
    checkDeleted(x, win, ctx, add, 'listSessions lists it')
    if (!x.liveThrough(win.sent, win.done)) continue
    const before = [...x.recs.values()].filter((a) => a.at < win.sent && a.ty !== 'stream')
    if (x.rewinds === 0 && e.n < before.length) add('R3', ctx.i, `${ctx.who}: ${x.key} listed with ${e.n} messages, ${before.length} acknowledged before`)
    const latest = before.reduce((m, a) => (a.ts > m ? a.ts : m), '')
    if (e.up < latest) add('R3', ctx.i, `${ctx.who}: ${x.key} listed as updated at ${e.up}, a record was acknowledged with timestamp ${latest}`)
  }
  for (const x of model.incs.values()) {
    if (!listed.has(x.key) && x.liveThrough(win.sent, win.done)) add(ctx.final ? 'R1' : 'R3', ctx.i, `${ctx.who}: ${x.key} is not listed`)
  }
}

// A search for the word of one acknowledged record (target: { key, t }). The record belongs to
// the incarnation its tag names, and may be found in any session whose lineage holds that one.
function checkSearch(model, target, hits, win, ctx, add) {
  const x = model.incs.get(target.key)
  const a = x.recs.get(target.t)
  const origin = parseTag(a.t).key
  const mine = hits.filter((h) => h.u === a.u)
  for (const h of mine) {
    const s = model.sessions.get(h.sid)
    if (!s) continue // a fork whose ack a kill lost
    const holders = [...s.incs.values()].filter((i) => i.lineage.has(origin))
    const gone = (i) => i.deleted !== null && i.deleted < win.sent
    if (!holders.length) add('R4', ctx.i, `${ctx.who}: finds ${a.t} in session ${h.sid}, which never held it`)
    else if (holders.every(gone)) add('R2', ctx.i, `${ctx.who}: finds ${a.t} in ${holders.map((i) => i.key)}, deleted before the search began`)
    else if (h.sid === x.sid && !gone(x) && h.s !== a.s) add('R1', ctx.i, `${ctx.who}: finds ${a.t} of ${x.key} at seq ${h.s}, acknowledged at ${a.s}`)
  }
  // A readonly store cannot index (docs/recall.md): it must find what a writable search indexed,
  // one that began after the ack and ended before this search began.
  const due = ctx.ro ? model.indexedBy(win.sent) : win.sent
  if (a.at < due && x.liveThrough(win.sent, win.done) && !mine.some((h) => h.sid === x.sid)) {
    add('R3', ctx.i, `${ctx.who}: does not find ${a.t} of ${x.key} (seq ${a.s}, via ${a.via}), acknowledged ${(win.sent - a.at).toFixed(1)} ms before`)
  }
}

// A fork ({ recs } read through the handle that made it) of `src` at record `at` (or its end):
// its records are the source's, with their uuids, parents and tags, and (without rewinds) every
// record acknowledged before, up to `at`.
function checkFork(model, src, recs, at, win, ctx, add) {
  const copies = new Map(recs.map((r) => [r.u, r]))
  for (const r of recs) {
    if (r.ty === 'stream') continue
    const a = checkTag(model, src, r.t, `${ctx.who} of ${src.key}`, ctx, add)
    const s = a && src.recs.get(r.t)
    if (s && (s.u !== r.u || s.p !== r.p)) add('R1', ctx.i, `${ctx.who}: ${r.t} copied as ${r.u} parent ${r.p}, acknowledged as ${s.u} parent ${s.p}`)
  }
  if (src.rewinds > 0 || !src.liveThrough(win.sent, win.done)) return
  const atRec = at && [...src.recs.values()].find((a) => a.u === at)
  const upto = atRec ? atRec.s : Infinity
  const recsUpTo = new Map([...src.recs].filter(([, a]) => a.s <= upto))
  missing({ key: `the fork of ${src.key}`, recs: recsUpTo }, (a) => copies.has(a.u), win, ctx, add)
}

// R5: while a worker is stopped, the others' appends (to sessions they hold) go on. A violation:
// a stop of at least 100 ms during which other processes began to append in its first half and
// none of their appends completed, held up by the stopped one (some failed with STORE_BUSY, or
// the first went through within 100 ms of SIGCONT; not a machine too busy to run them). Returns
// { busy, worst } over all stops: the appends of others that met STORE_BUSY, and the longest.
// Stops that overlap a server fault are left out, and so are stops of a process that held
// SQLite's write lock when it stopped (`inCommit`: stopped inside a commit, it holds the others'
// commits up until it runs again, as any SQLite writer does; docs/recovery.md), counted in
// `inCommit`. On SQLite the controller also looks, every 20 ms while the stop lasts, at which
// processes hold the write lock (`looks`, `writers`): a stop in which none of at least 3 looks
// found it held and no append met STORE_BUSY held nobody up by a lock; appends slow through it
// were slow for another reason (a busy machine: such appends take 200 ms and more in runs with
// no violation), counted in `unlocked`, not a violation.
function r5(stops, timeline, serverFaults, add) {
  let busy = 0
  let worst = 0
  let inCommit = 0
  let unlocked = 0
  for (const st of stops) {
    const during = timeline.filter((o) => o.w !== st.w && o.sent < st.end && o.done > st.start)
    const others = during.filter((o) => o.write && o.code !== 'SESSION_LOCKED')
    busy += others.filter((o) => o.code === 'STORE_BUSY' || o.busy > 0).length
    for (const o of others) if (o.ok) worst = Math.max(worst, Math.min(o.lat, o.done - Math.max(o.sent, st.start)))
    if (serverFaults.some((f) => f.start < st.end && (f.end === null || f.end > st.start))) continue
    if (st.inCommit) {
      inCommit++
      continue
    }
    const early = others.filter((o) => o.sent <= st.start + (st.end - st.start) / 2)
    if (st.end - st.start < 100 || !early.length || others.some((o) => o.ok && o.done <= st.end)) continue
    const b = others.filter((o) => o.code === 'STORE_BUSY' || o.busy > 0).length
    const released = Math.min(...others.filter((o) => o.ok).map((o) => o.done - st.end))
    if (!b && !(released <= 100)) continue
    if (!b && st.looks >= 3 && !st.writers) {
      unlocked++
      continue
    }
    const done = during.filter((o) => o.done <= st.end).length
    const held = early.map((o) => `${o.w} ${o.kind}${o.sid ? ` ${o.sid}` : ''} ${o.ok ? `done ${(o.done - st.end).toFixed(0)} ms after SIGCONT` : o.code}`)
    // What the stopped process was doing: the lock it may hold is one of these ops'.
    const own = timeline.filter((o) => o.w === st.w && o.sent < st.start && o.done > st.start)
    const doing = own.map((o) => `${o.kind}${o.sid ? ` ${o.sid}` : ''}${o.ok ? '' : ` (${o.code})`}`).join(', ') || 'nothing'
    add('R5', st.i, `${st.w} stopped ${(st.end - st.start).toFixed(0)} ms in the middle of ${doing}: ${early.length} appends of other processes began in its first half (${held.join('; ')}), none completed before it ended (${b} met STORE_BUSY, the first done ${released.toFixed(0)} ms after SIGCONT; ${done} ops of any kind completed during the stop; it held ${st.locks?.length ? st.locks.join(', ') : 'no lock on the store\'s files'}; the write lock was held in ${st.writers ? [...st.writers].map(([w, n]) => `${n} by ${w}`).join(', ') : 'none'} of ${st.looks ?? 0} looks 20 ms apart${st.waits ? `; lock waits seen: ${[...st.waits].slice(0, 6).join('; ')}` : ''})`)
  }
  return { busy, worst, inCommit, unlocked }
}

module.exports = { checkEnvelopes, checkMessages, checkNotFound, checkList, checkSearch, checkFork, r5 }
