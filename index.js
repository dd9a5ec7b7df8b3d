// @ts-check
'use strict'
// The JS facade over the native module: values cross as JSON text (JSON.stringify here,
// serde_json in Rust), bulk reads come back as one-byte JSON pages parsed here. The native side
// owns validation, storage and state; this file only shapes arguments and results.
//
// Type-checked (tsc: allowJs, checkJs, strict) against native.d.ts, the declarations napi-rs
// generates for the native module; index.d.ts is the public contract. Values given by callers
// are typed `any` here: they are unchecked input, validated below or on the native side.

// lib/load-native.js loads the generated loader (native.js) from CommonJS, ESM and bundles, and
// says what was wrong when it cannot. `path` and `fs` come from there too: in an ESM bundle a
// later require('node:path') would meet esbuild's stub.
const { native, path: nodePath, fs: nodeFs } = require('./lib/load-native.js').loadNative()

/** @typedef {import('./native.js').NativeSession} NativeSession */
/** @typedef {import('./native.js').NativeStore} NativeStore */
/** @typedef {import('./native.js').NativePages} NativePages */
/** @typedef {import('./native.js').NativeResponseWriter} NativeResponseWriter */
/** @typedef {Error & { code: string }} CodedError */
/** @typedef {(event: Record<string, unknown>) => void} Listener */

const CODES = [
  'INVALID_INPUT', 'NOT_FOUND', 'SESSION_NOT_EMPTY', 'SESSION_LOCKED', 'CLOSED', 'STORE_CORRUPT',
  'STORE_VERSION', 'STORE_BUSY', 'STORE_IO', 'SNAPSHOT_INVALID', 'PROMPT_MISMATCH',
]

/**
 * @param {string} code
 * @param {string} message
 * @returns {CodedError}
 */
function fail(code, message) {
  const err = /** @type {CodedError} */ (new Error(message))
  err.code = code
  return err
}

// Async tasks reject with the code before a NUL in the message; make it a normal coded error.
/** @param {any} err */
function recode(err) {
  if (err && typeof err.message === 'string') {
    const nul = err.message.indexOf('\u0000')
    if (nul > 0 && CODES.includes(err.message.slice(0, nul))) {
      return fail(err.message.slice(0, nul), err.message.slice(nul + 1))
    }
  }
  return err
}

// What a caller gave, for "got ..." in messages: "undefined", "an object", "a number", and for a
// Promise (a forgotten `await`) the likely mistake.
/** @param {unknown} v */
function describe(v) {
  if (v === null) return 'null'
  if (v === undefined) return 'undefined'
  if (isThenable(v)) return 'a Promise: did you forget await?'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
}

/** @param {unknown} v */
function isThenable(v) {
  if ((typeof v !== 'object' && typeof v !== 'function') || v === null) return false
  try {
    return typeof (/** @type {any} */ (v).then) === 'function'
  } catch {
    return false
  }
}

// The store takes JSON nested at most this deep (the Rust side enforces it too).
const MAX_DEPTH = 128

// Where JSON.stringify failed, found by walking the value iteratively (it may be too deep for
// recursion): a BigInt, a cycle, or nesting past MAX_DEPTH. Only runs after a failure.
/**
 * @param {unknown} value
 * @returns {{ path: string, reason: string } | null}
 */
function unencodable(value) {
  /** @type {Array<{ v: any, path?: string, depth?: number, leave?: boolean }>} */
  const stack = [{ v: value, path: '', depth: 0 }]
  const onPath = new Set()
  while (stack.length > 0) {
    const { v, path = '', depth = 0, leave } = /** @type {NonNullable<ReturnType<typeof stack.pop>>} */ (stack.pop())
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
    /** @type {Array<[string, unknown]>} */
    const entries = Array.isArray(v) ? v.map((x, i) => [`[${i}]`, x]) : Object.entries(v).map(([k, x]) => [path ? `.${k}` : k, x])
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, x] = /** @type {[string, unknown]} */ (entries[i])
      stack.push({ v: x, path: path + key, depth: depth + 1 })
    }
  }
  return null
}

const MAYBE_LONE_SURROGATE = /\\ud[89abcdef][0-9a-f]{2}/i
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

// Whether any string (or key) in a value holds a lone surrogate; walked iteratively.
/** @param {unknown} value */
function hasLoneSurrogate(value) {
  const stack = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return true
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (LONE_SURROGATE.test(k)) return true
        stack.push(x)
      }
    }
  }
  return false
}

/** @param {unknown} e */
function isJsonTypeError(e) {
  return (e instanceof TypeError && /circular|BigInt|cyclic/i.test(e.message)) || (e instanceof RangeError && /call stack/i.test(e.message))
}

// Options are small objects of flags and numbers: a number that is not finite (NaN, Infinity)
// would become null in JSON and be silently ignored, so it is refused with its path.
/**
 * @param {unknown} value
 * @param {string} what
 */
function checkFinite(value, what) {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw fail('INVALID_INPUT', `${what}: expected a finite number, got ${value}`)
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (v !== null && (typeof v === 'number' || (typeof v === 'object' && !Array.isArray(v)))) checkFinite(v, `${what}.${k}`)
    }
  }
}

// JSON text of a caller's value. Values are stored as JSON.stringify sees them (toJSON is
// honoured, undefined properties are left out); what it cannot encode is INVALID_INPUT.
/**
 * @param {unknown} value
 * @param {string} what
 * @returns {string}
 */
function toJson(value, what) {
  let text
  try {
    text = JSON.stringify(value)
  } catch (e) {
    // A getter, toJSON or Proxy trap of the caller's that threw: say so, and do not run it again
    // by walking the value (only cycles and BigInts, JSON.stringify's own TypeErrors, are walked).
    if (!isJsonTypeError(e)) {
      throw fail('INVALID_INPUT', `${what}: reading the value threw: ${e instanceof Error ? e.message : String(e)}`)
    }
    const found = unencodable(value)
    if (found && found.path) throw fail('INVALID_INPUT', `${what}: ${found.path}: ${found.reason}`)
    if (found) throw fail('INVALID_INPUT', `${what}: ${found.reason}`)
    throw fail('INVALID_INPUT', `${what}: cannot be stored as JSON: ${/** @type {Error} */ (e).message}`)
  }
  if (text === undefined) throw fail('INVALID_INPUT', `${what}: cannot be stored as JSON: got ${typeof value}`)
  return text
}

/**
 * @param {unknown} value
 * @param {string} what
 * @returns {string | null}
 */
function optJson(value, what) {
  return value === undefined || value === null ? null : toJson(value, what)
}

// JSON text of an options object, its numbers checked finite.
/**
 * @param {any} value
 * @param {string} what
 * @returns {string | null}
 */
function optionsJson(value, what) {
  checkFinite(value, what)
  return optJson(value, what)
}

/**
 * A caller's options object (or null when absent); anything else is INVALID_INPUT.
 * @param {any} value
 * @param {string} what
 * @returns {Record<string, any> | null}
 */
function object(value, what) {
  if (value === undefined || value === null) return null
  if (typeof value !== 'object' || isArray(value, what)) {
    throw fail('INVALID_INPUT', `${what}: expected an object, got ${describe(value)}`)
  }
  return value
}

// Parses a page of stored records. The native side checked every record's checksum before it
// made the page, so the text is well-formed JSON; should it still not parse, that is a damaged
// store (STORE_CORRUPT), never a bare SyntaxError.
/**
 * @param {string} json
 * @param {string} operation
 * @returns {any[]}
 */
function parsePage(json, operation) {
  let items
  try {
    items = JSON.parse(json)
  } catch (e) {
    throw fail('STORE_CORRUPT', `${operation}: a page of stored records is not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (!Array.isArray(items)) throw fail('STORE_CORRUPT', `${operation}: a page of stored records is not an array`)
  return items
}

// Reads every page of a bulk read; the native side reads the next page on another thread while
// this one is parsed, and each page's text is dropped once parsed.
/**
 * @param {NativePages} pages
 * @param {string} operation
 * @returns {any[]}
 */
function readPages(pages, operation) {
  /** @type {any[]} */
  let out = []
  for (let json = pages.next(); json !== null; json = pages.next()) {
    const items = parsePage(json, operation)
    out = out.length === 0 ? items : out.concat(items)
  }
  return out
}

/** @param {any} message */
function textBlocks(message) {
  if (message && typeof message.content === 'string') {
    return { ...message, content: [{ type: 'text', text: message.content }] }
  }
  return message
}

// The envelope `append` returns: the caller's own fields (nested objects shared, not copied),
// plus what the session filled in, in the same key order the store keeps.
/**
 * @param {any} input
 * @param {Record<string, any> | null} extra
 * @param {Record<string, any>} filled
 * @returns {Record<string, any>}
 */
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

// What `append` sends to the native side: the message's JSON text, and the envelope's.
/**
 * @param {any} message
 * @param {any} envelope
 */
function appendArgs(message, envelope) {
  checkRecord(message, 'append')
  const extra = object(envelope, 'append: envelope')
  const text = toJson(message, 'append')
  const extraText = optJson(extra, 'append: envelope')
  return { extra, text, extraText }
}

// Array.isArray of a caller's value: only a revoked Proxy makes it throw, and that is bad input.
/**
 * @param {unknown} v
 * @param {string} what
 */
function isArray(v, what) {
  try {
    return Array.isArray(v)
  } catch (e) {
    throw fail('INVALID_INPUT', `${what}: reading the value threw: ${e instanceof Error ? e.message : String(e)}`)
  }
}

/**
 * @param {unknown} input
 * @param {string} what
 */
function checkRecord(input, what) {
  if (typeof input === 'string') return
  if (input === null || typeof input !== 'object' || isArray(input, what) || isThenable(input)) {
    throw fail('INVALID_INPUT', `${what}: expected a message, an envelope or a string, got ${describe(input)}`)
  }
}

const kNative = Symbol('native')
const kTelemetry = Symbol('telemetry')

// Telemetry: structured events for a store's listeners, and JSON lines on stdout when
// THREADLINE_TELEMETRY=console. Off (no listener, no env) it costs one property check per call.
class Telemetry {
  /**
   * @param {number} slowMs
   * @param {NativeStore} [store] the store whose notices (a damaged append log...) it reports
   */
  constructor(slowMs, store) {
    /** @type {Listener[]} */
    this.listeners = []
    this.console = process.env.THREADLINE_TELEMETRY === 'console'
    this.slowMs = slowMs
    this.on = this.console
    this.store = store
  }

  // What the store found and handled on its own (log_damaged, log_deleted, log_unreplayed),
  // reported after the operation that found it (or the first one observed after it).
  notices() {
    if (!this.on || !this.store) return
    for (const n of JSON.parse(this.store.takeNotices())) this.emit({ type: n.kind, message: n.message })
  }

  /**
   * @param {Listener} listener
   * @returns {() => void}
   */
  add(listener) {
    this.listeners.push(listener)
    this.on = true
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener)
      this.on = this.console || this.listeners.length > 0
    }
  }

  /** @param {Record<string, unknown>} event */
  emit(event) {
    const e = { time: new Date().toISOString(), ...event }
    if (this.console) process.stdout.write(JSON.stringify(e) + '\n')
    for (const l of this.listeners) {
      try {
        l(e)
      } catch {
        // A listener's failure must not break the operation it observes.
      }
    }
  }
}

const PERSIST_CODES = new Set(['STORE_IO', 'STORE_BUSY'])

// Runs a native call; with telemetry on, reports persistence errors and slow operations.
/**
 * @template T
 * @param {Telemetry | undefined} tel
 * @param {string | undefined} sessionId
 * @param {string} operation
 * @param {() => T} fn
 * @returns {T}
 */
function observed(tel, sessionId, operation, fn) {
  if (!tel || !tel.on) return fn()
  const t0 = performance.now()
  try {
    return fn()
  } catch (err) {
    const e = /** @type {any} */ (err)
    if (e && PERSIST_CODES.has(e.code)) {
      tel.emit({ type: 'persist_error', sessionId, operation, code: e.code, message: e.message })
    }
    throw e
  } finally {
    const ms = performance.now() - t0
    if (ms >= tel.slowMs) tel.emit({ type: 'slow_operation', sessionId, operation, durationMs: Math.round(ms * 1000) / 1000, thresholdMs: tel.slowMs })
    tel.notices()
  }
}

const DEFAULT_SLOW_MS = 100

// What a tool produced, as recordToolOutcome and replay give it: a string is its content.
/**
 * @param {unknown} result
 * @param {string} what
 * @returns {Record<string, any>}
 */
function resultInput(result, what) {
  if (typeof result === 'string') return { content: result }
  return object(result, what) ?? (() => { throw fail('INVALID_INPUT', `${what}: expected an object, got ${describe(result)}`) })()
}

/**
 * @param {Record<string, unknown>} o
 * @returns {Record<string, unknown>}
 */
function withoutNulls(o) {
  for (const k of Object.keys(o)) if (o[k] === null && k !== 'input') delete o[k]
  return o
}

/**
 * @param {any} range
 * @param {string} what
 * @returns {{ fromSeq: number, limit: number }}
 */
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


/**
 * @param {unknown} path
 * @param {string} what
 * @returns {string | null}
 */
function pathArg(path, what) {
  if (path === undefined || path === null) return null
  if (typeof path !== 'string') throw fail('INVALID_INPUT', `${what}: path: expected a string, got ${describe(path)}`)
  // SQLite would only say "unable to open database file".
  if (isDirectory(path)) {
    throw fail('INVALID_INPUT', `${what}: path: ${path} is a directory; a store is a file path (e.g. ${nodePath.join(path, 'threadline.db')})`)
  }
  return path
}

// A path stat cannot read (no entry, no permission, a NUL byte) is left to the native side's errors.
/** @param {string} path */
function isDirectory(path) {
  try {
    return path !== '' && nodeFs.statSync(path, { throwIfNoEntry: false })?.isDirectory() === true
  } catch {
    return false
  }
}

/**
 * @param {unknown} id
 * @param {string} what
 * @param {string} [name]
 * @returns {string}
 */
function idArg(id, what, name = 'id') {
  if (typeof id !== 'string' || id === '') throw fail('INVALID_INPUT', `${what}: ${name}: expected a non-empty string, got ${describe(id)}`)
  return id
}

// The store options the native side takes; slowOperationMs is the facade's (telemetry).
/**
 * @param {any} options
 * @param {string} what
 * @returns {{ native: string | null, slowMs: number }}
 */
function storeOptions(options, what) {
  const o = object(options, `${what}: options`)
  if (!o || o.slowOperationMs === undefined) return { native: optionsJson(o, `${what}: options`), slowMs: DEFAULT_SLOW_MS }
  const { slowOperationMs, ...rest } = o
  if (typeof slowOperationMs !== 'number' || !(slowOperationMs >= 0)) {
    throw fail('INVALID_INPUT', `${what}: options.slowOperationMs: expected a number >= 0, got ${String(slowOperationMs)}`)
  }
  return { native: JSON.stringify(rest), slowMs: slowOperationMs }
}

/**
 * @param {any} options
 * @param {string} what
 * @returns {string | null}
 */
function promptKeyOf(options, what) {
  const o = object(options, `${what}: options`)
  if (!o || o.promptKey === undefined) return null
  if (typeof o.promptKey !== 'string') throw fail('INVALID_INPUT', `${what}: options.promptKey: expected a string`)
  return o.promptKey
}

// ---- How a method runs ----
// Each method of Session, ResponseWriter and Store is written once, as steps: a generator that
// checks and shapes its arguments, yields the native calls it makes, and shapes their results.
// The classes here make each call at once; the classes of `threadline/promise` make the call's
// `...Async` twin, which runs on libuv's thread pool, and await it. So both APIs check, convert
// and report errors the same way.

/**
 * A native call a step makes: `on[method](...args)`, then `post` of its result; with `op`, timed
 * and reported by the telemetry `tel` (session `sid`). `wait` instead: a promise to await (only
 * in methods that are async in both APIs).
 * @typedef {{ on?: any, method?: string, args?: any[], op?: string, tel?: Telemetry, sid?: string,
 *   post?: (v: any) => any, wait?: Promise<any> }} Call
 * @typedef {Generator<Call, any, any>} Steps
 */

/**
 * @param {any} on
 * @param {string} method
 * @param {any[]} args
 * @param {{ op?: string, tel?: Telemetry, sid?: string, post?: (v: any) => any }} [how]
 * @returns {Call}
 */
function call(on, method, args, how = {}) {
  return { on, method, args, ...how }
}

/**
 * A session's call, observed by its store's telemetry as `op`.
 * @param {any} session
 * @param {string} op
 * @param {string} method
 * @param {any[]} args
 * @param {(v: any) => any} [post]
 * @returns {Call}
 */
function sessionCall(session, op, method, args, post) {
  const tel = session[kTelemetry]
  // The id (a native getter, a new string each time) only when telemetry will report it.
  const sid = tel && tel.on ? session[kNative].id : undefined
  return call(session[kNative], method, args, { op, tel, sid, post })
}

/** @param {Call} c */
function callNow(c) {
  if (c.wait) throw fail('INVALID_INPUT', 'a synchronous method cannot wait')
  const post = c.post ?? ((/** @type {any} */ v) => v)
  const run = () => post(c.on[/** @type {string} */ (c.method)](...(c.args ?? [])))
  return c.op ? observed(c.tel, c.sid, c.op, run) : run()
}

/** @param {Call} c */
async function callLater(c) {
  if (c.wait) return c.wait
  const post = c.post ?? ((/** @type {any} */ v) => v)
  const run = async () => {
    let v
    try {
      v = await c.on[`${c.method}Async`](...(c.args ?? []))
    } catch (e) {
      throw recode(e)
    }
    return post(v)
  }
  return c.op ? observedAsync(c.tel, c.sid, c.op, run) : run()
}

/** @param {Steps} steps */
function runSync(steps) {
  let step = steps.next()
  while (!step.done) {
    let value
    try {
      value = callNow(step.value)
    } catch (e) {
      step = steps.throw(e)
      continue
    }
    step = steps.next(value)
  }
  return step.value
}

/**
 * Runs steps from `step` on, each call made by `make` (at once, or on the thread pool).
 * @param {Steps} steps
 * @param {IteratorResult<Call, any>} step
 * @param {(c: Call) => any} make
 */
async function runFrom(steps, step, make) {
  while (!step.done) {
    let value
    try {
      value = await make(step.value)
    } catch (e) {
      step = steps.throw(e)
      continue
    }
    step = steps.next(value)
  }
  return step.value
}

/**
 * The promise API: the arguments are checked and converted now (a caller may change its objects
 * once the call returns), the native calls run in the order the methods were called on this
 * object, each on the thread pool.
 * @param {any} self
 * @param {Steps} steps
 * @returns {Promise<any>}
 */
function queued(self, steps) {
  let first
  try {
    first = steps.next()
  } catch (e) {
    return Promise.reject(e)
  }
  const done = self[kQueue].then(() => runFrom(steps, /** @type {IteratorResult<Call, any>} */ (first), callLater))
  self[kQueue] = done.catch(() => {})
  return done
}

/**
 * `observed` for an async call.
 * @template T
 * @param {Telemetry | undefined} tel
 * @param {string | undefined} sessionId
 * @param {string} operation
 * @param {() => Promise<T>} fn
 * @returns {Promise<T>}
 */
async function observedAsync(tel, sessionId, operation, fn) {
  if (!tel || !tel.on) return fn()
  const t0 = performance.now()
  try {
    return await fn()
  } catch (err) {
    const e = /** @type {any} */ (err)
    if (e && PERSIST_CODES.has(e.code)) {
      tel.emit({ type: 'persist_error', sessionId, operation, code: e.code, message: e.message })
    }
    throw e
  } finally {
    const ms = performance.now() - t0
    if (ms >= tel.slowMs) tel.emit({ type: 'slow_operation', sessionId, operation, durationMs: Math.round(ms * 1000) / 1000, thresholdMs: tel.slowMs })
    tel.notices()
  }
}

// Every page of a bulk read: the synchronous API's pages (read ahead on another thread), or the
// promise API's list of pages.
/**
 * @param {NativePages | Array<{ json: string }>} pages
 * @param {string} operation
 */
function allPages(pages, operation) {
  if (!Array.isArray(pages)) return readPages(pages, operation)
  /** @type {any[]} */
  let out = []
  for (const page of pages) out = out.concat(parsePage(page.json, operation))
  return out
}

const kQueue = Symbol('queue')
const kKind = Symbol('kind')

// ---- Session ----

/** The steps of Session's methods (`this` is a Session or a promise Session). */
const SessionSteps = {
  /**
   * @this {any}
   * @returns {Steps}
   */
  *info() {
    return JSON.parse(yield call(this[kNative], 'info', []))
  },

  /**
   * @this {any}
   * @param {any} message
   * @param {any} envelope
   * @returns {Steps}
   */
  *append(message, envelope) {
    const a = appendArgs(message, envelope)
    const filled = JSON.parse(yield sessionCall(this, 'append', 'append', [a.text, a.extraText]))
    return envelopeOf(message, a.extra, filled)
  },

  /**
   * @this {any}
   * @param {any} records
   * @returns {Steps}
   */
  *appendMany(records) {
    if (!isArray(records, 'appendMany')) throw fail('INVALID_INPUT', `appendMany: expected an array, got ${describe(records)}`)
    records.forEach((/** @type {any} */ r, /** @type {number} */ i) => checkRecord(r, `appendMany: [${i}]`))
    const text = toJson(records, 'appendMany')
    const filled = JSON.parse(yield sessionCall(this, 'appendMany', 'appendMany', [text]))
    return records.map((/** @type {any} */ r, /** @type {number} */ i) => envelopeOf(r, null, filled[i]))
  },

  /**
   * @this {any}
   * @param {any} name
   * @param {any} data
   * @param {any} envelope
   * @returns {Steps}
   */
  *appendEvent(name, data, envelope) {
    if (typeof name !== 'string' || name === '') {
      throw fail('INVALID_INPUT', `appendEvent: name: expected a non-empty string, got ${describe(name)}`)
    }
    const extra = object(envelope, 'appendEvent: envelope')
    const dataJson = data === undefined ? null : toJson(data, 'appendEvent: data') // null is kept as null
    const extraText = optJson(extra, 'appendEvent: envelope')
    return JSON.parse(yield sessionCall(this, 'appendEvent', 'appendEvent', [name, dataJson, extraText]))
  },

  /**
   * @this {any}
   * @param {any} records
   * @returns {Steps}
   */
  *restoreMessages(records) {
    if (!isArray(records, 'restoreMessages')) throw fail('INVALID_INPUT', `restoreMessages: expected an array, got ${describe(records)}`)
    let text = toJson(records, 'restoreMessages')
    // A record holding a lone UTF-16 surrogate (not valid Unicode) is skipped and reported like
    // any unreadable line, not allowed to fail the whole restore. JSON.stringify writes lone
    // surrogates as escapes, so a cheap scan finds the rare text that needs the per-record look.
    /** @type {number[]} */
    let broken = []
    if (MAYBE_LONE_SURROGATE.test(text)) {
      broken = records.flatMap((/** @type {any} */ r, /** @type {number} */ i) => (hasLoneSurrogate(r) ? [i] : []))
      if (broken.length > 0) text = toJson(records.map((/** @type {any} */ r, /** @type {number} */ i) => (broken.includes(i) ? null : r)), 'restoreMessages')
    }
    const report = JSON.parse(yield sessionCall(this, 'restoreMessages', 'restoreMessages', [text]))
    for (const entry of report.skipped) {
      if (broken.includes(entry.index)) entry.reason = 'a string holds a lone UTF-16 surrogate, which is not valid Unicode text'
    }
    return report
  },

  /**
   * @this {any}
   * @param {any} state
   * @returns {Steps}
   */
  *restoreTokenState(state) {
    const o = object(state, 'restoreTokenState: state') ?? {}
    checkFinite(o, 'restoreTokenState: state')
    yield call(this[kNative], 'restoreTokenState', [toJson(o, 'restoreTokenState')])
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *messages() {
    return yield sessionCall(this, 'messages', 'readMessages', [false], (p) => allPages(p, 'messages'))
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *allMessages() {
    return yield sessionCall(this, 'allMessages', 'readMessages', [true], (p) => allPages(p, 'allMessages'))
  },

  /**
   * @this {any}
   * @param {any} range
   * @returns {Steps}
   */
  *envelopes(range) {
    const { fromSeq, limit } = rangeOf(range, 'envelopes')
    const pages = yield call(this[kNative], 'readEnvelopes', [fromSeq, limit === Infinity ? Number.MAX_SAFE_INTEGER : limit])
    return allPages(pages, 'envelopes')
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *turns() {
    return JSON.parse(yield call(this[kNative], 'turns', []))
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *tokenTracker() {
    return JSON.parse(yield call(this[kNative], 'tokenTracker', []))
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *contextFill() {
    return JSON.parse(yield call(this[kNative], 'contextFill', []))
  },

  /**
   * @this {any}
   * @param {any} status
   * @returns {Steps}
   */
  *setStatus(status) {
    if (typeof status !== 'string') throw fail('INVALID_INPUT', `setStatus: status: expected a string, got ${describe(status)}`)
    yield call(this[kNative], 'setStatus', [status])
  },

  // Changes title / metadata / contextWindow / model; null clears one; the new info. The native
  // side checks each field (the same checks for callers in Rust); here only what JSON would lose.
  /**
   * @this {any}
   * @param {any} changes
   * @returns {Steps}
   */
  *update(changes) {
    const o = object(changes, 'update: changes')
    if (o === null) throw fail('INVALID_INPUT', `update: changes: expected an object, got ${describe(changes)}`)
    const w = o.contextWindow
    if (typeof w === 'number' && !(Number.isSafeInteger(w) && w > 0)) {
      throw fail('INVALID_INPUT', `update: contextWindow: expected a positive integer, got ${w}`)
    }
    checkFinite(o.metadata, 'update: metadata')
    return JSON.parse(yield sessionCall(this, 'update', 'update', [toJson(o, 'update')]))
  },

  /**
   * @this {any}
   * @param {any} toolUseId
   * @returns {Steps}
   */
  *toolCallStarted(toolUseId) {
    const id = idArg(toolUseId, 'toolCallStarted', 'toolUseId')
    yield sessionCall(this, 'toolCallStarted', 'toolCallStarted', [id])
  },

  /**
   * @this {any}
   * @param {any} toolUseId
   * @param {any} result
   * @returns {Steps}
   */
  *recordToolOutcome(toolUseId, result) {
    const id = idArg(toolUseId, 'recordToolOutcome', 'toolUseId')
    const text = toJson(resultInput(result, 'recordToolOutcome: result'), 'recordToolOutcome: result')
    yield sessionCall(this, 'recordToolOutcome', 'recordToolOutcome', [id, text])
  },

  /**
   * @this {any}
   * @param {any} filter
   * @returns {Steps}
   */
  *toolCalls(filter) {
    const f = object(filter, 'toolCalls: filter') ?? {}
    if (f.state !== undefined && typeof f.state !== 'string') {
      throw fail('INVALID_INPUT', `toolCalls: filter.state: expected a string, got ${describe(f.state)}`)
    }
    return JSON.parse(yield call(this[kNative], 'toolCalls', [f.state ?? null])).map(withoutNulls)
  },

  /**
   * @this {any}
   * @param {any} toolUseId
   * @returns {Steps}
   */
  *cachedToolResult(toolUseId) {
    const text = yield call(this[kNative], 'cachedToolResult', [idArg(toolUseId, 'cachedToolResult', 'toolUseId')])
    return text === null || text === undefined ? null : JSON.parse(text)
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *pendingRepairs() {
    return JSON.parse(yield call(this[kNative], 'pendingRepairs', []))
  },

  /**
   * Async in both APIs: it awaits the caller's replay of calls.
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *recover(options) {
    const o = object(options, 'recover: options') ?? {}
    for (const k of ['isSafe', 'replay']) {
      if (o[k] !== undefined && typeof o[k] !== 'function') {
        throw fail('INVALID_INPUT', `recover: options.${k}: expected a function, got ${describe(o[k])}`)
      }
    }
    if (o.isSafe && !o.replay) throw fail('INVALID_INPUT', 'recover: options.replay: required when isSafe is given')
    const unknownOutcome = o.unknownOutcome ?? 'mark'
    if (unknownOutcome !== 'mark' && unknownOutcome !== 'leave') {
      throw fail('INVALID_INPUT', `recover: options.unknownOutcome: expected 'mark' or 'leave', got ${String(unknownOutcome)}`)
    }
    const t0 = performance.now()
    /** @type {string[]} */
    const replayed = o.isSafe ? yield* replaySafe(this, o.isSafe, o.replay) : []
    const report = JSON.parse(yield sessionCall(this, 'recover', 'recover', [JSON.stringify({ unknownOutcome, replayed })]))
    const tel = this[kTelemetry]
    if (tel && tel.on) {
      const sessionId = this[kNative].id
      for (const repair of report.repairs) tel.emit({ type: 'repair', sessionId, repair })
      tel.emit({ type: 'recovery', sessionId, repairs: report.repairs.length, recordsWritten: report.recordsWritten, durationMs: Math.round((performance.now() - t0) * 1000) / 1000 })
    }
    return report
  },

  /**
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *beginResponse(options) {
    const o = object(options, 'beginResponse: options')
    const n = yield call(this[kNative], 'beginResponse', [optionsJson(o, 'beginResponse: options')])
    return new this[kKind].ResponseWriter(this, n)
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *snapshot() {
    return yield sessionCall(this, 'snapshot', 'snapshot', [])
  },

  /**
   * @this {any}
   * @param {any} format
   * @param {any} [options]
   * @returns {Steps}
   */
  *export(format, options) {
    if (typeof format !== 'string' || !EXPORT_FORMATS.includes(format)) {
      throw fail('INVALID_INPUT', `export: format: expected one of ${EXPORT_FORMATS.map((f) => `'${f}'`).join(', ')}, got ${shown(format)}`)
    }
    const o = object(options, 'export: options')
    if (o && o.events !== undefined && typeof o.events !== 'boolean') throw fail('INVALID_INPUT', `export: options.events: expected a boolean, got ${describe(o.events)}`)
    return yield sessionCall(this, 'export', 'export', [format, optJson(o, 'export: options')])
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *verify() {
    return JSON.parse(yield sessionCall(this, 'verify', 'verify', []))
  },

  /**
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *buildContext(options) {
    const o = object(options, 'buildContext: options')
    if (!o) throw fail('INVALID_INPUT', 'buildContext: options: required ({ target })')
    const text = /** @type {string} */ (optionsJson(o, 'buildContext: options'))
    return JSON.parse(yield sessionCall(this, 'buildContext', 'buildContext', [text]))
  },

  /**
   * @this {any}
   * @param {any} toolUseId
   * @returns {Steps}
   */
  *readToolOutput(toolUseId) {
    const id = idArg(toolUseId, 'readToolOutput', 'toolUseId')
    return JSON.parse(yield sessionCall(this, 'readToolOutput', 'readToolOutput', [id]))
  },

  /**
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *compactionPlan(options) {
    const o = object(options, 'compactionPlan: options')
    if (!o) throw fail('INVALID_INPUT', 'compactionPlan: options: required ({ targetTokens })')
    return JSON.parse(yield call(this[kNative], 'compactionPlan', [/** @type {string} */ (optionsJson(o, 'compactionPlan: options'))]))
  },

  /**
   * @this {any}
   * @param {any} toUuid
   * @returns {Steps}
   */
  *rewind(toUuid) {
    const id = idArg(toUuid, 'rewind', 'toUuid')
    yield sessionCall(this, 'rewind', 'rewind', [id])
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *branches() {
    return JSON.parse(yield call(this[kNative], 'branches', []))
  },

  /**
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *compact(options) {
    const o = object(options, 'compact: options')
    if (!o) throw fail('INVALID_INPUT', 'compact: options: required ({ summary })')
    const text = /** @type {string} */ (optionsJson(o, 'compact: options'))
    return JSON.parse(yield sessionCall(this, 'compact', 'compact', [text]))
  },
}

// Re-runs, once, each started call with no outcome that the caller says is safe, and records
// its real result in the journal (a failed replay is recorded as an is_error result).
/**
 * @param {any} session
 * @param {(call: any) => boolean} isSafe
 * @param {(call: any) => unknown} replay
 * @returns {Steps}
 */
function* replaySafe(session, isSafe, replay) {
  const repairs = yield* SessionSteps.pendingRepairs.call(session)
  const unknown = new Set(repairs.filter((/** @type {any} */ r) => r.kind === 'unknown_outcome').map((/** @type {any} */ r) => r.toolUseId))
  /** @type {string[]} */
  const replayed = []
  for (const c of yield* SessionSteps.toolCalls.call(session, { state: 'started' })) {
    if (!unknown.has(c.id) || !isSafe(c)) continue
    let result
    try {
      result = resultInput(yield { wait: Promise.resolve().then(() => replay(c)) }, `recover: replay(${c.id})`)
    } catch (err) {
      const e = /** @type {any} */ (err)
      if (e && e.code === 'INVALID_INPUT') throw e
      result = { content: `Replay failed: ${e && e.message ? e.message : String(e)}`, is_error: true }
    }
    yield* SessionSteps.recordToolOutcome.call(session, c.id, result)
    replayed.push(c.id)
  }
  return replayed
}

class Session {
  /**
   * @param {any} options the caller's SessionOptions, or the native session to wrap (wrapSession)
   */
  constructor(options) {
    if (options && options[kNative]) {
      /** @type {NativeSession} */
      this[kNative] = options[kNative]
      /** @type {Telemetry} */
      this[kTelemetry] = options[kTelemetry]
    } else {
      this[kNative] = new native.NativeSession(optionsJson(object(options, 'Session: options'), 'Session: options'))
      this[kTelemetry] = new Telemetry(DEFAULT_SLOW_MS)
    }
    this[kKind] = SYNC
  }

  get id() {
    return this[kNative].id
  }

  get info() {
    return runSync(SessionSteps.info.call(this))
  }

  /** @param {any} message @param {any} envelope */
  append(message, envelope) {
    const tel = this[kTelemetry]
    if (tel && tel.on) return runSync(SessionSteps.append.call(this, message, envelope))
    // Unobserved: the same steps as SessionSteps.append, called straight (the generator's
    // machinery was a measurable part of an append).
    const a = appendArgs(message, envelope)
    return envelopeOf(message, a.extra, JSON.parse(this[kNative].append(a.text, a.extraText)))
  }

  /** @param {any} records */
  appendMany(records) {
    return runSync(SessionSteps.appendMany.call(this, records))
  }

  /** @param {any} name @param {any} data @param {any} envelope */
  appendEvent(name, data, envelope) {
    return runSync(SessionSteps.appendEvent.call(this, name, data, envelope))
  }

  /** @param {any} records */
  restoreMessages(records) {
    return runSync(SessionSteps.restoreMessages.call(this, records))
  }

  /** @param {any} state */
  restoreTokenState(state) {
    runSync(SessionSteps.restoreTokenState.call(this, state))
  }

  get messages() {
    return runSync(SessionSteps.messages.call(this))
  }

  get allMessages() {
    return runSync(SessionSteps.allMessages.call(this))
  }

  /** @param {any} range */
  envelopes(range) {
    return runSync(SessionSteps.envelopes.call(this, range))
  }

  /**
   * @param {any} range
   */
  async envelopesAsync(range) {
    const { fromSeq, limit } = rangeOf(range, 'envelopesAsync')
    const n = this[kNative]
    /** @type {any[]} */
    let out = []
    /** @type {number | undefined} */
    let from = fromSeq
    while (from !== undefined && from !== null && out.length < limit) {
      /** @type {import('./native.js').NativePage} */
      let page
      try {
        page = /** @type {import('./native.js').NativePage} */ (await n.envelopesPageAsync(from, Math.min(limit - out.length, Number.MAX_SAFE_INTEGER)))
      } catch (e) {
        throw recode(e)
      }
      out = out.concat(parsePage(page.json, 'envelopesAsync'))
      from = page.next
    }
    return out
  }

  get turns() {
    return runSync(SessionSteps.turns.call(this))
  }

  get tokenTracker() {
    return runSync(SessionSteps.tokenTracker.call(this))
  }

  get contextFill() {
    return runSync(SessionSteps.contextFill.call(this))
  }

  /** @param {any} status */
  setStatus(status) {
    runSync(SessionSteps.setStatus.call(this, status))
  }

  /** @param {any} changes */
  update(changes) {
    return runSync(SessionSteps.update.call(this, changes))
  }

  // --- recovery: the tool-call journal ---

  /** @param {any} toolUseId */
  toolCallStarted(toolUseId) {
    runSync(SessionSteps.toolCallStarted.call(this, toolUseId))
  }

  /** @param {any} toolUseId @param {any} result */
  recordToolOutcome(toolUseId, result) {
    runSync(SessionSteps.recordToolOutcome.call(this, toolUseId, result))
  }

  /** @param {any} filter */
  toolCalls(filter) {
    return runSync(SessionSteps.toolCalls.call(this, filter))
  }

  /** @param {any} toolUseId */
  cachedToolResult(toolUseId) {
    return runSync(SessionSteps.cachedToolResult.call(this, toolUseId))
  }

  pendingRepairs() {
    return runSync(SessionSteps.pendingRepairs.call(this))
  }

  /** @param {any} options */
  recover(options) {
    const steps = SessionSteps.recover.call(this, options)
    try {
      return runFrom(steps, steps.next(), (c) => (c.wait ? c.wait : callNow(c)))
    } catch (e) {
      return Promise.reject(e)
    }
  }

  // --- recovery: streaming, snapshots ---

  /** @param {any} options */
  beginResponse(options) {
    return runSync(SessionSteps.beginResponse.call(this, options))
  }

  snapshot() {
    return runSync(SessionSteps.snapshot.call(this))
  }

  /**
   * @param {any} format
   * @param {any} [options]
   */
  export(format, options) {
    return runSync(SessionSteps.export.call(this, format, options))
  }

  // Checks every record of the session (checksums, none missing, blobs); the report lists each
  // damaged record instead of stopping at the first.
  verify() {
    return runSync(SessionSteps.verify.call(this))
  }

  // --- context ---

  /** @param {any} options */
  buildContext(options) {
    return runSync(SessionSteps.buildContext.call(this, options))
  }

  /** @param {any} toolUseId */
  readToolOutput(toolUseId) {
    return runSync(SessionSteps.readToolOutput.call(this, toolUseId))
  }

  /** @param {any} options */
  compactionPlan(options) {
    return runSync(SessionSteps.compactionPlan.call(this, options))
  }

  /** @param {any} toUuid */
  rewind(toUuid) {
    runSync(SessionSteps.rewind.call(this, toUuid))
  }

  branches() {
    return runSync(SessionSteps.branches.call(this))
  }

  /** @param {any} options */
  compact(options) {
    return runSync(SessionSteps.compact.call(this, options))
  }

  close() {
    this[kNative].close()
  }
}

// ---- ResponseWriter ----

/** The steps of ResponseWriter's methods (`this` is a writer of either API). */
const WriterSteps = {
  /**
   * @this {any}
   * @param {any} chunk
   * @returns {Steps}
   */
  *push(chunk) {
    if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) {
      throw fail('INVALID_INPUT', `push: chunk: expected an object, got ${describe(chunk)}`)
    }
    const text = toJson(chunk, 'push: chunk')
    yield writerCall(this, 'push', [text])
  },

  /**
   * @this {any}
   * @param {any} message
   * @returns {Steps}
   */
  *finish(message) {
    const text = message === undefined || message === null ? null : toJson(object(message, 'finish: message'), 'finish: message')
    return JSON.parse(yield writerCall(this, 'finish', [text]))
  },

  /**
   * @this {any}
   * @param {any} error
   * @returns {Steps}
   */
  *fail(error) {
    const e = object(error, 'fail: error')
    if (!e || typeof e.message !== 'string') throw fail('INVALID_INPUT', 'fail: error.message: expected a string')
    if (e.code !== undefined && typeof e.code !== 'string') throw fail('INVALID_INPUT', 'fail: error.code: expected a string')
    return JSON.parse(yield writerCall(this, 'fail', [e.message, e.code ?? null]))
  },
}

/**
 * A writer's call, observed by its session's store telemetry as `op`.
 * @param {any} writer
 * @param {string} op
 * @param {any[]} args
 * @returns {Call}
 */
function writerCall(writer, op, args) {
  const s = writer.session
  return call(writer[kNative], op, args, { op, tel: s[kTelemetry], sid: s[kNative].id })
}

// A response being streamed: chunks are persisted as they arrive (at every block boundary, and
// at least every 200 ms within a long block), so a crash mid-stream leaves what had arrived.
class ResponseWriter {
  /**
   * @param {Session} session
   * @param {NativeResponseWriter} n
   */
  constructor(session, n) {
    this.session = session
    this[kNative] = n
  }

  get id() {
    return this[kNative].id
  }

  /** @param {any} chunk */
  push(chunk) {
    runSync(WriterSteps.push.call(this, chunk))
  }

  /** @param {any} message */
  finish(message) {
    return runSync(WriterSteps.finish.call(this, message))
  }

  /** @param {any} error */
  fail(error) {
    return runSync(WriterSteps.fail.call(this, error))
  }
}

/**
 * @param {any} store
 * @param {NativeSession} n
 */
function wrapSession(n, store) {
  return new store[kKind].Session({ [kNative]: n, [kTelemetry]: store[kTelemetry] })
}

// ---- Store ----

/** The steps of Store's methods (`this` is a Store of either API). */
const StoreSteps = {
  /**
   * @this {any}
   * @param {any} json
   * @returns {Steps}
   */
  *importSnapshot(json) {
    if (typeof json !== 'string') throw fail('INVALID_INPUT', `importSnapshot: expected a JSON string, got ${describe(json)}`)
    const n = yield call(this[kNative], 'importSnapshot', [json], { op: 'importSnapshot', tel: this[kTelemetry] })
    return wrapSession(n, this)
  },

  /**
   * @this {any}
   * @param {any} id
   * @param {any} options
   * @returns {Steps}
   */
  *forkSession(id, options) {
    const sid = idArg(id, 'forkSession')
    const o = object(options, 'forkSession: options') ?? {}
    for (const k of Object.keys(o)) {
      if (k !== 'atUuid' && k !== 'title') throw fail('INVALID_INPUT', `forkSession: options.${k}: unknown option (expected atUuid, title)`)
      if (o[k] !== undefined && typeof o[k] !== 'string') throw fail('INVALID_INPUT', `forkSession: options.${k}: expected a string, got ${describe(o[k])}`)
    }
    const n = yield call(this[kNative], 'forkSession', [sid, o.atUuid ?? null, o.title ?? null], { op: 'forkSession', tel: this[kTelemetry], sid })
    return wrapSession(n, this)
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *interruptedSessions() {
    const found = JSON.parse(yield call(this[kNative], 'interruptedSessions', [], { op: 'interruptedSessions', tel: this[kTelemetry] }))
    const tel = this[kTelemetry]
    if (tel.on) for (const info of found) tel.emit({ type: 'interrupted_session', sessionId: info.id, session: info })
    return found
  },

  /**
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *createSession(options) {
    const n = yield call(this[kNative], 'createSession', [optionsJson(object(options, 'createSession: options'), 'createSession: options')])
    return wrapSession(n, this)
  },

  /**
   * @this {any}
   * @param {any} id
   * @param {any} options
   * @returns {Steps}
   */
  *openSession(id, options) {
    const sid = idArg(id, 'openSession')
    const key = promptKeyOf(options, 'openSession')
    const n = yield call(this[kNative], 'openSession', [sid, key], { op: 'openSession', tel: this[kTelemetry], sid })
    return wrapSession(n, this)
  },

  /**
   * @this {any}
   * @param {any} filter
   * @returns {Steps}
   */
  *listSessions(filter) {
    return JSON.parse(yield call(this[kNative], 'listSessions', [optionsJson(object(filter, 'listSessions: filter'), 'listSessions: filter')], { op: 'listSessions', tel: this[kTelemetry] }))
  },

  // One file per step on the thread pool, progress reported between steps.
  /**
   * @this {any}
   * @param {any} source
   * @param {any} options
   * @returns {Steps}
   */
  *import(source, options) {
    const { format, path } = importSource(source)
    const o = importOptions(options)
    const importer = yield call(this[kNative], 'beginImport', [format, path, optJson({ project: o.project, includeDeleted: o.includeDeleted }, 'import: options')])
    for (;;) {
      const at = yield { wait: importer.stepAsync().catch((/** @type {unknown} */ e) => { throw recode(e) }) }
      if (at === null) break
      if (o.onProgress) o.onProgress(JSON.parse(at))
    }
    return JSON.parse(importer.report())
  },

  /**
   * @this {any}
   * @param {any} query
   * @param {any} options
   * @returns {Steps}
   */
  *search(query, options) {
    if (typeof query !== 'string') throw fail('INVALID_INPUT', `search: query: expected a string, got ${describe(query)}`)
    const o = optionsJson(object(options, 'search: options'), 'search: options')
    return JSON.parse(yield call(this[kNative], 'search', [query, o], { op: 'search', tel: this[kTelemetry] }))
  },

  // Tool definitions for the three providers, and one handler that answers a model's call with a
  // tool_result block (a model's mistakes are is_error results, never throws).
  /**
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *recallTools(options) {
    const o = optionsJson(object(options, 'recallTools: options'), 'recallTools: options')
    const tools = JSON.parse(yield call(this[kNative], 'recallTools', [o]))
    const store = this
    return {
      ...tools,
      /** @param {any} c */
      handle(c) {
        // A call JSON cannot hold (a getter that throws, a cycle, nesting too deep to walk) is
        // the caller's to fix: rejected with what it is, as any other argument.
        let text
        try {
          text = toJson(c ?? null, 'recallTools.handle: call')
        } catch (e) {
          return Promise.reject(e)
        }
        const steps = (/** @returns {Steps} */ function* () {
          return JSON.parse(yield call(store[kNative], 'recallHandle', [o, text]))
        })()
        if (store[kKind] !== SYNC) return queued(store, steps)
        try {
          return Promise.resolve(runSync(steps))
        } catch (e) {
          return Promise.reject(e)
        }
      },
    }
  },

  // SQLite's check of the file, then every session as session.verify() checks it, then the blobs.
  /**
   * @this {any}
   * @param {any} options
   * @returns {Steps}
   */
  *verify(options) {
    const o = object(options, 'verify: options') ?? {}
    for (const k of Object.keys(o)) {
      if (k !== 'quick') throw fail('INVALID_INPUT', `verify: options.${k}: unknown option (expected quick)`)
      if (o[k] !== undefined && typeof o[k] !== 'boolean') throw fail('INVALID_INPUT', `verify: options.${k}: expected a boolean, got ${describe(o[k])}`)
    }
    return JSON.parse(yield call(this[kNative], 'verify', [optJson({ quick: o.quick ?? false }, 'verify: options')], { op: 'verify', tel: this[kTelemetry] }))
  },

  /**
   * @this {any}
   * @param {any} id
   * @returns {Steps}
   */
  *deleteSession(id) {
    yield call(this[kNative], 'deleteSession', [idArg(id, 'deleteSession')], { op: 'deleteSession', tel: this[kTelemetry] })
  },

  // The store's size and what vacuum() could give back: { engine, bytes, freeBytes, pageSize?, freePages? }.
  /**
   * @this {any}
   * @returns {Steps}
   */
  *stats() {
    return JSON.parse(yield call(this[kNative], 'stats', [], { op: 'stats', tel: this[kTelemetry] }))
  },

  /**
   * @this {any}
   * @returns {Steps}
   */
  *vacuum() {
    return JSON.parse(yield call(this[kNative], 'vacuum', [], { op: 'vacuum', tel: this[kTelemetry] }))
  },

  // A copy of every session in a new SQLite file (never over an existing one): { path, sessions, records, bytes }.
  /**
   * @this {any}
   * @param {any} path
   * @returns {Steps}
   */
  *backup(path) {
    if (typeof path !== 'string' || path === '') throw fail('INVALID_INPUT', `backup: path: expected a non-empty string, got ${describe(path)}`)
    return JSON.parse(yield call(this[kNative], 'backup', [path], { op: 'backup', tel: this[kTelemetry] }))
  },
}

const IMPORT_FORMATS = ['claude-code', 'codex', 'pi', 'fspec']
const EXPORT_FORMATS = ['claude-code', 'markdown', 'html', 'snapshot']

/** A value in an error message: a string as it is, anything else by its kind. @param {unknown} v */
function shown(v) {
  return typeof v === 'string' ? `'${v}'` : describe(v)
}

/** @param {any} source */
function importSource(source) {
  const s = object(source, 'import: source')
  if (!s) throw fail('INVALID_INPUT', `import: source: expected { format, path }, got ${describe(source)}`)
  for (const k of Object.keys(s)) {
    if (k !== 'format' && k !== 'path') throw fail('INVALID_INPUT', `import: source.${k}: unknown field (expected format, path)`)
  }
  if (typeof s.format !== 'string' || !IMPORT_FORMATS.includes(s.format)) {
    throw fail('INVALID_INPUT', `import: source.format: expected one of ${IMPORT_FORMATS.map((f) => `'${f}'`).join(', ')}, got ${shown(s.format)}`)
  }
  if (typeof s.path !== 'string' || s.path === '') throw fail('INVALID_INPUT', `import: source.path: expected a file or folder path, got ${describe(s.path)}`)
  return { format: s.format, path: nodePath.resolve(s.path) }
}

/** @param {any} options */
function importOptions(options) {
  const o = object(options, 'import: options') ?? {}
  for (const k of Object.keys(o)) {
    if (k !== 'project' && k !== 'onProgress' && k !== 'includeDeleted') throw fail('INVALID_INPUT', `import: options.${k}: unknown option (expected project, includeDeleted, onProgress)`)
  }
  if (o.includeDeleted !== undefined && typeof o.includeDeleted !== 'boolean') throw fail('INVALID_INPUT', `import: options.includeDeleted: expected a boolean, got ${describe(o.includeDeleted)}`)
  if (o.project !== undefined && typeof o.project !== 'string') throw fail('INVALID_INPUT', `import: options.project: expected a string, got ${describe(o.project)}`)
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') throw fail('INVALID_INPUT', `import: options.onProgress: expected a function, got ${describe(o.onProgress)}`)
  return { project: o.project, includeDeleted: o.includeDeleted, onProgress: o.onProgress }
}

/**
 * Steps that wait on promises, run by a synchronous class: its calls at once, its waits awaited.
 * @param {() => Steps} make
 */
function runWaiting(make) {
  try {
    const steps = make()
    return runFrom(steps, steps.next(), (c) => (c.wait ? c.wait : callNow(c)))
  } catch (e) {
    return Promise.reject(e)
  }
}

/**
 * `new Store()` from outside is refused: a Store comes from Store.open.
 * @param {unknown} n
 */
function checkNativeStore(n) {
  if (!(n instanceof native.NativeStore)) {
    throw fail('INVALID_INPUT', 'Store: use Store.open(path, options) or Store.openAsync(path, options)')
  }
}

class Store {
  /**
   * @param {unknown} n a NativeStore (anything else: `new Store()` from outside, refused)
   * @param {number} [slowMs]
   */
  constructor(n, slowMs = DEFAULT_SLOW_MS) {
    checkNativeStore(n)
    this[kNative] = /** @type {NativeStore} */ (n)
    this[kTelemetry] = new Telemetry(slowMs, this[kNative])
    this[kKind] = SYNC
  }

  /**
   * @param {any} path
   * @param {any} options
   */
  static open(path, options) {
    const o = storeOptions(options, 'open')
    return new Store(native.NativeStore.open(pathArg(path, 'open'), o.native), o.slowMs)
  }

  /**
   * @param {any} path
   * @param {any} options
   */
  static async openAsync(path, options) {
    const o = storeOptions(options, 'openAsync')
    const task = native.openStoreAsync(pathArg(path, 'openAsync'), o.native)
    try {
      return new Store(await task, o.slowMs)
    } catch (e) {
      throw recode(e)
    }
  }

  // Imports a snapshot into the store at `path` (the default store when omitted). The store
  // stays open for the returned session; `store.importSnapshot(json)` imports into an open one.
  /**
   * @param {any} json
   * @param {any} path
   * @param {any} options
   */
  static importSnapshot(json, path, options) {
    return Store.open(path, options).importSnapshot(json)
  }

  /** @param {any} json */
  importSnapshot(json) {
    return runSync(StoreSteps.importSnapshot.call(this, json))
  }

  /** @param {any} id @param {any} options */
  forkSession(id, options) {
    return runSync(StoreSteps.forkSession.call(this, id, options))
  }

  interruptedSessions() {
    return runSync(StoreSteps.interruptedSessions.call(this))
  }

  /** @param {any} listener */
  onEvent(listener) {
    return addListener(this, listener)
  }

  get path() {
    return this[kNative].path
  }

  /** @param {any} options */
  createSession(options) {
    return runSync(StoreSteps.createSession.call(this, options))
  }

  /** @param {any} id @param {any} options */
  openSession(id, options) {
    return runSync(StoreSteps.openSession.call(this, id, options))
  }

  /**
   * @param {any} id
   * @param {any} options
   */
  async openSessionAsync(id, options) {
    const task = this[kNative].openSessionAsync(idArg(id, 'openSessionAsync'), promptKeyOf(options, 'openSessionAsync'))
    try {
      return wrapSession(/** @type {NativeSession} */ (await task), this)
    } catch (e) {
      throw recode(e)
    }
  }

  /** @param {any} filter */
  listSessions(filter) {
    return runSync(StoreSteps.listSessions.call(this, filter))
  }

  /** @param {any} query @param {any} options */
  search(query, options) {
    return runSync(StoreSteps.search.call(this, query, options))
  }

  /** @param {any} options */
  recallTools(options) {
    return runSync(StoreSteps.recallTools.call(this, options))
  }

  /** @param {any} options */
  verify(options) {
    return runSync(StoreSteps.verify.call(this, options))
  }

  /** @param {any} source @param {any} options */
  import(source, options) {
    return runWaiting(() => StoreSteps.import.call(this, source, options))
  }

  /** @param {any} id */
  deleteSession(id) {
    runSync(StoreSteps.deleteSession.call(this, id))
  }

  stats() {
    return runSync(StoreSteps.stats.call(this))
  }

  vacuum() {
    return runSync(StoreSteps.vacuum.call(this))
  }

  /** @param {any} path */
  backup(path) {
    return runSync(StoreSteps.backup.call(this, path))
  }

  close() {
    this[kNative].close()
  }
}

/**
 * @param {any} store
 * @param {any} listener
 */
function addListener(store, listener) {
  if (typeof listener !== 'function') throw fail('INVALID_INPUT', `onEvent: listener: expected a function, got ${describe(listener)}`)
  return store[kTelemetry].add(listener)
}

const SYNC = { Session, ResponseWriter }

// ---- threadline/promise ----
// The same classes and methods, each returning a Promise, its native work on libuv's thread
// pool; the property reads that touch the store (info, messages, allMessages, turns,
// tokenTracker, contextFill) are methods. Calls on one object run in the order they are made.

class PromiseSession {
  /** @param {any} options the native session to wrap, with its telemetry */
  constructor(options) {
    if (!options || !options[kNative]) {
      throw fail('INVALID_INPUT', 'Session: in threadline/promise, sessions come from a Store (createSession, openSession)')
    }
    /** @type {NativeSession} */
    this[kNative] = options[kNative]
    /** @type {Telemetry} */
    this[kTelemetry] = options[kTelemetry]
    this[kKind] = PROMISE
    /** @type {Promise<unknown>} */
    this[kQueue] = Promise.resolve()
  }

  get id() {
    return this[kNative].id
  }

  info() {
    return queued(this, SessionSteps.info.call(this))
  }

  /** @param {any} message @param {any} envelope */
  append(message, envelope) {
    return queued(this, SessionSteps.append.call(this, message, envelope))
  }

  /** @param {any} records */
  appendMany(records) {
    return queued(this, SessionSteps.appendMany.call(this, records))
  }

  /** @param {any} name @param {any} data @param {any} envelope */
  appendEvent(name, data, envelope) {
    return queued(this, SessionSteps.appendEvent.call(this, name, data, envelope))
  }

  /** @param {any} records */
  restoreMessages(records) {
    return queued(this, SessionSteps.restoreMessages.call(this, records))
  }

  /** @param {any} state */
  restoreTokenState(state) {
    return queued(this, SessionSteps.restoreTokenState.call(this, state))
  }

  messages() {
    return queued(this, SessionSteps.messages.call(this))
  }

  allMessages() {
    return queued(this, SessionSteps.allMessages.call(this))
  }

  /** @param {any} range */
  envelopes(range) {
    return queued(this, SessionSteps.envelopes.call(this, range))
  }

  /** @param {any} range */
  envelopesAsync(range) {
    return this.envelopes(range)
  }

  turns() {
    return queued(this, SessionSteps.turns.call(this))
  }

  tokenTracker() {
    return queued(this, SessionSteps.tokenTracker.call(this))
  }

  contextFill() {
    return queued(this, SessionSteps.contextFill.call(this))
  }

  /** @param {any} status */
  setStatus(status) {
    return queued(this, SessionSteps.setStatus.call(this, status))
  }

  /** @param {any} changes */
  update(changes) {
    return queued(this, SessionSteps.update.call(this, changes))
  }

  /** @param {any} toolUseId */
  toolCallStarted(toolUseId) {
    return queued(this, SessionSteps.toolCallStarted.call(this, toolUseId))
  }

  /** @param {any} toolUseId @param {any} result */
  recordToolOutcome(toolUseId, result) {
    return queued(this, SessionSteps.recordToolOutcome.call(this, toolUseId, result))
  }

  /** @param {any} filter */
  toolCalls(filter) {
    return queued(this, SessionSteps.toolCalls.call(this, filter))
  }

  /** @param {any} toolUseId */
  cachedToolResult(toolUseId) {
    return queued(this, SessionSteps.cachedToolResult.call(this, toolUseId))
  }

  pendingRepairs() {
    return queued(this, SessionSteps.pendingRepairs.call(this))
  }

  /** @param {any} options */
  recover(options) {
    return queued(this, SessionSteps.recover.call(this, options))
  }

  /** @param {any} options */
  beginResponse(options) {
    return queued(this, SessionSteps.beginResponse.call(this, options))
  }

  snapshot() {
    return queued(this, SessionSteps.snapshot.call(this))
  }

  /**
   * @param {any} format
   * @param {any} [options]
   */
  export(format, options) {
    return queued(this, SessionSteps.export.call(this, format, options))
  }

  verify() {
    return queued(this, SessionSteps.verify.call(this))
  }

  /** @param {any} options */
  buildContext(options) {
    return queued(this, SessionSteps.buildContext.call(this, options))
  }

  /** @param {any} toolUseId */
  readToolOutput(toolUseId) {
    return queued(this, SessionSteps.readToolOutput.call(this, toolUseId))
  }

  /** @param {any} options */
  compactionPlan(options) {
    return queued(this, SessionSteps.compactionPlan.call(this, options))
  }

  /** @param {any} toUuid */
  rewind(toUuid) {
    return queued(this, SessionSteps.rewind.call(this, toUuid))
  }

  branches() {
    return queued(this, SessionSteps.branches.call(this))
  }

  /** @param {any} options */
  compact(options) {
    return queued(this, SessionSteps.compact.call(this, options))
  }

  // Closing marks the handle closed (no work to move off the thread); after the calls made
  // before it.
  close() {
    const done = this[kQueue].then(() => this[kNative].close())
    this[kQueue] = done
    return done
  }
}

class PromiseResponseWriter {
  /**
   * @param {PromiseSession} session
   * @param {NativeResponseWriter} n
   */
  constructor(session, n) {
    this.session = session
    this[kNative] = n
    /** @type {Promise<unknown>} */
    this[kQueue] = Promise.resolve()
  }

  get id() {
    return this[kNative].id
  }

  /** @param {any} chunk */
  push(chunk) {
    return queued(this, WriterSteps.push.call(this, chunk))
  }

  /** @param {any} message */
  finish(message) {
    return queued(this, WriterSteps.finish.call(this, message))
  }

  /** @param {any} error */
  fail(error) {
    return queued(this, WriterSteps.fail.call(this, error))
  }
}

class PromiseStore {
  /**
   * @param {unknown} n a NativeStore (anything else: `new Store()` from outside, refused)
   * @param {number} [slowMs]
   */
  constructor(n, slowMs = DEFAULT_SLOW_MS) {
    checkNativeStore(n)
    this[kNative] = /** @type {NativeStore} */ (n)
    this[kTelemetry] = new Telemetry(slowMs, this[kNative])
    this[kKind] = PROMISE
    /** @type {Promise<unknown>} */
    this[kQueue] = Promise.resolve()
  }

  /**
   * Opens the store at `path` (or the default store) off the main thread.
   * @param {any} path
   * @param {any} options
   */
  static async open(path, options) {
    const o = storeOptions(options, 'open')
    const task = native.openStoreAsync(pathArg(path, 'open'), o.native)
    try {
      return new PromiseStore(await task, o.slowMs)
    } catch (e) {
      throw recode(e)
    }
  }

  /**
   * @param {any} path
   * @param {any} options
   */
  static openAsync(path, options) {
    return PromiseStore.open(path, options)
  }

  /**
   * @param {any} json
   * @param {any} path
   * @param {any} options
   */
  static async importSnapshot(json, path, options) {
    return (await PromiseStore.open(path, options)).importSnapshot(json)
  }

  /** @param {any} json */
  importSnapshot(json) {
    return queued(this, StoreSteps.importSnapshot.call(this, json))
  }

  /** @param {any} id @param {any} options */
  forkSession(id, options) {
    return queued(this, StoreSteps.forkSession.call(this, id, options))
  }

  interruptedSessions() {
    return queued(this, StoreSteps.interruptedSessions.call(this))
  }

  // Registers a telemetry listener at once (no store work); the returned function removes it.
  /** @param {any} listener */
  onEvent(listener) {
    return addListener(this, listener)
  }

  get path() {
    return this[kNative].path
  }

  /** @param {any} options */
  createSession(options) {
    return queued(this, StoreSteps.createSession.call(this, options))
  }

  /** @param {any} id @param {any} options */
  openSession(id, options) {
    return queued(this, StoreSteps.openSession.call(this, id, options))
  }

  /** @param {any} id @param {any} options */
  openSessionAsync(id, options) {
    return this.openSession(id, options)
  }

  /** @param {any} filter */
  listSessions(filter) {
    return queued(this, StoreSteps.listSessions.call(this, filter))
  }

  /** @param {any} query @param {any} options */
  search(query, options) {
    return queued(this, StoreSteps.search.call(this, query, options))
  }

  /** @param {any} options */
  recallTools(options) {
    return queued(this, StoreSteps.recallTools.call(this, options))
  }

  /** @param {any} options */
  verify(options) {
    return queued(this, StoreSteps.verify.call(this, options))
  }

  /** @param {any} source @param {any} options */
  import(source, options) {
    return queued(this, StoreSteps.import.call(this, source, options))
  }

  /** @param {any} id */
  deleteSession(id) {
    return queued(this, StoreSteps.deleteSession.call(this, id))
  }

  stats() {
    return queued(this, StoreSteps.stats.call(this))
  }

  vacuum() {
    return queued(this, StoreSteps.vacuum.call(this))
  }

  /** @param {any} path */
  backup(path) {
    return queued(this, StoreSteps.backup.call(this, path))
  }

  close() {
    return queued(this, (/** @returns {Steps} */ function* (/** @type {any} */ s) { yield call(s[kNative], 'close', []) })(this))
  }
}

// ---- The Claude Agent SDK's session mirror (internal: for threadline/claude-agent-sdk) ----
// `store[Symbol.for('threadline.claudeCode')](op, ...args)` on either API's Store, op one of
// 'append' (key, entries, sidecar?), 'load' (key), 'sessions' (projectKey), 'subkeys'
// (sessionId), 'delete' (key): the SDK's SessionStore calls, run as steps like every method (the
// promise Store queues them on the thread pool). Not in index.d.ts: the adapter is its API.
const kClaudeCode = Symbol.for('threadline.claudeCode')

/**
 * @this {any}
 * @param {any} op
 * @param {any[]} args
 * @returns {Steps}
 */
function* claudeCodeSteps(op, args) {
  const what = `claudeCode ${typeof op === 'string' ? op : ''}`.trim()
  const tel = this[kTelemetry]
  /** @param {any} key */
  const keyJson = (key) => {
    if (key === null || typeof key !== 'object' || Array.isArray(key)) throw fail('INVALID_INPUT', `${what}: key: expected an object, got ${describe(key)}`)
    return toJson(key, `${what}: key`)
  }
  /** @param {any} s @param {string} name */
  const text = (s, name) => {
    if (typeof s !== 'string' || s === '') throw fail('INVALID_INPUT', `${what}: ${name}: expected a non-empty string, got ${describe(s)}`)
    return s
  }
  /** @param {any} key */
  const sidOf = (key) => (typeof key.sessionId === 'string' ? key.sessionId : undefined)
  switch (op) {
    case 'append': {
      const [key, entries, sidecar] = args
      const k = keyJson(key)
      if (!Array.isArray(entries)) throw fail('INVALID_INPUT', `${what}: entries: expected an array, got ${describe(entries)}`)
      if (sidecar !== undefined && sidecar !== null && (typeof sidecar !== 'object' || Array.isArray(sidecar))) {
        throw fail('INVALID_INPUT', `${what}: sidecar: expected an object, got ${describe(sidecar)}`)
      }
      const out = yield call(this[kNative], 'claudeCodeAppend', [k, toJson(entries, `${what}: entries`), optJson(sidecar, `${what}: sidecar`)], { op: 'claudeCodeAppend', tel, sid: sidOf(key) })
      return JSON.parse(out)
    }
    case 'load': {
      const out = yield call(this[kNative], 'claudeCodeLoad', [keyJson(args[0])], { op: 'claudeCodeLoad', tel, sid: sidOf(args[0]) })
      return out === null ? null : JSON.parse(out)
    }
    case 'sessions':
      return JSON.parse(yield call(this[kNative], 'claudeCodeSessions', [text(args[0], 'projectKey')], { op: 'claudeCodeSessions', tel }))
    case 'subkeys':
      return JSON.parse(yield call(this[kNative], 'claudeCodeSubkeys', [text(args[0], 'sessionId')], { op: 'claudeCodeSubkeys', tel }))
    case 'delete':
      yield call(this[kNative], 'claudeCodeDelete', [keyJson(args[0])], { op: 'claudeCodeDelete', tel, sid: sidOf(args[0]) })
      return undefined
    default:
      throw fail('INVALID_INPUT', `claudeCode: op: expected 'append', 'load', 'sessions', 'subkeys' or 'delete', got ${describe(op)}`)
  }
}

Object.defineProperty(Store.prototype, kClaudeCode, {
  /** @param {any} op @param {...any} args */
  value(op, ...args) {
    return runSync(claudeCodeSteps.call(this, op, args))
  },
})

Object.defineProperty(PromiseStore.prototype, kClaudeCode, {
  /** @param {any} op @param {...any} args */
  value(op, ...args) {
    return queued(this, claudeCodeSteps.call(this, op, args))
  },
})

const PROMISE = { Session: PromiseSession, ResponseWriter: PromiseResponseWriter }

// Checks messages the way the provider checks a request; returns the problems, [] when valid.
/**
 * @param {any} messages
 * @param {any} [options]
 */
function validateMessages(messages, options) {
  if (!isArray(messages, 'validateMessages')) throw fail('INVALID_INPUT', `validateMessages: expected an array, got ${describe(messages)}`)
  const o = object(options, 'validateMessages: options') ?? {}
  for (const k of Object.keys(o)) {
    if (k !== 'target') throw fail('INVALID_INPUT', `validateMessages: options.${k}: unknown option (expected target)`)
  }
  const target = o.target ?? 'anthropic'
  if (typeof target !== 'string') throw fail('INVALID_INPUT', `validateMessages: options.target: expected a string, got ${describe(target)}`)
  return JSON.parse(native.validateMessages(toJson(messages, 'validateMessages'), target))
}

// Provider converters: neutral messages (the stored Anthropic wire shape) to and from the request
// and response shapes of Anthropic, OpenAI Chat Completions and the OpenAI Responses API. The
// native side converts and checks; this only shapes arguments.
/**
 * @param {'toAnthropic' | 'fromAnthropic' | 'toOpenAIChat' | 'fromOpenAIChat' | 'toOpenAIResponses' | 'fromOpenAIResponses'} name
 * @param {any} list
 * @param {any} options
 * @param {string} what
 */
function convertCall(name, list, options, what) {
  if (!isArray(list, name)) throw fail('INVALID_INPUT', `${name}: expected an array of ${what}, got ${describe(list)}`)
  const opts = object(options, `${name}: options`)
  return JSON.parse(native[name](toJson(list, name), optionsJson(opts, `${name}: options`)))
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function toAnthropic(messages, options) {
  return convertCall('toAnthropic', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function fromAnthropic(messages, options) {
  return convertCall('fromAnthropic', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function toOpenAIChat(messages, options) {
  return convertCall('toOpenAIChat', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function fromOpenAIChat(messages, options) {
  return convertCall('fromOpenAIChat', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function toOpenAIResponses(messages, options) {
  return convertCall('toOpenAIResponses', messages, options, 'messages')
}

// `items` may be a string, as the Responses API's `input` may: one user message.
/**
 * @param {any} items
 * @param {any} [options]
 */
function fromOpenAIResponses(items, options) {
  const list = typeof items === 'string' ? [{ role: 'user', content: items }] : items
  return convertCall('fromOpenAIResponses', list, options, 'items')
}

module.exports = {
  Store,
  Session,
  validateMessages,
  toAnthropic,
  fromAnthropic,
  toOpenAIChat,
  fromOpenAIChat,
  toOpenAIResponses,
  fromOpenAIResponses,
  defaultStorePath: native.defaultStorePath,
  ERROR_CODES: Object.freeze([...CODES]),
}

// threadline/promise (promise.js) takes its classes from here, so both entry points share one
// native binding and one set of helpers.
Object.defineProperty(module.exports, Symbol.for('threadline.promise'), {
  value: Object.freeze({ Store: PromiseStore, Session: PromiseSession, ResponseWriter: PromiseResponseWriter }),
})
