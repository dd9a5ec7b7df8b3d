'use strict'
// The error codes are one list: the core's (Rust, threadline::Error::CODES, which a cargo test
// ties to the Error variants), the JS facade's ERROR_CODES, and the ErrorCode type of index.d.ts.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { lib, ROOT } = require('./helpers/util')
const native = require(path.join(ROOT, 'native.js'))

test('ERROR_CODES equals the Rust core\'s list, in order', () => {
  assert.deepEqual([...lib.ERROR_CODES], native.errorCodes())
})

test('the ErrorCode type of index.d.ts names the same codes', () => {
  const dts = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8')
  const union = dts.match(/export type ErrorCode =([^;]*?)(?:\n\n|;)/s)
  assert.ok(union, 'index.d.ts declares ErrorCode')
  const declared = [...union[1].matchAll(/'([A-Z_]+)'/g)].map((m) => m[1])
  assert.deepEqual(declared.sort(), [...native.errorCodes()].sort())
})
