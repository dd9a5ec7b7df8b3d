// The ESM entry point of threadline/promise: the same module as the CommonJS one (promise.js).
// First, so the CommonJS code below has a require even inside an ESM bundle (lib/load-native.js).
import './lib/esm-require.mjs'
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
