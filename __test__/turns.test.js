'use strict'
// Turns, their statuses and counters; the token tracker (de-duplication by message id and by
// requestId, context estimate); restoreTokenState across a reopen; contextFill.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const { lib, tmpDir, readInNewProcess, normalizeMessage } = require('./helpers/util')

const { Store, Session } = lib

const ZERO = { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 }

function usage(input, output, cacheRead = 0, cacheCreation = 0) {
  return { input_tokens: input, output_tokens: output, cache_read_input_tokens: cacheRead, cache_creation_input_tokens: cacheCreation }
}
function sum(...us) {
  const out = { ...ZERO }
  for (const u of us) for (const k of Object.keys(out)) out[k] += u[k] || 0
  return out
}
const prompt = (text) => ({ role: 'user', content: [{ type: 'text', text }] })
const toolUse = (ids, u, id) => ({
  role: 'assistant',
  ...(id ? { id } : {}),
  content: ids.map((t) => ({ type: 'tool_use', id: t, name: 'run', input: { arg: t } })),
  stop_reason: 'tool_use',
  ...(u ? { usage: u } : {}),
})
const results = (...ids) => ({ role: 'user', content: ids.map((t) => ({ type: 'tool_result', tool_use_id: t, content: `out ${t}` })) })
const reply = (text, u, id) => ({ role: 'assistant', ...(id ? { id } : {}), content: [{ type: 'text', text }], stop_reason: 'end_turn', ...(u ? { usage: u } : {}) })

function lastTurn(s) {
  const turns = s.turns
  return turns[turns.length - 1]
}

// Checks each turn's indices/uuids against session.messages and the envelopes: the turn's first
// and last messages are the records named by startUuid / endUuid.
function checkTurnsAgainstLog(s) {
  const msgs = s.messages
  const envs = s.envelopes().filter((e) => e.message && e.includeInContext !== false)
  assert.equal(envs.length, msgs.length)
  let expectedStart = 0
  for (const t of s.turns) {
    assert.equal(t.startIndex, expectedStart, `turn ${t.index} starts where the previous ended`)
    assert.equal(t.messageCount, t.endIndex - t.startIndex + 1)
    assert.equal(envs[t.startIndex].uuid, t.startUuid)
    assert.equal(envs[t.endIndex].uuid, t.endUuid)
    assert.deepStrictEqual(envs[t.startIndex].message, msgs[t.startIndex])
    expectedStart = t.endIndex + 1
  }
  assert.equal(expectedStart, msgs.length, 'turns cover every message')
}

describe('turns', () => {
  test('a tool loop is one turn; statuses move through awaiting_tool_results, awaiting_response, complete', () => {
    const s = new Session()
    const u1 = usage(100, 10, 1000, 50)
    const u2 = usage(120, 20, 1050, 0)
    const u3 = usage(150, 30, 1070, 5)
    const e0 = s.append(prompt('fix the bug'))
    assert.equal(lastTurn(s).status, 'awaiting_response')
    s.append(toolUse(['t1'], u1, 'msg_1'))
    assert.equal(lastTurn(s).status, 'awaiting_tool_results')
    s.append(results('t1'))
    assert.equal(lastTurn(s).status, 'awaiting_response')
    s.append(toolUse(['t2'], u2, 'msg_2'))
    assert.equal(lastTurn(s).status, 'awaiting_tool_results')
    s.append(results('t2'))
    const e5 = s.append(reply('fixed', u3, 'msg_3'))
    assert.equal(s.turns.length, 1)
    assert.deepStrictEqual(s.turns[0], {
      index: 0, startIndex: 0, endIndex: 5, startUuid: e0.uuid, endUuid: e5.uuid,
      messageCount: 6, toolUseCount: 2, usage: sum(u1, u2, u3), status: 'complete',
    })

    const u4 = usage(10, 1)
    const e6 = s.append('thanks')
    assert.equal(s.turns.length, 2)
    assert.equal(s.turns[1].status, 'awaiting_response')
    const e7 = s.append(reply('you are welcome', u4, 'msg_4'))
    assert.deepStrictEqual(s.turns[1], {
      index: 1, startIndex: 6, endIndex: 7, startUuid: e6.uuid, endUuid: e7.uuid,
      messageCount: 2, toolUseCount: 0, usage: sum(u4), status: 'complete',
    })
    // the first turn is unchanged by the second
    assert.equal(s.turns[0].endIndex, 5)
    assert.deepStrictEqual(s.turns[0].usage, sum(u1, u2, u3))
    checkTurnsAgainstLog(s)
  })

  test('parallel tool calls with all results in one user message stay in one turn', () => {
    const s = new Session()
    s.append(prompt('read three files'))
    s.append(toolUse(['a', 'b', 'c'], usage(5, 5), 'msg_p'))
    assert.equal(lastTurn(s).status, 'awaiting_tool_results')
    s.append(results('a', 'b', 'c'))
    assert.equal(lastTurn(s).status, 'awaiting_response')
    s.append(reply('all read', usage(6, 6), 'msg_q'))
    assert.equal(s.turns.length, 1)
    const t = s.turns[0]
    assert.equal(t.messageCount, 4)
    assert.equal(t.toolUseCount, 3)
    assert.equal(t.status, 'complete')
    assert.deepStrictEqual(t.usage, sum(usage(5, 5), usage(6, 6)))
    checkTurnsAgainstLog(s)
  })

  test('parallel tool calls with results in several user messages stay in one turn until all arrive', () => {
    const s = new Session()
    s.append(prompt('run a, b, c'))
    s.append(toolUse(['a', 'b', 'c']))
    s.append(results('b'))
    assert.equal(lastTurn(s).status, 'awaiting_tool_results')
    s.append(results('c'))
    assert.equal(lastTurn(s).status, 'awaiting_tool_results')
    s.append(results('a'))
    assert.equal(lastTurn(s).status, 'awaiting_response')
    s.append(reply('done'))
    assert.equal(s.turns.length, 1)
    assert.equal(s.turns[0].messageCount, 6)
    assert.equal(s.turns[0].toolUseCount, 3)
    assert.equal(s.turns[0].status, 'complete')
    // results split 2 + 1 in a second round
    s.append(prompt('again'))
    s.append(toolUse(['d', 'e', 'f']))
    s.append(results('d', 'f'))
    assert.equal(lastTurn(s).status, 'awaiting_tool_results')
    s.append(results('e'))
    assert.equal(lastTurn(s).status, 'awaiting_response')
    assert.equal(s.turns.length, 2)
    assert.equal(s.turns[1].messageCount, 4)
    checkTurnsAgainstLog(s)
  })

  test('an interrupted turn (tool_use never answered, then a new prompt) stays awaiting_tool_results', () => {
    const s = new Session()
    s.append(prompt('delete the temp files'))
    const interrupted = s.append(toolUse(['t_rm'], usage(10, 2), 'msg_i'))
    const next = s.append(prompt('stop, never mind'))
    let turns = s.turns
    assert.equal(turns.length, 2)
    assert.equal(turns[0].status, 'awaiting_tool_results')
    assert.equal(turns[0].endUuid, interrupted.uuid)
    assert.equal(turns[0].messageCount, 2)
    assert.equal(turns[0].toolUseCount, 1)
    assert.equal(turns[1].startUuid, next.uuid)
    assert.equal(turns[1].status, 'awaiting_response', 'the old tool_use does not hold up the new turn')
    s.append(reply('ok, stopped', usage(11, 3), 'msg_j'))
    turns = s.turns
    assert.equal(turns[0].status, 'awaiting_tool_results')
    assert.equal(turns[1].status, 'complete')
    checkTurnsAgainstLog(s)
  })

  test('server and MCP tool calls count as tool uses but wait for no tool_result', () => {
    const s = new Session()
    s.append(prompt('search the web'))
    s.append({
      role: 'assistant',
      content: [
        { type: 'server_tool_use', id: 'srv_1', name: 'web_search', input: { query: 'x' } },
        { type: 'web_search_tool_result', tool_use_id: 'srv_1', content: [] },
        { type: 'mcp_tool_use', id: 'mcp_1', name: 'q', server_name: 'db', input: {} },
        { type: 'mcp_tool_result', tool_use_id: 'mcp_1', content: [] },
        { type: 'text', text: 'found it' },
      ],
    })
    const t = lastTurn(s)
    assert.equal(t.toolUseCount, 2)
    assert.equal(t.status, 'complete')
  })

  test('a session that starts with an assistant message starts a turn there; an orphan tool_result is out of messages', () => {
    const s = new Session()
    const orphan = s.append(results('orphan'))
    const first = s.append(reply('continuing'))
    s.append(prompt('new question'))
    const turns = s.turns
    assert.equal(turns.length, 2)
    assert.equal(turns[0].startUuid, first.uuid)
    assert.equal(turns[0].startIndex, 0)
    assert.equal(turns[0].messageCount, 1)
    assert.equal(s.messages.length, 2)
    assert.equal(s.envelopes()[0].uuid, orphan.uuid, 'the orphan result stays in the log')
    const s2 = new Session()
    s2.append(reply('hello first'))
    assert.equal(s2.turns.length, 1)
    assert.equal(s2.turns[0].status, 'complete')
    assert.deepStrictEqual(new Session().turns, [])
  })

  test('indices count messages only: events and includeInContext:false records are left out', () => {
    const s = new Session()
    s.append(prompt('one'))
    s.appendEvent('ui.scroll', { y: 10 })
    s.append(reply('hidden note'), { includeInContext: false })
    s.append({ type: 'progress', data: { step: 1 } })
    const r = s.append(reply('visible'))
    const p2 = s.append(prompt('two'))
    const turns = s.turns
    assert.equal(s.messages.length, 3)
    assert.equal(turns.length, 2)
    assert.deepStrictEqual([turns[0].startIndex, turns[0].endIndex, turns[0].messageCount], [0, 1, 2])
    assert.equal(turns[0].endUuid, r.uuid)
    assert.deepStrictEqual([turns[1].startIndex, turns[1].endIndex, turns[1].startUuid], [2, 2, p2.uuid])
    checkTurnsAgainstLog(s)
  })

  test('a response split over several records counts its usage once in the turn', () => {
    const s = new Session()
    const u = usage(40, 7, 300, 2)
    s.append(prompt('think'))
    s.append({ role: 'assistant', id: 'msg_split', content: [{ type: 'thinking', thinking: 'hmm', signature: 's' }], usage: u })
    s.append({ role: 'assistant', id: 'msg_split', content: [{ type: 'text', text: 'answer' }], usage: u })
    assert.equal(s.turns.length, 1)
    assert.equal(s.turns[0].messageCount, 3)
    assert.deepStrictEqual(s.turns[0].usage, sum(u))
  })

  test('turns are the same after the store is closed and read by a new process', (t) => {
    const dir = tmpDir(t)
    const file = path.join(dir, 'turns.db')
    const store = Store.open(file)
    const s = store.createSession({ id: 'turns' })
    s.append(prompt('go'))
    s.append(toolUse(['x', 'y'], usage(1, 2, 3, 4), 'm1'))
    s.append(results('x'))
    s.append(prompt('interrupt'))
    s.append(reply('ok', usage(5, 6, 7, 8), 'm2'))
    s.append(prompt('more'))
    const turns = s.turns
    const tracker = s.tokenTracker
    store.close()
    assert.deepStrictEqual(turns.map((x) => x.status), ['awaiting_tool_results', 'complete', 'awaiting_response'])
    const back = readInNewProcess(file, 'turns')
    assert.deepStrictEqual(back.turns, turns)
    assert.deepStrictEqual(back.tokenTracker, tracker)
  })
})

describe('token tracker', () => {
  test('latest usage and cumulative sums over distinct responses', () => {
    const s = new Session()
    const u1 = usage(100, 20, 1000, 10)
    const u2 = usage(150, 25, 1100, 0)
    s.append(prompt('a'))
    s.append(reply('b', u1, 'msg_a'))
    s.append(prompt('c'))
    s.append(reply('d', u2, 'msg_b'))
    const tt = s.tokenTracker
    assert.deepStrictEqual(tt, {
      inputTokens: 150, outputTokens: 25, cacheReadInputTokens: 1100, cacheCreationInputTokens: 0,
      contextTokens: 150 + 25 + 1100 + 0,
      cumulativeInputTokens: 250, cumulativeOutputTokens: 45, cumulativeCacheReadTokens: 2100, cumulativeCacheCreationTokens: 10,
    })
  })

  test('de-duplicates by message id: a response recorded on several records counts once, latest usage wins', () => {
    const s = new Session()
    s.append(prompt('a'))
    // streaming: the same response on three records; output grows as it streams
    s.append({ role: 'assistant', id: 'msg_dup', content: [{ type: 'thinking', thinking: 't', signature: 's' }], usage: usage(10, 1, 500, 50) })
    s.append({ role: 'assistant', id: 'msg_dup', content: [{ type: 'text', text: 'x' }], usage: usage(10, 1, 500, 50) })
    s.append({ role: 'assistant', id: 'msg_dup', content: [{ type: 'tool_use', id: 't', name: 'n', input: {} }], usage: usage(10, 90, 500, 50) })
    let tt = s.tokenTracker
    assert.equal(tt.cumulativeInputTokens, 10)
    assert.equal(tt.cumulativeOutputTokens, 90)
    assert.equal(tt.cumulativeCacheReadTokens, 500)
    assert.equal(tt.cumulativeCacheCreationTokens, 50)
    assert.equal(tt.outputTokens, 90)
    // a different id is a different response
    s.append(results('t'))
    s.append({ role: 'assistant', id: 'msg_other', content: [{ type: 'text', text: 'y' }], usage: usage(20, 5, 600, 0) })
    tt = s.tokenTracker
    assert.equal(tt.cumulativeInputTokens, 30)
    assert.equal(tt.cumulativeOutputTokens, 95)
    assert.equal(tt.cumulativeCacheReadTokens, 1100)
    assert.equal(tt.inputTokens, 20)
    // the turn counts the response once too
    assert.deepStrictEqual(s.turns[0].usage, sum(usage(10, 90, 500, 50), usage(20, 5, 600, 0)))
  })

  test('de-duplicates by message id when the repeat comes after another response', () => {
    const s = new Session()
    s.append(prompt('a'))
    s.append(reply('A1', usage(10, 1, 100, 0), 'msg_A'))
    s.append(reply('B', usage(20, 2, 200, 0), 'msg_B'))
    s.append(reply('A2', usage(10, 3, 100, 0), 'msg_A'))
    const tt = s.tokenTracker
    assert.equal(tt.cumulativeInputTokens, 30)
    assert.equal(tt.cumulativeOutputTokens, 5)
    assert.equal(tt.cumulativeCacheReadTokens, 300)
    assert.equal(tt.outputTokens, 3, 'the latest record with usage is the latest usage')
  })

  test('de-duplicates by requestId when the message has no id', () => {
    const s = new Session()
    s.append(prompt('a'))
    s.append(reply('part 1', usage(7, 3, 70, 0)), { requestId: 'req_1' })
    s.append(reply('part 2', usage(7, 3, 70, 0)), { requestId: 'req_1' })
    let tt = s.tokenTracker
    assert.equal(tt.cumulativeInputTokens, 7)
    assert.equal(tt.cumulativeOutputTokens, 3)
    assert.equal(tt.cumulativeCacheReadTokens, 70)
    s.append(reply('other request', usage(8, 4, 80, 0)), { requestId: 'req_2' })
    tt = s.tokenTracker
    assert.equal(tt.cumulativeInputTokens, 15)
    assert.equal(tt.cumulativeOutputTokens, 7)
    assert.equal(tt.cumulativeCacheReadTokens, 150)
  })

  test('de-duplication by id also works across a reopen (the earlier record is in the store)', (t) => {
    const dir = tmpDir(t)
    const file = path.join(dir, 'dedupe.db')
    let store = Store.open(file)
    store.createSession({ id: 'd' }).append(reply('first half', usage(3, 4, 5, 6), 'msg_across'))
    store.close()
    store = Store.open(file)
    const s = store.openSession('d')
    s.append(reply('second half', usage(3, 9, 5, 6), 'msg_across'))
    assert.equal(s.tokenTracker.cumulativeOutputTokens, 9)
    assert.equal(s.tokenTracker.cumulativeInputTokens, 3)
    store.close()
  })

  test('responses with neither message id nor requestId are each counted', () => {
    const s = new Session()
    s.append(reply('one', usage(1, 1)))
    s.append(reply('two', usage(1, 1)))
    assert.equal(s.tokenTracker.cumulativeInputTokens, 2)
    assert.equal(s.tokenTracker.cumulativeOutputTokens, 2)
  })

  test('contextTokens = latest usage total + ceil(bytes of messages appended after it / 4)', () => {
    const s = new Session()
    assert.equal(s.tokenTracker.contextTokens, 0)
    s.append(prompt('q'))
    const u = usage(100, 20, 3000, 400)
    s.append(toolUse(['t1'], u, 'msg_ctx'))
    const total = 100 + 20 + 3000 + 400
    assert.equal(s.tokenTracker.contextTokens, total)
    const m1 = results('t1')
    s.append(m1)
    const b1 = Buffer.byteLength(JSON.stringify(normalizeMessage(m1)))
    assert.equal(s.tokenTracker.contextTokens, total + Math.ceil(b1 / 4))
    const m2 = { role: 'user', content: 'and also this, please' }
    s.append(m2)
    const b2 = Buffer.byteLength(JSON.stringify(normalizeMessage(m2)))
    assert.equal(s.tokenTracker.contextTokens, total + Math.ceil((b1 + b2) / 4))
    // events and hidden records are not sent to the model: no estimate for them
    s.appendEvent('ui', { big: 'x'.repeat(4000) })
    s.append(reply('hidden '.repeat(500)), { includeInContext: false })
    assert.equal(s.tokenTracker.contextTokens, total + Math.ceil((b1 + b2) / 4))
    // a new response resets the estimate to its own usage
    s.append(reply('done', usage(5000, 10, 0, 0), 'msg_ctx2'))
    assert.equal(s.tokenTracker.contextTokens, 5010)
  })

  test('restoreTokenState sets the given fields, keeps the rest, and survives a reopen in a new process', (t) => {
    const dir = tmpDir(t)
    const file = path.join(dir, 'tokens.db')
    const store = Store.open(file)
    const s = store.createSession({ id: 'tok', contextWindow: 200000 })
    s.append(prompt('hi'))
    s.append(reply('hello', usage(11, 22, 33, 44), 'msg_t'))
    s.restoreTokenState({ cumulativeInputTokens: 5000, cumulativeOutputTokens: 700, contextTokens: 12345, inputTokens: 999 })
    const expected = {
      inputTokens: 999, outputTokens: 22, cacheReadInputTokens: 33, cacheCreationInputTokens: 44,
      contextTokens: 12345,
      cumulativeInputTokens: 5000, cumulativeOutputTokens: 700, cumulativeCacheReadTokens: 33, cumulativeCacheCreationTokens: 44,
    }
    assert.deepStrictEqual(s.tokenTracker, expected)
    // the restore is not a message
    assert.equal(s.messages.length, 2)
    store.close()

    const back = readInNewProcess(file, 'tok')
    assert.deepStrictEqual(back.tokenTracker, expected)
    assert.deepStrictEqual(back.contextFill, { usedTokens: 12345, contextWindow: 200000, fraction: 12345 / 200000 })

    // appending after a reopen builds on the restored state
    const store2 = Store.open(file)
    const s2 = store2.openSession('tok')
    const m = { role: 'user', content: 'next question' }
    s2.append(m)
    const b = Buffer.byteLength(JSON.stringify(normalizeMessage(m)))
    assert.equal(s2.tokenTracker.contextTokens, 12345 + Math.ceil(b / 4))
    s2.append(reply('answer', usage(100, 10, 0, 0), 'msg_t2'))
    const tt = s2.tokenTracker
    assert.equal(tt.cumulativeInputTokens, 5100)
    assert.equal(tt.cumulativeOutputTokens, 710)
    assert.equal(tt.contextTokens, 110)
    store2.close()
  })

  test('restoreTokenState on an in-memory session', () => {
    const s = new Session()
    s.restoreTokenState({ cumulativeCacheReadTokens: 77, cacheCreationInputTokens: 5 })
    const tt = s.tokenTracker
    assert.equal(tt.cumulativeCacheReadTokens, 77)
    assert.equal(tt.cacheCreationInputTokens, 5)
    assert.equal(tt.cumulativeInputTokens, 0)
  })
})

describe('contextFill', () => {
  test('usedTokens is contextTokens; fraction is used / contextWindow', () => {
    const s = new Session({ contextWindow: 1000 })
    assert.deepStrictEqual(s.contextFill, { usedTokens: 0, contextWindow: 1000, fraction: 0 })
    s.append(prompt('a'))
    s.append(reply('b', usage(200, 50, 0, 0), 'm'))
    assert.deepStrictEqual(s.contextFill, { usedTokens: 250, contextWindow: 1000, fraction: 0.25 })
    assert.equal(s.contextFill.usedTokens, s.tokenTracker.contextTokens)
  })

  test('without a context window: contextWindow and fraction are null', (t) => {
    const s = new Session()
    s.append(reply('b', usage(200, 50), 'm'))
    assert.deepStrictEqual(s.contextFill, { usedTokens: 250, contextWindow: null, fraction: null })
    const dir = tmpDir(t)
    const store = Store.open(path.join(dir, 'cf.db'))
    const st = store.createSession({ contextWindow: 400 })
    st.append(reply('b', usage(100, 0, 100, 0), 'm'))
    assert.deepStrictEqual(st.contextFill, { usedTokens: 200, contextWindow: 400, fraction: 0.5 })
    store.close()
  })
})
