'use strict'
// System messages inside a conversation (role 'system', as the Anthropic API takes them in
// `messages`), the context-management beta's compaction blocks, OpenAI Chat messages given to
// append, and custom OpenAI tool calls given to the recall tools' handle: the JS surface (sync and
// promise), buildContext for the three targets and the converters.

const { test } = require('node:test')
const assert = require('node:assert/strict')

const { lib, expectError } = require('./helpers/util')

const {
  Session, Store, validateMessages,
  toAnthropic, fromAnthropic, toOpenAIChat, fromOpenAIChat, toOpenAIResponses, fromOpenAIResponses,
} = lib
const promise = require('../promise')

const text = (t) => [{ type: 'text', text: t }]

function conversation(s) {
  s.append({ role: 'system', content: 'You are terse.' })
  s.append({ role: 'user', content: 'hello' })
  s.append({ role: 'assistant', content: text('hi') })
  s.append({ role: 'system', content: text('From now on, answer in French.') })
  s.append({ role: 'user', content: 'how are you?' })
  s.append({ role: 'assistant', content: text('bien') })
}

test('a system message is appended, stored in place and read back; it starts no turn', () => {
  const store = Store.open(':memory:')
  const s = store.createSession()
  const env = s.append({ role: 'system', content: 'You are terse.' })
  assert.equal(env.type, 'system')
  assert.deepEqual(env.message, { role: 'system', content: text('You are terse.') })
  s.append({ role: 'user', content: 'hello' })
  s.append({ role: 'assistant', content: text('hi') })
  s.append({ role: 'system', content: text('From now on, answer in French.') })
  s.append({ role: 'user', content: 'how are you?' })
  assert.deepEqual(s.messages.map((m) => m.role), ['system', 'user', 'assistant', 'system', 'user'])
  assert.deepEqual(s.messages[3], { role: 'system', content: text('From now on, answer in French.') })
  assert.deepEqual(s.turns.map((t) => [t.startIndex, t.endIndex]), [[1, 3], [4, 4]])
  assert.equal(s.turns[1].status, 'awaiting_response')
  // read by another handle, from the file's records
  const again = store.openSession(s.id)
  assert.deepEqual(again.messages, s.messages)
  store.close()
})

test('restoreMessages takes system messages', () => {
  const s = new Session()
  const report = s.restoreMessages([
    '{"role":"system","content":"Be brief."}',
    { role: 'user', content: 'one' },
    { role: 'assistant', content: 'two' },
  ])
  assert.deepEqual(report, { messageCount: 3, turnCount: 1, skipped: [] })
  assert.deepEqual(s.messages[0], { role: 'system', content: text('Be brief.') })
})

test('a system message with other than text, or an OpenAI Chat message, is refused with what to do; nothing is stored', () => {
  const s = new Session()
  expectError(() => s.append({ role: 'system', content: [{ type: 'image', source: { type: 'url', url: 'https://x' } }] }),
    'INVALID_INPUT', "append: content[0].type: a system message holds text blocks only, got 'image'")
  expectError(() => s.append({ role: 'tool', tool_call_id: 'c1', content: '42' }),
    'INVALID_INPUT', "append: role: 'tool' is an OpenAI Chat message; convert it with fromOpenAIChat(messages) first")
  expectError(() => s.append({ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }),
    'INVALID_INPUT', 'append: tool_calls: a message with tool_calls is an OpenAI Chat message; convert it with fromOpenAIChat(messages) first')
  expectError(() => s.appendMany([{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'c', content: 'y' }]),
    'INVALID_INPUT', "appendMany: [1].role: 'tool' is an OpenAI Chat message")
  assert.deepEqual(s.messages, [])
  // converted first, the same messages go in
  const from = fromOpenAIChat([
    { role: 'user', content: 'x' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: '42' },
  ])
  s.appendMany(from.messages)
  assert.equal(s.messages.length, 3)
})

test('buildContext sends system messages in place to every target', () => {
  const s = new Session()
  conversation(s)
  const a = s.buildContext({ target: 'anthropic', system: 'Prompt.' })
  assert.equal(a.system, 'Prompt.')
  assert.deepEqual(a.messages.map((m) => m.role), ['system', 'user', 'assistant', 'system', 'user', 'assistant'])
  assert.deepEqual(a.messages[3], { role: 'system', content: text('From now on, answer in French.') })
  assert.deepEqual(validateMessages(a.messages), [])
  assert.deepEqual(a.stats.warnings, [])

  const c = s.buildContext({ target: 'openai-chat', system: 'Prompt.' })
  assert.deepEqual(c.messages[0], { role: 'system', content: 'Prompt.' })
  assert.deepEqual(c.messages[1], { role: 'system', content: 'You are terse.' })
  assert.deepEqual(c.messages[4], { role: 'system', content: 'From now on, answer in French.' })
  assert.deepEqual(validateMessages(c.messages, { target: 'openai-chat' }), [])

  const r = s.buildContext({ target: 'openai-responses' })
  assert.deepEqual(r.messages[3], { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'From now on, answer in French.' }] })
  assert.deepEqual(validateMessages(r.messages, { target: 'openai-responses' }), [])
})

test('the converters round-trip a system message in place', () => {
  const neutral = [
    { role: 'user', content: text('a') },
    { role: 'assistant', content: text('b') },
    { role: 'system', content: text('be brief') },
    { role: 'user', content: text('c') },
  ]
  const a = toAnthropic(neutral)
  assert.deepEqual(a.messages, neutral)
  assert.deepEqual(fromAnthropic(a.messages).messages, neutral)
  // the SDK's SystemMessageParam, string content, as a request would hold it
  assert.deepEqual(fromAnthropic([{ role: 'user', content: 'a' }, { role: 'system', content: 'be brief' }]).messages[1],
    { role: 'system', content: text('be brief') })

  const chat = toOpenAIChat(neutral)
  assert.deepEqual(chat.messages[2], { role: 'system', content: 'be brief' })
  assert.deepEqual(fromOpenAIChat(chat.messages).messages, neutral)

  const items = toOpenAIResponses(neutral)
  assert.deepEqual(fromOpenAIResponses(items.messages).messages, neutral)

  // a leading system message of an OpenAI list is the system prompt
  const back = fromOpenAIChat([{ role: 'system', content: 'sys' }, { role: 'user', content: 'a' }, { role: 'developer', content: 'dev' }])
  assert.equal(back.system, 'sys')
  assert.deepEqual(back.messages[1], { role: 'system', content: text('dev') })
  assert.deepEqual(back.warnings, [])
})

const COMPACTION = { type: 'compaction', content: 'Summary: refactoring the parser.', encrypted_content: 'opaque==' }

test('a compaction block round-trips exactly; an Anthropic request starts at the latest one', () => {
  const store = Store.open(':memory:')
  const s = store.createSession()
  s.append({ role: 'system', content: 'You are terse.' })
  for (const t of ['one', 'two']) {
    s.append({ role: 'user', content: t })
    s.append({ role: 'assistant', content: text(t.toUpperCase()) })
  }
  s.append({ role: 'user', content: 'three' })
  const withBlock = { role: 'assistant', content: [COMPACTION, { type: 'text', text: 'THREE' }], id: 'msg_3', model: 'claude-sonnet-4-5' }
  s.append(withBlock)
  s.append({ role: 'user', content: 'four' })
  assert.deepEqual(store.openSession(s.id).messages[6], withBlock)

  const a = s.buildContext({ target: 'anthropic' })
  assert.deepEqual(a.messages, [
    { role: 'assistant', content: [COMPACTION, { type: 'text', text: 'THREE' }] },
    { role: 'user', content: text('four') },
  ])
  assert.equal(a.stats.startSeq, 6)
  assert.equal(a.stats.compacted, true)
  assert.deepEqual(validateMessages(a.messages), [])
  // the block's tokens are counted in the estimate
  assert.ok(a.stats.estimatedTokens >= JSON.stringify(COMPACTION).length * a.stats.tokensPerChar,
    `${a.stats.estimatedTokens} tokens`)
  s.rewind(s.envelopes()[5].uuid)
  // after the rewind, the block is off the branch: the whole conversation goes again
  assert.equal(s.buildContext({ target: 'anthropic' }).messages[0].role, 'system')

  // the OpenAI targets cannot take the block: left out, said in a warning
  const s2 = store.createSession()
  s2.appendMany([{ role: 'user', content: 'go' }, withBlock, { role: 'user', content: 'more' }])
  const chat = s2.buildContext({ target: 'openai-chat' })
  assert.equal(chat.stats.startSeq, 0)
  assert.ok(chat.stats.warnings.some((w) => w.code === 'block_dropped'))
  store.close()
})

test('a compaction block outside an assistant message is refused', () => {
  const s = new Session()
  expectError(() => s.append({ role: 'user', content: [COMPACTION] }),
    'INVALID_INPUT', "append: content[0].type: a 'compaction' block is only allowed in assistant messages")
  assert.deepEqual(s.messages, [])
})

test('the recall tools answer a custom OpenAI tool call (JSON input), and say what is wrong otherwise', async () => {
  const store = Store.open(':memory:')
  store.createSession().append('the phoenix server will not start')
  const tools = store.recallTools()
  const ok = await tools.handle({ id: 'c1', type: 'custom', custom: { name: 'session_search', input: '{"query":"phoenix"}' } })
  assert.equal(ok.tool_use_id, 'c1')
  assert.equal(ok.is_error, undefined)
  assert.match(ok.content, /phoenix/)
  const bad = await tools.handle({ id: 'c2', type: 'custom', custom: { name: 'session_search', input: 'phoenix' } })
  assert.equal(bad.tool_use_id, 'c2')
  assert.equal(bad.is_error, true)
  assert.match(bad.content, /^custom\.input: session_search takes a JSON object as its input/)
  store.close()
})

test('the promise API takes system messages too', async () => {
  const store = await promise.Store.open(':memory:')
  const s = await store.createSession()
  await s.append({ role: 'system', content: 'You are terse.' })
  await s.append({ role: 'user', content: 'hello' })
  assert.deepEqual((await s.messages()).map((m) => m.role), ['system', 'user'])
  const ctx = await s.buildContext({ target: 'openai-chat' })
  assert.deepEqual(ctx.messages[0], { role: 'system', content: 'You are terse.' })
  await store.close()
})
