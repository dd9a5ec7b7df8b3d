// The ESM entry point: the same module as the CommonJS one (index.js), so `import` and `require`
// in one process share one native binding and one set of classes.
// First, so the CommonJS code below has a require even inside an ESM bundle (lib/load-native.js).
import './lib/esm-require.mjs'
import threadline from './index.js'

export const {
  Store,
  Session,
  validateMessages,
  toAnthropic,
  fromAnthropic,
  toOpenAIChat,
  fromOpenAIChat,
  toOpenAIResponses,
  fromOpenAIResponses,
  defaultStorePath,
  ERROR_CODES,
} = threadline

export default threadline
