// @ts-check
'use strict'
// Errors with a stable code (docs/errors.md): the codes, how the facade makes one, how an async
// task's rejection becomes one, and how a message shows what the caller gave.

/** @typedef {Error & { code: string }} CodedError */

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

/** A value in an error message: a string as it is, anything else by its kind. @param {unknown} v */
function shown(v) {
  return typeof v === 'string' ? `'${v}'` : describe(v)
}

module.exports = { CODES, fail, recode, describe, isThenable, shown }
