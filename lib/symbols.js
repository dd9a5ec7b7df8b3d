// @ts-check
'use strict'
// The keys under which the classes of both APIs keep their state: the native object, the store's
// telemetry, the promise classes' queue of calls, and which API's classes an object makes.

const kNative = Symbol('native')
const kTelemetry = Symbol('telemetry')
const kQueue = Symbol('queue')
const kKind = Symbol('kind')
// the Store a session came from (its path tells session.watch what to watch)
const kStore = Symbol('store')

module.exports = { kNative, kTelemetry, kQueue, kKind, kStore }
