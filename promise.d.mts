// Types of the ESM entry point of threadline/promise (promise.mjs): the same declarations as the
// CommonJS one.
import * as promise from './promise.js'

export * from './promise.js'
export default promise
