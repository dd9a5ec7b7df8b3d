'use strict'
// The provider converters: round trips on the real Claude Code sessions and on hand-written
// conversations (images, documents, errors, parallel calls, long and odd ids), warnings, id maps,
// a Responses output through the store and back, and bad input named by its path.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { lib, FIXTURES, expectError } = require('./helpers/util')

const {
  Session, Store, validateMessages,
  toAnthropic, fromAnthropic, toOpenAIChat, fromOpenAIChat, toOpenAIResponses, fromOpenAIResponses,
} = lib

const NAMES = ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']

// The messages of a Claude Code session as a request sends them: each record's `message`,
// consecutive records of one role merged (Claude Code splits a response), tool results first.
function conversation(name) {
  const out = []
  for (const line of fs.readFileSync(path.join(FIXTURES, name), 'utf8').split('\n')) {
    if (!line.trim()) continue
    const rec = JSON.parse(line)
    if (!rec.message) continue
    const m = structuredClone(rec.message)
    if (typeof m.content === 'string') m.content = [{ type: 'text', text: m.content }]
    const last = out[out.length - 1]
    if (last && last.role === m.role) {
      last.content.push(...m.content)
      last.content.sort((a, b) => (a.type !== 'tool_result') - (b.type !== 'tool_result'))
    } else {
      out.push(m)
    }
  }
  return out
}

const requestShape = (ms) => ms.map((m) => ({ role: m.role, content: m.content }))

// What OpenAI can express: no thinking, no `caller` (direct), no `is_error`; for Chat
// Completions, text before tool calls.
function openaiExpressible(ms, chat) {
  return requestShape(ms).map((m) => {
    let content = m.content
      .filter((b) => b.type !== 'thinking' && b.type !== 'redacted_thinking')
      .map((b) => {
        const { caller, is_error, ...rest } = b
        return rest
      })
    if (chat) content = [...content.filter((b) => b.type !== 'tool_use'), ...content.filter((b) => b.type === 'tool_use')]
    return { role: m.role, content }
  })
}

const count = (ms, pred) => ms.flatMap((m) => m.content).filter(pred).length
const codes = (warnings) => warnings.map((w) => w.code)

// Chat Completions' rule, checked here independently of the library: every tool call answered by
// one tool message among those right after its assistant message, and no other tool message.
function chatPairingProblems(messages) {
  const problems = []
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]
    if (m.role === 'tool') continue
    const calls = (m.role === 'assistant' && m.tool_calls) || []
    const answers = []
    for (let j = i + 1; j < messages.length && messages[j].role === 'tool'; j++) answers.push(messages[j].tool_call_id)
    const ids = calls.map((c) => c.id)
    if (JSON.stringify([...answers].sort()) !== JSON.stringify([...ids].sort())) problems.push({ i, ids, answers })
    for (const id of ids) if (id.length > 40) problems.push({ i, long: id })
  }
  return problems
}

for (const name of NAMES) {
  test(`${name}: Anthropic round trip gives the request back byte for byte`, () => {
    const m = conversation(name)
    const to = toAnthropic(m, { system: 'You are Claude Code.' })
    assert.deepEqual(to.warnings, [])
    assert.deepEqual(to.idMap, {})
    assert.equal(to.system, 'You are Claude Code.')
    assert.deepEqual(validateMessages(to.messages), [])
    for (const x of to.messages) assert.deepEqual(Object.keys(x), ['role', 'content'])
    const back = fromAnthropic(to.messages, { system: to.system, idMap: to.idMap })
    assert.equal(JSON.stringify(back.messages), JSON.stringify(requestShape(m)))
    assert.equal(back.system, 'You are Claude Code.')
  })

  test(`${name}: Chat Completions round trip keeps what Chat can express, warns about the rest`, () => {
    const m = conversation(name)
    const to = toOpenAIChat(m, { system: 'sys' })
    assert.deepEqual(to.messages[0], { role: 'system', content: 'sys' })
    assert.deepEqual(chatPairingProblems(to.messages), [])
    assert.equal(to.messages.filter((x) => x.role === 'tool').length, count(m, (b) => b.type === 'tool_result'))
    const w = codes(to.warnings)
    assert.equal(w.filter((c) => c === 'thinking_dropped').length, count(m, (b) => b.type === 'thinking'))
    assert.equal(w.filter((c) => c === 'is_error_dropped').length, count(m, (b) => b.is_error === true))
    assert.ok(w.every((c) => ['thinking_dropped', 'is_error_dropped', 'reordered'].includes(c)), w.join())
    for (const warning of to.warnings) assert.match(warning.path, /^messages\[\d+\]\.content\[\d+\]$/)
    const back = fromOpenAIChat(to.messages, { idMap: to.idMap })
    assert.equal(back.system, 'sys')
    assert.deepEqual(back.warnings, [])
    assert.deepEqual(back.messages, openaiExpressible(m, true))
  })

  test(`${name}: Responses round trip keeps what Responses can express, warns about the rest`, () => {
    const m = conversation(name)
    const to = toOpenAIResponses(m, { system: [{ type: 'text', text: 'sys' }] })
    assert.deepEqual(to.messages[0], { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'sys' }] })
    const calls = to.messages.filter((i) => i.type === 'function_call').map((i) => i.call_id)
    const outputs = to.messages.filter((i) => i.type === 'function_call_output').map((i) => i.call_id)
    assert.equal(calls.length, count(m, (b) => b.type === 'tool_use'))
    assert.deepEqual([...outputs].sort(), [...calls].sort())
    assert.ok(codes(to.warnings).every((c) => ['thinking_dropped', 'is_error_dropped'].includes(c)))
    const back = fromOpenAIResponses(to.messages, { idMap: to.idMap })
    assert.deepEqual(back.system, [{ type: 'text', text: 'sys' }])
    assert.deepEqual(back.messages, openaiExpressible(m, false))
  })
}

test('stored messages (a Session) convert as they are', () => {
  const s = new Session()
  s.restoreMessages(fs.readFileSync(path.join(FIXTURES, 'tool_heavy.jsonl'), 'utf8').split('\n').filter(Boolean))
  const chat = toOpenAIChat(s.messages)
  assert.ok(chat.messages.some((x) => x.role === 'tool'))
  assert.ok(toOpenAIResponses(s.messages).messages.some((x) => x.type === 'function_call'))
})

// Images, documents, an error, parallel calls, an id too long for Chat and one Anthropic rejects.
const LONG = `call_${'x'.repeat(40)}` // 45 characters
function rich() {
  return [
    { role: 'user', content: [
      { type: 'text', text: 'What is in these?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0x' }, title: 'report.pdf' },
    ] },
    { role: 'assistant', content: [
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_use', id: 'functions.read:0', name: 'read', input: { path: 'a.txt' } },
      { type: 'tool_use', id: LONG, name: 'read', input: { path: 'b.txt' } },
    ] },
    { role: 'user', content: [
      { type: 'tool_result', tool_use_id: 'functions.read:0', content: 'alpha' },
      { type: 'tool_result', tool_use_id: LONG, content: [{ type: 'text', text: 'no such file' }], is_error: true },
      { type: 'text', text: 'Go on.' },
    ] },
    { role: 'assistant', content: [{ type: 'text', text: 'Done.' }] },
  ]
}

test('Chat Completions: images, PDFs, parallel calls, a long id mapped and mapped back', () => {
  const m = rich()
  const to = toOpenAIChat(m)
  const mapped = to.messages[1].tool_calls[1].id
  assert.match(mapped, /^tl_[0-9a-f]{32}$/)
  assert.deepEqual(to.idMap, { [mapped]: LONG })
  assert.deepEqual(to.messages, [
    { role: 'user', content: [
      { type: 'text', text: 'What is in these?' },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
      { type: 'file', file: { filename: 'report.pdf', file_data: 'data:application/pdf;base64,JVBERi0x' } },
    ] },
    { role: 'assistant', content: 'Let me look.', tool_calls: [
      { id: 'functions.read:0', type: 'function', function: { name: 'read', arguments: '{"path":"a.txt"}' } },
      { id: mapped, type: 'function', function: { name: 'read', arguments: '{"path":"b.txt"}' } },
    ] },
    { role: 'tool', tool_call_id: 'functions.read:0', content: 'alpha' },
    { role: 'tool', tool_call_id: mapped, content: [{ type: 'text', text: 'no such file' }] },
    { role: 'user', content: 'Go on.' },
    { role: 'assistant', content: 'Done.' },
  ])
  assert.deepEqual(to.warnings, [{ path: 'messages[2].content[1]', code: 'is_error_dropped', message: to.warnings[0].message }])
  // deterministic
  assert.deepEqual(toOpenAIChat(m), to)
  const back = fromOpenAIChat(to.messages, { idMap: to.idMap })
  const expected = rich()
  delete expected[2].content[1].is_error
  assert.deepEqual(back.messages, expected)
  // without the map the mapped id stays
  assert.equal(fromOpenAIChat(to.messages).messages[1].content[2].id, mapped)
})

test('Responses: the same conversation as items, and back', () => {
  const m = rich()
  const to = toOpenAIResponses(m)
  assert.deepEqual(to.idMap, {}, 'ids of up to 64 characters are kept')
  assert.deepEqual(to.messages.map((i) => i.type), [
    'message', 'message', 'function_call', 'function_call', 'function_call_output', 'function_call_output', 'message', 'message',
  ])
  assert.deepEqual(to.messages[0].content[1], { type: 'input_image', detail: 'auto', image_url: 'data:image/png;base64,iVBORw0KGgo=' })
  assert.deepEqual(to.messages[0].content[3], { type: 'input_file', filename: 'report.pdf', file_data: 'data:application/pdf;base64,JVBERi0x' })
  assert.deepEqual(to.messages[1], { type: 'message', role: 'assistant', content: 'Let me look.' })
  assert.deepEqual(to.messages[2], { type: 'function_call', call_id: 'functions.read:0', name: 'read', arguments: '{"path":"a.txt"}' })
  assert.deepEqual(to.messages[6], { type: 'message', role: 'user', content: 'Go on.' })
  const back = fromOpenAIResponses(to.messages, { idMap: to.idMap })
  const expected = rich()
  delete expected[2].content[1].is_error
  assert.deepEqual(back.messages, expected)
})

test('Anthropic: an id with characters Anthropic rejects is mapped on the call and its result', () => {
  const to = toAnthropic(rich())
  const [[target, original]] = Object.entries(to.idMap)
  assert.equal(original, 'functions.read:0')
  assert.match(target, /^[a-zA-Z0-9_-]+$/)
  assert.equal(to.messages[1].content[1].id, target)
  assert.equal(to.messages[2].content[0].tool_use_id, target)
  assert.deepEqual(validateMessages(to.messages), [])
  assert.deepEqual(fromAnthropic(to.messages, { idMap: to.idMap }).messages, rich())
})

test('what OpenAI cannot express is a warning with its path, never dropped silently', () => {
  const m = [
    { role: 'user', content: [
      { type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } },
      { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'notes' } },
      { type: 'image', source: { type: 'file', file_id: 'file_1' } },
    ] },
    { role: 'assistant', content: [
      { type: 'thinking', thinking: 'hmm', signature: 'sig' },
      { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'q' } },
      { type: 'tool_use', id: 't1', name: 'shot', input: {} },
    ] },
    { role: 'user', content: [
      { type: 'tool_result', tool_use_id: 't1', content: [
        { type: 'text', text: 'see image' },
        { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: 'AAA' } },
      ] },
    ] },
  ]
  const chat = toOpenAIChat(m)
  assert.deepEqual(chat.warnings.map((w) => `${w.path} ${w.code}`), [
    'messages[0].content[0] cache_control_dropped',
    'messages[0].content[1] document_as_text',
    'messages[0].content[2] unsupported_source',
    'messages[1].content[0] thinking_dropped',
    'messages[1].content[1] block_dropped',
    'messages[2].content[0].content[1] tool_result_content_moved',
  ])
  for (const w of chat.warnings) assert.ok(w.message.length > 10)
  assert.deepEqual(chat.messages.slice(2), [
    { role: 'tool', tool_call_id: 't1', content: [{ type: 'text', text: 'see image' }] },
    { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/jpeg;base64,AAA' } }] },
  ])
  const resp = toOpenAIResponses(m)
  assert.deepEqual(resp.warnings.map((w) => w.code), [
    'cache_control_dropped', 'document_as_text', 'unsupported_source', 'thinking_dropped', 'block_dropped',
  ])
  assert.deepEqual(resp.messages.at(-1).output[1], { type: 'input_image', detail: 'auto', image_url: 'data:image/jpeg;base64,AAA' })
})

// A Responses output: reasoning, a message, two parallel calls (items as the API returns them).
const OUTPUT = [
  { id: 'rs_1', type: 'reasoning', summary: [{ type: 'summary_text', text: 'Thinking.' }], encrypted_content: 'gAAAA' },
  { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', annotations: [], text: 'Checking both.' }] },
  { id: 'fc_1', type: 'function_call', status: 'completed', arguments: '{"city": "Paris"}', call_id: 'call_a', name: 'weather' },
  { id: 'fc_2', type: 'function_call', status: 'completed', arguments: '{"city":"Rome"}', call_id: 'call_b', name: 'weather' },
]

test('a Responses output goes through the store and back to the Responses API as it was', (t) => {
  const from = fromOpenAIResponses(OUTPUT)
  assert.equal(from.messages.length, 1)
  const content = from.messages[0].content
  assert.deepEqual(content.map((b) => b.type), ['openai_reasoning', 'text', 'tool_use', 'tool_use'])
  assert.deepEqual(content[1].openai, { id: 'msg_1', status: 'completed' })
  assert.deepEqual(content[2].input, { city: 'Paris' })

  const store = Store.open(':memory:')
  t.after(() => store.close())
  const s = store.createSession()
  s.append('Weather in Paris and Rome?')
  s.append(from.messages[0], { provider: 'openai' })
  s.append({ role: 'user', content: [
    { type: 'tool_result', tool_use_id: 'call_a', content: 'sunny' },
    { type: 'tool_result', tool_use_id: 'call_b', content: 'rain' },
  ] })
  const again = store.openSession(s.id)
  const to = toOpenAIResponses(again.messages)
  assert.deepEqual(to.warnings, [])
  assert.deepEqual(to.messages.slice(1, 5), OUTPUT)
  assert.deepEqual(to.messages.slice(5).map((i) => [i.type, i.call_id, i.output]), [
    ['function_call_output', 'call_a', 'sunny'], ['function_call_output', 'call_b', 'rain'],
  ])
  // the other targets get the text and the calls, and are told about the reasoning
  const a = toAnthropic(again.messages)
  assert.deepEqual(a.warnings.map((w) => [w.path, w.code]), [['messages[1].content[0]', 'reasoning_dropped']])
  assert.ok(a.messages[1].content.every((b) => !('openai' in b)))
  assert.deepEqual(validateMessages(a.messages), [])
  const c = toOpenAIChat(again.messages)
  assert.deepEqual(c.warnings.map((w) => w.code), ['reasoning_dropped'])
  assert.equal(c.messages[1].tool_calls[0].function.arguments, '{"city": "Paris"}', 'the exact arguments text')
})

test('a Chat Completions response message comes in and goes back', () => {
  const completionMessage = {
    role: 'assistant', content: 'Calling.', refusal: null, annotations: [],
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
  }
  const from = fromOpenAIChat([
    { role: 'developer', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Look' }, { type: 'image_url', image_url: { url: 'https://x/c.png', detail: 'high' } }] },
    completionMessage,
    { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
    { role: 'assistant', content: null, refusal: 'I cannot.' },
  ])
  assert.equal(from.system, 'Be brief.')
  assert.deepEqual(from.messages, [
    { role: 'user', content: [
      { type: 'text', text: 'Look' },
      { type: 'image', source: { type: 'url', url: 'https://x/c.png' }, openai: { detail: 'high' } },
    ] },
    { role: 'assistant', content: [{ type: 'text', text: 'Calling.' }, { type: 'tool_use', id: 'call_1', name: 'f', input: { a: 1 } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'ok' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'I cannot.', openai: { refusal: true } }] },
  ])
  const back = toOpenAIChat(from.messages, { system: from.system })
  assert.deepEqual(back.messages[2], { role: 'assistant', content: 'Calling.', tool_calls: completionMessage.tool_calls })
  assert.deepEqual(back.messages[1].content[1], { type: 'image_url', image_url: { url: 'https://x/c.png', detail: 'high' } })
  assert.deepEqual(back.messages[4], { role: 'assistant', content: null, refusal: 'I cannot.' })
  // a refusal goes to Anthropic as its text
  assert.deepEqual(toAnthropic(from.messages).messages[3], { role: 'assistant', content: [{ type: 'text', text: 'I cannot.' }] })
})

test('bad input is INVALID_INPUT naming the path', () => {
  expectError(() => toOpenAIChat('hi'), 'INVALID_INPUT', 'toOpenAIChat: expected an array of messages, got a string')
  expectError(() => toAnthropic([{ role: 'user', content: [{ type: 'tool_result' }] }]), 'INVALID_INPUT',
    'toAnthropic: messages[0].content[0].tool_use_id: expected a string')
  expectError(() => toOpenAIResponses([{ role: 'developer', content: 'x' }]), 'INVALID_INPUT', 'toOpenAIResponses: messages[0].role:')
  expectError(() => toOpenAIChat([], { system: 5 }), 'INVALID_INPUT', 'toOpenAIChat: system: expected a string or an array of text blocks')
  expectError(() => toOpenAIChat([], { sytem: 'x' }), 'INVALID_INPUT', 'toOpenAIChat: options.sytem')
  expectError(() => toOpenAIChat([], 'x'), 'INVALID_INPUT', 'toOpenAIChat: options: expected an object')
  expectError(() => fromOpenAIChat([
    { role: 'user', content: 'x' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }] },
  ]), 'INVALID_INPUT', 'fromOpenAIChat: messages[1].tool_calls[0].function.arguments: not valid JSON')
  expectError(() => fromOpenAIChat([{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '[1]' } }] }]),
    'INVALID_INPUT', 'fromOpenAIChat: messages[0].tool_calls[0].function.arguments: expected a JSON object')
  expectError(() => fromOpenAIChat([{ role: 'function', name: 'f', content: 'x' }]), 'INVALID_INPUT', 'fromOpenAIChat: messages[0].role:')
  expectError(() => fromOpenAIChat([], { idMap: { a: 1 } }), 'INVALID_INPUT', 'fromOpenAIChat: options.idMap.a')
  expectError(() => fromOpenAIResponses([{ type: 'function_call_output', output: 'x' }]), 'INVALID_INPUT',
    'fromOpenAIResponses: items[0].call_id: expected a string')
  expectError(() => fromAnthropic([{ role: 'user', content: 5 }]), 'INVALID_INPUT', 'fromAnthropic: messages[0].content')
})

test('fromOpenAIResponses takes an input string', () => {
  assert.deepEqual(fromOpenAIResponses('hello'), { messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }], warnings: [] })
})
