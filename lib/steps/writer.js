// @ts-check
'use strict'
// The steps of ResponseWriter's methods, run by both APIs (lib/run.js).

const { fail, describe } = require('../errors.js')
const { kNative, kTelemetry } = require('../symbols.js')
const { object } = require('../args.js')
const { toJson } = require('../json.js')
const { call } = require('../run.js')

/** @typedef {import('../run.js').Call} Call */
/** @typedef {import('../run.js').Steps} Steps */

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

module.exports = { WriterSteps }
