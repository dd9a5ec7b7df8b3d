// @ts-check
'use strict'

const { fail, describe } = require('./errors.js')
const { kTelemetry } = require('./symbols.js')

/** @typedef {import('../native.js').NativeStore} NativeStore */
/** @typedef {(event: Record<string, unknown>) => void} Listener */

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

  // What the store found and handled on its own (log_damaged, log_deleted, log_unreplayed,
  // records_lost), reported after the operation that found it (or the first one observed after it).
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

// What `observed` and `observedAsync` report of a call that threw (its error, returned to be
// rethrown) and of one that ended (slow or not), with telemetry on.
/**
 * @param {Telemetry} tel
 * @param {string | undefined} sessionId
 * @param {string} operation
 * @param {unknown} err
 */
function failed(tel, sessionId, operation, err) {
  const e = /** @type {any} */ (err)
  if (e && PERSIST_CODES.has(e.code)) {
    tel.emit({ type: 'persist_error', sessionId, operation, code: e.code, message: e.message })
  }
  return e
}

/**
 * @param {Telemetry} tel
 * @param {string | undefined} sessionId
 * @param {string} operation
 * @param {number} t0
 */
function ended(tel, sessionId, operation, t0) {
  const ms = performance.now() - t0
  if (ms >= tel.slowMs) tel.emit({ type: 'slow_operation', sessionId, operation, durationMs: Math.round(ms * 1000) / 1000, thresholdMs: tel.slowMs })
  tel.notices()
}

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
    throw failed(tel, sessionId, operation, err)
  } finally {
    ended(tel, sessionId, operation, t0)
  }
}

const DEFAULT_SLOW_MS = 100

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
    throw failed(tel, sessionId, operation, err)
  } finally {
    ended(tel, sessionId, operation, t0)
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

module.exports = { Telemetry, observed, observedAsync, addListener, DEFAULT_SLOW_MS }
