// The ESM entry point of threadline/ai-sdk: the same module as the CommonJS one.
import '../../lib/esm-require.mjs'
import adapter from './index.js'

export const { ThreadlineChatStore, INTERRUPTED } = adapter
export default adapter
