'use strict'
// Bad input and bad stores: every failure is an Error with a stable code and a message that names
// the operation and the offending path; a failed operation writes nothing, and the store keeps
// working afterwards.

const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { once } = require('node:events')

const { lib, tmpDir, readInNewProcess, expectError, expectRejection, openReadonlyDb, jsonClone } = require('./helpers/util')

const { Store, Session } = lib
const { Store: PromiseStore } = require('../promise.js')

const SQL_ID = "'; DROP TABLE records; --"

function nested(depth, leaf = {}) {
  let v = leaf
  for (let i = 0; i < depth; i++) v = { x: v }
  return v
}
function nestedArrays(depth) {
  let v = []
  for (let i = 0; i < depth; i++) v = [v]
  return v
}
function circular() {
  const b = { type: 'text', text: 'loop' }
  b.self = b
  return b
}

// Runs each operation: all must fail with CLOSED; returns those whose message does not start
// with the operation's own name.
function closedErrors(ops) {
  const misnamed = []
  for (const [op, run] of Object.entries(ops)) {
    const err = expectError(run, 'CLOSED')
    if (!err.message.startsWith(`${op}: `)) misnamed.push(`${op} -> ${err.message}`)
  }
  return misnamed
}

describe('a table of bad input: code, path in the message, and an intact store after each', () => {
  let dir
  let file
  let store
  let session
  let snapshot
  let probes = 0
  const otherFile = () => path.join(dir, `never-created-${probes}.db`)

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-errors-'))
    file = path.join(dir, 'main.db')
    store = Store.open(file)
    session = store.createSession({ id: SQL_ID, project: "x' OR '1'='1" })
    session.append('first prompt', { uuid: 'uuid-existing' })
    session.append({ role: 'assistant', id: 'msg_1', content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash', input: { cmd: 'ls' } }], usage: { input_tokens: 5, output_tokens: 6 } })
    session.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'z'.repeat(20000) }] })
    store.createSession({ id: 'with-prompt-key', promptKey: 'system-prompt-v1' }).append('hello')
    snapshot = JSON.stringify(session.envelopes())
  })

  after(() => {
    store.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  // The records appended so far are unchanged and the store still takes appends.
  function assertIntact() {
    const envs = session.envelopes()
    assert.equal(JSON.stringify(envs), snapshot, 'records appended before the failure are unchanged')
    const e = session.append(`probe ${++probes}`)
    const now = session.envelopes()
    assert.equal(now.length, envs.length + 1)
    assert.equal(now[now.length - 1].uuid, e.uuid)
    assert.equal(e.seq, envs.length)
    assert.equal(e.parentUuid, envs[envs.length - 1].uuid)
    snapshot = JSON.stringify(now)
  }

  const user = (content) => ({ role: 'user', content })
  const asst = (content, extra) => ({ role: 'assistant', content, ...extra })

  // [name, run, code, ...parts the message must contain]
  const CASES = [
    ['a number instead of a record', () => session.append(42), 'INVALID_INPUT', 'append: ', 'number'],
    ['null instead of a record', () => session.append(null), 'INVALID_INPUT', 'append: ', 'null'],
    ['an array instead of a record', () => session.append([{ role: 'user', content: 'x' }]), 'INVALID_INPUT', 'append: ', 'array'],
    // a forgotten await hands append a Promise: say so, not "type: required ..."
    ['a Promise instead of a record', () => session.append(Promise.resolve({ role: 'user', content: 'x' })), 'INVALID_INPUT',
      'append: expected a message, an envelope or a string, got a Promise: did you forget await?'],
    ['a thenable instead of a record', () => session.append({ then() {} }), 'INVALID_INPUT', 'got a Promise: did you forget await?'],
    ['a Promise in appendMany', () => session.appendMany(['x', Promise.resolve('y')]), 'INVALID_INPUT', 'appendMany: [1]: ', 'got a Promise: did you forget await?'],
    ['undefined instead of a record', () => session.append(undefined), 'INVALID_INPUT', /^append: expected a message, an envelope or a string, got undefined$/],
    ['an object instead of an array', () => session.appendMany({}), 'INVALID_INPUT', /^appendMany: expected an array, got an object$/],
    ['Store.open with a Promise path', () => Store.open(Promise.resolve(otherFile())), 'INVALID_INPUT', 'open: path: expected a string, got a Promise: did you forget await?'],
    ['Store.open with a directory', () => Store.open(dir), 'INVALID_INPUT', /^open: path: .* is a directory; a store is a file path \(e\.g\. .*threadline\.db\)$/],
    ['role is a number', () => session.append({ role: 1, content: 'x' }), 'INVALID_INPUT', 'append: role: '],
    ['role is unknown', () => session.append({ role: 'robot', content: 'x' }), 'INVALID_INPUT', 'append: role: ', 'robot'],
    ["role 'tool' is an OpenAI Chat message", () => session.append({ role: 'tool', content: 'x' }), 'INVALID_INPUT', 'append: role: ', 'fromOpenAIChat'],
    ['a system message with an image', () => session.append({ role: 'system', content: [{ type: 'image', source: { type: 'url', url: 'https://x' } }] }), 'INVALID_INPUT', 'append: content[0].type: ', 'text blocks only'],
    ['content missing', () => session.append({ role: 'user' }), 'INVALID_INPUT', 'append: content: '],
    ['content is a number', () => session.append(user(5)), 'INVALID_INPUT', 'append: content: '],
    ['user content is an empty array', () => session.append(user([])), 'INVALID_INPUT', 'append: content: '],
    ['a block is a string', () => session.append(user(['hello'])), 'INVALID_INPUT', 'append: content[0]: '],
    ['a block without type', () => session.append(user([{ text: 'x' }])), 'INVALID_INPUT', 'append: content[0].type: '],
    ['text is a number', () => session.append(user([{ type: 'text', text: 1 }])), 'INVALID_INPUT', 'append: content[0].text: '],
    ['tool_use without id', () => session.append(asst([{ type: 'text', text: 'calling' }, { type: 'tool_use', name: 'bash', input: {} }])), 'INVALID_INPUT', 'append: content[1].id: '],
    ['tool_use with an empty id', () => session.append(asst([{ type: 'tool_use', id: '', name: 'bash', input: {} }])), 'INVALID_INPUT', 'append: content[0].id: '],
    ['tool_use input is a string', () => session.append(asst([{ type: 'tool_use', id: 't', name: 'bash', input: 'ls' }])), 'INVALID_INPUT', 'append: content[0].input: '],
    ['tool_use in a user message', () => session.append(user([{ type: 'tool_use', id: 't', name: 'n', input: {} }])), 'INVALID_INPUT', 'append: content[0].type: '],
    ['tool_result without tool_use_id', () => session.append(user([{ type: 'tool_result', content: 'out' }])), 'INVALID_INPUT', 'append: content[0].tool_use_id: '],
    ['tool_use_id is a number', () => session.append(user([{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }, { type: 'tool_result', tool_use_id: 7 }])), 'INVALID_INPUT', 'append: content[2].tool_use_id: expected a string'],
    ['is_error is a string', () => session.append(user([{ type: 'tool_result', tool_use_id: 't', is_error: 'yes' }])), 'INVALID_INPUT', 'append: content[0].is_error: '],
    ['tool_result content is a number', () => session.append(user([{ type: 'tool_result', tool_use_id: 't', content: 3 }])), 'INVALID_INPUT', 'append: content[0].content: '],
    ['a bad block inside tool_result content', () => session.append(user([{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'ok' }, { type: 'text' }] }])), 'INVALID_INPUT', 'append: content[0].content[1].text: '],
    ['image without media_type', () => session.append(user([{ type: 'image', source: { type: 'base64', data: 'AAAA' } }])), 'INVALID_INPUT', 'append: content[0].source.media_type: '],
    ['document with an unknown source type', () => session.append(user([{ type: 'document', source: { type: 'ftp', url: 'ftp://x' } }])), 'INVALID_INPUT', 'append: content[0].source.type: '],
    ['thinking in a user message', () => session.append(user([{ type: 'thinking', thinking: 'hmm' }])), 'INVALID_INPUT', 'append: content[0].type: '],
    ['usage with a negative count', () => session.append(asst([{ type: 'text', text: 'x' }], { usage: { input_tokens: -1, output_tokens: 1 } })), 'INVALID_INPUT', 'append: usage.input_tokens: '],
    ['usage with a string count', () => session.append(asst([{ type: 'text', text: 'x' }], { usage: { input_tokens: 1, output_tokens: '2' } })), 'INVALID_INPUT', 'append: usage.output_tokens: '],
    ['a message inside an envelope: tool_use without id', () => session.append({ type: 'assistant', message: asst([{ type: 'tool_use', name: 'n', input: {} }]) }), 'INVALID_INPUT', 'append: message.content[0].id: '],
    ['envelope uuid is a number', () => session.append({ type: 'user', uuid: 5, message: user('x') }), 'INVALID_INPUT', 'append: uuid: '],
    ['envelope parentUuid is a number', () => session.append('x', { parentUuid: 5 }), 'INVALID_INPUT', 'append: parentUuid: '],
    ['timestamp is not ISO 8601', () => session.append('x', { timestamp: 'yesterday' }), 'INVALID_INPUT', 'append: timestamp: '],
    ['includeInContext is not a boolean', () => session.append('x', { includeInContext: 'no' }), 'INVALID_INPUT', 'append: includeInContext: '],
    ['metadata is an array', () => session.append('x', { metadata: [1] }), 'INVALID_INPUT', 'append: metadata: '],
    ['requestId is a number', () => session.append('x', { requestId: 12 }), 'INVALID_INPUT', 'append: requestId: '],
    ['type contradicts the role', () => session.append({ type: 'assistant', message: user('x') }), 'INVALID_INPUT', 'append: type: '],
    ['a record with neither message nor type', () => session.append({ data: 1 }), 'INVALID_INPUT', 'append: type: '],
    ['the envelope argument is not an object', () => session.append('x', 5), 'INVALID_INPUT', 'append: envelope'],
    ['a uuid already used in the session', () => session.append('x', { uuid: 'uuid-existing' }), 'INVALID_INPUT', 'append: uuid: ', 'uuid-existing'],
    ['a lone high surrogate in text', () => session.append(user([{ type: 'text', text: 'abc\uD800def' }])), 'INVALID_INPUT', 'append: content[0].text: ', /surrogate/],
    ['a lone high surrogate at the end of text', () => session.append(user([{ type: 'text', text: 'abc\uD800' }])), 'INVALID_INPUT', 'append: content[0].text: ', /surrogate/],
    ['a lone low surrogate in text', () => session.append(user([{ type: 'text', text: '\uDC00abc' }])), 'INVALID_INPUT', 'append: content[0].text: ', /surrogate/],
    ['nesting 200 deep', () => session.append(user([{ type: 'text', text: 'a', deep: nested(200) }])), 'INVALID_INPUT', 'append: content[0].deep.x.x', '128'],
    ['nesting 10,000 deep (objects)', () => session.append(user([{ type: 'text', text: 'a', deep: nested(10000) }])), 'INVALID_INPUT', 'append: content[0].deep'],
    ['nesting 10,000 deep (arrays)', () => session.append(user([{ type: 'text', text: 'a', deep: nestedArrays(10000) }])), 'INVALID_INPUT', 'append: content[0].deep'],
    ['a 50 MB string in a bare message', () => session.append(user([{ type: 'text', text: 'a'.repeat(50 * 1024 * 1024) }])), 'INVALID_INPUT', 'append: content[0].text: '],
    ['a 50 MB string in an envelope', () => session.append({ type: 'user', message: user([{ type: 'text', text: 'b'.repeat(50 * 1024 * 1024) }]) }), 'INVALID_INPUT', 'append: message.content[0].text: '],
    ['a BigInt value', () => session.append(user([{ type: 'text', text: 'a', tokens: 5n }])), 'INVALID_INPUT', 'append: ', 'content[0].tokens'],
    ['a circular value', () => session.append(user([circular()])), 'INVALID_INPUT', 'append: ', 'self'],
    ['appendMany of a non-array', () => session.appendMany('x'), 'INVALID_INPUT', 'appendMany: '],
    ['appendMany with one bad record writes nothing', () => session.appendMany([
      'good one', user('good two'), user([{ type: 'tool_result', content: 'no id' }]), 'good four',
    ]), 'INVALID_INPUT', 'appendMany: [2].content[0].tool_use_id: '],
    ['appendMany with a number among records', () => session.appendMany(['ok', 5]), 'INVALID_INPUT', 'appendMany: [1]'],
    ['appendMany with a uuid repeated inside the batch', () => session.appendMany([
      { type: 'user', uuid: 'dup-in-batch', message: user('a') }, { type: 'user', uuid: 'dup-in-batch', message: user('b') },
    ]), 'INVALID_INPUT', 'appendMany: [1].uuid: '],
    ['appendMany with a uuid already in the session', () => session.appendMany(['ok', { type: 'user', uuid: 'uuid-existing', message: user('b') }]), 'INVALID_INPUT', 'appendMany: [1].uuid: '],
    ['appendEvent with an empty name', () => session.appendEvent(''), 'INVALID_INPUT', 'appendEvent: name'],
    ['appendEvent with a message', () => session.appendEvent('e', null, { message: user('x') }), 'INVALID_INPUT', 'appendEvent: envelope.message'],
    ['restoreMessages of a non-array', () => session.restoreMessages('[]'), 'INVALID_INPUT', 'restoreMessages: '],
    ['restoreMessages on a session that has messages', () => session.restoreMessages(['{"role":"user","content":"x"}']), 'SESSION_NOT_EMPTY', 'restoreMessages: ', SQL_ID],
    ['restoreTokenState with a negative count', () => session.restoreTokenState({ inputTokens: -1 }), 'INVALID_INPUT', 'restoreTokenState: state.inputTokens'],
    ['restoreTokenState with an unknown field', () => session.restoreTokenState({ tokens: 1 }), 'INVALID_INPUT', 'restoreTokenState: state.tokens'],
    ['restoreTokenState of a number', () => session.restoreTokenState(5), 'INVALID_INPUT', 'restoreTokenState: state'],
    ['setStatus with an unknown status', () => session.setStatus('done'), 'INVALID_INPUT', 'setStatus: status'],
    ['envelopes with a negative fromSeq', () => session.envelopes({ fromSeq: -1 }), 'INVALID_INPUT', 'envelopes: range.fromSeq'],
    ['envelopes with a fractional limit', () => session.envelopes({ limit: 1.5 }), 'INVALID_INPUT', 'envelopes: range.limit'],
    ['openSession of an unknown id', () => store.openSession('no-such-session'), 'NOT_FOUND', 'openSession: ', 'no-such-session'],
    ['openSession with an empty id', () => store.openSession(''), 'INVALID_INPUT', 'openSession: id'],
    ['openSession with a number id', () => store.openSession(7), 'INVALID_INPUT', 'openSession: id'],
    ['openSession with a different promptKey', () => store.openSession('with-prompt-key', { promptKey: 'system-prompt-v2' }), 'PROMPT_MISMATCH', 'openSession: ', 'with-prompt-key'],
    ['openSession with a non-string promptKey', () => store.openSession('with-prompt-key', { promptKey: 2 }), 'INVALID_INPUT', 'openSession: options.promptKey'],
    ['deleteSession of an unknown id', () => store.deleteSession('no-such-session'), 'NOT_FOUND', 'deleteSession: ', 'no-such-session'],
    ['createSession with an id in use', () => store.createSession({ id: SQL_ID }), 'INVALID_INPUT', 'createSession: id'],
    ['createSession with a bad contextWindow', () => store.createSession({ contextWindow: 'big' }), 'INVALID_INPUT', 'createSession: options.contextWindow'],
    ['createSession with an unknown option', () => store.createSession({ bogus: 1 }), 'INVALID_INPUT', 'createSession: options.bogus'],
    ['createSession with a number for options', () => store.createSession(5), 'INVALID_INPUT', 'createSession: options'],
    ['new Session with an unknown option', () => new Session({ bogus: 1 }), 'INVALID_INPUT', 'Session: options.bogus'],
    ['listSessions with an unknown status', () => store.listSessions({ status: 'done' }), 'INVALID_INPUT', 'listSessions: filter.status'],
    ['listSessions with a bad since', () => store.listSessions({ since: 'yesterday' }), 'INVALID_INPUT', 'listSessions: filter.since'],
    ['Store.open with a number path', () => Store.open(5), 'INVALID_INPUT', 'open: path'],
    ['Store.open with a string for options', () => Store.open(otherFile(), 'fast'), 'INVALID_INPUT', 'open: options'],
    ['Store.open with an unknown option', () => Store.open(otherFile(), { bogus: true }), 'INVALID_INPUT', 'options.bogus'],
    ['Store.open with an unknown durability', () => Store.open(otherFile(), { durability: 'disk' }), 'INVALID_INPUT', 'options.durability'],
    ['Store.open with a negative blobThresholdBytes', () => Store.open(otherFile(), { blobThresholdBytes: -1 }), 'INVALID_INPUT', 'options.blobThresholdBytes'],
    ['Store.open with a string busyTimeoutMs', () => Store.open(otherFile(), { busyTimeoutMs: 'x' }), 'INVALID_INPUT', 'options.busyTimeoutMs'],
  ]

  for (const [name, run, code, ...parts] of CASES) {
    test(name, () => {
      const before = fs.readdirSync(dir).sort()
      expectError(run, code, ...parts)
      assertIntact()
      // a failed open creates no file
      assert.deepStrictEqual(fs.readdirSync(dir).filter((f) => f.startsWith('never-created')), [])
      assert.deepStrictEqual(fs.readdirSync(dir).filter((f) => !f.startsWith('main.db')), before.filter((f) => !f.startsWith('main.db')))
    })
  }

  test('Store.open option errors name the operation like every other error ("open: options.x: ...")', () => {
    expectError(() => Store.open(otherFile(), { bogus: true }), 'INVALID_INPUT', /^open: options\.bogus: /)
    assertIntact()
  })

  test('SQL in ids, uuids and fields is data: the session works and nothing breaks', () => {
    const e = session.append("Robert'); DROP TABLE sessions; --", { uuid: "x'); DELETE FROM records; --", requestId: "'; --" })
    assert.equal(e.uuid, "x'); DELETE FROM records; --")
    assert.equal(session.id, SQL_ID)
    assert.equal(store.openSession(SQL_ID).messages.length, session.messages.length)
    const listed = store.listSessions({ project: "x' OR '1'='1" })
    assert.deepStrictEqual(listed.map((i) => i.id), [SQL_ID])
    assert.deepStrictEqual(store.listSessions({ project: "anything' OR '1'='1" }), [])
    const other = store.createSession({ id: 'other; DELETE FROM blobs;' })
    other.append('still fine')
    assert.equal(store.openSession('other; DELETE FROM blobs;').messages.length, 1)
    snapshot = JSON.stringify(session.envelopes())
    assertIntact()
    // a new process finds the session by its id, with every record
    const back = readInNewProcess(file, SQL_ID)
    assert.equal(JSON.stringify(back.envelopes), snapshot)
    assert.equal(back.messages[2].content[0].content, 'z'.repeat(20000))
  })

  test('restoreMessages skips what it cannot read, with the index and a reason, and restores the rest', () => {
    const s = store.createSession({ id: 'restore-skips' })
    const report = s.restoreMessages([
      '{"role":"user","content":"one"}',
      'this is not JSON',
      '{"role":"user",',
      { role: 'tool', content: 'an OpenAI Chat message' },
      '{"role":"assistant","content":"two"}',
      '42',
      '{"role":"user","content":"bad \\ud800 text"}',
      '[' .repeat(10000) + ']'.repeat(10000),
      { role: 'user', content: [{ type: 'tool_result' }] },
      { role: 'user', content: 'three (legacy text-only)' },
    ])
    assert.equal(report.messageCount, 3)
    assert.equal(report.turnCount, 2)
    assert.deepStrictEqual(report.skipped.map((x) => x.index), [1, 2, 3, 5, 6, 7, 8])
    for (const sk of report.skipped) {
      assert.equal(typeof sk.reason, 'string')
      assert.ok(sk.reason.length > 0, `skip ${sk.index} has a reason`)
    }
    const reason = (i) => report.skipped.find((x) => x.index === i).reason
    assert.match(reason(3), /role/)
    assert.match(reason(6), /content/)
    assert.match(reason(8), /content\[0\]\.tool_use_id/)
    assert.deepStrictEqual(s.messages, [
      { role: 'user', content: [{ type: 'text', text: 'one' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'two' }] },
      { role: 'user', content: [{ type: 'text', text: 'three (legacy text-only)' }] },
    ])
    assert.equal(s.envelopes().length, 3)
    assertIntact()
  })

  test('a closed store: CLOSED from every operation, naming it; the file stays usable', () => {
    const h = Store.open(file)
    const s = h.openSession(SQL_ID)
    h.close()
    const ops = {
      append: () => s.append('x'),
      appendMany: () => s.appendMany(['x']),
      appendEvent: () => s.appendEvent('e'),
      messages: () => s.messages,
      envelopes: () => s.envelopes(),
      turns: () => s.turns,
      tokenTracker: () => s.tokenTracker,
      contextFill: () => s.contextFill,
      info: () => s.info,
      setStatus: () => s.setStatus('completed'),
      restoreTokenState: () => s.restoreTokenState({ inputTokens: 1 }),
      createSession: () => h.createSession(),
      openSession: () => h.openSession(SQL_ID),
      listSessions: () => h.listSessions(),
      deleteSession: () => h.deleteSession(SQL_ID),
    }
    const misnamed = closedErrors(ops)
    h.close() // closing twice is harmless
    assertIntact()
    assert.deepStrictEqual(misnamed, [], 'each error names its own operation')
  })

  test('a closed session: CLOSED from every operation, naming it; other handles keep working', () => {
    const s = store.openSession(SQL_ID)
    s.close()
    const ops = {
      append: () => s.append('x'),
      appendMany: () => s.appendMany(['x']),
      appendEvent: () => s.appendEvent('e'),
      restoreMessages: () => s.restoreMessages([]),
      messages: () => s.messages,
      envelopes: () => s.envelopes(),
      turns: () => s.turns,
      tokenTracker: () => s.tokenTracker,
      contextFill: () => s.contextFill,
      info: () => s.info,
      setStatus: () => s.setStatus('completed'),
    }
    const misnamed = closedErrors(ops)
    assertIntact()
    assert.deepStrictEqual(misnamed, [], 'each error names its own operation')
  })

  test('after every failure above, a new process reads exactly the log this one holds', () => {
    const back = readInNewProcess(file, SQL_ID)
    assert.equal(JSON.stringify(back.envelopes), snapshot)
    assert.equal(back.envelopes.length, JSON.parse(snapshot).length)
    back.envelopes.forEach((e, i) => assert.equal(e.seq, i))
    assertIntact()
  })

  test('a store opened readonly refuses writes with STORE_IO and still reads', () => {
    const ro = Store.open(file, { readonly: true })
    const s = ro.openSession(SQL_ID)
    expectError(() => s.append('x'), 'STORE_IO', 'append: ')
    expectError(() => ro.createSession(), 'STORE_IO', 'createSession: ')
    assert.equal(JSON.stringify(s.envelopes()), snapshot)
    ro.close()
    assertIntact()
  })
})

describe('a store locked by another process', () => {
  test('an append is acknowledged without the write lock; once its batch has waited busyTimeoutMs for it, the next fails with STORE_BUSY and writes nothing', async (t) => {
    const dir = tmpDir(t)
    const file = path.join(dir, 'busy.db')
    const store = Store.open(file, { busyTimeoutMs: 200 })
    const s = store.createSession({ id: 'busy' })
    s.append('before the lock')
    const before = JSON.stringify(s.envelopes())
    // another process takes the write lock (a separate process: two SQLite copies in one process
    // do not see each other's POSIX locks)
    const code = `
      const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))})
      const db = new Database(process.argv[1])
      db.exec('BEGIN IMMEDIATE')
      process.stdout.write('locked\\n')
      process.stdin.on('end', () => { db.exec('ROLLBACK'); db.close(); process.exit(0) })
      process.stdin.resume()
    `
    const child = spawn(process.execPath, ['-e', code, file], { stdio: ['pipe', 'pipe', 'inherit'] })
    const exited = once(child, 'exit')
    await once(child.stdout, 'data')
    let acked
    try {
      // Acknowledged at once: its frame is in this process's append log, its rows wait for the
      // write lock (docs/recovery.md, "The append log").
      acked = s.append('while locked')
      assert.equal(acked.seq, 1)
      // A read in this process is to show it, so it waits for the lock too, and gives up.
      expectError(() => s.envelopes(), 'STORE_BUSY', 'envelopes: ')
      // The batch has waited busyTimeoutMs: the next append waits for the lock, and gives up.
      await new Promise((resolve) => setTimeout(resolve, 250))
      const t0 = Date.now()
      expectError(() => s.append('refused'), 'STORE_BUSY', 'append: ')
      assert.ok(Date.now() - t0 >= 150, 'it waited for busyTimeoutMs before giving up')
    } finally {
      child.stdin.end()
      await exited
    }
    const after = s.envelopes()
    assert.deepEqual(after.map((e) => e.uuid), [JSON.parse(before)[0].uuid, acked.uuid], 'the acknowledged append is there, the refused one is not')
    const e = s.append('after the lock')
    assert.equal(e.seq, 2)
    store.close()
  })
})

describe('files that are not usable stores', () => {
  function bytesOf(file) {
    return fs.readFileSync(file)
  }
  function siblings(dir) {
    return fs.readdirSync(dir).sort()
  }

  test('a garbage file: STORE_CORRUPT naming the file, and the file is unchanged byte for byte', (t) => {
    const dir = tmpDir(t)
    const file = path.join(dir, 'garbage.db')
    const junk = Buffer.alloc(64 * 1024)
    for (let i = 0; i < junk.length; i++) junk[i] = (i * 7919 + 13) % 251
    fs.writeFileSync(file, junk)
    expectError(() => Store.open(file), 'STORE_CORRUPT', file)
    assert.ok(bytesOf(file).equals(junk), 'file unchanged')
    assert.deepStrictEqual(siblings(dir), ['garbage.db'], 'no -wal / -shm left behind')
    // text garbage too
    const text = path.join(dir, 'notes.db')
    fs.writeFileSync(text, 'just some notes, not a database\n'.repeat(50))
    const before = bytesOf(text)
    expectError(() => Store.open(text), 'STORE_CORRUPT', text)
    assert.ok(bytesOf(text).equals(before))
  })

  test('a store from a newer schema: STORE_VERSION, and the file is unchanged', (t) => {
    const dir = tmpDir(t)
    const file = path.join(dir, 'newer.db')
    const st = Store.open(file)
    st.createSession({ id: 'kept' }).append('from the future')
    st.close()
    const Database = require('better-sqlite3')
    const db = new Database(file)
    db.pragma('user_version = 99')
    db.close()
    const before = bytesOf(file)
    expectError(() => Store.open(file), 'STORE_VERSION', file)
    expectError(() => Store.open(file, { readonly: true }), 'STORE_VERSION', file)
    assert.ok(bytesOf(file).equals(before), 'file unchanged')
    const ro = openReadonlyDb(file)
    assert.equal(ro.pragma('user_version', { simple: true }), 99)
    assert.equal(ro.prepare('SELECT count(*) AS n FROM records').get().n, 1)
    ro.close()
  })

  test("a plain SQLite database that is not Threadline's: STORE_CORRUPT, and it is left alone", (t) => {
    const dir = tmpDir(t)
    const file = path.join(dir, 'other-app.db')
    const Database = require('better-sqlite3')
    const db = new Database(file)
    db.exec("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('hello')")
    db.close()
    const before = bytesOf(file)
    expectError(() => Store.open(file), 'STORE_CORRUPT', file)
    assert.ok(bytesOf(file).equals(before), 'file unchanged')
    const ro = openReadonlyDb(file)
    assert.deepStrictEqual(ro.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r) => r.name), ['notes'])
    ro.close()
  })

  test('a directory as store path: INVALID_INPUT saying it is a directory, from both APIs; nothing is created in it', async (t) => {
    const dir = tmpDir(t)
    expectError(() => Store.open(dir), 'INVALID_INPUT', `open: path: ${dir} is a directory; a store is a file path`)
    await expectRejection(Store.openAsync(dir), 'INVALID_INPUT', `openAsync: path: ${dir} is a directory`)
    await expectRejection(PromiseStore.open(dir), 'INVALID_INPUT', `open: path: ${dir} is a directory`)
    assert.deepEqual(fs.readdirSync(dir), [])
  })

  test('the promise API says a Promise was given where a record was due (a forgotten await)', async (t) => {
    const store = await PromiseStore.open(path.join(tmpDir(t), 'p.db'))
    const s = await store.createSession()
    await expectRejection(s.append(s.append('x')), 'INVALID_INPUT', 'append: expected a message, an envelope or a string, got a Promise: did you forget await?')
    await expectRejection(s.append(undefined), 'INVALID_INPUT', /got undefined$/)
    assert.deepEqual((await s.messages()).map((m) => m.content[0].text), ['x'])
    await store.close()
  })
})

describe('error objects', () => {
  test('are Errors with a code from ERROR_CODES and a stack', () => {
    const err = expectError(() => new Session().append(42), 'INVALID_INPUT')
    assert.ok(lib.ERROR_CODES.includes(err.code))
    assert.equal(typeof err.stack, 'string')
    for (const code of ['INVALID_INPUT', 'NOT_FOUND', 'SESSION_NOT_EMPTY', 'CLOSED', 'STORE_CORRUPT', 'STORE_VERSION', 'STORE_BUSY', 'STORE_IO']) {
      assert.ok(lib.ERROR_CODES.includes(code), code)
    }
  })

  test('an in-memory session rejects bad input the same way and keeps its records', () => {
    const s = new Session()
    s.append('kept')
    const before = jsonClone(s.envelopes())
    expectError(() => s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 7 }] }), 'INVALID_INPUT', 'append: content[0].tool_use_id: ')
    expectError(() => s.appendMany(['ok', 5]), 'INVALID_INPUT', 'appendMany: [1]')
    assert.deepStrictEqual(s.envelopes(), before)
    s.append('still works')
    assert.equal(s.messages.length, 2)
  })
})
