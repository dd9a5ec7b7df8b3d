'use strict'
// Snapshots: session.snapshot() -> store.importSnapshot(json) / Store.importSnapshot(json, path)
// brings a session back elsewhere exactly (messages byte for byte, envelopes, turns, token state,
// the tool-call journal, the session's info); a damaged, truncated or foreign document is
// SNAPSHOT_INVALID and leaves the target store as it was; a session imported mid-recovery
// recovers the same way it would have where it came from.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const path = require('node:path')

const { lib, tmpDir, expectError, assertSameJson, readJsonl, readInNewProcess } = require('./helpers/util')

const { Store, validateMessages } = lib

const MARKER = 'snapshot marker text: the quick brown fox'

// Deterministic pseudo-random bytes (so the test data is the same on every run).
function bytes(n, seed) {
  const out = Buffer.alloc(n)
  let x = seed >>> 0 || 1
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0
    x ^= x >>> 17
    x ^= x << 5; x >>>= 0
    out[i] = x & 0xff
  }
  return out
}

const IMAGE = bytes(48 * 1024, 7).toString('base64') // ~64 KB of base64, over the 10 KiB blob threshold
const BIG_OUTPUT = Array.from({ length: 800 }, (_, i) => `src/file_${i}.rs: fn item_${i}() -> u64 { ${i} } // ✓ ünïcødé`).join('\n')

// Everything a resumed agent reads from a session.
function stateOf(s) {
  return {
    messages: s.messages,
    envelopes: s.envelopes(),
    turns: s.turns,
    tokenTracker: s.tokenTracker,
    contextFill: s.contextFill,
    toolCalls: s.toolCalls(),
    pendingRepairs: s.pendingRepairs(),
    info: s.info,
  }
}

function withoutUpdatedAt(info) {
  const { updatedAt, ...rest } = info
  return rest
}

function assertSameSession(actual, expected, what) {
  const a = stateOf(actual)
  const e = stateOf(expected)
  assertSameJson(a.messages, e.messages, `${what}: messages`)
  assert.equal(JSON.stringify(a.messages), JSON.stringify(e.messages), `${what}: messages JSON byte-identical`)
  assertSameJson(a.envelopes, e.envelopes, `${what}: envelopes`)
  assert.deepStrictEqual(a.turns, e.turns, `${what}: turns`)
  assert.deepStrictEqual(a.tokenTracker, e.tokenTracker, `${what}: tokenTracker`)
  assert.deepStrictEqual(a.contextFill, e.contextFill, `${what}: contextFill`)
  assert.deepStrictEqual(a.toolCalls, e.toolCalls, `${what}: toolCalls`)
  assert.deepStrictEqual(a.pendingRepairs, e.pendingRepairs, `${what}: pendingRepairs`)
  assert.deepStrictEqual(withoutUpdatedAt(a.info), withoutUpdatedAt(e.info), `${what}: info`)
}

const OPTIONS = {
  project: 'snapshots',
  title: 'A session to move ✈',
  provider: 'anthropic',
  model: 'claude-sonnet-4-5',
  contextWindow: 200000,
  promptKey: 'agent-v3#system-prompt-sha:9f2c',
  metadata: { owner: 'ci', tags: ['a', 'b'], ratio: 0.75, big: 12345678901234567890, nested: { ok: true, none: null } },
}

// A source session: a real Claude Code history, then a turn with an image, a large tool output
// and the journal in every state.
function buildSource(store, fixture, id) {
  const s = store.createSession({ ...OPTIONS, id })
  const report = s.restoreMessages(readJsonl(fixture))
  assert.deepStrictEqual(report.skipped, [])
  s.append({ role: 'user', content: [{ type: 'text', text: MARKER }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: IMAGE } }] })
  s.append({
    id: 'msg_snapshot_1',
    role: 'assistant',
    model: 'claude-sonnet-4-5',
    content: [
      { type: 'thinking', thinking: 'Two calls.', signature: 'EqSig==' },
      { type: 'tool_use', id: 'toolu_snap_big', name: 'Grep', input: { pattern: 'fn', n: 1.5e300 } },
      { type: 'tool_use', id: 'toolu_snap_deny', name: 'Bash', input: { command: 'rm -rf /' } },
      { type: 'tool_use', id: 'toolu_snap_img', name: 'Screenshot', input: {} },
    ],
    stop_reason: 'tool_use',
    usage: { input_tokens: 1200, output_tokens: 80, cache_read_input_tokens: 1000, cache_creation_input_tokens: 0, service_tier: 'standard' },
  })
  s.toolCallStarted('toolu_snap_big')
  s.toolCallStarted('toolu_snap_img')
  s.append({
    role: 'user',
    content: [
      { type: 'tool_result', tool_use_id: 'toolu_snap_big', content: BIG_OUTPUT },
      { type: 'tool_result', tool_use_id: 'toolu_snap_deny', content: "The user doesn't want to proceed with this tool use.", is_error: true },
      { type: 'tool_result', tool_use_id: 'toolu_snap_img', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: IMAGE } }] },
    ],
  }, { toolUseResult: { stdout: BIG_OUTPUT, stderr: '', interrupted: false, isImage: false } })
  s.appendEvent('checkpoint', { note: 'an app event', at: 3 })
  s.append({ role: 'assistant', content: 'Found them.', usage: { input_tokens: 9000, output_tokens: 12 } })
  s.setStatus('completed')
  return s
}

function build(fixture, id = `snap-${fixture.replace(/\W/g, '-')}`) {
  const store = Store.open(':memory:')
  return buildSource(store, fixture, id)
}

// The body of a snapshot sealed again (as a tool that rewrote it would): checksum recomputed.
function reseal(snapshot, change) {
  const doc = JSON.parse(snapshot)
  change(doc.body)
  const body = JSON.stringify(doc.body)
  const sum = crypto.createHash('sha256').update(body).digest('hex')
  return `{"format":"threadline.snapshot","version":1,"sha256":"${sum}","body":${body}}`
}

// A store with a session of its own, and what must not change in it.
function target(t, kind) {
  const store = kind === 'file' ? Store.open(path.join(tmpDir(t), 'target.db')) : Store.open(':memory:')
  const own = store.createSession({ id: 'already-here', project: 'other' })
  own.append('an unrelated session')
  const look = () => ({ sessions: store.listSessions(), own: stateOf(store.openSession('already-here')) })
  return { store, look }
}

describe('round trip', () => {
  for (const fixture of ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']) {
    for (const kind of ['file', 'memory']) {
      test(`${fixture} (+ images, large outputs, journal states) into a ${kind} store`, (t) => {
        const src = build(fixture)
        const snap = src.snapshot()
        assert.equal(typeof snap, 'string')
        assert.equal(src.snapshot(), snap, 'a snapshot of an unchanged session is the same text')
        const { store, look } = target(t, kind)
        const before = look()
        const back = store.importSnapshot(snap)
        assert.equal(back.id, src.id)
        assertSameSession(back, src, 'imported')
        assertSameSession(store.openSession(src.id), src, 'opened again')
        assert.equal(back.info.status, 'completed')
        assert.equal(back.info.title, OPTIONS.title)
        assert.equal(back.info.project, OPTIONS.project)
        assert.deepStrictEqual(back.info.metadata, src.info.metadata)
        assert.equal(back.info.createdAt, src.info.createdAt)
        const calls = Object.fromEntries(back.toolCalls().map((c) => [c.id, c.state]))
        assert.equal(calls.toolu_snap_big, 'completed')
        assert.equal(calls.toolu_snap_deny, 'denied')
        assert.equal(calls.toolu_snap_img, 'completed')
        assertSameJson(back.cachedToolResult('toolu_snap_big'), { type: 'tool_result', tool_use_id: 'toolu_snap_big', content: BIG_OUTPUT })
        // the other session of the target is untouched, and the new one is listed
        const after = look()
        assert.deepStrictEqual(after.own, before.own)
        assert.deepStrictEqual(after.sessions.map((i) => i.id).sort(), ['already-here', src.id].sort())
        if (kind === 'file') {
          const fromDisk = readInNewProcess(store.path, src.id)
          assert.equal(JSON.stringify(fromDisk.messages), JSON.stringify(src.messages), 'a new process reads the same bytes')
          assertSameJson(fromDisk.envelopes, src.envelopes())
          assert.deepStrictEqual(fromDisk.turns, src.turns)
          assert.deepStrictEqual(fromDisk.tokenTracker, src.tokenTracker)
        }
        // and it goes on like any session
        back.append('one more prompt')
        assert.equal(back.messages.length, src.messages.length + 1)
      })
    }
  }

  test('Store.importSnapshot(json, path, options) opens the store at path and imports into it', (t) => {
    const src = build('short.jsonl', 'static-import')
    const file = path.join(tmpDir(t), 'static.db')
    const back = Store.importSnapshot(src.snapshot(), file, { durability: 'power' })
    assertSameSession(back, src, 'static import')
    assertSameSession(Store.open(file).openSession('static-import'), src, 'reopened')
    const mem = Store.importSnapshot(src.snapshot(), ':memory:')
    assertSameSession(mem, src, 'static import into :memory:')
  })

  test('the imported session keeps its updatedAt (listSessions orders by it)', async (t) => {
    const src = build('short.jsonl', 'updated-at')
    // Written a few ms after the source's last write, so 'already-here' is newer by the clock
    // (within one ms the tie would go to write order, where the import comes last).
    await new Promise((r) => setTimeout(r, 5))
    const { store } = target(t, 'memory')
    await new Promise((r) => setTimeout(r, 20)) // so an import-time updatedAt would differ
    const back = store.importSnapshot(src.snapshot())
    assert.equal(back.info.updatedAt, src.info.updatedAt)
    assert.deepStrictEqual(store.listSessions().map((i) => i.id), ['already-here', 'updated-at'], 'the older session is listed after the newer one')
  })

  test('a session with no records, and one with only events, round-trip', () => {
    const store = Store.open(':memory:')
    const empty = store.createSession({ id: 'empty' })
    const events = store.createSession({ id: 'events-only', metadata: { x: 1 } })
    events.appendEvent('started', { a: 1 })
    events.appendEvent('paused', null)
    for (const src of [empty, events]) {
      const back = Store.open(':memory:').importSnapshot(src.snapshot())
      assertSameSession(back, src, src.id)
    }
  })

  test('openSession(id, { promptKey }) on an imported session: the same key opens it, another is PROMPT_MISMATCH', (t) => {
    const src = build('short.jsonl', 'keyed')
    const { store } = target(t, 'file')
    store.importSnapshot(src.snapshot())
    assert.equal(store.openSession('keyed', { promptKey: OPTIONS.promptKey }).id, 'keyed')
    assert.equal(store.openSession('keyed').id, 'keyed')
    expectError(() => store.openSession('keyed', { promptKey: 'agent-v4#other-prompt' }), 'PROMPT_MISMATCH', 'keyed')
    expectError(() => store.openSession('keyed', { promptKey: OPTIONS.promptKey + ' ' }), 'PROMPT_MISMATCH')
    expectError(() => Store.open(store.path).openSession('keyed', { promptKey: 'agent-v4#other-prompt' }), 'PROMPT_MISMATCH')
  })
})

describe('bad snapshots write nothing', () => {
  const src = build('tool_heavy.jsonl', 'victim')
  const snap = src.snapshot()

  function assertRejected(t, text, code, ...parts) {
    for (const kind of ['file', 'memory']) {
      const { store, look } = target(t, kind)
      const before = look()
      expectError(() => store.importSnapshot(text), code, 'importSnapshot', ...parts)
      assert.deepStrictEqual(look(), before, `${kind}: the target store is unchanged`)
      expectError(() => store.openSession('victim'), 'NOT_FOUND')
      // the store still works, and the good snapshot still imports
      store.importSnapshot(snap)
    }
  }

  function replaceOnce(text, from, to) {
    const i = text.indexOf(from)
    assert.ok(i >= 0, `${from} is in the snapshot`)
    assert.equal(text.indexOf(from, i + 1), -1, `${from} is in the snapshot once`)
    return text.slice(0, i) + to + text.slice(i + from.length)
  }

  test('one character of a message text changed', (t) => {
    assertRejected(t, replaceOnce(snap, 'the quick brown fox', 'the quick brown fix'), 'SNAPSHOT_INVALID')
  })

  test('a number changed', (t) => {
    const m = /"input_tokens":(\d+)/.exec(snap)
    assert.ok(m)
    const altered = snap.slice(0, m.index) + `"input_tokens":${Number(m[1]) + 1}` + snap.slice(m.index + m[0].length)
    assertRejected(t, altered, 'SNAPSHOT_INVALID')
    assertRejected(t, snap.replace('"version":1', '"version":1.0'), 'SNAPSHOT_INVALID')
  })

  test('a record dropped', (t) => {
    const doc = JSON.parse(snap)
    doc.body.records.splice(5, 1)
    assertRejected(t, JSON.stringify(doc), 'SNAPSHOT_INVALID')
    // the same with the checksum recomputed: the gap in seq is found
    assertRejected(t, reseal(snap, (b) => b.records.splice(5, 1)), 'SNAPSHOT_INVALID', 'records[5]')
  })

  test('keys reordered', (t) => {
    const altered = replaceOnce(snap, `{"type":"text","text":"${MARKER}"}`, `{"text":"${MARKER}","type":"text"}`)
    assert.notEqual(altered, snap)
    assert.deepStrictEqual(JSON.parse(altered), JSON.parse(snap), 'same values, other key order')
    assertRejected(t, altered, 'SNAPSHOT_INVALID')
    // key order inside the session row too
    const doc = JSON.parse(snap)
    const { id, ...rest } = doc.body.session
    doc.body.session = { ...rest, id }
    assertRejected(t, JSON.stringify(doc), 'SNAPSHOT_INVALID')
  })

  test('truncated at every 10% (and one byte short)', (t) => {
    for (let k = 0; k < 10; k++) {
      assertRejected(t, snap.slice(0, Math.floor((snap.length * k) / 10)), 'SNAPSHOT_INVALID')
    }
    assertRejected(t, snap.slice(0, -1), 'SNAPSHOT_INVALID')
  })

  test('JSON that is not a snapshot', (t) => {
    const foreign = [
      '{}', '[]', 'null', '42', '"a snapshot"', 'true',
      readJsonl('short.jsonl')[0],
      JSON.stringify(src.envelopes()),
      JSON.stringify(JSON.parse(snap).body),
      JSON.stringify({ format: 'threadline.snapshot', version: 1 }),
      JSON.stringify({ ...JSON.parse(snap), format: 'other.snapshot' }),
      JSON.stringify({ ...JSON.parse(snap), sha256: '0'.repeat(64) }),
      JSON.stringify({ ...JSON.parse(snap), body: undefined }),
      readJsonl('short.jsonl').join('\n'),
      'not json at all',
    ]
    for (const text of foreign) assertRejected(t, text, 'SNAPSHOT_INVALID')
    assertRejected(t, snap.replace('"version":1', '"version":2'), 'SNAPSHOT_INVALID', 'upgrade')
    const { store } = target(t, 'memory')
    for (const bad of [undefined, null, 5, {}, Buffer.from(snap)]) expectError(() => store.importSnapshot(bad), 'INVALID_INPUT', 'importSnapshot')
  })

  test('a well-sealed snapshot with invalid contents', (t) => {
    const assistantIndex = JSON.parse(snap).body.records.findIndex((r) => r.message && r.message.role === 'assistant')
    const cases = [
      ['records swapped', (b) => { [b.records[1], b.records[2]] = [b.records[2], b.records[1]] }, 'records[1]'],
      ['a message the API would reject', (b) => { b.records[assistantIndex].message.content = [{ type: 'tool_use', id: 'x', input: {} }] }, `records[${assistantIndex}]`],
      ['a uuid used twice', (b) => { b.records[2].uuid = b.records[1].uuid }, 'records[2]'],
      ['an unknown journal state', (b) => { b.journal[0].state = 'exploded' }, 'exploded'],
      ['an unknown field in the body', (b) => { b.extra = 1 }, 'extra'],
      ['no records', (b) => { delete b.records }, 'records'],
    ]
    for (const [what, change, part] of cases) {
      assertRejected(t, reseal(snap, change), 'SNAPSHOT_INVALID', part)
      assert.ok(what)
    }
  })

  for (const [what, change] of [
    ['an empty session id', (b) => { b.session.id = '' }],
    ['an unknown status', (b) => { b.session.status = 'exploded' }],
    ['metadata that is not a JSON object', (b) => { b.session.metadata = 'not json {' }],
    ['a negative contextWindow', (b) => { b.session.contextWindow = -5 }],
  ]) {
    test(`a well-sealed snapshot with ${what} in its session row`, (t) => {
      assertRejected(t, reseal(snap, change), 'SNAPSHOT_INVALID')
    })
  }

  test('importing the same snapshot twice: the second fails (the id is taken) and writes nothing', (t) => {
    for (const kind of ['file', 'memory']) {
      const { store, look } = target(t, kind)
      const first = store.importSnapshot(snap)
      first.append('the imported session moved on')
      const before = look()
      const victim = stateOf(store.openSession('victim'))
      expectError(() => store.importSnapshot(snap), 'INVALID_INPUT', 'importSnapshot', "'victim'", 'already exists')
      assert.deepStrictEqual(look(), before)
      assert.deepStrictEqual(stateOf(store.openSession('victim')), victim)
    }
  })

  test('the source session is not changed by taking a snapshot', () => {
    const s = build('short.jsonl', 'untouched')
    const before = stateOf(s)
    s.snapshot()
    assert.deepStrictEqual(stateOf(s), before)
  })
})

describe('a snapshot taken mid-recovery', () => {
  test('unanswered calls: imported elsewhere, pendingRepairs and recover() give the same repairs', async (t) => {
    const store = Store.open(path.join(tmpDir(t), 'source.db'))
    const s = store.createSession({ id: 'mid-recovery', promptKey: 'pk' })
    s.restoreMessages(readJsonl('short.jsonl'))
    s.append('clean the build dir and list it')
    s.append({
      role: 'assistant',
      content: [
        { type: 'tool_use', id: 'toolu_m1', name: 'Bash', input: { command: 'ls' } },
        { type: 'tool_use', id: 'toolu_m2', name: 'Bash', input: { command: 'rm -rf build' } },
        { type: 'tool_use', id: 'toolu_m3', name: 'Read', input: { path: 'README.md' } },
        { type: 'tool_use', id: 'toolu_m4', name: 'Bash', input: { command: 'make' } },
      ],
    })
    s.toolCallStarted('toolu_m1')
    s.recordToolOutcome('toolu_m1', { content: 'build\nsrc', toolUseResult: { stdout: 'build\nsrc' } })
    s.toolCallStarted('toolu_m2')
    s.toolCallStarted('toolu_m3')
    const snap = s.snapshot()
    const copy = Store.open(':memory:').importSnapshot(snap)
    assertSameSession(copy, s, 'before recovery')
    const planned = s.pendingRepairs()
    assert.deepStrictEqual(planned.map((r) => [r.toolUseId, r.kind]), [
      ['toolu_m1', 'backfill'], ['toolu_m2', 'unknown_outcome'], ['toolu_m3', 'unknown_outcome'], ['toolu_m4', 'never_started'],
    ])
    assert.deepStrictEqual(copy.pendingRepairs(), planned)
    const options = () => ({ isSafe: (c) => c.name === 'Read', replay: async (c) => ({ content: `# ${c.input.path}` }) })
    const a = await s.recover(options())
    const b = await copy.recover(options())
    assert.deepStrictEqual(b, a)
    assert.deepStrictEqual(a.repairs.map((r) => [r.toolUseId, r.kind]), [
      ['toolu_m1', 'backfill'], ['toolu_m2', 'unknown_outcome'], ['toolu_m3', 'replayed'], ['toolu_m4', 'never_started'],
    ])
    const strip = (envs) => envs.map(({ timestamp, ...rest }) => rest)
    assertSameJson(strip(copy.envelopes()), strip(s.envelopes()), 'the same records, repair uuids included')
    assert.deepStrictEqual(validateMessages(s.messages.slice(-3)), [], 'the recovered turn is valid')
    assert.deepStrictEqual(validateMessages(copy.messages.slice(-3)), [], 'the recovered turn of the copy is valid')
    assert.deepStrictEqual(copy.toolCalls().map((c) => [c.id, c.state]), s.toolCalls().map((c) => [c.id, c.state]))
    assert.deepStrictEqual(await copy.recover(), { repairs: [], recordsWritten: 0, clean: true })
  })

  test('a stream cut off mid-way: the copy closes it the same way', async (t) => {
    const file = path.join(tmpDir(t), 'stream-src.db')
    const s = Store.open(file).createSession({ id: 'mid-stream' })
    s.append('weather?')
    const w = s.beginResponse({ requestId: 'req_mid', model: 'gpt-5' })
    for (const chunk of [
      { type: 'reasoning', text: 'Check the forecast.', signature: 'sig_1' },
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_call_delta', id: 'call_w', name: 'get_weather', delta: '{"city":"Oslo"}' },
      { type: 'text', text: 'Half a sent' },
    ]) w.push(chunk)
    // abandoned: the process died
    const src = Store.open(file).openSession('mid-stream')
    const copy = Store.open(':memory:').importSnapshot(src.snapshot())
    const planned = src.pendingRepairs()
    assert.equal(planned[0].kind, 'close_stream')
    assert.deepStrictEqual(copy.pendingRepairs(), planned)
    const a = await src.recover()
    const b = await copy.recover()
    assert.deepStrictEqual(b, a)
    const strip = (envs) => envs.map(({ timestamp, ...rest }) => rest)
    assertSameJson(strip(copy.envelopes()), strip(src.envelopes()))
    assert.deepStrictEqual(validateMessages(copy.messages), [])
    assert.deepStrictEqual(validateMessages(src.messages), [])
  })
})
