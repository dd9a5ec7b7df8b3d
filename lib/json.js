// @ts-check
'use strict'
// Caller values to JSON text for the native side: what JSON.stringify cannot encode is
// INVALID_INPUT with the path of the offending field.

const { fail } = require('./errors.js')

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

module.exports = { MAYBE_LONE_SURROGATE, hasLoneSurrogate, checkFinite, toJson, optJson, optionsJson }
