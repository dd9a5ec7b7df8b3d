'use strict'
// threadline/promise: the classes of `threadline` with every method returning a Promise and its
// store work on libuv's thread pool, for servers and Electron main processes whose event loop
// must not wait on the disk. Property reads that touch the store (info, messages, allMessages,
// turns, tokenTracker, contextFill) are methods: `await session.messages()`. See docs/promise.md.

const threadline = require('./index.js')

const { Store, Session, ResponseWriter } = threadline[Symbol.for('threadline.promise')]

module.exports = {
  Store,
  Session,
  ResponseWriter,
  validateMessages: threadline.validateMessages,
  toAnthropic: threadline.toAnthropic,
  fromAnthropic: threadline.fromAnthropic,
  toOpenAIChat: threadline.toOpenAIChat,
  fromOpenAIChat: threadline.fromOpenAIChat,
  toOpenAIResponses: threadline.toOpenAIResponses,
  fromOpenAIResponses: threadline.fromOpenAIResponses,
  defaultStorePath: threadline.defaultStorePath,
  ERROR_CODES: threadline.ERROR_CODES,
}
