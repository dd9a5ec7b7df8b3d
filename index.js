// @ts-check
'use strict'
// The JS facade over the native module: values cross as JSON text (JSON.stringify in lib/json.js,
// serde_json in Rust), bulk reads come back as one-byte JSON pages parsed in lib/pages.js. The
// native side owns validation, storage and state; the facade only shapes arguments and results.
//
// This file only chooses what `threadline` exports; the facade lives in lib/, one concept per file
// (ARCHITECTURE.md): lib/binding.js (the native module), errors.js, args.js, json.js, pages.js,
// envelope.js, telemetry.js, run.js (how a method's steps run), steps/*.js (each method written
// once), sync.js (the classes here), promise.js (those of threadline/promise), convert.js,
// claude-code.js (the store calls of threadline/claude-agent-sdk).
//
// Type-checked (tsc: allowJs, checkJs, strict) against native.d.ts, the declarations napi-rs
// generates for the native module; index.d.ts is the public contract. Values given by callers
// are typed `any` in lib/: they are unchecked input, validated there or on the native side.

const { native } = require('./lib/binding.js')
const { CODES } = require('./lib/errors.js')
const { Store, Session } = require('./lib/sync.js')
const promise = require('./lib/promise.js')
const convert = require('./lib/convert.js')
// The internal method threadline/claude-agent-sdk calls on both Store classes.
require('./lib/claude-code.js')

module.exports = {
  Store,
  Session,
  validateMessages: convert.validateMessages,
  toAnthropic: convert.toAnthropic,
  fromAnthropic: convert.fromAnthropic,
  toOpenAIChat: convert.toOpenAIChat,
  fromOpenAIChat: convert.fromOpenAIChat,
  toOpenAIResponses: convert.toOpenAIResponses,
  fromOpenAIResponses: convert.fromOpenAIResponses,
  defaultStorePath: native.defaultStorePath,
  ERROR_CODES: Object.freeze([...CODES]),
}

// threadline/promise (promise.js) takes its classes from here, so both entry points share one
// native binding and one set of helpers.
Object.defineProperty(module.exports, Symbol.for('threadline.promise'), {
  value: Object.freeze({ Store: promise.Store, Session: promise.Session, ResponseWriter: promise.ResponseWriter }),
})
