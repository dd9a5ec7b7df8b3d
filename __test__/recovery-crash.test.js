'use strict'
// The crash matrix of recovery (issue 3). Each case runs an agent conversation in a real child
// process (helpers/recovery-writer.js) that is SIGKILLed at a named point: mid-stream (in text, in
// thinking, in a tool_use input), after the assistant message with tool calls, after
// toolCallStarted, after recordToolOutcome, with parallel calls half done, during appendMany.
// This test process is the new process that resumes. For each case:
//   - what the child acknowledged is there: uuids, seq order, messages deep-equal (key order
//     too), journal states, every streamed chunk;
//   - the session shows in store.interruptedSessions() (and a session the child closed does not);
//   - pendingRepairs() tells the truth about each call, recover() does it, the repair records are
//     in envelopes() with their `type` and `repair`, and validateMessages(messages) is [];
//   - recover() again writes nothing and reports clean; the session can be continued.
// Plus: SESSION_LOCKED for a second writer while the first lives, take-over after it is killed,
// and no interrupted session after a clean exit.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { once } = require('node:events')
const { setTimeout: sleep } = require('node:timers/promises')

const { mulberry32 } = require('./helpers/seeded')
const { lib, tmpDir, assertSameJson, normalizeMessage, jsonClone, expectError, expectRejection, readInNewProcess } = require('./helpers/util')

const { Store, validateMessages } = lib
const WRITER = path.join(__dirname, 'helpers', 'recovery-writer.js')
const RAW = require('./fixtures/anthropic-stream-events.json')
const SIMPLE = require('./fixtures/simple-stream-chunks.json')

const MODEL = 'claude-sonnet-4-5-20250929'
const IDS = {
  test: 'toolu_01BashRunTests7Hq2kXv',
  read: 'toolu_01ReadLexer3mNcY8pQ',
  edit: 'toolu_01EditLexerFix9zRtW',
  rerun: 'toolu_01BashRerun5sLdK2f',
  readTest: 'toolu_01ReadRawTest4vBn6M',
  gitLog: 'toolu_01BashGitLog8wQe1Z',
  fmt: 'toolu_01BashFmtAll2pXr7J',
  readToken: 'toolu_01ReadToken6tGh3Wc',
}

// ---------------------------------------------------------------------------------------------
// the child

// Starts the writer on `file` for `caseName`; the child is killed when the test ends, whatever
// happens.
function startWriter(t, file, caseName, sessionId) {
  const args = [WRITER, file, caseName]
  if (sessionId) args.push(sessionId)
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  const w = { child, out: '', err: '', exited: false, code: null, signal: null }
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (d) => { w.out += d })
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d) => { w.err += d })
  w.closed = once(child, 'close').then(([code, signal]) => {
    w.exited = true
    w.code = code
    w.signal = signal
  })
  t.after(async () => {
    if (!w.exited) {
      child.kill('SIGKILL')
      await w.closed
    }
  })
  // complete lines only: a line cut by the kill was never fully reported
  w.lines = () => w.out.split('\n').slice(0, -1)
  // the payload of the first complete line starting with `prefix `
  w.waitLine = async (prefix, ms = 15000) => {
    const end = Date.now() + ms
    for (;;) {
      const line = w.lines().find((l) => l.startsWith(prefix + ' '))
      if (line !== undefined) return line.slice(prefix.length + 1)
      if (w.exited) assert.fail(`${caseName}: child exited (code ${w.code}, signal ${w.signal}) before ${prefix}:\n${w.err}`)
      if (Date.now() > end) assert.fail(`${caseName}: no ${prefix} line within ${ms} ms:\n${w.err}`)
      await sleep(2)
    }
  }
  w.kill = async () => {
    assert.ok(!w.exited, `${caseName}: child still alive when it is to be killed (code ${w.code}):\n${w.err}`)
    child.kill('SIGKILL')
    await w.closed
    assert.equal(w.signal, 'SIGKILL', `${caseName}: child was killed by SIGKILL:\n${w.err}`)
  }
  return w
}

// Runs `caseName` to its READY point and SIGKILLs the child there. Returns what it acknowledged.
async function crashAt(t, file, caseName) {
  const w = startWriter(t, file, caseName)
  const ready = JSON.parse(await w.waitLine('READY'))
  await w.kill()
  return ready
}

// ---------------------------------------------------------------------------------------------
// checks

const expectedMessage = (input) => jsonClone(typeof input === 'string' ? { role: 'user', content: [{ type: 'text', text: input }] } : normalizeMessage(input))

// The tool_use ids of an acknowledged record, in order.
function callIds(record) {
  const m = typeof record.input === 'string' ? null : record.input
  return m && m.role === 'assistant' ? m.content.filter((b) => b.type === 'tool_use').map((b) => b.id) : []
}

// The journal state each acknowledged journal write implies.
function expectedCallStates(ready) {
  const states = {}
  for (const r of ready.records) for (const id of callIds(r)) states[id] = 'requested'
  for (const j of ready.journal) {
    if (j.op === 'started') states[j.id] = 'started'
    else states[j.id] = j.result.is_error ? 'failed' : 'completed'
  }
  return states
}

const stateMap = (calls) => Object.fromEntries(calls.map((c) => [c.id, c.state]))

// Everything the child acknowledged is in the store, as it was given.
function checkAcknowledged(session, ready, what) {
  const envs = session.envelopes()
  envs.forEach((e, i) => {
    assert.equal(e.seq, i, `${what}: seq contiguous at ${i}`)
    assert.equal(e.sessionId, ready.sessionId)
    assert.equal(e.parentUuid, i === 0 ? null : envs[i - 1].uuid, `${what}: parent chain at ${i}`)
  })
  // the message records are exactly the acknowledged ones, in order, as appended
  const messageEnvs = envs.filter((e) => e.type !== 'stream')
  assert.deepStrictEqual(messageEnvs.map((e) => e.uuid), ready.records.map((r) => r.uuid), `${what}: acknowledged records, in order`)
  let lastSeq = -1
  for (const r of ready.records) {
    const e = envs[r.seq]
    assert.ok(r.seq > lastSeq, `${what}: acknowledged seqs increase`)
    lastSeq = r.seq
    assert.equal(e.uuid, r.uuid, `${what}: uuid at seq ${r.seq}`)
    assertSameJson(e.message, expectedMessage(r.input), `${what}: message at seq ${r.seq}`)
    for (const [k, v] of Object.entries(r.extra ?? {})) assertSameJson(e[k], v, `${what}: envelope.${k} at seq ${r.seq}`)
  }
  const messages = session.messages
  assert.equal(messages.length, ready.records.length, `${what}: stream records stay out of messages`)
  messages.forEach((m, i) => assertSameJson(m, expectedMessage(ready.records[i].input), `${what}: messages[${i}]`))

  // every pushed chunk was persisted, in order, in stream records of the open response
  const streamEnvs = envs.filter((e) => e.type === 'stream')
  if (ready.pushed.length === 0) {
    assert.equal(streamEnvs.length, 0, `${what}: no stream records`)
  } else {
    streamEnvs.forEach((e, i) => {
      assert.equal(e.includeInContext, false)
      assert.equal(e.stream.id, ready.streamId, `${what}: stream record ${i} of the open response`)
      assert.equal(e.stream.part, i, `${what}: stream parts in order`)
    })
    assertSameJson(streamEnvs.flatMap((e) => e.stream.chunks), jsonClone(ready.pushed), `${what}: persisted chunks = pushed chunks`)
  }

  // the journal: each call in the state the acknowledged writes put it in
  assert.deepStrictEqual(stateMap(session.toolCalls()), expectedCallStates(ready), `${what}: journal states`)
  for (const j of ready.journal.filter((x) => x.op === 'outcome')) {
    const block = { type: 'tool_result', tool_use_id: j.id, content: j.result.content }
    if (j.result.is_error) block.is_error = true
    assert.deepStrictEqual(session.cachedToolResult(j.id), block, `${what}: cachedToolResult(${j.id})`)
  }
  return envs
}

// The repairs, reduced to what must be exact.
const repairFacts = (repairs) => repairs.map((r) => {
  const f = { kind: r.kind }
  if (r.toolUseId !== undefined) f.toolUseId = r.toolUseId
  if (r.name !== undefined) f.name = r.name
  if (r.state !== undefined) f.state = r.state
  return f
})

function checkRepairShape(repairs, what) {
  for (const r of repairs) {
    assert.equal(typeof r.reason, 'string', `${what}: repair reason`)
    assert.ok(r.reason.length > 0, `${what}: repair reason not empty`)
    if (r.kind === 'unknown_outcome' || r.kind === 'left') {
      assert.doesNotMatch(r.reason, /reject/i, `${what}: an unknown outcome is not a rejection`)
    }
  }
}

// A tool_result block written by recovery, checked against what is known about its call.
function checkResultBlock(block, id, kind, truth, what) {
  assert.equal(block.type, 'tool_result', what)
  assert.equal(block.tool_use_id, id, what)
  if (kind === 'never_started') {
    assert.equal(block.is_error, true, `${what}: a call that never ran is an error result`)
    assert.match(block.content, /not run|never started/i, `${what}: says it never ran`)
    assert.match(block.content, /nothing was executed/i, `${what}: says nothing was executed`)
  } else if (kind === 'unknown_outcome') {
    assert.equal(block.is_error, true, `${what}: an unknown outcome is an error result`)
    assert.match(block.content, /outcome is unknown/i, `${what}: says the outcome is unknown`)
    assert.match(block.content, /side effects/i, `${what}: says side effects are possible`)
    assert.doesNotMatch(block.content, /reject/i, `${what}: an unknown outcome is not a rejection`)
  } else {
    // backfill / replayed: the recorded result, as it was recorded
    const expected = { type: 'tool_result', tool_use_id: id, content: truth.content }
    if (truth.is_error) expected.is_error = true
    assertSameJson(block, jsonClone(expected), `${what}: the recorded result`)
  }
}

// The record answering the calls of the latest response: one tool_result message, its blocks in
// call order, saying the truth about each call. `truths`: { [id]: recorded result } for calls
// with a recorded (or replayed) outcome.
function checkToolResultsRecord(env, report, truths, what) {
  const answered = report.repairs.filter((r) => r.toolUseId && r.recordUuid)
  assert.ok(answered.length > 0, `${what}: calls answered`)
  for (const r of answered) assert.equal(r.recordUuid, env.uuid, `${what}: repair ${r.toolUseId} names its record`)
  assert.equal(env.type, 'tool_result', `${what}: repair record type`)
  assert.deepStrictEqual(env.repair, { kind: 'tool_results', calls: answered.map((r) => ({ toolUseId: r.toolUseId, kind: r.kind })) }, `${what}: envelope.repair`)
  assert.equal(env.message.role, 'user')
  assert.equal(env.message.content.length, answered.length, `${what}: one block per call`)
  answered.forEach((r, i) => checkResultBlock(env.message.content[i], r.toolUseId, r.kind, truths[r.toolUseId], `${what}: block for ${r.toolUseId}`))
}

function checkInterrupted(store, ready, what) {
  const found = store.interruptedSessions()
  assert.deepStrictEqual(found.map((i) => i.id), [ready.sessionId], `${what}: the killed writer's session (only) is interrupted`)
  assert.equal(found[0].status, 'active')
  assert.ok(!found.some((i) => i.id === ready.doneId), `${what}: the session closed before is not interrupted`)
}

// recover() again: nothing to do, nothing written.
async function checkIdempotent(session, what) {
  const count = session.envelopes().length
  assert.deepStrictEqual(session.pendingRepairs(), [], `${what}: nothing pending after recovery`)
  const again = await session.recover()
  assert.deepStrictEqual(again, { repairs: [], recordsWritten: 0, clean: true }, `${what}: second recover() is clean`)
  assert.equal(session.envelopes().length, count, `${what}: second recover() wrote nothing`)
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: still valid`)
}

// The recovered history reads the same from another new process.
function checkFromNewProcess(file, session, what) {
  const read = readInNewProcess(file, session.id)
  assertSameJson(read.messages, session.messages, `${what}: messages from a new process`)
  assert.equal(read.envelopes.length, session.envelopes().length, `${what}: envelopes from a new process`)
}

// The agent goes on: a response for the last user message if it has none, then a new prompt and
// its response. The history stays valid and the last turn is complete.
function continueSession(session, what) {
  const last = session.messages.at(-1)
  if (last.role === 'user') {
    session.append({ role: 'assistant', content: [{ type: 'text', text: 'Picking up after the interruption: I will check the current state first.' }], stop_reason: 'end_turn' })
  }
  session.append('Please continue where you left off, and re-run the tests at the end.')
  session.append({
    id: 'msg_01ThreadlineResumed',
    type: 'message',
    role: 'assistant',
    model: MODEL,
    content: [{ type: 'text', text: 'Resumed. The lexer fix is in place and `cargo test -p parser` passes.' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 2400, cache_creation_input_tokens: 0, cache_read_input_tokens: 6000, output_tokens: 40 },
  })
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: valid after continuing`)
  assert.equal(session.turns.at(-1).status, 'complete', `${what}: last turn complete`)
}

// Opens the store in this (new) process and runs the checks that come before recovery.
function reopen(file, ready, what) {
  const store = Store.open(file)
  const session = store.openSession(ready.sessionId)
  const before = checkAcknowledged(session, ready, what)
  checkInterrupted(store, ready, what)
  return { store, session, before }
}

// After recovery: the writer of this process holds the session; nothing is interrupted.
function checkTakenOver(store, what) {
  assert.deepStrictEqual(store.interruptedSessions(), [], `${what}: no interrupted session once recovered here`)
}

// ---------------------------------------------------------------------------------------------
// the matrix: tool calls

test('killed after the assistant message with tool calls, before any started: never_started', { timeout: 20000 }, async (t) => {
  const what = 'after-assistant'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const { store, session, before } = reopen(file, ready, what)

  const expected = [
    { kind: 'never_started', toolUseId: IDS.edit, name: 'Edit', state: 'requested' },
    { kind: 'never_started', toolUseId: IDS.rerun, name: 'Bash', state: 'requested' },
  ]
  const pending = session.pendingRepairs()
  assert.deepStrictEqual(repairFacts(pending), expected, `${what}: pendingRepairs`)
  checkRepairShape(pending, what)
  assert.equal(session.envelopes().length, before.length, `${what}: pendingRepairs writes nothing`)

  const report = await session.recover()
  assert.deepStrictEqual(repairFacts(report.repairs), expected, `${what}: recover repairs`)
  assert.deepStrictEqual(report.repairs.map((r) => r.recordUuid), pending.map((r) => r.recordUuid), `${what}: the plan names the record recover writes`)
  assert.equal(report.recordsWritten, 1)
  assert.equal(report.clean, false)
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: valid after recover`)
  const added = session.envelopes().slice(before.length)
  assert.equal(added.length, 1)
  checkToolResultsRecord(added[0], report, {}, what)
  assert.deepStrictEqual(added[0].parentUuid, before.at(-1).uuid)

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

test('killed after toolCallStarted, before the outcome: unknown_outcome, or left with unknownOutcome "leave"', { timeout: 20000 }, async (t) => {
  const what = 'after-started'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const { store, session, before } = reopen(file, ready, what)

  const pending = session.pendingRepairs()
  assert.deepStrictEqual(repairFacts(pending), [{ kind: 'unknown_outcome', toolUseId: IDS.edit, name: 'Edit', state: 'started' }], `${what}: pendingRepairs`)
  checkRepairShape(pending, what)

  // 'leave': reported, nothing written, the call still unanswered
  const left = await session.recover({ unknownOutcome: 'leave' })
  assert.deepStrictEqual(repairFacts(left.repairs), [{ kind: 'left', toolUseId: IDS.edit, name: 'Edit', state: 'started' }], `${what}: leave`)
  checkRepairShape(left.repairs, what)
  assert.equal(left.repairs[0].recordUuid, undefined, `${what}: a left call names no record`)
  assert.equal(left.recordsWritten, 0, `${what}: leave writes nothing`)
  assert.equal(session.envelopes().length, before.length, `${what}: leave wrote nothing`)
  assert.deepStrictEqual(validateMessages(session.messages).map((p) => p.code), ['tool_use_without_result'], `${what}: still unanswered after leave`)
  assert.deepStrictEqual(repairFacts(session.pendingRepairs()), repairFacts(pending), `${what}: still pending after leave`)
  assert.equal(session.toolCalls().find((c) => c.id === IDS.edit).state, 'started')

  // an Edit is not safe to re-run: replay is never called for it
  const replayed = []
  const report = await session.recover({
    isSafe: (call) => call.name === 'Read' || call.name === 'Grep',
    replay: async (call) => { replayed.push(call.id); return { content: 'should not run' } },
  })
  assert.deepStrictEqual(replayed, [], `${what}: an unsafe call is not replayed`)
  assert.deepStrictEqual(repairFacts(report.repairs), repairFacts(pending), `${what}: recover repairs`)
  checkRepairShape(report.repairs, what)
  assert.equal(report.recordsWritten, 1)
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: valid after recover`)
  const added = session.envelopes().slice(before.length)
  assert.equal(added.length, 1)
  checkToolResultsRecord(added[0], report, {}, what)

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

test('killed after recordToolOutcome, before the tool_result message: backfill with the recorded result', { timeout: 20000 }, async (t) => {
  const what = 'after-outcome'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const { store, session, before } = reopen(file, ready, what)
  const recorded = ready.journal.find((j) => j.op === 'outcome' && j.id === IDS.rerun).result

  const pending = session.pendingRepairs()
  assert.deepStrictEqual(repairFacts(pending), [{ kind: 'backfill', toolUseId: IDS.rerun, name: 'Bash', state: 'completed' }], `${what}: pendingRepairs`)
  checkRepairShape(pending, what)

  const report = await session.recover()
  assert.deepStrictEqual(repairFacts(report.repairs), repairFacts(pending), `${what}: recover repairs`)
  assert.equal(report.recordsWritten, 1)
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: valid after recover`)
  const added = session.envelopes().slice(before.length)
  assert.equal(added.length, 1)
  checkToolResultsRecord(added[0], report, { [IDS.rerun]: recorded }, what)
  assertSameJson(added[0].toolUseResult, recorded.toolUseResult, `${what}: the recorded toolUseResult is on the record`)
  assert.equal(session.toolCalls().find((c) => c.id === IDS.rerun).state, 'completed')

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

test('killed with parallel calls half done: backfill, replayed (safe), unknown_outcome, never_started', { timeout: 20000 }, async (t) => {
  const what = 'parallel-half'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const { store, session, before } = reopen(file, ready, what)
  const outcomes = Object.fromEntries(ready.journal.filter((j) => j.op === 'outcome').map((j) => [j.id, j.result]))

  const pending = session.pendingRepairs()
  assert.deepStrictEqual(repairFacts(pending), [
    { kind: 'backfill', toolUseId: IDS.readTest, name: 'Read', state: 'completed' },
    { kind: 'backfill', toolUseId: IDS.gitLog, name: 'Bash', state: 'failed' },
    { kind: 'unknown_outcome', toolUseId: IDS.readToken, name: 'Read', state: 'started' },
    { kind: 'unknown_outcome', toolUseId: IDS.fmt, name: 'Bash', state: 'started' },
    { kind: 'never_started', toolUseId: IDS.edit, name: 'Edit', state: 'requested' },
  ], `${what}: pendingRepairs (default options: nothing is safe)`)
  checkRepairShape(pending, what)
  assert.equal(new Set(pending.map((r) => r.recordUuid)).size, 1, `${what}: one record answers them all`)

  // Read is safe to re-run: the started one without outcome is replayed, once, with its input
  const replayCalls = []
  const replayResult = { content: '     1\tpub enum Token {\n     2\t    RawStr(String),\n     3\t    Ident(String),\n     4\t}' }
  const report = await session.recover({
    isSafe: (call) => call.name === 'Read' || call.name === 'Grep',
    replay: async (call) => {
      replayCalls.push(call)
      await sleep(5)
      return replayResult
    },
  })
  assert.deepStrictEqual(replayCalls.map((c) => [c.id, c.name, c.state]), [[IDS.readToken, 'Read', 'started']], `${what}: replayed exactly the safe started call`)
  assert.deepStrictEqual(replayCalls[0].input, { file_path: '/home/dev/acme/crates/parser/src/token.rs', limit: 40 })
  assert.deepStrictEqual(repairFacts(report.repairs), [
    { kind: 'backfill', toolUseId: IDS.readTest, name: 'Read', state: 'completed' },
    { kind: 'backfill', toolUseId: IDS.gitLog, name: 'Bash', state: 'failed' },
    { kind: 'replayed', toolUseId: IDS.readToken, name: 'Read', state: 'completed' },
    { kind: 'unknown_outcome', toolUseId: IDS.fmt, name: 'Bash', state: 'started' },
    { kind: 'never_started', toolUseId: IDS.edit, name: 'Edit', state: 'requested' },
  ], `${what}: recover repairs`)
  checkRepairShape(report.repairs, what)
  assert.equal(report.recordsWritten, 1)
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: valid after recover`)
  const added = session.envelopes().slice(before.length)
  assert.equal(added.length, 1)
  checkToolResultsRecord(added[0], report, { ...outcomes, [IDS.readToken]: replayResult }, what)
  assert.equal(added[0].toolUseResult, undefined, `${what}: several results: no single toolUseResult`)
  assert.deepStrictEqual(session.cachedToolResult(IDS.readToken), { type: 'tool_result', tool_use_id: IDS.readToken, content: replayResult.content }, `${what}: the replay's result is recorded`)
  // the calls whose outcome is known keep it (the answered unknown / never-started calls change
  // state when their is_error result is recorded; the repair record keeps what they were)
  const after = stateMap(session.toolCalls())
  assert.deepStrictEqual([IDS.readTest, IDS.gitLog, IDS.readToken].map((id) => after[id]), ['completed', 'failed', 'completed'], `${what}: journal after recovery`)
  assert.notEqual(after[IDS.fmt], 'completed', `${what}: an unknown outcome is not reported as completed`)
  assert.notEqual(after[IDS.edit], 'completed', `${what}: a call never run is not reported as completed`)

  // again, with every call called safe: nothing is replayed twice, nothing written
  const count = session.envelopes().length
  const again = await session.recover({ isSafe: () => true, replay: async (call) => { replayCalls.push(call); return 'again' } })
  assert.deepStrictEqual(again, { repairs: [], recordsWritten: 0, clean: true }, `${what}: second recover() with replay is clean`)
  assert.equal(replayCalls.length, 1, `${what}: no call replayed a second time`)
  assert.equal(session.envelopes().length, count)
  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

// ---------------------------------------------------------------------------------------------
// the matrix: mid-stream

// Recovers a session whose response was cut mid-stream; returns the close_stream record and the
// tool_results record (if any).
async function recoverStream(file, ready, what, { expectedCalls = [] } = {}) {
  const { store, session, before } = reopen(file, ready, what)
  const pending = session.pendingRepairs()
  const expected = [{ kind: 'close_stream' }, ...expectedCalls]
  assert.deepStrictEqual(repairFacts(pending), expected, `${what}: pendingRepairs`)
  checkRepairShape(pending, what)
  assert.equal(session.envelopes().length, before.length, `${what}: pendingRepairs writes nothing`)

  const report = await session.recover()
  assert.deepStrictEqual(repairFacts(report.repairs), expected, `${what}: recover repairs`)
  assert.equal(report.repairs[0].recordUuid, pending[0].recordUuid, `${what}: the plan names the record recover writes`)
  assert.equal(report.recordsWritten, expectedCalls.length > 0 ? 2 : 1)
  assert.equal(report.clean, false)
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: valid after recover`)

  const added = session.envelopes().slice(before.length)
  assert.equal(added.length, report.recordsWritten)
  const closed = added[0]
  assert.equal(closed.uuid, report.repairs[0].recordUuid, `${what}: close_stream names its record`)
  assert.equal(closed.type, 'error', `${what}: a stream cut off is closed as an error record`)
  assert.deepStrictEqual(closed.repair, { kind: 'close_stream' })
  assert.equal(closed.streamId, ready.streamId, `${what}: the record of the stream that was open`)
  assert.equal(closed.requestId, ready.requestId, `${what}: requestId carried over`)
  assert.equal(typeof closed.error.message, 'string')
  if (expectedCalls.length > 0) checkToolResultsRecord(added[1], { repairs: report.repairs.slice(1) }, {}, what)
  return { store, session, before, closed, added }
}

// Nothing in `messages` that was cut half-way.
function assertAbsent(session, fragments, what) {
  const json = JSON.stringify(session.messages)
  for (const f of fragments) assert.ok(!json.includes(f), `${what}: ${JSON.stringify(f)} is not in messages`)
}

test('killed mid-stream in a text block: close_stream keeps the signed thinking and the flushed text', { timeout: 20000 }, async (t) => {
  const what = 'mid-text'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const c = RAW.cases[0]
  assert.deepStrictEqual(ready.pushed, c.events.slice(0, 11), `${what}: pushed up to the second text delta`)
  const { store, session, closed } = await recoverStream(file, ready, what)

  const start = c.events[0].message
  const salvaged = session.messages.at(-1)
  assert.equal(closed.includeInContext, undefined, `${what}: the salvaged output is in context`)
  assertSameJson(salvaged, closed.message, `${what}: the last message is the salvaged one`)
  assert.equal(salvaged.role, 'assistant')
  assert.equal(salvaged.id, start.id)
  assert.equal(salvaged.model, start.model)
  assert.equal(salvaged.stop_reason, null, `${what}: the response did not stop`)
  assertSameJson(salvaged.content, [
    c.expected.content[0],                                                       // thinking, with its signature
    { type: 'text', text: c.events[9].delta.text + c.events[10].delta.text },    // the text that had arrived
  ], `${what}: salvaged content`)
  assertAbsent(session, [c.events[11].delta.text, c.expected.content[2].id], what)

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

test('killed mid-stream in a thinking block: the signed thinking before it is kept, the half one is not', { timeout: 20000 }, async (t) => {
  const what = 'mid-thinking'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const chunks = SIMPLE.cases[0].chunks
  assert.deepStrictEqual(ready.pushed.slice(0, 4), chunks.slice(0, 4))
  const { store, session, closed } = await recoverStream(file, ready, what)

  const salvaged = session.messages.at(-1)
  assertSameJson(salvaged, closed.message, `${what}: the last message is the salvaged one`)
  assert.equal(salvaged.role, 'assistant')
  assert.equal(salvaged.model, ready.model, `${what}: the writer's model`)
  assertSameJson(salvaged.content, [SIMPLE.cases[0].expected.content[0]], `${what}: only the complete, signed thinking`)
  assert.deepStrictEqual(salvaged.content[0], { type: 'thinking', thinking: 'Let me check the weather.', signature: 'sig_A' })
  assertAbsent(session, ['Second thought', 'Then call the weather tool'], what)

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

test('killed mid-stream in the first thinking block (raw events): nothing whole, the record stays out of context', { timeout: 20000 }, async (t) => {
  const what = 'mid-thinking-raw'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const c = RAW.cases[0]
  assert.deepStrictEqual(ready.pushed, c.events.slice(0, 5))
  const { store, session, closed } = await recoverStream(file, ready, what)

  assert.equal(closed.includeInContext, false, `${what}: nothing a model may see again`)
  assert.ok(!closed.message || closed.message.content.every((b) => b.type !== 'thinking'), `${what}: no half thinking in the record`)
  assert.equal(session.messages.length, ready.records.length, `${what}: messages unchanged`)
  session.messages.forEach((m, i) => assertSameJson(m, expectedMessage(ready.records[i].input), `${what}: messages[${i}]`))
  assertAbsent(session, [c.events[3].delta.thinking, c.events[4].delta.thinking], what)

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

test('killed mid-stream in a tool_use input (raw events): the half call is left out, no repair for it', { timeout: 20000 }, async (t) => {
  const what = 'mid-tool-input'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const c = RAW.cases[0]
  assert.deepStrictEqual(ready.pushed, c.events.slice(0, 18))
  const { store, session, closed } = await recoverStream(file, ready, what)

  const salvaged = session.messages.at(-1)
  assertSameJson(salvaged, closed.message, `${what}: the last message is the salvaged one`)
  assertSameJson(salvaged.content, c.expected.content.slice(0, 2), `${what}: thinking and text, whole; no tool_use`)
  const callId = c.expected.content[2].id
  assertAbsent(session, [callId, c.events[16].delta.partial_json, c.events[17].delta.partial_json], what)
  assert.ok(!session.toolCalls().some((x) => x.id === callId), `${what}: the half call is not in the journal`)

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

test('killed mid-stream in a second tool input (simple chunks): the whole call is kept and answered never_started', { timeout: 20000 }, async (t) => {
  const what = 'mid-tool-input-simple'
  const file = path.join(tmpDir(t), 'r.db')
  const ready = await crashAt(t, file, what)
  const c = SIMPLE.cases[0]
  assert.deepStrictEqual(ready.pushed.slice(0, 11), c.chunks.slice(0, 11))
  const { store, session, closed, added } = await recoverStream(file, ready, what, {
    expectedCalls: [{ kind: 'never_started', toolUseId: 'call_1', name: 'get_weather', state: 'requested' }],
  })

  const msgs = session.messages
  assertSameJson(msgs.at(-2), closed.message, `${what}: the salvaged response, then its results`)
  assertSameJson(closed.message.content, [
    c.expected.content[0],   // signed thinking
    c.expected.content[2],   // text
    c.expected.content[3],   // call_1, its input whole
  ], `${what}: salvaged content (the unsigned thinking and the half call left out)`)
  assertSameJson(msgs.at(-1), added[1].message)
  assertAbsent(session, ['call_2', 'Ile-', 'Second thought'], what)
  assert.deepStrictEqual(session.toolCalls().map((x) => x.id).filter((id) => id.startsWith('call_')), ['call_1'])

  await checkIdempotent(session, what)
  checkFromNewProcess(file, session, what)
  checkTakenOver(store, what)
  continueSession(session, what)
  store.close()
})

// ---------------------------------------------------------------------------------------------
// appendMany


test('killed during appendMany (batches of 50), several times: acknowledged batches whole, the one in flight all or nothing', { timeout: 40000 }, async (t) => {
  const what = 'append-many'
  const seed = Number(process.env.THREADLINE_CRASH_SEED) || (Date.now() % 1e9)
  t.diagnostic(`seed ${seed} (THREADLINE_CRASH_SEED=${seed} repeats the kill schedule)`)
  const random = mulberry32(seed)
  const file = path.join(tmpDir(t), 'r.db')
  const ROUNDS = 8
  let sessionId = null
  let prompt = null
  const tried = new Map()   // batch -> uuids, over all rounds
  const acked = new Set()
  let before = []           // uuids as of the previous check
  let inFlightKept = 0
  let inFlightLost = 0

  for (let k = 0; k < ROUNDS; k++) {
    const w = startWriter(t, file, what, sessionId)
    const ready = JSON.parse(await w.waitLine('READY'))
    if (k === 0) {
      sessionId = ready.sessionId
      prompt = ready.records[0]
    }
    await sleep(Math.floor(random() * 100))
    await w.kill()

    let last = null
    for (const line of w.lines()) {
      const [kind, batch, rest] = line.split(' ')
      if (kind === 'TRY') {
        tried.set(batch, JSON.parse(rest))
        last = batch
      } else if (kind === 'ACK') {
        assert.equal(batch, last, `${what}: ACK of the batch just tried`)
        acked.add(batch)
      } else {
        assert.equal(kind, 'READY', `${what}: unexpected line ${line}`)
      }
    }
    const inFlight = last !== null && !acked.has(last) ? last : null

    const store = Store.open(file)
    const session = store.openSession(sessionId)
    const envs = session.envelopes()
    const uuids = envs.map((e) => e.uuid)
    envs.forEach((e, i) => {
      assert.equal(e.seq, i, `${what}: seq contiguous at ${i} after kill ${k}`)
      assert.equal(e.parentUuid, i === 0 ? null : envs[i - 1].uuid, `${what}: parent chain at ${i} after kill ${k}`)
    })
    assert.deepStrictEqual(uuids.slice(0, before.length), before, `${what}: earlier records kept after kill ${k}`)
    assert.equal(uuids[0], prompt.uuid)
    assertSameJson(envs[0].message, expectedMessage(prompt.input))
    const at = new Map(uuids.map((u, i) => [u, i]))
    // every record after the prompt belongs to a batch that was tried, all of whose records are
    // there, contiguous and in order
    let seq = 1
    while (seq < envs.length) {
      const batch = envs[seq].metadata && envs[seq].metadata.batch
      assert.ok(tried.has(batch), `${what}: record ${seq} belongs to a tried batch after kill ${k}`)
      const us = tried.get(batch)
      assert.deepStrictEqual(uuids.slice(seq, seq + us.length), us, `${what}: batch ${batch} whole and in order after kill ${k}`)
      us.forEach((u, j) => {
        const e = envs[seq + j]
        assert.equal(e.metadata.batch, batch)
        assert.equal(e.metadata.i, j)
        assert.equal(e.type, j % 2 === 0 ? 'assistant' : 'tool_result')
        assert.equal(e.message.role, j % 2 === 0 ? 'assistant' : 'user')
      })
      seq += us.length
    }
    for (const b of acked) assert.ok(at.has(tried.get(b)[0]), `${what}: acknowledged batch ${b} present after kill ${k}`)
    if (inFlight !== null) {
      const present = tried.get(inFlight).filter((u) => at.has(u)).length
      assert.ok(present === 0 || present === 50, `${what}: batch in flight ${inFlight} all or nothing (${present}/50) after kill ${k}`)
      if (present) inFlightKept++
      else inFlightLost++
    }
    // tried batches of earlier rounds that were not acknowledged stay as they were
    const known = new Set(uuids)
    for (const [b, us] of tried) {
      const n = us.filter((u) => known.has(u)).length
      assert.ok(n === 0 || n === us.length, `${what}: batch ${b} all or nothing`)
    }
    assert.deepStrictEqual(store.interruptedSessions().map((i) => i.id), [sessionId], `${what}: interrupted after kill ${k}`)
    store.close()
    before = uuids
  }
  t.diagnostic(`${before.length} records, ${acked.size} acknowledged batches, in flight at the kill: ${inFlightKept} kept, ${inFlightLost} absent`)
  assert.ok(acked.size > 0, `${what}: the children got to append batches`)

  // recovery: every call of every batch was answered in its batch, nothing to repair
  const store = Store.open(file)
  const session = store.openSession(sessionId)
  assert.deepStrictEqual(session.pendingRepairs(), [], `${what}: nothing to repair`)
  const report = await session.recover()
  assert.deepStrictEqual(report, { repairs: [], recordsWritten: 0, clean: true })
  assert.equal(session.envelopes().length, before.length)
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: valid`)
  continueSession(session, what)
  store.close()
})

// ---------------------------------------------------------------------------------------------
// ownership

test('a second writer gets SESSION_LOCKED while the first lives; reading works; after the kill it takes over', { timeout: 20000 }, async (t) => {
  const what = 'hold'
  const file = path.join(tmpDir(t), 'r.db')
  const w = startWriter(t, file, what)
  const ready = JSON.parse(await w.waitLine('READY'))

  const store = Store.open(file)
  const session = store.openSession(ready.sessionId)
  const envs = checkAcknowledged(session, ready, `${what} (live)`)
  assert.deepStrictEqual(store.interruptedSessions(), [], `${what}: a live writer's session is not interrupted`)
  assert.deepStrictEqual(session.pendingRepairs(), [], `${what}: pendingRepairs reads`)
  assert.deepStrictEqual(validateMessages(session.messages), [])

  expectError(() => session.append('Is anyone there?'), 'SESSION_LOCKED', ready.sessionId)
  expectError(() => session.appendMany(['one', { role: 'assistant', content: 'two' }]), 'SESSION_LOCKED')
  expectError(() => session.appendEvent('note', { from: 'second writer' }), 'SESSION_LOCKED')
  await expectRejection(() => session.recover(), 'SESSION_LOCKED')
  // this process wrote nothing to it
  assert.equal(session.envelopes().length, envs.length, `${what}: the refused writes wrote nothing`)
  assert.deepStrictEqual(session.envelopes(), envs)
  // other sessions of the same store are free
  const other = store.createSession({ title: 'unrelated' })
  other.append('A different task.')
  other.close()
  // another process cannot write it either
  const second = startWriter(t, file, 'try-append', ready.sessionId)
  assert.match(await second.waitLine('RESULT'), /^SESSION_LOCKED /, `${what}: a second process gets SESSION_LOCKED`)
  await second.closed

  await w.kill()
  assert.deepStrictEqual(store.interruptedSessions().map((i) => i.id), [ready.sessionId], `${what}: interrupted once killed`)
  const env = session.append({ role: 'assistant', content: [{ type: 'text', text: 'The lexer snippet shows the off-by-one: `>` must be `>=`.' }], stop_reason: 'end_turn' })
  assert.equal(env.seq, envs.length, `${what}: take-over appends after the last acknowledged record`)
  assert.equal(env.parentUuid, envs.at(-1).uuid)
  session.append('The other agent died; please apply the fix here.')
  session.append({ role: 'assistant', content: [{ type: 'text', text: 'Applying the fix now.' }], stop_reason: 'end_turn' })
  assert.deepStrictEqual(validateMessages(session.messages), [])
  assert.deepStrictEqual(store.interruptedSessions(), [], `${what}: held by this live process now`)

  // now this process holds it: another process is refused, until this one closes the session
  const third = startWriter(t, file, 'try-append', ready.sessionId)
  assert.match(await third.waitLine('RESULT'), /^SESSION_LOCKED /, `${what}: refused while this process holds it`)
  await third.closed
  session.close()
  const fourth = startWriter(t, file, 'try-append', ready.sessionId)
  assert.match(await fourth.waitLine('RESULT'), /^ok /, `${what}: free once closed`)
  await fourth.closed
  assert.deepStrictEqual(store.interruptedSessions(), [], `${what}: the fourth writer closed its store`)
  store.close()
})

test('a writer that closes its session and store and exits leaves no interrupted session', { timeout: 20000 }, async (t) => {
  const what = 'clean-exit'
  const file = path.join(tmpDir(t), 'r.db')
  const w = startWriter(t, file, what)
  const ready = JSON.parse(await w.waitLine('READY'))
  await w.closed
  assert.equal(w.code, 0, `${what}: exited on its own:\n${w.err}`)

  const store = Store.open(file)
  assert.deepStrictEqual(store.interruptedSessions(), [], `${what}: nothing interrupted`)
  const session = store.openSession(ready.sessionId)
  checkAcknowledged(session, ready, what)
  assert.deepStrictEqual(session.pendingRepairs(), [])
  assert.deepStrictEqual(await session.recover(), { repairs: [], recordsWritten: 0, clean: true })
  assert.deepStrictEqual(validateMessages(session.messages), [])
  session.append('Thanks. Now add a regression test for nested raw strings.')
  assert.deepStrictEqual(validateMessages(session.messages), [])
  store.close()
})
