'use strict'
// Lossless round trip: every content block type, unknown blocks and fields, key order, awkward
// numbers and strings, written by this process and read back by a new process from the closed
// store. The only allowed change is string content -> [{type:'text', text}].

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const {
  lib, tmpDir, readInNewProcess, assertSameJson, normalizeMessage, jsonClone, expectedEnvelope,
  keyPaths, UUID_V7_RE, ISO_RE,
} = require('./helpers/util')

const { Store } = lib

const PNG_1PX = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
const PDF_B64 = Buffer.from('%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n').toString('base64')

// Records as a caller gives them: [input, envelopeArg?]. Keys are deliberately in unusual orders.
function catalogue() {
  return [
    // a user prompt with every user-side block type
    [{
      role: 'user',
      content: [
        { type: 'text', text: 'Look at these.' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_1PX } },
        { source: { url: 'https://example.com/cat.jpg', type: 'url' }, type: 'image' },
        {
          type: 'document',
          source: { type: 'base64', media_type: 'application/pdf', data: PDF_B64 },
          title: 'Spec', context: 'attached by the user', citations: { enabled: true },
        },
        { type: 'document', source: { type: 'url', url: 'https://example.com/paper.pdf' } },
        {
          context: 'plain text context', title: 'Notes', type: 'document',
          source: { data: 'The sky is blue.\nGrass is green.', media_type: 'text/plain', type: 'text' },
        },
      ],
    }],
    // assistant: thinking with signature, redacted thinking, text with citations, two tool calls
    [{
      id: 'msg_01RoundTrip000000000001',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5-20250929',
      content: [
        { type: 'thinking', thinking: 'The user wants a summary.\nLet me check.', signature: 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxM/sig==' },
        { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qyPKiIG' },
        {
          type: 'text',
          text: 'The sky is blue.',
          citations: [
            { type: 'char_location', cited_text: 'The sky is blue.', document_index: 2, document_title: 'Notes', start_char_index: 0, end_char_index: 16 },
            { end_page_number: 2, start_page_number: 1, type: 'page_location', cited_text: 'p', document_index: 0, document_title: null },
          ],
        },
        { type: 'tool_use', id: 'toolu_01A', name: 'read_file', input: { path: '/tmp/a.txt', options: { z: 1, a: 2, m: [3, { y: 1, b: 2 }] } } },
        { input: {}, name: 'list_dir', id: 'toolu_01B', type: 'tool_use' },
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: {
        input_tokens: 1200, cache_creation_input_tokens: 300, cache_read_input_tokens: 4000,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 300 },
        output_tokens: 88, service_tier: 'standard',
      },
    }, { requestId: 'req_01RoundTrip', provider: 'anthropic' }],
    // user: tool results with string content, block-array content, is_error, and no content
    [{
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_01A', content: 'line 1\nline 2\n' },
        {
          type: 'tool_result', tool_use_id: 'toolu_01B', is_error: false,
          content: [
            { type: 'text', text: 'a.txt\nb.png' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_1PX } },
          ],
        },
        { is_error: true, content: 'permission denied', tool_use_id: 'toolu_01C', type: 'tool_result' },
        { type: 'tool_result', tool_use_id: 'toolu_01D' },
      ],
    }, {
      toolUseResult: { stdout: 'line 1\nline 2\n', stderr: '', interrupted: false, isImage: false },
    }],
    // assistant: server tools, MCP tools and a block type nobody models yet
    [{
      role: 'assistant',
      content: [
        { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'threadline' } },
        {
          type: 'web_search_tool_result', tool_use_id: 'srvtoolu_01',
          content: [{ type: 'web_search_result', url: 'https://example.com', title: 'Example', encrypted_content: 'abc', page_age: null }],
        },
        { type: 'mcp_tool_use', id: 'mcptoolu_01', name: 'query', server_name: 'db', input: { sql: 'select 1' } },
        { type: 'mcp_tool_result', tool_use_id: 'mcptoolu_01', is_error: false, content: [{ type: 'text', text: '1' }] },
        { type: 'x_future_block', payload: { z: 1, a: [true, null, { q: 'r' }] }, version: 3 },
        { type: 'text', text: 'Done.' },
      ],
      stop_reason: 'end_turn',
    }],
    // unknown fields on a block, on the message and on the envelope; unknown block in a user message
    [{
      type: 'user',
      zzz_first: { b: 1, a: 2 },
      message: {
        content: [
          { text: 'cached prompt', type: 'text', cache_control: { type: 'ephemeral', ttl: '1h' }, x_block_field: [1, 'two', { three: 3 }] },
          { type: 'x_user_block', anything: { goes: ['here'] } },
        ],
        role: 'user',
        x_message_field: { nested: { deeper: [{ k: 'v' }] } },
      },
      cwd: '/home/USER/project',
      gitBranch: 'main',
      isSidechain: false,
      metadata: { tag: 'round-trip', order: { z: 26, a: 1 } },
      aaa_last: null,
    }],
    // an envelope without a message (an app record), kept as given
    [{ type: 'progress', data: { type: 'hook_progress', hookEvent: 'SessionStart' }, toolUseID: 'x-1', parentToolUseID: 'x-0' }],
    // a record shown to people but never sent to a model
    [{ role: 'assistant', content: [{ type: 'text', text: 'internal note' }] }, { includeInContext: false, mode: 'plan', runId: 'run-1', agentId: 'agent-7' }],
    // string content, normalised to one text block (user, assistant, inside an envelope, a plain string)
    [{ role: 'user', content: 'a plain prompt', x_after_content: 1 }],
    [{ content: 'a plain answer', role: 'assistant', id: 'msg_01RoundTrip000000000002' }],
    [{ message: { role: 'user', content: 'prompt inside an envelope' }, custom: 'kept' }],
    ['a prompt given as a string'],
  ]
}

function appendAll(session, records) {
  return records.map(([input, extra]) => (extra === undefined ? session.append(input) : session.append(input, extra)))
}

// What messages must read back as: records with a message, not includeInContext:false, in order.
function expectedMessages(records) {
  const out = []
  for (const [input, extra] of records) {
    const iic = (extra && extra.includeInContext) ?? (input && input.includeInContext)
    if (iic === false) continue
    if (typeof input === 'string') out.push({ role: 'user', content: [{ type: 'text', text: input }] })
    else if ('role' in input && !('message' in input)) out.push(normalizeMessage(input))
    else if (input.message) out.push(normalizeMessage(input.message))
  }
  return jsonClone(out)
}

function derivedType(input) {
  const m = typeof input === 'string' ? { role: 'user', content: 'x' } : ('message' in input ? input.message : ('role' in input ? input : null))
  if (!m) return undefined
  if (m.role === 'assistant') return 'assistant'
  const blocks = typeof m.content === 'string' ? [{ type: 'text' }] : m.content
  return blocks.every((b) => b.type === 'tool_result') ? 'tool_result' : 'user'
}

function checkEnvelopes(actual, records, sessionId, returned) {
  assert.equal(actual.length, records.length)
  let prevUuid = null
  records.forEach(([input, extra], i) => {
    const a = actual[i]
    const given = { ...(typeof input === 'object' && !('role' in input && !('message' in input)) ? input : {}), ...(extra || {}) }
    if (!('uuid' in given)) assert.match(a.uuid, UUID_V7_RE, `record ${i}: generated uuid`)
    if (!('timestamp' in given)) {
      assert.match(a.timestamp, ISO_RE, `record ${i}: generated timestamp`)
      assert.ok(Math.abs(Date.parse(a.timestamp) - Date.now()) < 10 * 60 * 1000, `record ${i}: timestamp is now`)
    }
    const expected = expectedEnvelope(input, extra, {
      seq: i, parentUuid: prevUuid, sessionId, type: derivedType(input), actual: a,
    })
    assertSameJson(a, expected, `envelope ${i}`)
    assertSameJson(a, jsonClone(returned[i]), `envelope ${i} read back vs returned by append`)
    prevUuid = a.uuid
  })
}

test('every block type, unknown blocks and unknown fields round-trip through a closed store read by a new process', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'rt.db')
  const records = catalogue()
  const store = Store.open(file)
  const session = store.createSession({ id: 'round-trip' })
  const returned = appendAll(session, records)
  store.close()

  const back = readInNewProcess(file, 'round-trip')
  assert.notEqual(back.pid, process.pid)
  assertSameJson(back.messages, expectedMessages(records), 'messages')
  checkEnvelopes(back.envelopes, records, 'round-trip', returned)
})

test('object key order is kept at every depth (Object.keys and JSON text)', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'order.db')
  // Keys in reverse-alphabetical and random orders, at every level: envelope, message, block, input.
  const input = {
    zeta: 1,
    message: {
      usage: { output_tokens: 2, input_tokens: 1, service_tier: 'priority', cache_read_input_tokens: 0 },
      stop_reason: 'tool_use',
      model: 'claude-opus-4-1',
      content: [
        { name: 'edit', input: { z: { y: { x: [{ c: 3, b: 2, a: 1 }] } }, m: 'mid', a: 'first?' }, id: 'toolu_order', type: 'tool_use' },
        { signature: 'sig', thinking: 'hmm', type: 'thinking' },
      ],
      role: 'assistant',
      id: 'msg_order',
    },
    yankee: { c: 1, b: 2, a: 3 },
    alpha: [{ z: 0, y: 0 }, { b: 0, a: 0 }],
  }
  const store = Store.open(file)
  const s = store.createSession({ id: 'order' })
  s.append(input)
  s.append({ role: 'user', content: [{ tool_use_id: 'toolu_order', type: 'tool_result', content: [{ text: 'ok', type: 'text' }] }] }, { zulu: { b: 1, a: 2 }, alpha: 0 })
  store.close()

  const back = readInNewProcess(file, 'order')
  const env0 = back.envelopes[0]
  // the caller's keys in the caller's order, then the filled ones
  assert.deepStrictEqual(Object.keys(env0), ['zeta', 'message', 'yankee', 'alpha', 'type', 'uuid', 'parentUuid', 'sessionId', 'seq', 'timestamp'])
  assert.deepStrictEqual(Object.keys(env0.message), ['usage', 'stop_reason', 'model', 'content', 'role', 'id'])
  assert.deepStrictEqual(Object.keys(env0.message.usage), ['output_tokens', 'input_tokens', 'service_tier', 'cache_read_input_tokens'])
  assert.deepStrictEqual(Object.keys(env0.message.content[0]), ['name', 'input', 'id', 'type'])
  assert.deepStrictEqual(Object.keys(env0.message.content[0].input), ['z', 'm', 'a'])
  assert.deepStrictEqual(Object.keys(env0.message.content[0].input.z.y.x[0]), ['c', 'b', 'a'])
  assertSameJson(back.messages[0], input.message, 'message 0')
  assert.equal(JSON.stringify(back.messages[0]), JSON.stringify(input.message))
  assert.deepStrictEqual(keyPaths(env0.yankee), keyPaths(input.yankee))
  const env1 = back.envelopes[1]
  assert.deepStrictEqual(Object.keys(env1), ['zulu', 'alpha', 'type', 'uuid', 'parentUuid', 'sessionId', 'seq', 'timestamp', 'message'])
  assert.deepStrictEqual(Object.keys(env1.zulu), ['b', 'a'])
  assert.deepStrictEqual(Object.keys(env1.message.content[0]), ['tool_use_id', 'type', 'content'])
})

test('awkward numbers and strings come back exactly from a new process', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'awkward.db')
  const numbers = {
    tiny: 1e-7,
    twoTo53: 2 ** 53,
    twoTo53plus2: 2 ** 53 + 2,
    minusTwoTo53: -(2 ** 53),
    maxSafe: Number.MAX_SAFE_INTEGER,
    huge: 1.5e300,
    max: Number.MAX_VALUE,
    minDenormal: 5e-324,
    negTiny: -9.87654321e-300,
    oneE21: 1e21,
    pointThree: 0.1 + 0.2,
    third: 1 / 3,
    pi: Math.PI,
    longDecimal: 123456789.12345679,
    // more digits than a double holds: JS rounds it when the caller builds the value
    tooLong: 3.14159265358979323846264338327950288,
    zero: 0,
    negative: -42,
    list: [0.5, -0.25, 1e-300, 1e300, 12345678901234567890],
  }
  const strings = {
    emoji: '😀 👩‍👩‍👧‍👦 🏳️‍🌈 🇯🇵',
    cjk: '漢字かなカナ한국어 中文',
    nul: 'before\u0000after',
    controls: '\u0001\u0002\u0003\u001f\u007f\b\f\n\r\t',
    // the raw bytes a store might use as markers, spelled out in user text
    fakeBlobMark: '\u0001' + 'a'.repeat(64) + '\u0001',
    fakeMessageMark: 'x\u0002y',
    separators: '\u2028\u2029',
    quotes: '"\'\\/`',
    rtl: 'مرحبا שלום',
    combining: 'e\u0301 a\u030a',
    bmpEdge: '\uffff\ufffe\ufeff',
    astral: '\u{10FFFF}\u{1D11E}',
    empty: '',
  }
  const keys = { '': 'empty key', '\u0000': 'nul key', '😀': 'emoji key', '日本': 'cjk key', '\u0001': 'marker key', 'a"b': 'quote key' }
  const longWeird = ('😀漢\u0000\u0001' + 'z'.repeat(60)).repeat(400) // > 10 KB: stored out of line

  const records = [
    [{ role: 'user', content: Object.values(strings).map((text) => ({ type: 'text', text })), x_numbers: numbers, x_strings: strings, x_keys: keys }],
    [{
      role: 'assistant',
      id: 'msg_awkward',
      content: [
        { type: 'text', text: strings.emoji + strings.cjk },
        { type: 'tool_use', id: 'toolu_😀', name: 'calc', input: { numbers, keys, nested: [[[[numbers.tiny]]]] } },
      ],
      usage: { input_tokens: 2 ** 53 - 1, output_tokens: 0 },
    }, { x_env_numbers: numbers, x_env_keys: keys }],
    [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_😀', content: longWeird }] }, { toolUseResult: { stdout: longWeird, n: numbers } }],
    [strings.emoji + strings.nul + strings.cjk],
  ]

  const store = Store.open(file)
  const s = store.createSession({ id: 'awkward' })
  const returned = appendAll(s, records)
  store.close()

  const back = readInNewProcess(file, 'awkward')
  assertSameJson(back.messages, expectedMessages(records), 'messages')
  checkEnvelopes(back.envelopes, records, 'awkward', returned)
  // spot checks written out, so a failure says which value broke
  const nums = back.messages[0].x_numbers
  for (const [k, v] of Object.entries(numbers)) assert.ok(Object.is(nums[k], v) || k === 'list', `number ${k}: ${nums[k]} !== ${v}`)
  assert.equal(nums.tiny, 1e-7)
  assert.equal(nums.twoTo53, 9007199254740992)
  assert.equal(nums.huge, 1.5e300)
  for (const [k, v] of Object.entries(strings)) assert.equal(back.messages[0].x_strings[k], v, `string ${k}`)
  assert.deepStrictEqual(Object.keys(back.messages[0].x_keys), Object.keys(keys))
  assert.equal(back.messages[2].content[0].content, longWeird)
  assert.equal(back.envelopes[2].toolUseResult.stdout, longWeird)
  assert.equal(back.messages[3].content[0].text, strings.emoji + strings.nul + strings.cjk)
})

test('string content is normalised to one text block and nothing else changes', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'norm.db')
  const store = Store.open(file)
  const s = store.createSession({ id: 'norm' })
  const e0 = s.append({ role: 'user', content: 'hello there', x: 1 })
  const e1 = s.append({ role: 'assistant', content: 'general kenobi', id: 'msg_n1' })
  const e2 = s.append({ type: 'user', message: { content: '  spaces\nand lines  ', role: 'user' } })
  const e3 = s.append('prompt string')
  // already-array content is not touched: two adjacent text blocks stay two blocks
  const e4 = s.append({ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] })
  // an empty string is a text block with empty text
  const e5 = s.append({ role: 'assistant', content: '' })
  store.close()

  // what append returned is already normalised
  assert.deepStrictEqual(e0.message, { role: 'user', content: [{ type: 'text', text: 'hello there' }], x: 1 })
  assert.deepStrictEqual(e1.message.content, [{ type: 'text', text: 'general kenobi' }])
  assert.deepStrictEqual(e2.message.content, [{ type: 'text', text: '  spaces\nand lines  ' }])
  assert.deepStrictEqual(e3.message, { role: 'user', content: [{ type: 'text', text: 'prompt string' }] })
  assert.equal(e3.type, 'user')

  const back = readInNewProcess(file, 'norm')
  assertSameJson(back.messages, [
    { role: 'user', content: [{ type: 'text', text: 'hello there' }], x: 1 },
    { role: 'assistant', content: [{ type: 'text', text: 'general kenobi' }], id: 'msg_n1' },
    { content: [{ type: 'text', text: '  spaces\nand lines  ' }], role: 'user' },
    { role: 'user', content: [{ type: 'text', text: 'prompt string' }] },
    { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
    { role: 'assistant', content: [{ type: 'text', text: '' }] },
  ], 'messages')
  for (const [i, e] of [e0, e1, e2, e3, e4, e5].entries()) assertSameJson(back.envelopes[i], jsonClone(e), `envelope ${i}`)
})

test('values are stored as JSON.stringify sees them: toJSON honoured, undefined dropped', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'tojson.db')
  const when = new Date(Date.UTC(2025, 0, 2, 3, 4, 5, 6))
  const store = Store.open(file)
  const s = store.createSession({ id: 'tojson' })
  s.append({ role: 'user', content: [{ type: 'text', text: 'x', gone: undefined }], when, skip: undefined })
  store.close()
  const back = readInNewProcess(file, 'tojson')
  assertSameJson(back.messages[0], { role: 'user', content: [{ type: 'text', text: 'x' }], when: '2025-01-02T03:04:05.006Z' })
})

test('every BMP character and a sweep of astral ones round-trip, inline and out of line, in values and keys', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'unicode.db')
  let all = ''
  for (let c = 0; c <= 0xffff; c++) if (c < 0xd800 || c > 0xdfff) all += String.fromCharCode(c)
  for (let c = 0x10000; c <= 0x10ffff; c += 97) all += String.fromCodePoint(c)
  // short pieces (stored inline) of every length around common chunk sizes, and the whole (a blob)
  const chars = Array.from(all) // by code point: a piece never splits a surrogate pair
  const pieces = []
  for (let at = 0, len = 1; at < chars.length; at += len, len = (len % 67) + 1) pieces.push(chars.slice(at, at + len).join(''))
  const half = Math.floor(pieces.length / 2)
  assert.ok(half > 500)
  const keyed = {}
  for (let i = 0; i < 2000; i++) keyed[`${i}:${pieces[i % pieces.length]}`] = pieces[(i * 7) % pieces.length]
  const records = [
    [{ role: 'user', content: [{ type: 'text', text: all }] }],
    [{ role: 'user', content: pieces.slice(0, half).map((text) => ({ type: 'text', text })) }],
    [{ role: 'user', content: pieces.slice(half).map((text) => ({ type: 'text', text })) }],
    [{ type: 'event', name: 'keys', data: keyed }],
  ]
  const store = Store.open(file)
  const s = store.createSession({ id: 'unicode' })
  const returned = appendAll(s, records)
  store.close()
  const back = readInNewProcess(file, 'unicode')
  assert.equal(back.messages[0].content[0].text, all)
  assert.deepStrictEqual(back.messages[1].content.concat(back.messages[2].content).map((b) => b.text), pieces)
  assert.deepStrictEqual(Object.keys(back.envelopes[3].data), Object.keys(keyed))
  assertSameJson(back.messages, expectedMessages(records), 'messages')
  checkEnvelopes(back.envelopes, records, 'unicode', returned)
})

test('a given seq is replaced, in place, by the record position', () => {
  const s = new lib.Session()
  s.append('zero')
  const e = s.append({ seq: 99, type: 'user', message: { role: 'user', content: 'one' }, extra: true })
  assert.equal(e.seq, 1)
  const back = s.envelopes()[1]
  assert.equal(back.seq, 1)
  assert.deepStrictEqual(Object.keys(back), ['seq', 'type', 'message', 'extra', 'uuid', 'parentUuid', 'sessionId', 'timestamp'])
})

test('number text of restored JSON lines is kept as written (exponents too) through snapshot and import', (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'numbers.db'))
  t.after(() => store.close())
  const written = '{"a":1E+2,"b":1e5,"c":-2.50E-3,"d":1e400,"e":[1E2,0e0],"f":12345678901234567890123,"g":1.0}'
  const line = `{"type":"assistant","uuid":"n1","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_n","name":"calc","input":${written}}]}}`
  const s = store.createSession({ id: 'numbers' })
  s.restoreMessages([line])
  const snapshot = s.snapshot()
  assert.ok(snapshot.includes(`"input":${written}`), snapshot)
  // The values JS sees are the numbers written.
  assert.deepEqual(s.messages[0].content[0].input.e, [100, 0])
  const other = Store.open(path.join(dir, 'other.db'))
  t.after(() => other.close())
  assert.ok(other.importSnapshot(snapshot).snapshot().includes(`"input":${written}`))
})
