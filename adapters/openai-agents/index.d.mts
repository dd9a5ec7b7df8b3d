// Types of the ESM entry point (index.mjs): the same declarations as the CommonJS one.
export * from './index.js'
