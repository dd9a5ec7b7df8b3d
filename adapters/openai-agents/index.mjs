// The ESM entry point of threadline/openai-agents: the same module as the CommonJS one.
import '../../lib/esm-require.mjs'
import adapter from './index.js'

export const { ThreadlineSession } = adapter
export default adapter
