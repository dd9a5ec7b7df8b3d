'use strict'
// Shared helpers of the Node test suite (not a test file: node --test only runs *.test.js here).

const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..', '..')
const FIXTURES = path.join(ROOT, 'fixtures', 'claude-code')
const READER = path.join(__dirname, 'read-store.js')

const lib = require(ROOT)

// A fresh temp dir, removed when the test `t` ends.
function tmpDir(t, prefix = 'threadline-test-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

// Opens `storePath` in a new node process and returns what it read of session `sessionId`:
// { messages, envelopes, turns, tokenTracker, contextFill, info }.
function readInNewProcess(storePath, sessionId, options) {
  const out = path.join(path.dirname(storePath), `read-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.json`)
  const args = [READER, storePath, sessionId, out]
  if (options) args.push(JSON.stringify(options))
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 << 20 })
  assert.equal(r.status, 0, `reader process failed (status ${r.status}, signal ${r.signal}):\n${r.stderr}`)
  const text = fs.readFileSync(out, 'utf8')
  fs.rmSync(out, { force: true })
  return JSON.parse(text)
}

// Every key path of a value, in order, so two values can be compared for key order at every depth.
function keyPaths(value, at = '$', out = []) {
  if (Array.isArray(value)) {
    value.forEach((v, i) => keyPaths(v, `${at}[${i}]`, out))
  } else if (value !== null && typeof value === 'object') {
    for (const k of Object.keys(value)) {
      out.push(`${at}.${JSON.stringify(k)}`)
      keyPaths(value[k], `${at}.${JSON.stringify(k)}`, out)
    }
  }
  return out
}

// Deep-equal, same key order at every depth, and the same JSON text.
function assertSameJson(actual, expected, what = 'value') {
  assert.deepStrictEqual(actual, expected, `${what}: not deep-equal`)
  assert.deepStrictEqual(keyPaths(actual), keyPaths(expected), `${what}: key order differs`)
  assert.equal(JSON.stringify(actual), JSON.stringify(expected), `${what}: JSON text differs`)
}

// The one normalisation the contract allows: string content -> [{type:'text', text}], in place
// (the `content` key keeps its position). Returns a new object; the input is not changed.
function normalizeMessage(m) {
  const out = {}
  for (const [k, v] of Object.entries(m)) {
    out[k] = k === 'content' && typeof v === 'string' ? [{ type: 'text', text: v }] : v
  }
  return out
}

// Values as JSON sees them (what a store can hold): drops undefined, applies toJSON.
function jsonClone(v) {
  return JSON.parse(JSON.stringify(v))
}

const FILLED = ['type', 'uuid', 'parentUuid', 'sessionId', 'seq', 'timestamp']

// The envelope the notes promise for a record appended as `input` (+ `extra` envelope fields):
// given keys in given order, missing ones appended in FILLED order, seq always set, and for a bare
// message (or a string prompt) the message last. `actual` supplies only the values the test cannot
// know in advance (generated uuid, timestamp): they are checked for shape by the caller.
function expectedEnvelope(input, extra, { seq, parentUuid, sessionId, type, actual }) {
  let env
  let bare = false
  let message
  if (typeof input === 'string') {
    bare = true
    message = { role: 'user', content: [{ type: 'text', text: input }] }
    env = { ...(extra || {}) }
  } else if ('role' in input && !('message' in input)) {
    bare = true
    message = normalizeMessage(input)
    env = { ...(extra || {}) }
  } else {
    env = { ...input, ...(extra || {}) }
    if (env.message) env.message = normalizeMessage(env.message)
  }
  const defaults = {
    type,
    uuid: actual.uuid,
    parentUuid,
    sessionId,
    seq,
    timestamp: actual.timestamp,
  }
  for (const k of FILLED) {
    if (!(k in env)) env[k] = defaults[k]
  }
  env.seq = seq
  if (bare) env.message = message
  return jsonClone(env)
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const UUID_V7_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/

// Runs `fn`, which must throw (or reject) a coded error; checks its code and that its message
// contains each of `parts` (strings) / matches each of `parts` (RegExps). Returns the error.
function expectError(fn, code, ...parts) {
  let err
  try {
    fn()
  } catch (e) {
    err = e
  }
  checkError(err, code, parts)
  return err
}

async function expectRejection(promiseOrFn, code, ...parts) {
  let err
  try {
    await (typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn)
  } catch (e) {
    err = e
  }
  checkError(err, code, parts)
  return err
}

function checkError(err, code, parts) {
  assert.ok(err !== undefined, `expected an error with code ${code}, but nothing was thrown`)
  assert.ok(err instanceof Error, `expected an Error, got ${String(err)}`)
  assert.equal(err.code, code, `wrong code; message: ${err.message}`)
  for (const p of parts) {
    if (p instanceof RegExp) assert.match(err.message, p)
    else assert.ok(err.message.includes(p), `message ${JSON.stringify(err.message)} does not name ${JSON.stringify(p)}`)
  }
}

function readJsonl(name) {
  const text = fs.readFileSync(path.join(FIXTURES, name), 'utf8')
  return text.split('\n').filter((l) => l.trim() !== '')
}

// The turn rule, written from the contract: a turn starts at a user message with a block a person
// wrote or attached; tool results, text Claude Code inserts (interruptions, local commands and
// their output, notifications) and records marked isMeta / isCompactSummary belong to the turn
// they occur in.
const HARNESS_TEXT = [
  '[Request interrupted by user', '<local-command-caveat>', '<command-name>', '<command-message>',
  '<local-command-stdout>', '<local-command-stderr>', '<bash-input>', '<bash-stdout>', '<bash-stderr>',
  '<task-notification>', '<system-reminder>',
]
function isHumanBlock(b) {
  if (b.type === 'tool_result') return false
  if (b.type !== 'text') return true
  const text = b.text.trimStart()
  return !HARNESS_TEXT.some((p) => text.startsWith(p))
}
function isPrompt(message, envelope = {}) {
  if (envelope.isMeta === true || envelope.isCompactSummary === true) return false
  const content = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content
  return message.role === 'user' && content.some(isHumanBlock)
}

// A URL of the test server (THREADLINE_TEST_POSTGRES, which `npm test` sets) with a schema of
// its own, or null, said in a diagnostic, when there is no server.
let schemas = 0
function pgUrl(t, name) {
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (!base) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `npm test` for PostgreSQL')
    return null
  }
  const schema = `js_${name}_${process.pid}_${Date.now() % 1e8}_${schemas++}`
  return `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`
}

// better-sqlite3, read-only, on a closed store file.
function openReadonlyDb(file) {
  const Database = require('better-sqlite3')
  return new Database(file, { readonly: true, fileMustExist: true })
}

module.exports = {
  isPrompt,
  pgUrl,
  ROOT,
  FIXTURES,
  lib,
  tmpDir,
  readInNewProcess,
  keyPaths,
  assertSameJson,
  normalizeMessage,
  jsonClone,
  expectedEnvelope,
  expectError,
  expectRejection,
  readJsonl,
  openReadonlyDb,
  UUID_RE,
  UUID_V7_RE,
  ISO_RE,
}
