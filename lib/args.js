// @ts-check
'use strict'
// Checks of the arguments callers give: each refusal is INVALID_INPUT, naming the method and the
// offending field, and saying what was given.

const { native, path: nodePath, fs: nodeFs } = require('./binding.js')
const { fail, describe, isThenable } = require('./errors.js')
const { optionsJson } = require('./json.js')
const { DEFAULT_SLOW_MS } = require('./telemetry.js')

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

/**
 * `new Store()` from outside is refused: a Store comes from Store.open.
 * @param {unknown} n
 */
function checkNativeStore(n) {
  if (!(n instanceof native.NativeStore)) {
    throw fail('INVALID_INPUT', 'Store: use Store.open(path, options) or Store.openAsync(path, options)')
  }
}

module.exports = {
  object,
  isArray,
  checkRecord,
  resultInput,
  rangeOf,
  pathArg,
  idArg,
  storeOptions,
  promptKeyOf,
  checkNativeStore,
}
