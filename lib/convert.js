// @ts-check
'use strict'
// The functions on messages that need no store: validateMessages and the provider converters.

const { native } = require('./binding.js')
const { fail, describe } = require('./errors.js')
const { object, isArray } = require('./args.js')
const { toJson, optionsJson } = require('./json.js')

// Checks messages the way the provider checks a request; returns the problems, [] when valid.
/**
 * @param {any} messages
 * @param {any} [options]
 */
function validateMessages(messages, options) {
  if (!isArray(messages, 'validateMessages')) throw fail('INVALID_INPUT', `validateMessages: expected an array, got ${describe(messages)}`)
  const o = object(options, 'validateMessages: options') ?? {}
  for (const k of Object.keys(o)) {
    if (k !== 'target') throw fail('INVALID_INPUT', `validateMessages: options.${k}: unknown option (expected target)`)
  }
  const target = o.target ?? 'anthropic'
  if (typeof target !== 'string') throw fail('INVALID_INPUT', `validateMessages: options.target: expected a string, got ${describe(target)}`)
  return JSON.parse(native.validateMessages(toJson(messages, 'validateMessages'), target))
}

// Provider converters: neutral messages (the stored Anthropic wire shape) to and from the request
// and response shapes of Anthropic, OpenAI Chat Completions and the OpenAI Responses API. The
// native side converts and checks; this only shapes arguments.
/**
 * @param {'toAnthropic' | 'fromAnthropic' | 'toOpenAIChat' | 'fromOpenAIChat' | 'toOpenAIResponses' | 'fromOpenAIResponses'} name
 * @param {any} list
 * @param {any} options
 * @param {string} what
 */
function convertCall(name, list, options, what) {
  if (!isArray(list, name)) throw fail('INVALID_INPUT', `${name}: expected an array of ${what}, got ${describe(list)}`)
  const opts = object(options, `${name}: options`)
  return JSON.parse(native[name](toJson(list, name), optionsJson(opts, `${name}: options`)))
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function toAnthropic(messages, options) {
  return convertCall('toAnthropic', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function fromAnthropic(messages, options) {
  return convertCall('fromAnthropic', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function toOpenAIChat(messages, options) {
  return convertCall('toOpenAIChat', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function fromOpenAIChat(messages, options) {
  return convertCall('fromOpenAIChat', messages, options, 'messages')
}

/**
 * @param {any} messages
 * @param {any} [options]
 */
function toOpenAIResponses(messages, options) {
  return convertCall('toOpenAIResponses', messages, options, 'messages')
}

// `items` may be a string, as the Responses API's `input` may: one user message.
/**
 * @param {any} items
 * @param {any} [options]
 */
function fromOpenAIResponses(items, options) {
  const list = typeof items === 'string' ? [{ role: 'user', content: items }] : items
  return convertCall('fromOpenAIResponses', list, options, 'items')
}

module.exports = {
  validateMessages,
  toAnthropic,
  fromAnthropic,
  toOpenAIChat,
  fromOpenAIChat,
  toOpenAIResponses,
  fromOpenAIResponses,
}
