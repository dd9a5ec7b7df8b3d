'use strict'
// The JS facade over the native module: values cross as JSON text (JSON.stringify here,
// serde_json in Rust), bulk reads come back as one-byte JSON pages parsed here. The native side
// owns validation, storage and state; this file only shapes arguments and results.

const native = require('./native.js')

const CODES = [
  'INVALID_INPUT', 'NOT_FOUND', 'SESSION_NOT_EMPTY', 'SESSION_LOCKED', 'CLOSED', 'STORE_CORRUPT',
  'STORE_VERSION', 'STORE_BUSY', 'STORE_IO', 'SNAPSHOT_INVALID', 'PROMPT_MISMATCH',
]

function fail(code, message) {
  const err = new Error(message)
  err.code = code
  return err
}

// Async tasks reject with the code before a NUL in the message; make it a normal coded error.
function recode(err) {
  if (err && typeof err.message === 'string') {
    const nul = err.message.indexOf('\u0000')
    if (nul > 0 && CODES.includes(err.message.slice(0, nul))) {
      return fail(err.message.slice(0, nul), err.message.slice(nul + 1))
    }
  }
  return err
}

function describe(v) {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
}

// The store takes JSON nested at most this deep (the Rust side enforces it too).
const MAX_DEPTH = 128

// Where JSON.stringify failed, found by walking the value iteratively (it may be too deep for
// recursion): a BigInt, a cycle, or nesting past MAX_DEPTH. Only runs after a failure.
function unencodable(value) {
  const stack = [{ v: value, path: '', depth: 0 }]
  const onPath = new Set()
  while (stack.length > 0) {
    const { v, path, depth, leave } = stack.pop()
    if (leave) {
      onPath.delete(v)
      continue
    }
    if (typeof v === 'bigint') return { path, reason: 'a BigInt cannot be stored as JSON; use a number or a string' }
    if (v === null || typeof v !== 'object') continue
    if (onPath.has(v)) return { path, reason: 'a circular reference cannot be stored as JSON' }
    if (depth >= MAX_DEPTH) return { path, reason: `nested deeper than ${MAX_DEPTH} levels` }
    if (typeof v.toJSON === 'function') continue
    onPath.add(v)
    stack.push({ v, leave: true })
    const entries = Array.isArray(v) ? v.map((x, i) => [`[${i}]`, x]) : Object.entries(v).map(([k, x]) => [path ? `.${k}` : k, x])
    for (let i = entries.length - 1; i >= 0; i--) {
      stack.push({ v: entries[i][1], path: path + entries[i][0], depth: depth + 1 })
    }
  }
  return null
}

// JSON text of a caller's value. Values are stored as JSON.stringify sees them (toJSON is
// honoured, undefined properties are left out); what it cannot encode is INVALID_INPUT.
function toJson(value, what) {
  let text
  try {
    text = JSON.stringify(value)
  } catch (e) {
    const found = unencodable(value)
    if (found && found.path) throw fail('INVALID_INPUT', `${what}: ${found.path}: ${found.reason}`)
    if (found) throw fail('INVALID_INPUT', `${what}: ${found.reason}`)
    throw fail('INVALID_INPUT', `${what}: cannot be stored as JSON: ${e.message}`)
  }
  if (text === undefined) throw fail('INVALID_INPUT', `${what}: cannot be stored as JSON: got ${typeof value}`)
  return text
}

function optJson(value, what) {
  return value === undefined || value === null ? null : toJson(value, what)
}

function object(value, what) {
  if (value === undefined || value === null) return null
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw fail('INVALID_INPUT', `${what}: expected an object, got ${describe(value)}`)
  }
  return value
}

// Reads every page of a bulk read; the native side reads the next page on another thread while
// this one is parsed, and each page's text is dropped once parsed.
function readPages(pages) {
  let out = []
  for (let json = pages.next(); json !== null; json = pages.next()) {
    const items = JSON.parse(json)
    out = out.length === 0 ? items : out.concat(items)
  }
  return out
}

function textBlocks(message) {
  if (message && typeof message.content === 'string') {
    return { ...message, content: [{ type: 'text', text: message.content }] }
  }
  return message
}

// The envelope `append` returns: the caller's own fields (nested objects shared, not copied),
// plus what the session filled in, in the same key order the store keeps.
function envelopeOf(input, extra, filled) {
  if (typeof input === 'string') {
    return { ...extra, ...filled, message: { role: 'user', content: [{ type: 'text', text: input }] } }
  }
  if ('role' in input && !('message' in input)) {
    return { ...extra, ...filled, message: textBlocks(input) }
  }
  const env = { ...input, ...extra, ...filled }
  if (env.message) env.message = textBlocks(env.message)
  return env
}

function checkRecord(input, what) {
  if (typeof input === 'string') return
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw fail('INVALID_INPUT', `${what}: expected a message, an envelope or a string, got ${describe(input)}`)
  }
}

const kNative = Symbol('native')

class Session {
  constructor(options) {
    if (options && options[kNative]) {
      this[kNative] = options[kNative]
      return
    }
    this[kNative] = new native.NativeSession(optJson(object(options, 'Session: options'), 'Session: options'))
  }

  get id() {
    return this[kNative].id
  }

  get info() {
    return JSON.parse(this[kNative].info())
  }

  append(message, envelope) {
    checkRecord(message, 'append')
    const extra = object(envelope, 'append: envelope')
    const filled = JSON.parse(this[kNative].append(toJson(message, 'append'), optJson(extra, 'append: envelope')))
    return envelopeOf(message, extra, filled)
  }

  appendMany(records) {
    if (!Array.isArray(records)) throw fail('INVALID_INPUT', `appendMany: expected an array, got ${describe(records)}`)
    records.forEach((r, i) => checkRecord(r, `appendMany: [${i}]`))
    const filled = JSON.parse(this[kNative].appendMany(toJson(records, 'appendMany')))
    return records.map((r, i) => envelopeOf(r, null, filled[i]))
  }

  appendEvent(name, data, envelope) {
    if (typeof name !== 'string' || name === '') {
      throw fail('INVALID_INPUT', `appendEvent: name: expected a non-empty string, got ${describe(name)}`)
    }
    const extra = object(envelope, 'appendEvent: envelope')
    const dataJson = data === undefined ? null : toJson(data, 'appendEvent: data')   // null is kept as null
    return JSON.parse(this[kNative].appendEvent(name, dataJson, optJson(extra, 'appendEvent: envelope')))
  }

  restoreMessages(records) {
    if (!Array.isArray(records)) throw fail('INVALID_INPUT', `restoreMessages: expected an array, got ${describe(records)}`)
    return JSON.parse(this[kNative].restoreMessages(toJson(records, 'restoreMessages')))
  }

  restoreTokenState(state) {
    this[kNative].restoreTokenState(toJson(object(state, 'restoreTokenState: state') ?? {}, 'restoreTokenState'))
  }

  get messages() {
    return readPages(this[kNative].readMessages())
  }

  envelopes(range) {
    const { fromSeq, limit } = rangeOf(range, 'envelopes')
    return readPages(this[kNative].readEnvelopes(fromSeq, limit === Infinity ? Number.MAX_SAFE_INTEGER : limit))
  }

  async envelopesAsync(range) {
    const { fromSeq, limit } = rangeOf(range, 'envelopesAsync')
    const n = this[kNative]
    let out = []
    let from = fromSeq
    while (from !== undefined && from !== null && out.length < limit) {
      let page
      try {
        page = await n.envelopesPageAsync(from, Math.min(limit - out.length, Number.MAX_SAFE_INTEGER))
      } catch (e) {
        throw recode(e)
      }
      out = out.concat(JSON.parse(page.json))
      from = page.next
    }
    return out
  }

  get turns() {
    return JSON.parse(this[kNative].turns())
  }

  get tokenTracker() {
    return JSON.parse(this[kNative].tokenTracker())
  }

  get contextFill() {
    return JSON.parse(this[kNative].contextFill())
  }

  setStatus(status) {
    if (typeof status !== 'string') throw fail('INVALID_INPUT', `setStatus: status: expected a string, got ${describe(status)}`)
    this[kNative].setStatus(status)
  }

  close() {
    this[kNative].close()
  }
}

function rangeOf(range, what) {
  const r = object(range, `${what}: range`) ?? {}
  const fromSeq = r.fromSeq ?? 0
  const limit = r.limit ?? Infinity
  if (!Number.isInteger(fromSeq) || fromSeq < 0) {
    throw fail('INVALID_INPUT', `${what}: range.fromSeq: expected a whole number >= 0, got ${String(fromSeq)}`)
  }
  if (limit !== Infinity && (!Number.isInteger(limit) || limit < 0)) {
    throw fail('INVALID_INPUT', `${what}: range.limit: expected a whole number >= 0, got ${String(limit)}`)
  }
  return { fromSeq, limit }
}

function wrapSession(n) {
  return new Session({ [kNative]: n })
}

function pathArg(path, what) {
  if (path === undefined || path === null) return null
  if (typeof path !== 'string') throw fail('INVALID_INPUT', `${what}: path: expected a string, got ${describe(path)}`)
  return path
}

function idArg(id, what) {
  if (typeof id !== 'string' || id === '') throw fail('INVALID_INPUT', `${what}: id: expected a non-empty string, got ${describe(id)}`)
  return id
}

function promptKeyOf(options, what) {
  const o = object(options, `${what}: options`)
  if (!o || o.promptKey === undefined) return null
  if (typeof o.promptKey !== 'string') throw fail('INVALID_INPUT', `${what}: options.promptKey: expected a string`)
  return o.promptKey
}

class Store {
  constructor(n) {
    if (!(n instanceof native.NativeStore)) {
      throw fail('INVALID_INPUT', 'Store: use Store.open(path, options) or Store.openAsync(path, options)')
    }
    this[kNative] = n
  }

  static open(path, options) {
    return new Store(native.NativeStore.open(pathArg(path, 'open'), optJson(object(options, 'open: options'), 'open: options')))
  }

  static async openAsync(path, options) {
    const task = native.openStoreAsync(pathArg(path, 'openAsync'), optJson(object(options, 'openAsync: options'), 'openAsync: options'))
    try {
      return new Store(await task)
    } catch (e) {
      throw recode(e)
    }
  }

  get path() {
    return this[kNative].path
  }

  createSession(options) {
    return wrapSession(this[kNative].createSession(optJson(object(options, 'createSession: options'), 'createSession: options')))
  }

  openSession(id, options) {
    return wrapSession(this[kNative].openSession(idArg(id, 'openSession'), promptKeyOf(options, 'openSession')))
  }

  async openSessionAsync(id, options) {
    const task = this[kNative].openSessionAsync(idArg(id, 'openSessionAsync'), promptKeyOf(options, 'openSessionAsync'))
    try {
      return wrapSession(await task)
    } catch (e) {
      throw recode(e)
    }
  }

  listSessions(filter) {
    return JSON.parse(this[kNative].listSessions(optJson(object(filter, 'listSessions: filter'), 'listSessions: filter')))
  }

  deleteSession(id) {
    this[kNative].deleteSession(idArg(id, 'deleteSession'))
  }

  close() {
    this[kNative].close()
  }
}

// Checks messages the way the provider checks a request; returns the problems, [] when valid.
function validateMessages(messages) {
  if (!Array.isArray(messages)) throw fail('INVALID_INPUT', `validateMessages: expected an array, got ${describe(messages)}`)
  return JSON.parse(native.validateMessages(toJson(messages, 'validateMessages')))
}

module.exports = {
  Store,
  Session,
  validateMessages,
  defaultStorePath: native.defaultStorePath,
  ERROR_CODES: Object.freeze([...CODES]),
}
