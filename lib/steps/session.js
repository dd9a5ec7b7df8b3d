// @ts-check
'use strict'
// The steps of Session's methods, run by both APIs (lib/run.js), and the recovery's replay.

const { fail, describe, shown } = require('../errors.js')
const { kNative, kTelemetry, kKind } = require('../symbols.js')
const { object, isArray, checkRecord, resultInput, rangeOf, idArg } = require('../args.js')
const { MAYBE_LONE_SURROGATE, hasLoneSurrogate, checkFinite, toJson, optJson, optionsJson } = require('../json.js')
const { envelopeOf, appendArgs } = require('../envelope.js')
const { allPages } = require('../pages.js')
const { call, sessionCall } = require('../run.js')

/** @typedef {import('../run.js').Steps} Steps */

const EXPORT_FORMATS = ['claude-code', 'markdown', 'html', 'snapshot']

/**
 * @param {Record<string, unknown>} o
 * @returns {Record<string, unknown>}
 */
function withoutNulls(o) {
  for (const k of Object.keys(o)) if (o[k] === null && k !== 'input') delete o[k]
  return o
}

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

module.exports = { SessionSteps }
