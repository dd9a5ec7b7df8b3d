// @ts-check
'use strict'
// The Claude Agent SDK's session mirror (internal: for threadline/claude-agent-sdk).
// `store[Symbol.for('threadline.claudeCode')](op, ...args)` on either API's Store, op one of
// 'append' (key, entries, sidecar?), 'load' (key), 'sessions' (projectKey), 'subkeys'
// (sessionId), 'delete' (key): the SDK's SessionStore calls, and 'release' (key): let go of the
// session an append keeps claimed; run as steps like every method (the promise Store queues them
// on the thread pool). Not in index.d.ts: the adapter is its API.

const { kNative, kTelemetry } = require('./symbols.js')
const { fail, describe } = require('./errors.js')
const { toJson, optJson } = require('./json.js')
const { call, runSync, queued } = require('./run.js')
const { Store } = require('./sync.js')
const { Store: PromiseStore } = require('./promise.js')

/** @typedef {import('./run.js').Steps} Steps */

const kClaudeCode = Symbol.for('threadline.claudeCode')

/**
 * @this {any}
 * @param {any} op
 * @param {any[]} args
 * @returns {Steps}
 */
function* claudeCodeSteps(op, args) {
  const what = `claudeCode ${typeof op === 'string' ? op : ''}`.trim()
  const tel = this[kTelemetry]
  /** @param {any} key */
  const keyJson = (key) => {
    if (key === null || typeof key !== 'object' || Array.isArray(key)) throw fail('INVALID_INPUT', `${what}: key: expected an object, got ${describe(key)}`)
    return toJson(key, `${what}: key`)
  }
  /** @param {any} s @param {string} name */
  const text = (s, name) => {
    if (typeof s !== 'string' || s === '') throw fail('INVALID_INPUT', `${what}: ${name}: expected a non-empty string, got ${describe(s)}`)
    return s
  }
  /** @param {any} key */
  const sidOf = (key) => (typeof key.sessionId === 'string' ? key.sessionId : undefined)
  switch (op) {
    case 'append': {
      const [key, entries, sidecar] = args
      const k = keyJson(key)
      if (!Array.isArray(entries)) throw fail('INVALID_INPUT', `${what}: entries: expected an array, got ${describe(entries)}`)
      if (sidecar !== undefined && sidecar !== null && (typeof sidecar !== 'object' || Array.isArray(sidecar))) {
        throw fail('INVALID_INPUT', `${what}: sidecar: expected an object, got ${describe(sidecar)}`)
      }
      const out = yield call(this[kNative], 'claudeCodeAppend', [k, toJson(entries, `${what}: entries`), optJson(sidecar, `${what}: sidecar`)], { op: 'claudeCodeAppend', tel, sid: sidOf(key) })
      return JSON.parse(out)
    }
    case 'load': {
      const out = yield call(this[kNative], 'claudeCodeLoad', [keyJson(args[0])], { op: 'claudeCodeLoad', tel, sid: sidOf(args[0]) })
      return out === null ? null : JSON.parse(out)
    }
    case 'release':
      return yield call(this[kNative], 'claudeCodeRelease', [keyJson(args[0])], { op: 'claudeCodeRelease', tel, sid: sidOf(args[0]) })
    case 'sessions':
      return JSON.parse(yield call(this[kNative], 'claudeCodeSessions', [text(args[0], 'projectKey')], { op: 'claudeCodeSessions', tel }))
    case 'subkeys':
      return JSON.parse(yield call(this[kNative], 'claudeCodeSubkeys', [text(args[0], 'sessionId')], { op: 'claudeCodeSubkeys', tel }))
    case 'delete':
      yield call(this[kNative], 'claudeCodeDelete', [keyJson(args[0])], { op: 'claudeCodeDelete', tel, sid: sidOf(args[0]) })
      return undefined
    default:
      throw fail('INVALID_INPUT', `claudeCode: op: expected 'append', 'load', 'release', 'sessions', 'subkeys' or 'delete', got ${describe(op)}`)
  }
}

Object.defineProperty(Store.prototype, kClaudeCode, {
  /** @param {any} op @param {...any} args */
  value(op, ...args) {
    return runSync(claudeCodeSteps.call(this, op, args))
  },
})

Object.defineProperty(PromiseStore.prototype, kClaudeCode, {
  /** @param {any} op @param {...any} args */
  value(op, ...args) {
    return queued(this, claudeCodeSteps.call(this, op, args))
  },
})
