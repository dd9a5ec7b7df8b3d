'use strict'
// One lane of a worker: a store handle (and a readonly one) that runs the controller's ops one at
// a time, through `threadline` (synchronous, in a worker thread) or `threadline/promise` (the
// worker's main thread): every call is awaited, which is the same code for both.
//
// A write that succeeds is written to the lane's ack file (fs.writeSync) before anything else
// is done with it: a worker killed right after has left it there for the controller. An append
// that fails with STORE_BUSY or STORE_IO is tried again when it gives its uuids, as an agent
// should: a commit cut off by a PostgreSQL fault may have happened, and only the same uuid is
// stored once. Other writes are not tried again (the controller finds out what happened).

const fs = require('node:fs')
const { tag, text, summarize, summarizeMessage } = require('./content')

const TRANSIENT = new Set(['STORE_BUSY', 'STORE_IO'])
const prop = async (obj, name) => (typeof obj[name] === 'function' ? obj[name]() : obj[name])

function incOf(info, sid) {
  const m = info.metadata || {}
  if (m.sid === sid) return m.inc
  return info.forkedFrom ? 1 : null
}

function ackOf(env) {
  return { u: env.uuid, s: env.seq, p: env.parentUuid ?? null, t: summarize(env).t, ts: env.timestamp }
}

class Lane {
  // api: require('threadline') or require('threadline/promise'); cfg: { writer, path, roPath,
  // ackFile, busyTimeoutMs }; sleep(ms): waits (blocking in a thread, a timer on the main thread).
  constructor(api, cfg, sleep) {
    this.api = api
    this.cfg = cfg
    this.sleep = sleep
    this.sessions = new Map() // sid -> { inc, s }: handles this lane writes through
    this.reads = new Map() // `${ro}:${sid}` -> session: long-lived read handles
    this.ack = fs.openSync(cfg.ackFile, 'a')
  }

  async open() {
    const o = { busyTimeoutMs: this.cfg.busyTimeoutMs }
    // (A process that only reads opens no writable store: opening one replays dead writers' logs.)
    if (this.cfg.path) this.store = await this.retry(() => this.api.Store.open(this.cfg.path, o), 100)
    if (this.cfg.roPath) this.ro = await this.retry(() => this.api.Store.open(this.cfg.roPath, { ...o, readonly: true }), 100)
  }

  async retry(fn, times = 3) {
    for (let n = 0; ; n++) {
      try {
        return await fn()
      } catch (e) {
        if (!TRANSIENT.has(e.code) || n >= times) throw e
        this.busy = (this.busy || 0) + (e.code === 'STORE_BUSY' ? 1 : 0)
        await this.sleep(10 + n * 20)
      }
    }
  }

  // The handle this lane writes incarnation `inc` of `sid` through.
  async session(sid, inc) {
    const h = this.sessions.get(sid)
    if (h && h.inc === inc) return h.s
    if (h) this.sessions.delete(sid)
    const s = await this.store.openSession(sid)
    this.sessions.set(sid, { inc, s })
    return s
  }

  recordAck(op, fields) {
    const line = JSON.stringify({ i: op.i, kind: op.kind, sid: op.sid, inc: op.inc, ...fields }) + '\n'
    fs.writeSync(this.ack, line)
  }

  message(op, part) {
    const t = tag(op.sid, op.inc, this.cfg.writer, op.i, part)
    const role = (op.i + part) % 2 ? 'assistant' : 'user'
    const env = { message: { role, content: [{ type: 'text', text: text(t) }] }, metadata: { t } }
    if (op.uuid) env.uuid = `u-${op.i}-${part}`
    return env
  }

  async run(op) {
    this.busy = 0
    const started = performance.now()
    try {
      const r = await this[op.kind](op)
      return { ok: true, lat: performance.now() - started, busy: this.busy, ...r }
    } catch (e) {
      // An error without a code is reported as such: the library maps every error to a code.
      const code = e && typeof e.code === 'string' ? e.code : 'UNCODED'
      return { ok: false, code, message: String(e && e.message).slice(0, 300), lat: performance.now() - started, busy: this.busy, fresh: e && e.fresh }
    }
  }

  async create(op) {
    const s = await this.store.createSession({ id: op.sid, metadata: { sid: op.sid, inc: op.inc } })
    this.sessions.set(op.sid, { inc: op.inc, s })
    this.recordAck(op, {})
    return {}
  }

  async append(op) {
    const s = await this.session(op.sid, op.inc)
    const { message, ...envelope } = this.message(op, 0)
    const env = await this.retry(() => s.append(message, envelope), op.uuid ? 3 : 0)
    const recs = [ackOf(env)]
    this.recordAck(op, { recs })
    return { recs }
  }

  async many(op) {
    const s = await this.session(op.sid, op.inc)
    const records = Array.from({ length: op.n }, (_, part) => this.message(op, part))
    const envs = await this.retry(() => s.appendMany(records), op.uuid ? 3 : 0)
    const recs = envs.map(ackOf)
    this.recordAck(op, { recs })
    return { recs }
  }

  async stream(op) {
    const s = await this.session(op.sid, op.inc)
    const t = tag(op.sid, op.inc, this.cfg.writer, op.i, 0)
    const w = await s.beginResponse({ requestId: t })
    const x = text(t)
    await w.push({ type: 'reasoning', text: `thinking about ${op.i}` }) // a block boundary follows
    for (let at = 0; at < x.length; at += Math.ceil(x.length / 3)) await w.push({ type: 'text', text: x.slice(at, at + Math.ceil(x.length / 3)) })
    const env = await w.finish()
    const recs = [ackOf(env)]
    this.recordAck(op, { recs })
    return { recs }
  }

  async rewind(op) {
    const s = await this.session(op.sid, op.inc)
    await s.rewind(op.to)
    this.recordAck(op, { to: op.to })
    return {}
  }

  async fork(op) {
    const options = { title: `fork|${op.i}` }
    if (op.at) options.atUuid = op.at
    const f = await this.store.forkSession(op.sid, options)
    this.sessions.set(f.id, { inc: 1, s: f })
    // What the fork holds, read through the handle that made it: its records are acknowledged.
    let recs = null
    try {
      recs = (await f.envelopes()).map((e) => ({ ...ackOf(e), ty: e.type }))
    } catch {}
    this.recordAck(op, { fid: f.id, recs })
    return { fid: f.id, recs }
  }

  async delete(op) {
    await this.retry(() => this.store.deleteSession(op.sid))
    this.recordAck(op, {})
    await this.release(op)
    return {}
  }

  // Closes this lane's handle of `sid`, so that another process may take the session over.
  async release(op) {
    const h = this.sessions.get(op.sid)
    this.sessions.delete(op.sid)
    try {
      if (h) await h.s.close()
    } catch {}
    return {}
  }

  async resolve(op) {
    try {
      return { inc: incOf(await prop(await this.store.openSession(op.sid), 'info'), op.sid) }
    } catch (e) {
      if (e.code === 'NOT_FOUND') return { inc: null }
      throw e
    }
  }

  // A read of one session: through the writable or the readonly store, a new handle or one kept
  // from earlier reads; its envelopes (with its info) or its messages.
  async read(op) {
    const store = op.ro ? this.ro : this.store
    const key = `${op.ro}:${op.sid}`
    let s = op.cached ? this.reads.get(key) : null
    const fresh = !s
    if (!s) s = await store.openSession(op.sid)
    if (op.cached) this.reads.set(key, s)
    try {
      if (op.what === 'msg') return { fresh, msgs: (await prop(s, 'messages')).map(summarizeMessage) }
      const info = await prop(s, 'info')
      const recs = (await s.envelopes()).map(summarize)
      return { fresh, inc: incOf(info, op.sid), recs }
    } catch (e) {
      this.reads.delete(key)
      if (e && typeof e === 'object') e.fresh = fresh
      throw e
    }
  }

  async list(op) {
    const store = op.ro ? this.ro : this.store
    const infos = await store.listSessions()
    return { list: infos.map((x) => ({ id: x.id, inc: incOf(x, x.id), n: x.messageCount, up: x.updatedAt, title: x.title ?? null })) }
  }

  async search(op) {
    const store = op.ro ? this.ro : this.store
    const page = await store.search(op.token, { limit: 50 })
    return { hits: page.hits.map((h) => ({ sid: h.sessionId, u: h.uuid, s: h.seq })) }
  }

  async close() {
    for (const st of [this.store, this.ro]) {
      try {
        if (st) await st.close()
      } catch {}
    }
  }
}

module.exports = { Lane, incOf }
