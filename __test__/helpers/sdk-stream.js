'use strict'
// Feeds Anthropic raw stream events through the REAL installed SDK's MessageStream, to compare
// Threadline's stream assembler with what the SDK builds.
//
// The events go in as newline-delimited JSON through `MessageStream.fromReadableStream`, the
// SDK's own way to consume a stream produced elsewhere; that path hands every event, `ping` and
// `error` included, to the same accumulator as a live request.

const { MessageStream } = require('@anthropic-ai/sdk/lib/MessageStream')

/** A ReadableStream of the events as newline-delimited JSON, one event per chunk. */
function ndjsonStream(events) {
  const encoder = new TextEncoder()
  let i = 0
  return new ReadableStream({
    pull(controller) {
      if (i < events.length) controller.enqueue(encoder.encode(JSON.stringify(events[i++]) + '\n'))
      else controller.close()
    },
  })
}

/**
 * The SDK's `finalMessage()` for these events, as JSON sees it (`undefined` fields left out,
 * non-enumerable helpers gone), so it can be deep-compared with a stored message.
 *
 * `finalMessage()` adds `parsed_output: null` to the message (the SDK's structured-output
 * slot, not a field of the API's Message); it is removed unless `{ keepParsedOutput: true }`.
 * Rejects as the SDK does (e.g. a stream without `message_stop` has no final message).
 */
async function sdkFinalMessage(events, { keepParsedOutput = false } = {}) {
  const stream = MessageStream.fromReadableStream(ndjsonStream(events))
  const message = JSON.parse(JSON.stringify(await stream.finalMessage()))
  if (!keepParsedOutput && message.parsed_output === null) delete message.parsed_output
  return message
}

module.exports = { sdkFinalMessage, ndjsonStream }
