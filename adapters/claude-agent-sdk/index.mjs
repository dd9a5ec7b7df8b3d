// The ESM entry point of threadline/claude-agent-sdk: the same module as the CommonJS one.
import '../../lib/esm-require.mjs'
import adapter from './index.js'

export const { ThreadlineSessionStore } = adapter
export default adapter
