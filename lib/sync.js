// @ts-check
'use strict'
// The classes of `threadline`: each method runs its steps at once (lib/run.js).

const { native } = require('./binding.js')
const { recode } = require('./errors.js')
const { kNative, kTelemetry, kKind } = require('./symbols.js')
const { object, rangeOf, idArg, storeOptions, pathArg, promptKeyOf, checkNativeStore } = require('./args.js')
const { optionsJson } = require('./json.js')
const { envelopeOf, appendArgs } = require('./envelope.js')
const { parsePage } = require('./pages.js')
const { Telemetry, addListener, DEFAULT_SLOW_MS } = require('./telemetry.js')
const { callNow, runSync, runFrom, runWaiting } = require('./run.js')
const { SessionSteps } = require('./steps/session.js')
const { watchSession } = require('./watch.js')
const { watchStore } = require('./store-watch.js')
const { WriterSteps } = require('./steps/writer.js')
const { StoreSteps, wrapSession } = require('./steps/store.js')

/** @typedef {import('../native.js').NativeSession} NativeSession */
/** @typedef {import('../native.js').NativeStore} NativeStore */
/** @typedef {import('../native.js').NativeResponseWriter} NativeResponseWriter */

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
      /** @type {import('../native.js').NativePage} */
      let page
      try {
        page = /** @type {import('../native.js').NativePage} */ (await n.envelopesPageAsync(from, Math.min(limit - out.length, Number.MAX_SAFE_INTEGER)))
      } catch (e) {
        throw recode(e)
      }
      out = out.concat(parsePage(page.json, 'envelopesAsync'))
      from = page.next
    }
    return out
  }

  // Each committed record from options.fromSeq on (default: those committed after this call), as
  // any process commits them; lib/watch.js.
  /** @param {any} [options] */
  watch(options) {
    return watchSession(this, options)
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

  // Every change to the store's sessions (or a project's, or one session's), as any process
  // commits it; lib/store-watch.js.
  /** @param {any} options */
  watch(options) {
    return watchStore(this, options)
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

const SYNC = { Session, ResponseWriter }

module.exports = { Session, ResponseWriter, Store }
