// Types of the ESM entry point (index.mjs): the same declarations as the CommonJS one.
import * as threadline from './index.js'

export * from './index.js'
export default threadline
