'use strict'
// Long strings are stored once, by content, in the `blobs` table: the threshold (in UTF-8 bytes),
// de-duplication, exact content on read-back, a custom threshold, and clean-up on deleteSession.
// The file is inspected read-only with better-sqlite3 after store.close().

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const crypto = require('node:crypto')

const { lib, tmpDir, readInNewProcess, openReadonlyDb } = require('./helpers/util')

const { Store } = lib
const DEFAULT_THRESHOLD = 10240

function counts(file) {
  const db = openReadonlyDb(file)
  try {
    return {
      blobs: db.prepare('SELECT count(*) AS n FROM blobs').get().n,
      refs: db.prepare('SELECT count(*) AS n FROM blob_refs').get().n,
      records: db.prepare('SELECT count(*) AS n FROM records').get().n,
    }
  } finally {
    db.close()
  }
}

// A string of exactly `bytes` UTF-8 bytes, made of `unit` (whose byte length divides `bytes`).
function ofBytes(bytes, unit = 'x') {
  const u = Buffer.byteLength(unit)
  assert.equal(bytes % u, 0)
  const s = unit.repeat(bytes / u)
  assert.equal(Buffer.byteLength(s), bytes)
  return s
}

// Deterministic, incompressible-looking text of `bytes` bytes (tool output).
function toolOutput(bytes, seed) {
  let out = ''
  let i = 0
  while (out.length < bytes) out += crypto.createHash('sha256').update(`${seed}:${i++}`).digest('hex') + '\n'
  return out.slice(0, bytes)
}

// Stores one user message holding `text` in a fresh store; returns the blob count.
function blobsFor(t, text, options) {
  const dir = tmpDir(t)
  const file = path.join(dir, 'b.db')
  const store = Store.open(file, options)
  const s = store.createSession({ id: 's' })
  s.append({ role: 'user', content: [{ type: 'text', text }] })
  store.close()
  const back = readInNewProcess(file, 's')
  assert.equal(back.messages[0].content[0].text, text, 'content comes back exactly')
  return counts(file).blobs
}

test('default threshold: a string one byte over 10240 bytes is a blob, one at or under it is not', (t) => {
  assert.equal(blobsFor(t, ofBytes(DEFAULT_THRESHOLD + 1)), 1)
  assert.equal(blobsFor(t, ofBytes(DEFAULT_THRESHOLD)), 0)
  assert.equal(blobsFor(t, ofBytes(DEFAULT_THRESHOLD - 1)), 0)
})

test('the threshold counts UTF-8 bytes, not JS string length', (t) => {
  // 5121 two-byte characters: 5121 JS chars, 10242 bytes
  const over = ofBytes(DEFAULT_THRESHOLD + 2, 'é')
  assert.ok(over.length < DEFAULT_THRESHOLD)
  assert.equal(blobsFor(t, over), 1)
  // 5120 two-byte characters: exactly 10240 bytes
  assert.equal(blobsFor(t, ofBytes(DEFAULT_THRESHOLD, 'é')), 0)
  // emoji (4 bytes, 2 JS chars each)
  assert.equal(blobsFor(t, ofBytes(DEFAULT_THRESHOLD + 4, '😀')), 1)
})

test('the same 50 KB tool output stored twice costs one blob row, and comes back exactly', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'dedupe.db')
  const output = toolOutput(50 * 1024, 'ls -R')
  const store = Store.open(file)
  const s = store.createSession({ id: 'dup' })
  s.append('list everything')
  s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: { cmd: 'ls -R' } }] })
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: output }] })
  s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 't2', name: 'bash', input: { cmd: 'ls -R' } }] })
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't2', content: output }] })
  store.close()

  let c = counts(file)
  assert.equal(c.blobs, 1, 'one blob row for the repeated output')
  assert.equal(c.refs, 2, 'each record that uses it refers to it')

  const back = readInNewProcess(file, 'dup')
  assert.equal(back.messages[2].content[0].content, output)
  assert.equal(back.messages[4].content[0].content, output)

  // again in the same record (block and toolUseResult), in another session of the same store
  const store2 = Store.open(file)
  const s2 = store2.createSession({ id: 'dup2' })
  s2.append({ role: 'assistant', content: ['t9', 't10', 't11'].map((id) => ({ type: 'tool_use', id, name: 'bash', input: { cmd: 'ls -R' } })) })
  s2.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't9', content: output }] }, { toolUseResult: { stdout: output, stderr: '' } })
  s2.appendMany([
    { type: 'tool_result', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't10', content: output }] } },
    { type: 'tool_result', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't11', content: output }] } },
  ])
  store2.close()
  c = counts(file)
  assert.equal(c.blobs, 1, 'still one blob row')
  const back2 = readInNewProcess(file, 'dup2')
  assert.equal(back2.messages[1].content[0].content, output)
  assert.equal(back2.envelopes[1].toolUseResult.stdout, output)
  assert.equal(back2.messages[2].content[0].content, output)
  assert.equal(back2.messages[3].content[0].content, output)
})

test('different long strings are different blobs; long strings anywhere in a record are stored out of line', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'many.db')
  const a = toolOutput(20000, 'a')
  const b = toolOutput(20000, 'b')
  const thinking = toolOutput(15000, 'think')
  const image = Buffer.from(toolOutput(30000, 'img')).toString('base64')
  const store = Store.open(file)
  const s = store.createSession({ id: 'many' })
  s.append({ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: image } }] })
  s.append({ role: 'assistant', content: [{ type: 'thinking', thinking, signature: 'sig' }, { type: 'text', text: a }] })
  s.append({ type: 'progress', data: { output: b } })
  store.close()
  assert.equal(counts(file).blobs, 4)
  const back = readInNewProcess(file, 'many')
  assert.equal(back.messages[0].content[0].source.data, image)
  assert.equal(back.messages[1].content[0].thinking, thinking)
  assert.equal(back.messages[1].content[1].text, a)
  assert.equal(back.envelopes[2].data.output, b)
})

test('a custom blobThresholdBytes moves the cut-off', (t) => {
  assert.equal(blobsFor(t, ofBytes(101), { blobThresholdBytes: 100 }), 1)
  assert.equal(blobsFor(t, ofBytes(100), { blobThresholdBytes: 100 }), 0)
  // a high threshold keeps a 50 KB string inline
  assert.equal(blobsFor(t, ofBytes(50 * 1024), { blobThresholdBytes: 1 << 20 }), 0)
  assert.equal(blobsFor(t, ofBytes(50 * 1024)), 1)
})

test('deleteSession removes blobs only it used and keeps shared ones readable', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'gc.db')
  const shared = toolOutput(30000, 'shared')
  const own = toolOutput(30000, 'own')
  const store = Store.open(file)
  store.createSession({ id: 'keep' }).append({ role: 'user', content: [{ type: 'text', text: shared }] })
  const gone = store.createSession({ id: 'gone' })
  gone.append({ role: 'user', content: [{ type: 'text', text: shared }] })
  gone.append({ role: 'assistant', content: [{ type: 'text', text: own }] })
  store.close()
  assert.equal(counts(file).blobs, 2)

  const store2 = Store.open(file)
  store2.deleteSession('gone')
  store2.close()
  assert.equal(counts(file).blobs, 1)
  const back = readInNewProcess(file, 'keep')
  assert.equal(back.messages[0].content[0].text, shared)
})
