// @ts-check
'use strict'
// The classes of threadline/promise: the same classes and methods as lib/sync.js, each returning
// a Promise, its native work on libuv's thread pool; the property reads that touch the store
// (info, messages, allMessages, turns, tokenTracker, contextFill) are methods. Calls on one object
// run in the order they are made.

const { native } = require('./binding.js')
const { fail, recode } = require('./errors.js')
const { kNative, kTelemetry, kKind, kQueue } = require('./symbols.js')
const { storeOptions, pathArg, checkNativeStore } = require('./args.js')
const { Telemetry, addListener, DEFAULT_SLOW_MS } = require('./telemetry.js')
const { call, queued } = require('./run.js')
const { SessionSteps } = require('./steps/session.js')
const { watchSession } = require('./watch.js')
const { watchStore } = require('./store-watch.js')
const { WriterSteps } = require('./steps/writer.js')
const { StoreSteps } = require('./steps/store.js')

/** @typedef {import('../native.js').NativeSession} NativeSession */
/** @typedef {import('../native.js').NativeStore} NativeStore */
/** @typedef {import('../native.js').NativeResponseWriter} NativeResponseWriter */
/** @typedef {import('./run.js').Steps} Steps */

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

  // Each committed record from options.fromSeq on (default: those committed after this call), as
  // any process commits them; lib/watch.js.
  /** @param {any} [options] */
  watch(options) {
    return watchSession(this, options)
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

const PROMISE = { Session: PromiseSession, ResponseWriter: PromiseResponseWriter }

module.exports = { Session: PromiseSession, ResponseWriter: PromiseResponseWriter, Store: PromiseStore }
