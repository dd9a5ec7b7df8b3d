// @ts-check
'use strict'
// The JS facade over the native module: values cross as JSON text (JSON.stringify here,
// serde_json in Rust), bulk reads come back as one-byte JSON pages parsed here. The native side
// owns validation, storage and state; this file only shapes arguments and results.
//
// Type-checked (tsc: allowJs, checkJs, strict) against native.d.ts, the declarations napi-rs
// generates for the native module; index.d.ts is the public contract. Values given by callers
// are typed `any` here: they are unchecked input, validated below or on the native side.

const native = loadNative()

// The generated loader (native.js) tries this folder, then the platform package
// (threadline-<platform>). When both fail, say which package was wanted and how to get it.
/** @returns {typeof import('./native.js')} */
function loadNative() {
  try {
    return require('./native.js')
  } catch (cause) {
    const report = /** @type {{ header?: { glibcVersionRuntime?: string } } | undefined} */ (process.report?.getReport())
    const libc = process.platform === 'linux' ? (report?.header?.glibcVersionRuntime ? '-gnu' : '-musl') : ''
    const abi = process.platform === 'win32' ? '-msvc' : libc
    const err = new Error(
      `threadline: could not load the native binary for ${process.platform}-${process.arch}${abi} ` +
        `(package threadline-${process.platform}-${process.arch}${abi}). Prebuilt binaries exist for linux x64/arm64 ` +
        '(glibc >= 2.17, musl), darwin x64/arm64 and win32 x64/arm64, installed as optional dependencies: ' +
        'reinstall without --omit=optional / --no-optional, and keep the lockfile from another platform out of the way ' +
        '(delete node_modules and package-lock.json, then npm install). Elsewhere, build from a clone (needs Rust). ' +
        `Cause: ${cause instanceof Error ? cause.message.split('\n')[0] : String(cause)}`,
    )
    err.cause = cause
    throw err
  }
}

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

/** @param {unknown} v */
function describe(v) {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
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
  if (input === null || typeof input !== 'object' || isArray(input, what)) {
    throw fail('INVALID_INPUT', `${what}: expected a message, an envelope or a string, got ${describe(input)}`)
  }
}

const kNative = Symbol('native')
const kTelemetry = Symbol('telemetry')

// Telemetry: structured events for a store's listeners, and JSON lines on stdout when
// THREADLINE_TELEMETRY=console. Off (no listener, no env) it costs one property check per call.
class Telemetry {
  /** @param {number} slowMs */
  constructor(slowMs) {
    /** @type {Listener[]} */
    this.listeners = []
    this.console = process.env.THREADLINE_TELEMETRY === 'console'
    this.slowMs = slowMs
    this.on = this.console
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
  }
}

const DEFAULT_SLOW_MS = 100

// A session's native call, observed by its store's telemetry when that is on.
/**
 * @template T
 * @param {Session} session
 * @param {string} operation
 * @param {() => T} fn
 * @returns {T}
 */
function run(session, operation, fn) {
  return observed(session[kTelemetry], session[kNative].id, operation, fn)
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
      return
    }
    this[kNative] = new native.NativeSession(optionsJson(object(options, 'Session: options'), 'Session: options'))
    this[kTelemetry] = new Telemetry(DEFAULT_SLOW_MS)
  }


  get id() {
    return this[kNative].id
  }

  get info() {
    return JSON.parse(this[kNative].info())
  }

  /**
   * @param {any} message
   * @param {any} envelope
   */
  append(message, envelope) {
    checkRecord(message, 'append')
    const extra = object(envelope, 'append: envelope')
    const text = toJson(message, 'append')
    const extraText = optJson(extra, 'append: envelope')
    const filled = JSON.parse(run(this, 'append', () => this[kNative].append(text, extraText)))
    return envelopeOf(message, extra, filled)
  }

  /**
   * @param {any} records
   */
  appendMany(records) {
    if (!isArray(records, 'appendMany')) throw fail('INVALID_INPUT', `appendMany: expected an array, got ${describe(records)}`)
    records.forEach((r, i) => checkRecord(r, `appendMany: [${i}]`))
    const text = toJson(records, 'appendMany')
    const filled = JSON.parse(run(this, 'appendMany', () => this[kNative].appendMany(text)))
    return records.map((r, i) => envelopeOf(r, null, filled[i]))
  }

  /**
   * @param {any} name
   * @param {any} data
   * @param {any} envelope
   */
  appendEvent(name, data, envelope) {
    if (typeof name !== 'string' || name === '') {
      throw fail('INVALID_INPUT', `appendEvent: name: expected a non-empty string, got ${describe(name)}`)
    }
    const extra = object(envelope, 'appendEvent: envelope')
    const dataJson = data === undefined ? null : toJson(data, 'appendEvent: data')   // null is kept as null
    const extraText = optJson(extra, 'appendEvent: envelope')
    return JSON.parse(run(this, 'appendEvent', () => this[kNative].appendEvent(name, dataJson, extraText)))
  }

  /**
   * @param {any} records
   */
  restoreMessages(records) {
    if (!isArray(records, 'restoreMessages')) throw fail('INVALID_INPUT', `restoreMessages: expected an array, got ${describe(records)}`)
    let text = toJson(records, 'restoreMessages')
    // A record holding a lone UTF-16 surrogate (not valid Unicode) is skipped and reported like
    // any unreadable line, not allowed to fail the whole restore. JSON.stringify writes lone
    // surrogates as escapes, so a cheap scan finds the rare text that needs the per-record look.
    /** @type {number[]} */
    let broken = []
    if (MAYBE_LONE_SURROGATE.test(text)) {
      broken = records.flatMap((r, i) => (hasLoneSurrogate(r) ? [i] : []))
      if (broken.length > 0) text = toJson(records.map((r, i) => (broken.includes(i) ? null : r)), 'restoreMessages')
    }
    const report = JSON.parse(run(this, 'restoreMessages', () => this[kNative].restoreMessages(text)))
    for (const entry of report.skipped) {
      if (broken.includes(entry.index)) entry.reason = 'a string holds a lone UTF-16 surrogate, which is not valid Unicode text'
    }
    return report
  }

  /**
   * @param {any} state
   */
  restoreTokenState(state) {
    const o = object(state, 'restoreTokenState: state') ?? {}
    checkFinite(o, 'restoreTokenState: state')
    this[kNative].restoreTokenState(toJson(o, 'restoreTokenState'))
  }

  get messages() {
    return run(this, 'messages', () => readPages(this[kNative].readMessages(false), 'messages'))
  }

  get allMessages() {
    return run(this, 'allMessages', () => readPages(this[kNative].readMessages(true), 'allMessages'))
  }

  /**
   * @param {any} range
   */
  envelopes(range) {
    const { fromSeq, limit } = rangeOf(range, 'envelopes')
    return readPages(this[kNative].readEnvelopes(fromSeq, limit === Infinity ? Number.MAX_SAFE_INTEGER : limit), 'envelopes')
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
    return JSON.parse(this[kNative].turns())
  }

  get tokenTracker() {
    return JSON.parse(this[kNative].tokenTracker())
  }

  get contextFill() {
    return JSON.parse(this[kNative].contextFill())
  }

  /**
   * @param {any} status
   */
  setStatus(status) {
    if (typeof status !== 'string') throw fail('INVALID_INPUT', `setStatus: status: expected a string, got ${describe(status)}`)
    this[kNative].setStatus(status)
  }

  // --- recovery: the tool-call journal ---

  /**
   * @param {any} toolUseId
   */
  toolCallStarted(toolUseId) {
    const id = idArg(toolUseId, 'toolCallStarted', 'toolUseId')
    run(this, 'toolCallStarted', () => this[kNative].toolCallStarted(id))
  }

  /**
   * @param {any} toolUseId
   * @param {any} result
   */
  recordToolOutcome(toolUseId, result) {
    const id = idArg(toolUseId, 'recordToolOutcome', 'toolUseId')
    const text = toJson(resultInput(result, 'recordToolOutcome: result'), 'recordToolOutcome: result')
    run(this, 'recordToolOutcome', () => this[kNative].recordToolOutcome(id, text))
  }

  /**
   * @param {any} filter
   */
  toolCalls(filter) {
    const f = object(filter, 'toolCalls: filter') ?? {}
    if (f.state !== undefined && typeof f.state !== 'string') {
      throw fail('INVALID_INPUT', `toolCalls: filter.state: expected a string, got ${describe(f.state)}`)
    }
    return JSON.parse(this[kNative].toolCalls(f.state ?? null)).map(withoutNulls)
  }

  /**
   * @param {any} toolUseId
   */
  cachedToolResult(toolUseId) {
    const text = this[kNative].cachedToolResult(idArg(toolUseId, 'cachedToolResult', 'toolUseId'))
    return text === null || text === undefined ? null : JSON.parse(text)
  }

  pendingRepairs() {
    return JSON.parse(this[kNative].pendingRepairs())
  }

  /**
   * @param {any} options
   */
  async recover(options) {
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
    const replayed = o.isSafe ? await replaySafe(this, o.isSafe, o.replay) : []
    const report = JSON.parse(run(this, 'recover', () => this[kNative].recover(JSON.stringify({ unknownOutcome, replayed }))))
    const tel = this[kTelemetry]
    if (tel && tel.on) {
      const sessionId = this.id
      for (const repair of report.repairs) tel.emit({ type: 'repair', sessionId, repair })
      tel.emit({ type: 'recovery', sessionId, repairs: report.repairs.length, recordsWritten: report.recordsWritten, durationMs: Math.round((performance.now() - t0) * 1000) / 1000 })
    }
    return report
  }

  // --- recovery: streaming, snapshots ---

  /**
   * @param {any} options
   */
  beginResponse(options) {
    const o = object(options, 'beginResponse: options')
    return new ResponseWriter(this, this[kNative].beginResponse(optionsJson(o, 'beginResponse: options')))
  }

  snapshot() {
    return run(this, 'snapshot', () => this[kNative].snapshot())
  }

  // Checks every record of the session (checksums, none missing, blobs); the report lists each
  // damaged record instead of stopping at the first.
  verify() {
    return JSON.parse(run(this, 'verify', () => this[kNative].verify()))
  }

  // --- context ---

  /**
   * @param {any} options
   */
  buildContext(options) {
    const o = object(options, 'buildContext: options')
    if (!o) throw fail('INVALID_INPUT', 'buildContext: options: required ({ target })')
    const text = /** @type {string} */ (optionsJson(o, 'buildContext: options'))
    return JSON.parse(run(this, 'buildContext', () => this[kNative].buildContext(text)))
  }

  /**
   * @param {any} toolUseId
   */
  readToolOutput(toolUseId) {
    const id = idArg(toolUseId, 'readToolOutput', 'toolUseId')
    return JSON.parse(run(this, 'readToolOutput', () => this[kNative].readToolOutput(id)))
  }

  /**
   * @param {any} options
   */
  compactionPlan(options) {
    const o = object(options, 'compactionPlan: options')
    if (!o) throw fail('INVALID_INPUT', 'compactionPlan: options: required ({ targetTokens })')
    return JSON.parse(this[kNative].compactionPlan(/** @type {string} */ (optionsJson(o, 'compactionPlan: options'))))
  }

  /**
   * @param {any} toUuid
   */
  rewind(toUuid) {
    const id = idArg(toUuid, 'rewind', 'toUuid')
    run(this, 'rewind', () => this[kNative].rewind(id))
  }

  branches() {
    return JSON.parse(this[kNative].branches())
  }

  /**
   * @param {any} options
   */
  compact(options) {
    const o = object(options, 'compact: options')
    if (!o) throw fail('INVALID_INPUT', 'compact: options: required ({ summary })')
    const text = /** @type {string} */ (optionsJson(o, 'compact: options'))
    return JSON.parse(run(this, 'compact', () => this[kNative].compact(text)))
  }

  close() {
    this[kNative].close()
  }
}

// Re-runs, once, each started call with no outcome that the caller says is safe, and records
// its real result in the journal (a failed replay is recorded as an is_error result).
/**
 * @param {Session} session
 * @param {(call: any) => boolean} isSafe
 * @param {(call: any) => unknown} replay
 * @returns {Promise<string[]>}
 */
async function replaySafe(session, isSafe, replay) {
  const unknown = new Set(session.pendingRepairs().filter((/** @type {any} */ r) => r.kind === 'unknown_outcome').map((/** @type {any} */ r) => r.toolUseId))
  /** @type {string[]} */
  const replayed = []
  for (const call of session.toolCalls({ state: 'started' })) {
    if (!unknown.has(call.id) || !isSafe(call)) continue
    let result
    try {
      result = resultInput(await replay(call), `recover: replay(${call.id})`)
    } catch (err) {
      const e = /** @type {any} */ (err)
      if (e && e.code === 'INVALID_INPUT') throw e
      result = { content: `Replay failed: ${e && e.message ? e.message : String(e)}`, is_error: true }
    }
    session.recordToolOutcome(call.id, result)
    replayed.push(call.id)
  }
  return replayed
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

  /**
   * @param {any} chunk
   */
  push(chunk) {
    if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) {
      throw fail('INVALID_INPUT', `push: chunk: expected an object, got ${describe(chunk)}`)
    }
    const text = toJson(chunk, 'push: chunk')
    run(this.session, 'push', () => this[kNative].push(text))
  }

  /**
   * @param {any} message
   */
  finish(message) {
    const text = message === undefined || message === null ? null : toJson(object(message, 'finish: message'), 'finish: message')
    return JSON.parse(run(this.session, 'finish', () => this[kNative].finish(text)))
  }

  /**
   * @param {any} error
   */
  fail(error) {
    const e = object(error, 'fail: error')
    if (!e || typeof e.message !== 'string') throw fail('INVALID_INPUT', 'fail: error.message: expected a string')
    if (e.code !== undefined && typeof e.code !== 'string') throw fail('INVALID_INPUT', 'fail: error.code: expected a string')
    return JSON.parse(run(this.session, 'fail', () => this[kNative].fail(e.message, e.code ?? null)))
  }
}

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
 * @param {NativeSession} n
 * @param {Telemetry} telemetry
 */
function wrapSession(n, telemetry) {
  return new Session({ [kNative]: n, [kTelemetry]: telemetry })
}

/**
 * @param {unknown} path
 * @param {string} what
 * @returns {string | null}
 */
function pathArg(path, what) {
  if (path === undefined || path === null) return null
  if (typeof path !== 'string') throw fail('INVALID_INPUT', `${what}: path: expected a string, got ${describe(path)}`)
  return path
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

class Store {
  /**
   * @param {unknown} n a NativeStore (anything else: `new Store()` from outside, refused)
   * @param {number} [slowMs]
   */
  constructor(n, slowMs = DEFAULT_SLOW_MS) {
    if (!(n instanceof native.NativeStore)) {
      throw fail('INVALID_INPUT', 'Store: use Store.open(path, options) or Store.openAsync(path, options)')
    }
    this[kNative] = n
    this[kTelemetry] = new Telemetry(slowMs)
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

  /**
   * @param {any} json
   */
  importSnapshot(json) {
    if (typeof json !== 'string') throw fail('INVALID_INPUT', `importSnapshot: expected a JSON string, got ${describe(json)}`)
    const tel = this[kTelemetry]
    return wrapSession(observed(tel, undefined, 'importSnapshot', () => this[kNative].importSnapshot(json)), tel)
  }

  /**
   * @param {any} id
   * @param {any} options
   */
  forkSession(id, options) {
    const sid = idArg(id, 'forkSession')
    const o = object(options, 'forkSession: options') ?? {}
    for (const k of Object.keys(o)) {
      if (k !== 'atUuid' && k !== 'title') throw fail('INVALID_INPUT', `forkSession: options.${k}: unknown option (expected atUuid, title)`)
      if (o[k] !== undefined && typeof o[k] !== 'string') throw fail('INVALID_INPUT', `forkSession: options.${k}: expected a string, got ${describe(o[k])}`)
    }
    const tel = this[kTelemetry]
    return wrapSession(observed(tel, sid, 'forkSession', () => this[kNative].forkSession(sid, o.atUuid ?? null, o.title ?? null)), tel)
  }

  interruptedSessions() {
    const found = JSON.parse(this[kNative].interruptedSessions())
    const tel = this[kTelemetry]
    if (tel.on) for (const info of found) tel.emit({ type: 'interrupted_session', sessionId: info.id, session: info })
    return found
  }

  /**
   * @param {any} listener
   */
  onEvent(listener) {
    if (typeof listener !== 'function') throw fail('INVALID_INPUT', `onEvent: listener: expected a function, got ${describe(listener)}`)
    return this[kTelemetry].add(listener)
  }

  get path() {
    return this[kNative].path
  }

  /**
   * @param {any} options
   */
  createSession(options) {
    return wrapSession(this[kNative].createSession(optionsJson(object(options, 'createSession: options'), 'createSession: options')), this[kTelemetry])
  }

  /**
   * @param {any} id
   * @param {any} options
   */
  openSession(id, options) {
    const sid = idArg(id, 'openSession')
    const key = promptKeyOf(options, 'openSession')
    const tel = this[kTelemetry]
    return wrapSession(observed(tel, sid, 'openSession', () => this[kNative].openSession(sid, key)), tel)
  }

  /**
   * @param {any} id
   * @param {any} options
   */
  async openSessionAsync(id, options) {
    const task = this[kNative].openSessionAsync(idArg(id, 'openSessionAsync'), promptKeyOf(options, 'openSessionAsync'))
    try {
      return wrapSession(/** @type {NativeSession} */ (await task), this[kTelemetry])
    } catch (e) {
      throw recode(e)
    }
  }

  /**
   * @param {any} filter
   */
  listSessions(filter) {
    return JSON.parse(this[kNative].listSessions(optionsJson(object(filter, 'listSessions: filter'), 'listSessions: filter')))
  }

  /**
   * @param {any} query
   * @param {any} options
   */
  search(query, options) {
    if (typeof query !== 'string') throw fail('INVALID_INPUT', `search: query: expected a string, got ${describe(query)}`)
    const o = optionsJson(object(options, 'search: options'), 'search: options')
    return JSON.parse(observed(this[kTelemetry], undefined, 'search', () => this[kNative].search(query, o)))
  }

  // Tool definitions for the three providers, and one handler that answers a model's call with a
  // tool_result block (a model's mistakes are is_error results, never throws).
  /**
   * @param {any} options
   */
  recallTools(options) {
    const o = optionsJson(object(options, 'recallTools: options'), 'recallTools: options')
    const native = this[kNative]
    const tools = JSON.parse(native.recallTools(o))
    return {
      ...tools,
      /** @param {any} call */
      async handle(call) {
        let text
        try {
          text = JSON.stringify(call ?? null)
        } catch (e) {
          text = 'null'
        }
        return JSON.parse(native.recallHandle(o, text ?? 'null'))
      },
    }
  }

  // SQLite's check of the file, then every session as session.verify() checks it, then the blobs.
  /**
   * @param {any} options
   */
  verify(options) {
    const o = object(options, 'verify: options') ?? {}
    for (const k of Object.keys(o)) {
      if (k !== 'quick') throw fail('INVALID_INPUT', `verify: options.${k}: unknown option (expected quick)`)
      if (o[k] !== undefined && typeof o[k] !== 'boolean') throw fail('INVALID_INPUT', `verify: options.${k}: expected a boolean, got ${describe(o[k])}`)
    }
    return JSON.parse(observed(this[kTelemetry], undefined, 'verify', () => this[kNative].verify(optJson({ quick: o.quick ?? false }, 'verify: options'))))
  }

  /**
   * @param {any} id
   */
  deleteSession(id) {
    this[kNative].deleteSession(idArg(id, 'deleteSession'))
  }

  close() {
    this[kNative].close()
  }
}

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
