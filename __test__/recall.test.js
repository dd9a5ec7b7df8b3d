'use strict'
// store.recallTools(): the three tools' definitions, a model's calls answered for Anthropic,
// OpenAI Chat and OpenAI Responses (each result appended after its call passes validateMessages
// and goes back to the provider's shape), bounded results that say how to read on, the current
// session left out, and a model's mistakes answered with is_error results.

const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const { lib, tmpDir, readJsonl } = require('./helpers/util')

const { Store, validateMessages, toOpenAIChat, toOpenAIResponses, fromOpenAIChat, fromOpenAIResponses } = lib

describe('recall tools', () => {
  let store
  let dir
  before(() => {
    dir = require('node:fs').mkdtempSync(path.join(require('node:os').tmpdir(), 'threadline-recall-'))
    store = Store.open(path.join(dir, 'recall.db'))
    store.createSession({ id: 'earlier', project: 'spotter', title: 'transcript components' })
      .restoreMessages(readJsonl('compacted-session.jsonl'))
    store.createSession({ id: 'tools', project: 'spotter' }).restoreMessages(readJsonl('tool_heavy.jsonl'))
    store.createSession({ id: 'current', project: 'spotter' }).append('What did we decide about the transcript renderer?')
  })
  after(() => {
    store.close()
    require('node:fs').rmSync(dir, { recursive: true, force: true })
  })

  test('definitions for the three providers, the same three tools', () => {
    const tools = store.recallTools()
    assert.deepEqual(tools.names, ['session_list', 'session_search', 'session_read'])
    assert.deepEqual(tools.anthropic.map((t) => t.name), tools.names)
    assert.deepEqual(tools.openaiChat.map((t) => t.function.name), tools.names)
    assert.deepEqual(tools.openaiResponses.map((t) => t.name), tools.names)
    for (const t of tools.anthropic) {
      assert.equal(t.input_schema.type, 'object')
      assert.equal(t.input_schema.additionalProperties, false)
      assert.ok(t.description.length > 40)
    }
    assert.deepEqual(tools.anthropic[1].input_schema.required, ['query'])
    assert.deepEqual(tools.openaiChat[2].function.parameters, tools.anthropic[2].input_schema)
    assert.equal(tools.openaiResponses[0].strict, false)
  })

  // A model's turn: a scripted call, answered by handle, appended after it; then the context.
  async function roundTrip(target, call) {
    const tools = store.recallTools({ excludeSessionId: 'current' })
    const s = store.createSession({ id: `trip-${target}`, project: 'spotter' })
    s.append('What did we decide about the transcript renderer?')
    let id
    if (target === 'anthropic') {
      id = 'toolu_recall_1'
      s.append({ role: 'assistant', content: [{ type: 'tool_use', id, name: call.name, input: call.input }] })
      const result = await tools.handle({ type: 'tool_use', id, name: call.name, input: call.input })
      s.append({ role: 'user', content: [result] })
      return { s, result }
    }
    if (target === 'openai-chat') {
      id = 'call_recall_1'
      const tc = { id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.input) } }
      for (const m of fromOpenAIChat([{ role: 'assistant', content: null, tool_calls: [tc] }]).messages) s.append(m)
      const result = await tools.handle(tc)
      s.append({ role: 'user', content: [result] })
      return { s, result }
    }
    id = 'fc_recall_1'
    const item = { type: 'function_call', call_id: id, name: call.name, arguments: JSON.stringify(call.input) }
    for (const m of fromOpenAIResponses([item]).messages) s.append(m)
    const result = await tools.handle(item)
    s.append({ role: 'user', content: [result] })
    return { s, result }
  }

  for (const target of ['anthropic', 'openai-chat', 'openai-responses']) {
    test(`${target}: search, then read around the hit; every result valid after its call`, async (t) => {
      const { s, result } = await roundTrip(target, { name: 'session_search', input: { query: 'TranscriptRenderer' } })
      t.after(() => store.deleteSession(s.id))
      assert.equal(result.type, 'tool_result')
      assert.equal(result.is_error, undefined, result.content)
      assert.match(result.content, /session earlier/)
      assert.doesNotMatch(result.content, /session current/)
      const uuid = result.content.match(/uuid ([0-9a-f-]{36})/)[1]
      const tools = store.recallTools({ excludeSessionId: 'current' })
      const read = await tools.handle({ name: 'session_read', input: { session_id: 'earlier', around_uuid: uuid } })
      assert.equal(read.is_error, undefined, read.content)
      const seq = store.openSession('earlier').envelopes().find((e) => e.uuid === uuid).seq
      assert.match(read.content, new RegExp(`\\[seq ${seq}\\] `))
      // The history with the call and its result is what the provider accepts.
      const messages = s.messages
      assert.deepEqual(validateMessages(messages), [])
      if (target === 'openai-chat') assert.deepEqual(validateMessages(toOpenAIChat(messages).messages, { target }), [])
      if (target === 'openai-responses') assert.deepEqual(validateMessages(toOpenAIResponses(messages).messages, { target }), [])
      const ctx = s.buildContext({ target: target === 'anthropic' ? 'anthropic' : target })
      assert.ok(ctx)
    })
  }

  test('session_list: newest first, title or first prompt, the current session left out, paged', async () => {
    const tools = store.recallTools({ excludeSessionId: 'current' })
    const r = await tools.handle({ name: 'session_list', input: {} })
    assert.match(r.content, /^2 earlier sessions, newest first/)
    assert.match(r.content, /- earlier · "transcript components" · project spotter/)
    assert.match(r.content, /- tools · "start phoenix in background" · project spotter/)
    assert.doesNotMatch(r.content, /current/)
    const first = await tools.handle({ name: 'session_list', input: { limit: 1 } })
    assert.match(first.content, /cursor "1"/)
    const second = await tools.handle({ name: 'session_list', input: { limit: 1, cursor: '1' } })
    assert.match(second.content, /; 2-2:/)
    assert.doesNotMatch(second.content, /cursor "2"/)
  })

  test('session_read is bounded by maxResultTokens and says how to read on; reading on covers every record', async () => {
    const tools = store.recallTools({ maxResultTokens: 500 })
    const shown = new Set()
    let input = { session_id: 'earlier' }
    for (let pages = 0; pages < 500; pages++) {
      const r = await tools.handle({ name: 'session_read', input })
      assert.equal(r.is_error, undefined, r.content)
      assert.ok(r.content.length <= 500 * 4 + 400, `${r.content.length} chars`)
      for (const m of r.content.matchAll(/^\[seq (\d+)\]/gm)) shown.add(Number(m[1]))
      const next = r.content.match(/"from_seq": (\d+)/)
      if (!next) {
        assert.match(r.content, /\(end of the session\)$/)
        break
      }
      input = { session_id: 'earlier', from_seq: Number(next[1]) }
    }
    // every message of the conversation was shown (records of other kinds are not)
    const conversation = store.openSession('earlier').envelopes()
      .filter((e) => ['user', 'assistant', 'tool_result'].includes(e.type) && e.message && !e.isMeta && !e.isCompactSummary && e.includeInContext !== false)
    for (const e of conversation) assert.ok(shown.has(e.seq), `seq ${e.seq} was never shown`)
  })

  test('a long tool output is previewed with its handle; record_seq reads it whole, char_offset reads on', async () => {
    const tools = store.recallTools({ maxResultTokens: 300 })
    const r = await tools.handle({ name: 'session_read', input: { session_id: 'tools', from_seq: 32 } })
    const handle = r.content.match(/whole: session_read (\{[^}]+\})/)
    assert.ok(handle, r.content)
    const call = JSON.parse(handle[1])
    let text = ''
    let input = call
    for (let i = 0; i < 50; i++) {
      const part = await tools.handle({ name: 'session_read', input })
      const next = part.content.match(/"char_offset": (\d+)/)
      text += next ? part.content.slice(0, part.content.lastIndexOf('\n(cut at character')) : part.content
      if (!next) break
      input = { ...call, char_offset: Number(next[1]) }
    }
    assert.match(text, /Web search results for query/)
    assert.ok(text.length > 3000, `${text.length}`)
  })

  // Issue 23, finding 10 (on both engines: postgres.test.js runs this file again).
  test('session_search: a cursor altered, of another query or with a huge offset is an error result naming cursor', async () => {
    const tools = store.recallTools()
    const first = await tools.handle({ name: 'session_search', input: { query: 'phoenix', limit: 1 } })
    const c = first.content.match(/cursor "([^"]+)"/)[1]
    const next = await tools.handle({ name: 'session_search', input: { query: 'phoenix', limit: 1, cursor: c } })
    assert.equal(next.is_error, undefined, next.content)
    assert.notEqual(next.content.match(/uuid (\S+)/)[1], first.content.match(/uuid (\S+)/)[1])
    const rest = c.replace(/^\d+/, '')
    const altered = c.slice(0, -1) + (c.endsWith('0') ? '1' : '0')
    for (const [query, cursor] of [['phoenix', altered], ['phoenix', `9223372036854775808${rest}`], ['phoenix', `18446744073709551615${rest}`], ['phoenix server', c]]) {
      const r = await tools.handle({ name: 'session_search', input: { query, limit: 1, cursor } })
      assert.equal(r.is_error, true, `${cursor}: ${r.content}`)
      assert.match(r.content, /^cursor: not a cursor of this search/, cursor)
    }
  })

  test("a model's mistakes are is_error results that say what was wrong", async () => {
    const tools = store.recallTools({ excludeSessionId: 'current' })
    const cases = [
      [{ name: 'session_delete', input: {} }, /unknown tool 'session_delete'/],
      [{ name: 'session_search', input: {} }, /query: required/],
      [{ name: 'session_search', input: { query: '"open' } }, /not closed/],
      [{ name: 'session_search', input: { query: 'x', limit: 'ten' } }, /limit: expected a whole number/],
      [{ name: 'session_search', input: { query: 'x', fields: ['body'] } }, /fields: expected a list/],
      [{ name: 'session_read', input: { session_id: 'nope' } }, /no session 'nope'/],
      [{ name: 'session_read', input: { session_id: 'current' } }, /current session/],
      [{ name: 'session_read', input: { session_id: 'earlier', around_uuid: 'nope' } }, /no record 'nope'/],
      [{ name: 'session_read', input: { session_id: 'earlier', record_seq: 999999 } }, /has no record 999999/],
      [{ name: 'session_list', input: { since: 'last week' } }, /since: expected an ISO 8601/],
      [{ name: 'session_list', input: { page: 2 } }, /page: unknown argument/],
      [{ name: 'session_list', input: 'list please' }, /input: expected an object/],
      [{ id: 'c', type: 'function', function: { name: 'session_list', arguments: '{not json' } }, /arguments: not valid JSON/],
      [{ input: {} }, /names no tool/],
      ['session_list', /names no tool/],
    ]
    for (const [call, why] of cases) {
      const r = await tools.handle(/** @type {any} */ (call))
      assert.equal(r.type, 'tool_result')
      assert.equal(r.is_error, true, JSON.stringify(call))
      assert.match(r.content, why, JSON.stringify(call))
    }
    // the id of the call is carried back
    const r = await tools.handle({ id: 'c', type: 'function', function: { name: 'nope', arguments: '{}' } })
    assert.equal(r.tool_use_id, 'c')
    assert.throws(() => store.recallTools({ maxResultTokens: 5 }), (e) => e.code === 'INVALID_INPUT')
    assert.throws(() => store.recallTools({ nope: 1 }), (e) => e.code === 'INVALID_INPUT')
  })

  // Issue 23, finding 12: a call the facade could not read was "the call names no tool", a
  // numeric id was dropped, selectors were accepted together, char_offset past the end was empty.
  test('a call is refused or answered for what it is: unreadable, numeric id, selectors together, past the end', async () => {
    const tools = store.recallTools()
    const root = {}
    let deep = root
    for (let i = 0; i < 100000; i++) deep = deep.a = {}
    await assert.rejects(tools.handle({ name: 'session_list', input: root }), (e) => e.code === 'INVALID_INPUT' && /^recallTools\.handle: call: input\.a\.a.*: nested deeper than 128 levels$/.test(e.message))
    const getter = { name: 'session_list', get input() { throw new Error('boom') } }
    await assert.rejects(tools.handle(getter), (e) => e.code === 'INVALID_INPUT' && e.message === 'recallTools.handle: call: reading the value threw: boom')
    await assert.rejects(tools.handle({ type: 'tool_use', id: 7, name: 'session_list', input: {} }), (e) => e.code === 'INVALID_INPUT' && /call\.id: expected a string, got a number/.test(e.message))
    // a Responses item is answered by its call_id (its own id is the item's)
    const answered = await tools.handle({ type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'session_list', arguments: '{}' })
    assert.equal(answered.tool_use_id, 'call_1')
    const read = (input) => tools.handle({ name: 'session_read', input: { session_id: 'tools', ...input } })
    for (const [input, named] of [[{ from_seq: 1, record_seq: 2 }, 'from_seq and record_seq'], [{ around_uuid: 'x', record_seq: 2 }, 'around_uuid and record_seq'], [{ around_uuid: 'x', from_seq: 1, record_seq: 2 }, 'around_uuid, from_seq and record_seq']]) {
      const r = await read(input)
      assert.equal(r.is_error, true, JSON.stringify(input))
      assert.equal(r.content, `give one of around_uuid, from_seq or record_seq, not ${named}`)
    }
    const whole = await read({ record_seq: 3 })
    assert.match(whole.content, /\n\(end of the record\)$/)
    const length = [...whole.content].length - '\n(end of the record)'.length
    for (const charOffset of [length, 10_000_000]) {
      const r = await read({ record_seq: 3, char_offset: charOffset })
      assert.equal(r.is_error, undefined, r.content)
      assert.match(r.content, /^\(end of the record\)/)
    }
  })

  // Issue 23, finding 12: budgets counted characters (4,115 CJK characters at 1,000 tokens).
  test('results stay within maxResultTokens estimated per script: CJK, emoji, Latin, mixed', async (t) => {
    const other = Store.open(path.join(tmpDir(t), 'budget.db'))
    t.after(() => other.close())
    const texts = {
      cjk: '我们决定认证流程使用令牌，一小时后过期。'.repeat(300),
      emoji: '🚀🔥😀👍🎉'.repeat(1200),
      latin: 'The quick brown fox jumps over the lazy dog. '.repeat(130),
      mixed: '认证 flow 🚀 ok; '.repeat(400),
    }
    for (const [id, text] of Object.entries(texts)) {
      const s = other.createSession({ id })
      for (let i = 0; i < 3; i++) s.append(text)
    }
    const tools = other.recallTools({ maxResultTokens: 1000 })
    const calls = [['session_list', {}], ['session_search', { query: '认证', limit: 50 }], ['session_search', { query: 'quick OR flow', limit: 50 }]]
    for (const id of Object.keys(texts)) {
      calls.push(['session_read', { session_id: id }], ['session_read', { session_id: id, record_seq: 1 }], ['session_read', { session_id: id, record_seq: 1, char_offset: 700 }])
    }
    for (const [name, input] of calls) {
      const r = await tools.handle({ name, input })
      assert.equal(r.is_error, undefined, r.content)
      // What a tokenizer makes of it at least, without the library's estimate: a Han, kana or
      // hangul character a token, an emoji two, four ASCII characters one.
      let atLeast = 0
      for (const c of r.content) {
        if (/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u.test(c)) atLeast += 1
        else if (/\p{Extended_Pictographic}/u.test(c)) atLeast += 2
        else if (c < '\u0080') atLeast += 0.25
      }
      assert.ok(atLeast <= 1000, `${name} ${JSON.stringify(input)}: at least ${atLeast} tokens`)
    }
  })

  test('a closed store rejects with CLOSED (the caller\'s problem, not the model\'s)', async (t) => {
    const other = Store.open(path.join(tmpDir(t), 'closed.db'))
    const tools = other.recallTools()
    other.close()
    await assert.rejects(tools.handle({ name: 'session_list', input: {} }), (e) => e.code === 'CLOSED')
  })
})
