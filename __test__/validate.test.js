'use strict'
// validateMessages: the provider's checks on a request, run on real Claude Code sessions and on
// histories a crash leaves behind.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { lib } = require('./helpers/util')

const { Session, validateMessages } = lib
const FIXTURES = path.join(__dirname, '..', 'fixtures', 'claude-code')
const NAMES = ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']

function messagesOf(name) {
  const lines = fs.readFileSync(path.join(FIXTURES, name), 'utf8').split('\n').filter(Boolean)
  const s = new Session()
  s.restoreMessages(lines)
  return s.messages
}

// One provider turn per run of same-role records (how Claude Code's split responses are sent).
function mergeTurns(messages) {
  const out = []
  for (const m of messages) {
    const last = out[out.length - 1]
    if (last && last.role === m.role) last.content = last.content.concat(m.content)
    else out.push({ role: m.role, content: [...m.content] })
  }
  return out
}

for (const name of NAMES) {
  test(`${name}: the real session is a valid request once its split responses are merged`, () => {
    const messages = messagesOf(name)
    const merged = mergeTurns(messages)
    assert.ok(merged.length < messages.length)
    assert.deepEqual(validateMessages(merged), [])
    // as stored, one response per several records: consecutive assistant messages are named
    const raw = validateMessages(messages)
    assert.ok(raw.some((p) => p.code === 'roles_not_alternating'))
    for (const p of raw) assert.match(p.path, /^\[\d+\]/)
  })
}

test('a history cut after a tool call names the unanswered call', () => {
  const merged = mergeTurns(messagesOf('tool_heavy.jsonl'))
  const cut = merged.findIndex((m) => m.role === 'assistant' && m.content.some((b) => b.type === 'tool_use'))
  assert.ok(cut > 0)
  const history = merged.slice(0, cut + 1).concat([{ role: 'user', content: [{ type: 'text', text: 'continue' }] }])
  const problems = validateMessages(history)
  const calls = history[cut].content.map((b, j) => [b, j]).filter(([b]) => b.type === 'tool_use')
  assert.deepEqual(
    problems.map((p) => [p.code, p.path]),
    calls.map(([, j]) => ['tool_use_without_result', `[${cut}].content[${j}]`]),
  )
  assert.match(problems[0].message, new RegExp(calls[0][0].id))
})

test('orphan results, unsigned thinking, empty text and order problems are each named', () => {
  const problems = validateMessages([
    { role: 'user', content: [{ type: 'text', text: 'go' }] },
    { role: 'assistant', content: [{ type: 'thinking', thinking: 'half' }, { type: 'tool_use', id: 't1', name: 'bash', input: {} }] },
    { role: 'user', content: [{ type: 'text', text: '' }, { type: 'tool_result', tool_use_id: 't1' }, { type: 'tool_result', tool_use_id: 'nope' }] },
  ])
  assert.deepEqual(problems.map((p) => `${p.path} ${p.code}`), [
    '[1].content[0] unsigned_thinking',
    '[2].content[0] empty_text',
    '[2].content[1] tool_result_not_first',
    '[2].content[2] tool_result_not_first',
    '[2].content[2] tool_result_without_tool_use',
  ])
})

test('a stored session with an interrupted turn fails validation until it is answered', () => {
  const s = new Session()
  s.append('run the tests')
  s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'npm test' } }] })
  assert.deepEqual(validateMessages(s.messages).map((p) => p.code), ['tool_use_without_result'])
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' }] })
  assert.deepEqual(validateMessages(s.messages), [])
})

test('validateMessages rejects what is not a list, and writes nothing', () => {
  assert.throws(() => validateMessages({ role: 'user' }), (e) => e.code === 'INVALID_INPUT' && /validateMessages/.test(e.message))
  assert.deepEqual(validateMessages([]), [])
})
