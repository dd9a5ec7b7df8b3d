// The ESM entry point of threadline/anthropic: the same module as the CommonJS one.
import '../../lib/esm-require.mjs'
import adapter from './index.js'

export const { record } = adapter
export default adapter
