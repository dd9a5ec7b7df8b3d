// The ESM entry point of threadline/promise: the same module as the CommonJS one (promise.js).
import promise from './promise.js'

export const {
  Store,
  Session,
  ResponseWriter,
  validateMessages,
  toAnthropic,
  fromAnthropic,
  toOpenAIChat,
  fromOpenAIChat,
  toOpenAIResponses,
  fromOpenAIResponses,
  defaultStorePath,
  ERROR_CODES,
} = promise

export default promise
