'use strict'
// Hostile input: each case here was found by attacking the library as a user could, and failed
// before its fix (a panic reaching JS, an uncoded error, a silent misreading, data left behind).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { lib, ROOT, tmpDir, expectError, openReadonlyDb } = require('./helpers/util')

const { Store, Session, validateMessages } = lib
const native = require(path.join(ROOT, 'native.js'))

test('a panic inside the binding reaches JS as INVALID_INPUT naming the operation, and the library goes on', () => {
  expectError(() => native.__panicForTest(), 'INVALID_INPUT', '__panicForTest: internal error', 'a deliberate panic')
  const s = new Session()
  s.append('still works')
  assert.equal(s.messages.length, 1)
})

// Keys of two-byte characters, so a cut by bytes at 120 falls inside one.
const KEY = 'ключ_параметра_'.repeat(6)

function deep(levels) {
  let v = { leaf: 1 }
  for (let i = 0; i < levels; i++) v = { [`${KEY}${i}`]: v }
  return v
}

test('a long non-ASCII error path is cut by characters: errors, not panics, on every path', () => {
  const message = { role: 'user', content: [{ type: 'text', text: 'x', extra: deep(140) }] }
  expectError(() => new Session().append(message), 'INVALID_INPUT', 'nested deeper than 128 levels')
  expectError(() => validateMessages([message]), 'INVALID_INPUT')
  expectError(() => lib.toOpenAIChat([message]), 'INVALID_INPUT')
  expectError(() => new Session().buildContext({ target: 'anthropic', system: [{ type: 'text', text: 's', x: deep(140) }] }), 'INVALID_INPUT')
  // A transcript line cut short by a crash, under such keys: that line is skipped, the rest restored.
  const good = JSON.stringify({ type: 'user', message: { role: 'user', content: 'first' } })
  const full = JSON.stringify({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'n', input: deep(3) }] } })
  const cut = full.slice(0, full.length - 40)
  const s = new Session()
  const report = s.restoreMessages([good, cut])
  assert.equal(report.messageCount, 1)
  assert.equal(report.skipped.length, 1)
  assert.equal(report.skipped[0].index, 1)
})

test('a negative schema version is STORE_CORRUPT, not a panic', (t) => {
  const file = path.join(tmpDir(t), 's.db')
  Store.open(file).close()
  const Database = require('better-sqlite3')
  const db = new Database(file)
  db.pragma('user_version = -1')
  db.close()
  expectError(() => Store.open(file), 'STORE_CORRUPT', 'schema version is -1')
})

test('a throwing getter or a revoked Proxy is INVALID_INPUT, and the getter runs once', () => {
  const s = new Session()
  let reads = 0
  const message = { role: 'user', get content() { reads++; throw new Error('getter says no') } }
  expectError(() => s.append(message), 'INVALID_INPUT', 'append: reading the value threw: getter says no')
  assert.equal(reads, 1)
  const { proxy, revoke } = Proxy.revocable({ role: 'user', content: 'x' }, {})
  revoke()
  expectError(() => s.append(proxy), 'INVALID_INPUT', 'append:')
  assert.equal(s.messages.length, 0, 'nothing written')
})

test('NaN and Infinity in options are INVALID_INPUT with their path, not silently ignored', () => {
  const s = new Session()
  s.append('hi')
  expectError(() => s.restoreTokenState({ inputTokens: NaN }), 'INVALID_INPUT', 'restoreTokenState: state.inputTokens: expected a finite number, got NaN')
  expectError(() => s.buildContext({ target: 'anthropic', maxTokens: NaN }), 'INVALID_INPUT', 'buildContext: options.maxTokens')
  expectError(() => s.compactionPlan({ targetTokens: Infinity }), 'INVALID_INPUT', 'compactionPlan: options.targetTokens')
  expectError(() => Store.open(':memory:').listSessions({ limit: -Infinity }), 'INVALID_INPUT', 'listSessions: filter.limit')
})

test('a line holding a raw lone surrogate is skipped and reported; the rest of the restore goes in', () => {
  const lines = [
    JSON.stringify({ type: 'user', message: { role: 'user', content: 'before' } }),
    `{"type":"assistant","message":{"role":"assistant","content":"bad \ud800 text"}}`,
    JSON.stringify({ type: 'user', message: { role: 'user', content: 'after \ud83d\ude00' } }),
  ]
  const s = new Session()
  const report = s.restoreMessages(lines)
  assert.equal(report.messageCount, 2)
  assert.deepEqual(report.skipped, [{ index: 1, reason: 'a string holds a lone UTF-16 surrogate, which is not valid Unicode text' }])
  assert.deepEqual(s.messages.map((m) => m.content[0].text), ['before', 'after \ud83d\ude00'])
})

test('error messages are bounded and carry no raw control characters', () => {
  const store = Store.open(':memory:')
  const huge = 'x'.repeat(10_000_000)
  const err = expectError(() => store.openSession(huge), 'NOT_FOUND')
  assert.ok(err.message.length < 500, `message of ${err.message.length} characters`)
  assert.match(err.message, /more characters\)$/)
  const forged = expectError(() => store.openSession('a\n[INFO] forged log line\u001b[31m'), 'NOT_FOUND')
  assert.doesNotMatch(forged.message, /[\u0000-\u001f\u007f]/)
  assert.match(forged.message, /a\\n\[INFO\] forged log line\\u\{001b\}/)
})

test('deleteSession leaves none of its content readable in the store files', (t) => {
  const file = path.join(tmpDir(t), 's.db')
  const store = Store.open(file)
  const secret = `SECRET-${Math.random().toString(36).slice(2)}`
  const keep = store.createSession({ id: 'keep' })
  keep.append('nothing to hide')
  const gone = store.createSession({ id: 'gone' })
  gone.append(`my password is ${secret}`)
  gone.append({ role: 'assistant', content: [{ type: 'text', text: `${secret} `.repeat(2000) }] }) // a blob
  gone.close()
  store.deleteSession('gone')
  const files = [file, `${file}-wal`].filter((f) => fs.existsSync(f))
  for (const f of files) assert.ok(!fs.readFileSync(f).includes(secret), `${path.basename(f)} still holds the deleted text (store open)`)
  store.close()
  for (const f of [file, `${file}-wal`].filter((x) => fs.existsSync(x))) {
    assert.ok(!fs.readFileSync(f).includes(secret), `${path.basename(f)} still holds the deleted text`)
  }
  const db = openReadonlyDb(file)
  t.after(() => db.close())
  assert.equal(Store.open(file, { readonly: true }).openSession('keep').messages.length, 1)
})
