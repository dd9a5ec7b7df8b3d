'use strict'
// The tool-call journal and recovery, as an agent author relies on them: every call's lifecycle
// (requested -> started -> completed / failed / denied), whether it moves through appended
// tool_result messages or through recordToolOutcome; cachedToolResult for idempotency; what
// recover() writes for a session cut off mid-turn (backfill, replay of safe calls, "never
// started", "outcome unknown"), deterministic and idempotent, leaving a history the provider
// accepts.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const {
  lib, ROOT, tmpDir, expectError, expectRejection, assertSameJson, readJsonl, jsonClone, UUID_RE, ISO_RE,
} = require('./helpers/util')

const { Store, validateMessages } = lib

const CC_DENIED_TEXT = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
const CC_REJECTED = 'User rejected tool use'
const FINAL = new Set(['completed', 'failed', 'denied'])
const CALL_TYPES = new Set(['tool_use', 'server_tool_use', 'mcp_tool_use'])

function toolUse(id, name = 'Bash', input = { command: `run ${id}` }) {
  return { type: 'tool_use', id, name, input }
}

function result(id, content, extra = {}) {
  return { type: 'tool_result', tool_use_id: id, content, ...extra }
}

// A session with a prompt and one assistant response making `ids` tool calls.
function sessionWithCalls(store, ids, options = {}) {
  const s = store.createSession(options)
  s.append('do the things')
  s.append({ role: 'assistant', content: [{ type: 'text', text: 'On it.' }, ...ids.map((id) => toolUse(id))] })
  return s
}

function states(session) {
  return Object.fromEntries(session.toolCalls().map((c) => [c.id, c.state]))
}

function assertValid(session, what = 'messages') {
  assert.deepStrictEqual(validateMessages(session.messages), [], `${what}: validateMessages`)
}

// Everything a failed operation must leave as it was.
function observe(session) {
  return {
    envelopes: session.envelopes(),
    toolCalls: session.toolCalls(),
    messages: session.messages,
    info: session.info,
  }
}

describe('lifecycle through appended messages', () => {
  test('requested -> started -> completed, with timestamps, seqs and the call input', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_01'])
    const [requested] = s.toolCalls()
    assert.equal(requested.id, 'toolu_01')
    assert.equal(requested.kind, 'tool_use')
    assert.equal(requested.name, 'Bash')
    assert.deepStrictEqual(requested.input, { command: 'run toolu_01' })
    assert.equal(requested.state, 'requested')
    assert.equal(requested.callSeq, 1)
    assert.equal(requested.callUuid, s.envelopes()[1].uuid)
    assert.match(requested.requestedAt, ISO_RE)
    assert.equal(requested.startedAt, undefined)
    assert.equal(requested.endedAt, undefined)
    assert.equal(requested.resultSeq, undefined)

    s.toolCallStarted('toolu_01')
    const [started] = s.toolCalls()
    assert.equal(started.state, 'started')
    assert.match(started.startedAt, ISO_RE)
    assert.ok(started.startedAt >= started.requestedAt)
    assert.equal(s.cachedToolResult('toolu_01'), null, 'a running call has no cached result')
    s.toolCallStarted('toolu_01') // again: still started, no error
    assert.equal(states(s).toolu_01, 'started')

    const env = s.append({ role: 'user', content: [result('toolu_01', 'a.txt\nb.txt')] }, { toolUseResult: { stdout: 'a.txt\nb.txt', stderr: '' } })
    const [done] = s.toolCalls()
    assert.equal(done.state, 'completed')
    assert.equal(done.resultSeq, env.seq)
    assert.match(done.endedAt, ISO_RE)
    assert.ok(done.endedAt >= done.startedAt)
    assert.deepStrictEqual(s.toolCalls({ state: 'completed' }).map((c) => c.id), ['toolu_01'])
    assert.deepStrictEqual(s.toolCalls({ state: 'started' }), [])
    assertValid(s)
  })

  test('an is_error result makes the call failed; a call can be answered without being started', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_ok', 'toolu_err', 'toolu_blocks'])
    s.toolCallStarted('toolu_err')
    s.append({
      role: 'user',
      content: [
        result('toolu_ok', 'fine'),
        result('toolu_err', 'Exit code 1\nboom', { is_error: true }),
        result('toolu_blocks', [{ type: 'text', text: 'two' }, { type: 'text', text: 'blocks' }], { is_error: false }),
      ],
    })
    assert.deepStrictEqual(states(s), { toolu_ok: 'completed', toolu_err: 'failed', toolu_blocks: 'completed' })
    assert.deepStrictEqual(s.toolCalls({ state: 'failed' }).map((c) => c.id), ['toolu_err'])
    assert.deepStrictEqual(s.pendingRepairs(), [])
  })

  test("denied: Claude Code's rejection (toolUseResult 'User rejected tool use' and its is_error text)", () => {
    const store = Store.open(':memory:')
    const ids = ['toolu_cc', 'toolu_text_only', 'toolu_blocks', 'toolu_plain']
    const s = sessionWithCalls(store, ids)
    for (const id of ids) s.toolCallStarted(id)
    // exactly as Claude Code writes it (short.jsonl, line 11)
    s.append({
      role: 'user',
      content: [{ type: 'tool_result', content: CC_DENIED_TEXT, is_error: true, tool_use_id: 'toolu_cc' }],
    }, { toolUseResult: CC_REJECTED })
    assert.equal(states(s).toolu_cc, 'denied')
    // the rejection text alone (no toolUseResult), as a string and as text blocks; and an
    // ordinary error, which is a failure, not a denial
    s.append({
      role: 'user',
      content: [
        result('toolu_text_only', CC_DENIED_TEXT, { is_error: true }),
        result('toolu_blocks', [{ type: 'text', text: CC_DENIED_TEXT }], { is_error: true }),
        result('toolu_plain', 'Permission denied (os error 13)', { is_error: true }),
      ],
    })
    assert.deepStrictEqual(states(s), {
      toolu_cc: 'denied', toolu_text_only: 'denied', toolu_blocks: 'denied', toolu_plain: 'failed',
    })
    // the envelope alone (Claude Code's toolUseResult), with another is_error text
    const t = sessionWithCalls(store, ['toolu_env'])
    t.append({ role: 'user', content: [result('toolu_env', 'Rejected by the user.', { is_error: true })] }, { toolUseResult: CC_REJECTED })
    assert.equal(states(t).toolu_env, 'denied')
    assert.deepStrictEqual(t.toolCalls({ state: 'denied' }).map((c) => c.id), ['toolu_env'])
  })

  test('server_tool_use + web_search_tool_result and mcp_tool_use + mcp_tool_result in one assistant message settle at once', () => {
    const store = Store.open(':memory:')
    const s = store.createSession()
    s.append('search and echo')
    const webResult = {
      type: 'web_search_tool_result',
      tool_use_id: 'srvtoolu_01',
      content: [{ type: 'web_search_result', title: 'Rust 1.90', url: 'https://blog.rust-lang.org/', encrypted_content: 'Eq0AbC', page_age: null }],
    }
    const mcpOk = { type: 'mcp_tool_result', tool_use_id: 'mcptoolu_01', is_error: false, content: [{ type: 'text', text: 'echoed' }] }
    const mcpErr = { type: 'mcp_tool_result', tool_use_id: 'mcptoolu_02', is_error: true, content: [{ type: 'text', text: 'server down' }] }
    s.append({
      role: 'assistant',
      content: [
        { type: 'text', text: 'Searching.' },
        { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'rust release' } },
        webResult,
        { type: 'mcp_tool_use', id: 'mcptoolu_01', name: 'echo', server_name: 'tools', input: { text: 'hi' } },
        mcpOk,
        { type: 'mcp_tool_use', id: 'mcptoolu_02', name: 'ping', server_name: 'tools', input: {} },
        mcpErr,
        { type: 'text', text: 'Done.' },
      ],
      stop_reason: 'end_turn',
    })
    const calls = s.toolCalls()
    assert.deepStrictEqual(calls.map((c) => [c.id, c.kind, c.name, c.state, c.resultSeq]), [
      ['srvtoolu_01', 'server_tool_use', 'web_search', 'completed', 1],
      ['mcptoolu_01', 'mcp_tool_use', 'echo', 'completed', 1],
      ['mcptoolu_02', 'mcp_tool_use', 'ping', 'failed', 1],
    ])
    assertSameJson(s.cachedToolResult('srvtoolu_01'), webResult, 'web search result')
    assertSameJson(s.cachedToolResult('mcptoolu_01'), mcpOk, 'mcp result')
    assertSameJson(s.cachedToolResult('mcptoolu_02'), mcpErr, 'mcp error')
    assert.deepStrictEqual(s.pendingRepairs(), [], 'nothing is waiting for a result')
    expectError(() => s.toolCallStarted('srvtoolu_01'), 'INVALID_INPUT', 'srvtoolu_01')
    assertValid(s)
  })

  test('tool_use_id is matched exactly: another case or extra whitespace answers nothing (an orphan)', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_AbC'])
    for (const wrong of ['toolu_abc', 'TOOLU_ABC', ' toolu_AbC', 'toolu_AbC ', 'toolu_AbC\n']) {
      const before = s.messages.length
      s.append({ role: 'user', content: [result(wrong, 'not mine')] })
      assert.equal(s.messages.length, before, `${JSON.stringify(wrong)}: kept out of messages`)
      assert.equal(states(s).toolu_AbC, 'requested', `${JSON.stringify(wrong)} does not answer toolu_AbC`)
      expectError(() => s.toolCallStarted(wrong), 'NOT_FOUND', wrong.trim())
      assert.equal(s.cachedToolResult(wrong), null)
    }
    assert.equal(s.envelopes().length, 2 + 5, 'the orphans are in the log')
    s.append({ role: 'user', content: [result('toolu_AbC', 'mine')] })
    assert.equal(states(s).toolu_AbC, 'completed')
    assert.equal(s.messages.length, 3)
    assertValid(s)
  })

  test('an orphan tool_result (no call in history) is kept in envelopes() but out of messages and the journal', () => {
    const store = Store.open(':memory:')
    const s = store.createSession()
    s.append('hi')
    s.append({ role: 'assistant', content: 'hello' })
    const orphan = { role: 'user', content: [result('toolu_ghost', 'from nowhere', { is_error: false })] }
    const env = s.append(orphan, { toolUseResult: { stdout: 'from nowhere' } })
    assert.equal(env.seq, 2)
    const stored = s.envelopes()
    assert.equal(stored.length, 3)
    assertSameJson(stored[2].message, orphan, 'the orphan as stored')
    assert.deepStrictEqual(stored[2].toolUseResult, { stdout: 'from nowhere' })
    assert.equal(s.messages.length, 2)
    assert.deepStrictEqual(s.toolCalls(), [])
    assert.equal(s.cachedToolResult('toolu_ghost'), null)
    assertValid(s)
    s.append('next prompt')
    assert.equal(s.messages.length, 3)
    assertValid(s)

    // the same from restoreMessages
    const r = store.createSession()
    const report = r.restoreMessages([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
      orphan,
      { role: 'user', content: 'next prompt' },
    ])
    assert.deepStrictEqual(report.skipped, [])
    assert.equal(r.envelopes().length, 4)
    assert.deepStrictEqual(r.messages.map((m) => m.content[0].text), ['hi', 'hello', 'next prompt'])
    assert.deepStrictEqual(r.toolCalls(), [])
    assertValid(r)
  })
})

describe('recordToolOutcome and cachedToolResult', () => {
  test('recordToolOutcome settles a call in the journal only; cachedToolResult returns it', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_ok', 'toolu_err', 'toolu_deny', 'toolu_blocks'])
    const envCount = s.envelopes().length
    for (const id of ['toolu_ok', 'toolu_err', 'toolu_blocks']) s.toolCallStarted(id)
    s.recordToolOutcome('toolu_ok', { content: 'index.ts\nlib.ts', toolUseResult: { stdout: 'index.ts\nlib.ts', stderr: '', interrupted: false } })
    s.recordToolOutcome('toolu_err', { content: 'Exit code 2', is_error: true })
    s.recordToolOutcome('toolu_deny', { content: 'The user said no.', is_error: true, denied: true })
    s.recordToolOutcome('toolu_blocks', 'plain string content') // a string is the content
    assert.deepStrictEqual(states(s), { toolu_ok: 'completed', toolu_err: 'failed', toolu_deny: 'denied', toolu_blocks: 'completed' })
    assert.equal(s.envelopes().length, envCount, 'the journal is not the log: no record written')
    assert.equal(s.messages.length, 2)
    for (const c of s.toolCalls()) assert.match(c.endedAt, ISO_RE, c.id)

    assertSameJson(s.cachedToolResult('toolu_ok'), { type: 'tool_result', tool_use_id: 'toolu_ok', content: 'index.ts\nlib.ts' })
    assertSameJson(s.cachedToolResult('toolu_err'), { type: 'tool_result', tool_use_id: 'toolu_err', content: 'Exit code 2', is_error: true })
    assertSameJson(s.cachedToolResult('toolu_deny'), { type: 'tool_result', tool_use_id: 'toolu_deny', content: 'The user said no.', is_error: true })
    assertSameJson(s.cachedToolResult('toolu_blocks'), { type: 'tool_result', tool_use_id: 'toolu_blocks', content: 'plain string content' })
    expectError(() => s.toolCallStarted('toolu_ok'), 'INVALID_INPUT', 'toolu_ok', 'completed')
    expectError(() => s.toolCallStarted('toolu_deny'), 'INVALID_INPUT', 'toolu_deny', 'denied')
  })

  test('cachedToolResult: the tool_result from the history, exactly (a large one too); null for unknown or unfinished calls', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_big', 'toolu_blocks', 'toolu_pending', 'toolu_running'])
    s.toolCallStarted('toolu_running')
    const big = 'line of tool output ✓\n'.repeat(2000) // well over the 10 KiB blob threshold
    const bigBlock = { type: 'tool_result', tool_use_id: 'toolu_big', content: big, cache_control: { type: 'ephemeral' } }
    const blocksBlock = {
      tool_use_id: 'toolu_blocks', // key order as given
      type: 'tool_result',
      content: [{ type: 'text', text: 'see image' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }],
      is_error: false,
    }
    s.append({ role: 'user', content: [bigBlock, blocksBlock] })
    assertSameJson(s.cachedToolResult('toolu_big'), bigBlock, 'large result')
    assertSameJson(s.cachedToolResult('toolu_blocks'), blocksBlock, 'block result')
    assert.equal(s.cachedToolResult('toolu_pending'), null, 'requested only')
    assert.equal(s.cachedToolResult('toolu_running'), null, 'started, no outcome')
    assert.equal(s.cachedToolResult('toolu_unknown'), null, 'no such call')
    assert.equal(s.cachedToolResult('TOOLU_BIG'), null, 'ids are case-sensitive')
    expectError(() => s.cachedToolResult(''), 'INVALID_INPUT', 'toolUseId')
    expectError(() => s.cachedToolResult(42), 'INVALID_INPUT', 'toolUseId')
  })

  test('toolCallStarted: NOT_FOUND for an unknown id, INVALID_INPUT for a finished call', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_a', 'toolu_b'])
    s.append({ role: 'user', content: [result('toolu_a', 'done'), result('toolu_b', 'no', { is_error: true })] })
    const before = observe(s)
    expectError(() => s.toolCallStarted('toolu_missing'), 'NOT_FOUND', 'toolCallStarted', 'toolu_missing')
    expectError(() => s.toolCallStarted('toolu_a'), 'INVALID_INPUT', 'toolCallStarted', 'toolu_a', 'completed')
    expectError(() => s.toolCallStarted('toolu_b'), 'INVALID_INPUT', 'toolCallStarted', 'toolu_b', 'failed')
    expectError(() => s.recordToolOutcome('toolu_missing', { content: 'x' }), 'NOT_FOUND', 'recordToolOutcome', 'toolu_missing')
    expectError(() => s.recordToolOutcome('toolu_a', { content: 'x' }), 'INVALID_INPUT', 'recordToolOutcome', 'toolu_a')
    assert.deepStrictEqual(observe(s), before)
  })

  test('recordToolOutcome twice: the same outcome is a no-op, another one is INVALID_INPUT', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_x'])
    s.toolCallStarted('toolu_x')
    const outcome = { content: [{ type: 'text', text: 'ok' }], is_error: false, toolUseResult: { stdout: 'ok', code: 0 } }
    s.recordToolOutcome('toolu_x', outcome)
    const after1 = observe(s)
    s.recordToolOutcome('toolu_x', jsonClone(outcome)) // a retry
    assert.deepStrictEqual(observe(s), after1)
    for (const other of [
      { ...outcome, content: [{ type: 'text', text: 'ok!' }] },
      { ...outcome, is_error: true },
      { ...outcome, toolUseResult: { stdout: 'ok', code: 1 } },
      { content: [{ type: 'text', text: 'ok' }] },
      { ...outcome, denied: true },
    ]) {
      expectError(() => s.recordToolOutcome('toolu_x', other), 'INVALID_INPUT', 'recordToolOutcome', 'toolu_x')
      assert.deepStrictEqual(observe(s), after1, JSON.stringify(other))
    }
    assertSameJson(s.cachedToolResult('toolu_x'), { type: 'tool_result', tool_use_id: 'toolu_x', content: [{ type: 'text', text: 'ok' }], is_error: false })
    // once the tool_result message is appended, the same outcome again is still a no-op
    s.append({ role: 'user', content: [result('toolu_x', [{ type: 'text', text: 'ok' }], { is_error: false })] })
    s.recordToolOutcome('toolu_x', outcome)
    assert.equal(states(s).toolu_x, 'completed')
  })

  test('bad inputs are INVALID_INPUT naming the path, and write nothing', () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_x'])
    s.toolCallStarted('toolu_x')
    const before = observe(s)
    const bad = [
      [() => s.toolCallStarted(''), 'toolUseId'],
      [() => s.toolCallStarted(7), 'toolUseId'],
      [() => s.toolCallStarted(undefined), 'toolUseId'],
      [() => s.recordToolOutcome('', { content: 'x' }), 'toolUseId'],
      [() => s.recordToolOutcome('toolu_x'), 'result'],
      [() => s.recordToolOutcome('toolu_x', null), 'result'],
      [() => s.recordToolOutcome('toolu_x', 5), 'result'],
      [() => s.recordToolOutcome('toolu_x', ['x']), 'result'],
      [() => s.recordToolOutcome('toolu_x', {}), 'result.content'],
      [() => s.recordToolOutcome('toolu_x', { content: 5 }), 'result.content'],
      [() => s.recordToolOutcome('toolu_x', { content: [{ type: 'text' }] }), 'result.content[0].text'],
      [() => s.recordToolOutcome('toolu_x', { content: [{ type: 'image' }] }), 'result.content[0].source'],
      [() => s.recordToolOutcome('toolu_x', { content: [{ type: 'text', text: 'a' }, 'b'] }), 'result.content[1]'],
      [() => s.recordToolOutcome('toolu_x', { content: 'x', is_error: 'yes' }), 'result.is_error'],
      [() => s.recordToolOutcome('toolu_x', { content: 'x', denied: 1 }), 'result.denied'],
      [() => s.recordToolOutcome('toolu_x', { content: 'x', toolUseResult: 'text' }), 'result.toolUseResult'],
      [() => s.recordToolOutcome('toolu_x', { content: 'x', tool_use_id: 'toolu_y' }), 'result.tool_use_id'],
      [() => s.recordToolOutcome('toolu_x', { content: 'x', extra: true }), 'result.extra'],
      [() => s.recordToolOutcome('toolu_x', { content: 'bad \ud800 surrogate' }), 'result'],
      [() => s.toolCalls({ state: 'running' }), 'state'],
      [() => s.toolCalls({ state: 3 }), 'state'],
      [() => s.toolCalls('started'), 'filter'],
    ]
    for (const [fn, part] of bad) {
      expectError(fn, 'INVALID_INPUT', part)
      assert.deepStrictEqual(observe(s), before, `after ${fn}`)
    }
    assert.equal(s.cachedToolResult('toolu_x'), null)
    assert.equal(states(s).toolu_x, 'started')
  })

  test("a call denied with { denied: true } stays denied when its tool_result is appended", () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_a', 'toolu_b'])
    s.recordToolOutcome('toolu_a', { content: 'Denied by the user.', is_error: true, denied: true })
    s.recordToolOutcome('toolu_b', { content: 'Denied by policy.', denied: true })
    assert.deepStrictEqual(states(s), { toolu_a: 'denied', toolu_b: 'denied' })
    // the agent then appends the result message it had ready
    s.append({ role: 'user', content: [result('toolu_a', 'Denied by the user.', { is_error: true }), result('toolu_b', 'Denied by policy.')] })
    assert.deepStrictEqual(states(s), { toolu_a: 'denied', toolu_b: 'denied' }, 'appending the result must not turn a denial into a failure / success')
  })

  test('the journal survives closing and reopening the store, and a new process reads the same', (t) => {
    const file = path.join(tmpDir(t), 'journal.db')
    let store = Store.open(file)
    const s = sessionWithCalls(store, ['toolu_req', 'toolu_start', 'toolu_rec', 'toolu_msg', 'toolu_deny'], { id: 'j1' })
    s.toolCallStarted('toolu_start')
    s.toolCallStarted('toolu_rec')
    s.recordToolOutcome('toolu_rec', { content: 'recorded', toolUseResult: { stdout: 'recorded' } })
    s.recordToolOutcome('toolu_deny', { content: 'no', is_error: true, denied: true })
    const calls = s.toolCalls()
    const repairs = s.pendingRepairs()
    store.close()

    store = Store.open(file)
    const back = store.openSession('j1')
    assert.deepStrictEqual(back.toolCalls(), calls)
    assert.deepStrictEqual(back.pendingRepairs(), repairs)
    assertSameJson(back.cachedToolResult('toolu_rec'), { type: 'tool_result', tool_use_id: 'toolu_rec', content: 'recorded' })
    // the outcome recorded before the close is still a no-op to record again, and another is refused
    back.recordToolOutcome('toolu_rec', { content: 'recorded', toolUseResult: { stdout: 'recorded' } })
    expectError(() => back.recordToolOutcome('toolu_rec', { content: 'other' }), 'INVALID_INPUT')
    back.append({ role: 'user', content: [result('toolu_msg', 'x')] }) // not all answered: fine for the journal
    const calls2 = back.toolCalls()
    assert.equal(calls2.find((c) => c.id === 'toolu_msg').state, 'completed')
    store.close()

    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      const s = Store.open(${JSON.stringify(file)}, { readonly: true }).openSession('j1')
      process.stdout.write(JSON.stringify({ calls: s.toolCalls(), cached: s.cachedToolResult('toolu_rec'), started: s.toolCalls({ state: 'started' }) }))
    `
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout)
    assert.deepStrictEqual(out.calls, calls2)
    assert.deepStrictEqual(out.started.map((c) => c.id), ['toolu_start'])
    assert.deepStrictEqual(out.cached, { type: 'tool_result', tool_use_id: 'toolu_rec', content: 'recorded' })
  })
})

describe('the journal of restored Claude Code sessions', () => {
  // The state the fixture's own result says: denied (Claude Code's rejection), failed, completed.
  function expectedStates(lines) {
    const out = new Map()
    for (const line of lines) {
      const r = JSON.parse(line)
      const content = r.message && Array.isArray(r.message.content) ? r.message.content : []
      for (const b of content) {
        if (!b.type || !b.type.endsWith('tool_result')) continue
        const text = typeof b.content === 'string' ? b.content : (Array.isArray(b.content) && b.content[0] && b.content[0].text) || ''
        const denied = b.is_error === true && (r.toolUseResult === CC_REJECTED || text.startsWith("The user doesn't want to proceed with this tool use"))
        out.set(b.tool_use_id, { state: denied ? 'denied' : b.is_error === true ? 'failed' : 'completed', block: b })
      }
    }
    return out
  }

  for (const name of ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']) {
    test(`${name}: every call with a result is settled, with its exact result cached`, () => {
      const lines = readJsonl(name)
      const store = Store.open(':memory:')
      const s = store.createSession()
      const report = s.restoreMessages(lines)
      const expected = expectedStates(lines)
      const callIds = []
      for (const line of lines) {
        const r = JSON.parse(line)
        for (const b of (r.message && Array.isArray(r.message.content) ? r.message.content : [])) {
          if (CALL_TYPES.has(b.type) && !callIds.includes(b.id)) callIds.push(b.id)
        }
      }
      assert.ok(callIds.length > 0)
      const calls = s.toolCalls()
      assert.deepStrictEqual(calls.map((c) => c.id), callIds, 'every call, in order')
      const envelopes = s.envelopes()
      for (const c of calls) {
        const want = expected.get(c.id)
        if (!want) {
          assert.equal(c.state, 'requested', `${c.id} has no result in the fixture`)
          continue
        }
        assert.ok(FINAL.has(c.state), `${c.id}: ${c.state}`)
        assert.equal(c.state, want.state, c.id)
        assert.ok(envelopes[c.resultSeq].message.content.some((b) => b.tool_use_id === c.id), `${c.id}: resultSeq points at its result`)
        assert.ok(envelopes[c.callSeq].message.content.some((b) => b.id === c.id), `${c.id}: callSeq points at its call`)
        assertSameJson(s.cachedToolResult(c.id), want.block, `${c.id}: cached result`)
      }
      if (name === 'short.jsonl') {
        assert.deepStrictEqual(s.toolCalls({ state: 'denied' }).map((c) => c.id), ['toolu_0116Hyi5v8ut7Ffb7d8qV1Sc', 'toolu_01FdQ8qTyVyZjE3Kw4dguQGx'])
      }
      if (name === 'compacted-session.jsonl') {
        assert.equal(calls.length, 150)
        assert.equal(s.toolCalls({ state: 'failed' }).length, [...expected.values()].filter((v) => v.state === 'failed').length)
      }
      assert.equal(report.messageCount, s.allMessages.length)
      assert.deepStrictEqual(s.pendingRepairs(), [], 'a finished session needs no repair')
    })
  }
})

describe('recovery', () => {
  test('pendingRepairs describes what recover() does and writes nothing', async () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_never', 'toolu_unknown', 'toolu_done'], { id: 'pr' })
    s.toolCallStarted('toolu_unknown')
    s.toolCallStarted('toolu_done')
    s.recordToolOutcome('toolu_done', { content: 'finished' })
    const before = observe(s)
    const planned = s.pendingRepairs()
    assert.deepStrictEqual(s.pendingRepairs(), planned, 'stable')
    assert.deepStrictEqual(observe(s), before, 'pendingRepairs wrote nothing')
    assert.deepStrictEqual(planned.map((r) => [r.kind, r.toolUseId, r.name, r.state]), [
      ['never_started', 'toolu_never', 'Bash', 'requested'],
      ['unknown_outcome', 'toolu_unknown', 'Bash', 'started'],
      ['backfill', 'toolu_done', 'Bash', 'completed'],
    ])
    for (const r of planned) {
      assert.equal(typeof r.reason, 'string')
      assert.match(r.recordUuid, UUID_RE)
    }
    assert.match(planned[0].reason, /never started/)
    assert.match(planned[1].reason, /outcome unknown, side effects possible/)

    const report = await s.recover()
    assert.deepStrictEqual(report.repairs, planned, 'recover did what pendingRepairs said')
    assert.equal(report.recordsWritten, 1)
    assert.equal(report.clean, false)
    const envs = s.envelopes()
    assert.equal(envs.length, before.envelopes.length + 1, 'one record answers the three calls')
    const repair = envs[envs.length - 1]
    assert.equal(repair.uuid, planned[0].recordUuid)
    assert.equal(repair.type, 'tool_result')
    assert.equal(repair.parentUuid, envs[envs.length - 2].uuid)
    assert.deepStrictEqual(repair.repair, {
      kind: 'tool_results',
      calls: [
        { toolUseId: 'toolu_never', kind: 'never_started' },
        { toolUseId: 'toolu_unknown', kind: 'unknown_outcome' },
        { toolUseId: 'toolu_done', kind: 'backfill' },
      ],
    })
    const [never, unknown, done] = repair.message.content
    assert.deepStrictEqual(Object.keys(never), ['type', 'tool_use_id', 'content', 'is_error'])
    assert.equal(never.tool_use_id, 'toolu_never')
    assert.equal(never.is_error, true)
    assert.match(never.content, /Not run/)
    assert.match(never.content, /Nothing was executed/)
    assert.equal(unknown.tool_use_id, 'toolu_unknown')
    assert.equal(unknown.is_error, true)
    assert.match(unknown.content, /outcome is unknown and side effects may have happened/)
    assertSameJson(done, { type: 'tool_result', tool_use_id: 'toolu_done', content: 'finished' })
    // (the repair record places the results; it does not change what is known of each call)
    assert.deepStrictEqual(states(s), { toolu_never: 'requested', toolu_unknown: 'started', toolu_done: 'completed' })
    assertValid(s, 'after recover')
    assert.equal(s.turns.at(-1).status, 'awaiting_response', 'the turn can go on: the model may be called again')
  })

  test('backfill of a single recorded outcome carries its toolUseResult on the repair record', async () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_one'])
    s.toolCallStarted('toolu_one')
    s.recordToolOutcome('toolu_one', { content: 'out', toolUseResult: { stdout: 'out', stderr: '', interrupted: false } })
    const report = await s.recover()
    assert.deepStrictEqual(report.repairs.map((r) => r.kind), ['backfill'])
    const rec = s.envelopes().at(-1)
    assert.deepStrictEqual(rec.toolUseResult, { stdout: 'out', stderr: '', interrupted: false })
    assertSameJson(rec.message, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_one', content: 'out' }] })
    assert.equal(states(s).toolu_one, 'completed')
    assertValid(s)
  })

  test('replay: called exactly once per safe started call, its result recorded and shown as replayed; a throwing replay becomes an is_error result', async () => {
    const store = Store.open(':memory:')
    const s = store.createSession({ id: 'replay' })
    s.append('read things')
    s.append({
      role: 'assistant',
      content: [
        toolUse('toolu_read1', 'Read', { path: 'a' }),
        toolUse('toolu_read2', 'Read', { path: 'b' }),
        toolUse('toolu_write', 'Write', { path: 'c' }),
        toolUse('toolu_never', 'Read', { path: 'd' }),
        toolUse('toolu_known', 'Read', { path: 'e' }),
      ],
    })
    for (const id of ['toolu_read1', 'toolu_read2', 'toolu_write', 'toolu_known']) s.toolCallStarted(id)
    s.recordToolOutcome('toolu_known', { content: 'already known' })
    const asked = []
    const replayed = []
    const report = await s.recover({
      isSafe: (call) => {
        asked.push(call.id)
        assert.equal(call.state, 'started')
        return call.name === 'Read'
      },
      replay: async (call) => {
        replayed.push([call.id, call.name, call.input])
        await new Promise((r) => setTimeout(r, 1))
        if (call.id === 'toolu_read2') throw new Error('disk unplugged')
        return { content: `contents of ${call.input.path}`, toolUseResult: { bytes: 10 } }
      },
    })
    assert.deepStrictEqual(asked, ['toolu_read1', 'toolu_read2', 'toolu_write'], 'only started calls with no outcome are considered')
    assert.deepStrictEqual(replayed, [['toolu_read1', 'Read', { path: 'a' }], ['toolu_read2', 'Read', { path: 'b' }]])
    assert.deepStrictEqual(report.repairs.map((r) => [r.toolUseId, r.kind, r.state]), [
      ['toolu_read1', 'replayed', 'completed'],
      ['toolu_read2', 'replayed', 'failed'],
      ['toolu_write', 'unknown_outcome', 'started'],
      ['toolu_never', 'never_started', 'requested'],
      ['toolu_known', 'backfill', 'completed'],
    ])
    assert.equal(report.recordsWritten, 1)
    const content = s.messages.at(-1).content
    assertSameJson(content[0], { type: 'tool_result', tool_use_id: 'toolu_read1', content: 'contents of a' })
    assert.equal(content[1].tool_use_id, 'toolu_read2')
    assert.equal(content[1].is_error, true)
    assert.match(content[1].content, /disk unplugged/)
    assert.equal(content[2].is_error, true)
    assert.equal(content[3].is_error, true)
    assertSameJson(content[4], { type: 'tool_result', tool_use_id: 'toolu_known', content: 'already known' })
    assertSameJson(s.cachedToolResult('toolu_read1'), content[0])
    assert.deepStrictEqual(states(s), { toolu_read1: 'completed', toolu_read2: 'failed', toolu_write: 'started', toolu_never: 'requested', toolu_known: 'completed' })
    assertValid(s)

    // a second recovery replays nothing and writes nothing
    let calledAgain = 0
    const again = await s.recover({ isSafe: () => true, replay: async () => { calledAgain++; return 'x' } })
    assert.equal(calledAgain, 0)
    assert.deepStrictEqual(again, { repairs: [], recordsWritten: 0, clean: true })
  })

  test('recover options are checked', async () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_x'])
    s.toolCallStarted('toolu_x')
    const before = observe(s)
    await expectRejection(() => s.recover({ isSafe: () => true }), 'INVALID_INPUT', 'replay')
    await expectRejection(() => s.recover({ isSafe: true, replay: async () => 'x' }), 'INVALID_INPUT', 'isSafe')
    await expectRejection(() => s.recover({ replay: 'x' }), 'INVALID_INPUT', 'replay')
    await expectRejection(() => s.recover({ unknownOutcome: 'ignore' }), 'INVALID_INPUT', 'unknownOutcome')
    await expectRejection(() => s.recover('mark'), 'INVALID_INPUT', 'options')
    assert.deepStrictEqual(observe(s), before)
  })

  test("unknownOutcome 'leave' writes nothing for a started call; 'mark' (the default) answers it", async () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_rm'])
    s.toolCallStarted('toolu_rm')
    const before = observe(s)
    const left = await s.recover({ unknownOutcome: 'leave' })
    assert.deepStrictEqual(left.repairs.map((r) => [r.kind, r.toolUseId, r.state]), [['left', 'toolu_rm', 'started']])
    assert.equal(left.repairs[0].recordUuid, undefined)
    assert.equal(left.recordsWritten, 0)
    assert.equal(left.clean, false)
    assert.deepStrictEqual(observe(s), before, "'leave' wrote nothing")
    assert.deepStrictEqual(s.pendingRepairs().map((r) => r.kind), ['unknown_outcome'], 'still pending')

    // the caller finds out what happened and records it: recovery then backfills it
    s.recordToolOutcome('toolu_rm', { content: 'checked: the file was removed' })
    const done = await s.recover({ unknownOutcome: 'leave' })
    assert.deepStrictEqual(done.repairs.map((r) => r.kind), ['backfill'])
    assertValid(s)

    const m = sessionWithCalls(store, ['toolu_rm'])
    m.toolCallStarted('toolu_rm')
    const marked = await m.recover({ unknownOutcome: 'mark' })
    assert.deepStrictEqual(marked.repairs.map((r) => r.kind), ['unknown_outcome'])
    assert.equal(marked.recordsWritten, 1)
    assertValid(m)
  })

  test("unknownOutcome 'leave' beside a call that can be backfilled: once the left call is resolved, the history is valid", async () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_left', 'toolu_done'])
    s.toolCallStarted('toolu_left')
    s.toolCallStarted('toolu_done')
    s.recordToolOutcome('toolu_done', { content: 'done' })
    const first = await s.recover({ unknownOutcome: 'leave' })
    assert.ok(first.repairs.some((r) => r.kind === 'left' && r.toolUseId === 'toolu_left'))
    // the caller checks what toolu_left did, records it, and recovers again
    s.recordToolOutcome('toolu_left', { content: 'checked: it ran' })
    await s.recover()
    // both results must end up in the one user message right after the calls
    assertValid(s, "after 'leave', resolve, recover")
    assert.deepStrictEqual(states(s), { toolu_left: 'completed', toolu_done: 'completed' })
  })

  test('a call of an earlier response with later messages is reported as stranded and nothing is written', async () => {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_old'])
    s.append('never mind that, answer this instead') // the call is left behind
    s.append({ role: 'assistant', content: 'Sure.' })
    const before = observe(s)
    const planned = s.pendingRepairs()
    assert.deepStrictEqual(planned.map((r) => [r.kind, r.toolUseId]), [['stranded', 'toolu_old']])
    const report = await s.recover()
    assert.deepStrictEqual(report.repairs, planned)
    assert.equal(report.recordsWritten, 0)
    assert.deepStrictEqual(observe(s), before)
  })

  test('recovering twice: the second run is clean and writes nothing; validateMessages is [] after each', async (t) => {
    const file = path.join(tmpDir(t), 'twice.db')
    const store = Store.open(file)
    const s = sessionWithCalls(store, ['toolu_a', 'toolu_b', 'toolu_c'], { id: 'twice' })
    s.toolCallStarted('toolu_b')
    s.toolCallStarted('toolu_c')
    s.recordToolOutcome('toolu_c', { content: 'c', is_error: true })
    const r1 = await s.recover()
    assert.equal(r1.recordsWritten, 1)
    assertValid(s)
    const after1 = observe(s)
    const r2 = await s.recover()
    assert.deepStrictEqual(r2, { repairs: [], recordsWritten: 0, clean: true })
    assert.deepStrictEqual(observe(s), after1)
    assert.deepStrictEqual(s.pendingRepairs(), [])
    // and from another handle on the store
    const other = Store.open(file).openSession('twice')
    assert.deepStrictEqual(await other.recover(), { repairs: [], recordsWritten: 0, clean: true })
    assertValid(other)
    // a clean session recovers clean
    const clean = store.createSession()
    clean.append('hi')
    assert.deepStrictEqual(await clean.recover(), { repairs: [], recordsWritten: 0, clean: true })
    assert.deepStrictEqual(clean.pendingRepairs(), [])
  })

  test('repair uuids are deterministic: the same session in two stores gets the same repair records', async (t) => {
    const dir = tmpDir(t)
    const build = (store) => {
      const s = store.createSession({ id: 'same-session' })
      s.append({ uuid: '00000000-0000-4000-8000-000000000001', timestamp: '2025-01-01T00:00:00.000Z', message: { role: 'user', content: 'go' } })
      s.append({
        uuid: '00000000-0000-4000-8000-000000000002',
        timestamp: '2025-01-01T00:00:01.000Z',
        message: { role: 'assistant', content: [toolUse('toolu_1'), toolUse('toolu_2'), toolUse('toolu_3')] },
      })
      s.toolCallStarted('toolu_2')
      s.toolCallStarted('toolu_3')
      s.recordToolOutcome('toolu_3', { content: 'three' })
      return s
    }
    const a = build(Store.open(path.join(dir, 'a.db')))
    const b = build(Store.open(':memory:'))
    const pa = a.pendingRepairs()
    assert.deepStrictEqual(b.pendingRepairs(), pa)
    const ra = await a.recover()
    const rb = await b.recover()
    assert.deepStrictEqual(rb, ra)
    assert.match(ra.repairs[0].recordUuid, UUID_RE)
    const ea = a.envelopes().at(-1)
    const eb = b.envelopes().at(-1)
    assert.equal(ea.uuid, eb.uuid)
    assert.equal(ea.uuid, pa[0].recordUuid)
    const { timestamp: ta, ...restA } = ea
    const { timestamp: tb, ...restB } = eb
    assertSameJson(restB, restA, 'repair record')
    // another session id gives other uuids
    const c = Store.open(':memory:').createSession({ id: 'other-session' })
    c.append('go')
    c.append({ role: 'assistant', content: [toolUse('toolu_1'), toolUse('toolu_2'), toolUse('toolu_3')] })
    assert.notEqual(c.pendingRepairs()[0].recordUuid, pa[0].recordUuid)
  })

  test('recovery after the process was killed mid-turn (SIGKILL), from a new process', async (t) => {
    const file = path.join(tmpDir(t), 'killed.db')
    const code = `
      const { Store } = require(${JSON.stringify(ROOT)})
      const s = Store.open(${JSON.stringify(file)}).createSession({ id: 'killed' })
      s.append('clean up')
      s.append({ role: 'assistant', content: [
        { type: 'tool_use', id: 'toolu_ls', name: 'Bash', input: { command: 'ls' } },
        { type: 'tool_use', id: 'toolu_rm', name: 'Bash', input: { command: 'rm -rf build' } },
        { type: 'tool_use', id: 'toolu_echo', name: 'Bash', input: { command: 'echo hi' } },
      ] })
      s.toolCallStarted('toolu_ls')
      s.recordToolOutcome('toolu_ls', { content: 'build\\nsrc', toolUseResult: { stdout: 'build\\nsrc' } })
      s.toolCallStarted('toolu_rm')
      process.kill(process.pid, 'SIGKILL')
    `
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' })
    assert.equal(r.signal, 'SIGKILL', r.stderr)
    const store = Store.open(file)
    assert.deepStrictEqual(store.interruptedSessions().map((i) => i.id), ['killed'])
    const s = store.openSession('killed')
    assert.deepStrictEqual(states(s), { toolu_ls: 'completed', toolu_rm: 'started', toolu_echo: 'requested' })
    const report = await s.recover()
    assert.deepStrictEqual(report.repairs.map((x) => [x.toolUseId, x.kind]), [
      ['toolu_ls', 'backfill'], ['toolu_rm', 'unknown_outcome'], ['toolu_echo', 'never_started'],
    ])
    assertValid(s)
    assert.deepStrictEqual(s.messages.at(-1).content.map((b) => [b.tool_use_id, b.is_error === true]), [
      ['toolu_ls', false], ['toolu_rm', true], ['toolu_echo', true],
    ])
  })

  async function deniedAndRecovered() {
    const store = Store.open(':memory:')
    const s = sessionWithCalls(store, ['toolu_plain_deny', 'toolu_error_deny'])
    s.recordToolOutcome('toolu_plain_deny', { content: 'The user declined this command.', denied: true })
    s.recordToolOutcome('toolu_error_deny', { content: 'The user declined this edit.', is_error: true, denied: true })
    assert.deepStrictEqual(states(s), { toolu_plain_deny: 'denied', toolu_error_deny: 'denied' })
    const report = await s.recover()
    assert.deepStrictEqual(report.repairs.map((r) => [r.toolUseId, r.kind, r.state]), [
      ['toolu_plain_deny', 'backfill', 'denied'], ['toolu_error_deny', 'backfill', 'denied'],
    ])
    assertValid(s)
    return s
  }

  test('a denied outcome stays denied in the journal after recover() backfills it', async () => {
    const s = await deniedAndRecovered()
    assert.deepStrictEqual(states(s), { toolu_plain_deny: 'denied', toolu_error_deny: 'denied' }, 'journal state after the backfill')
    assert.deepStrictEqual(s.toolCalls({ state: 'denied' }).map((c) => c.id), ['toolu_plain_deny', 'toolu_error_deny'])
  })

  test('a denied outcome is answered with an is_error tool_result (the model must not read a denial as success)', async () => {
    const s = await deniedAndRecovered()
    for (const b of s.messages.at(-1).content) {
      assert.equal(b.is_error, true, `${b.tool_use_id}: a denied call is answered with an is_error result`)
    }
  })
})
