// @ts-check
'use strict'
// What `append` sends and returns: the message's JSON text, and the envelope the caller gets back.

const { checkRecord, object } = require('./args.js')
const { toJson, optJson } = require('./json.js')

/** @param {any} message */
function textBlocks(message) {
  if (message && typeof message.content === 'string') {
    return { ...message, content: [{ type: 'text', text: message.content }] }
  }
  return message
}

// The envelope `append` returns: the caller's own fields (nested objects shared, not copied),
// plus what the session filled in, in the same key order the store keeps.
/**
 * @param {any} input
 * @param {Record<string, any> | null} extra
 * @param {Record<string, any>} filled
 * @returns {Record<string, any>}
 */
function envelopeOf(input, extra, filled) {
  if (typeof input === 'string') {
    return { ...extra, ...filled, message: { role: 'user', content: [{ type: 'text', text: input }] } }
  }
  if ('role' in input && !('message' in input)) {
    return { ...extra, ...filled, message: textBlocks(input) }
  }
  const env = { ...input, ...extra, ...filled }
  if (env.message) env.message = textBlocks(env.message)
  return env
}

// What `append` sends to the native side: the message's JSON text, and the envelope's.
/**
 * @param {any} message
 * @param {any} envelope
 */
function appendArgs(message, envelope) {
  checkRecord(message, 'append')
  const extra = object(envelope, 'append: envelope')
  const text = toJson(message, 'append')
  const extraText = optJson(extra, 'append: envelope')
  return { extra, text, extraText }
}

module.exports = { envelopeOf, appendArgs }
