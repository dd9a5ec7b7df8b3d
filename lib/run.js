// @ts-check
'use strict'
// How a method runs. Each method of Session, ResponseWriter and Store is written once, as steps
// (lib/steps/*.js): a generator that checks and shapes its arguments, yields the native calls it
// makes, and shapes their results. The classes of lib/sync.js make each call at once; those of
// lib/promise.js (`threadline/promise`) make the call's `...Async` twin, which runs on libuv's
// thread pool, and await it. So both APIs check, convert and report errors the same way.

const { fail, recode } = require('./errors.js')
const { kNative, kTelemetry, kQueue } = require('./symbols.js')
const { observed, observedAsync } = require('./telemetry.js')

/** @typedef {import('./telemetry.js').Telemetry} Telemetry */

/**
 * A native call a step makes: `on[method](...args)`, then `post` of its result; with `op`, timed
 * and reported by the telemetry `tel` (session `sid`). `wait` instead: a promise to await (only
 * in methods that are async in both APIs).
 * @typedef {{ on?: any, method?: string, args?: any[], op?: string, tel?: Telemetry, sid?: string,
 *   post?: (v: any) => any, wait?: Promise<any> }} Call
 * @typedef {Generator<Call, any, any>} Steps
 */

/**
 * @param {any} on
 * @param {string} method
 * @param {any[]} args
 * @param {{ op?: string, tel?: Telemetry, sid?: string, post?: (v: any) => any }} [how]
 * @returns {Call}
 */
function call(on, method, args, how = {}) {
  return { on, method, args, ...how }
}

/**
 * A session's call, observed by its store's telemetry as `op`.
 * @param {any} session
 * @param {string} op
 * @param {string} method
 * @param {any[]} args
 * @param {(v: any) => any} [post]
 * @returns {Call}
 */
function sessionCall(session, op, method, args, post) {
  const tel = session[kTelemetry]
  // The id (a native getter, a new string each time) only when telemetry will report it.
  const sid = tel && tel.on ? session[kNative].id : undefined
  return call(session[kNative], method, args, { op, tel, sid, post })
}

/** @param {Call} c */
function callNow(c) {
  if (c.wait) throw fail('INVALID_INPUT', 'a synchronous method cannot wait')
  const post = c.post ?? ((/** @type {any} */ v) => v)
  const run = () => post(c.on[/** @type {string} */ (c.method)](...(c.args ?? [])))
  return c.op ? observed(c.tel, c.sid, c.op, run) : run()
}

/** @param {Call} c */
async function callLater(c) {
  if (c.wait) return c.wait
  const post = c.post ?? ((/** @type {any} */ v) => v)
  const run = async () => {
    let v
    try {
      v = await c.on[`${c.method}Async`](...(c.args ?? []))
    } catch (e) {
      throw recode(e)
    }
    return post(v)
  }
  return c.op ? observedAsync(c.tel, c.sid, c.op, run) : run()
}

/** @param {Steps} steps */
function runSync(steps) {
  let step = steps.next()
  while (!step.done) {
    let value
    try {
      value = callNow(step.value)
    } catch (e) {
      step = steps.throw(e)
      continue
    }
    step = steps.next(value)
  }
  return step.value
}

/**
 * Runs steps from `step` on, each call made by `make` (at once, or on the thread pool).
 * @param {Steps} steps
 * @param {IteratorResult<Call, any>} step
 * @param {(c: Call) => any} make
 */
async function runFrom(steps, step, make) {
  while (!step.done) {
    let value
    try {
      value = await make(step.value)
    } catch (e) {
      step = steps.throw(e)
      continue
    }
    step = steps.next(value)
  }
  return step.value
}

/**
 * The promise API: the arguments are checked and converted now (a caller may change its objects
 * once the call returns), the native calls run in the order the methods were called on this
 * object, each on the thread pool.
 * @param {any} self
 * @param {Steps} steps
 * @returns {Promise<any>}
 */
function queued(self, steps) {
  let first
  try {
    first = steps.next()
  } catch (e) {
    return Promise.reject(e)
  }
  const done = self[kQueue].then(() => runFrom(steps, /** @type {IteratorResult<Call, any>} */ (first), callLater))
  self[kQueue] = done.catch(() => {})
  return done
}

/**
 * Steps that wait on promises, run by a synchronous class: its calls at once, its waits awaited.
 * @param {() => Steps} make
 */
function runWaiting(make) {
  try {
    const steps = make()
    return runFrom(steps, steps.next(), (c) => (c.wait ? c.wait : callNow(c)))
  } catch (e) {
    return Promise.reject(e)
  }
}

module.exports = { call, sessionCall, callNow, runSync, runFrom, queued, runWaiting }
