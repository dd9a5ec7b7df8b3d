// Imported by the ESM entry points before the CommonJS code they wrap: hands lib/load-native.js a
// real `require` for the case where that code has none (an ESM bundle; see lib/load-native.js).
// import.meta.url is the bundle's own URL there, so the .node file copied beside it resolves.
// In a CommonJS bundle import.meta is empty and nothing is needed.
import { createRequire } from 'node:module'

if (typeof import.meta.url === 'string') {
  globalThis[Symbol.for('threadline.esmRequire')] = createRequire(import.meta.url)
}
