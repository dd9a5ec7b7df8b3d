// @ts-check
'use strict'
// The steps of Store's methods, run by both APIs (lib/run.js), and the checks of import's arguments.

const { path: nodePath } = require('../binding.js')
const { fail, recode, describe, shown } = require('../errors.js')
const { kNative, kTelemetry, kKind, kQueue, kStore } = require('../symbols.js')
const { object, idArg, promptKeyOf } = require('../args.js')
const { toJson, optJson, optionsJson } = require('../json.js')
const { call, runSync, queued } = require('../run.js')

/** @typedef {import('../../native.js').NativeSession} NativeSession */
/** @typedef {import('../run.js').Steps} Steps */

/**
 * @param {any} store
 * @param {NativeSession} n
 */
function wrapSession(n, store) {
  const session = new store[kKind].Session({ [kNative]: n, [kTelemetry]: store[kTelemetry] })
  session[kStore] = store
  return session
}

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
        // A promise Store (it has a queue of calls) queues the call; a synchronous one makes it now.
        if (store[kQueue]) return queued(store, steps)
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

module.exports = { StoreSteps, wrapSession }
