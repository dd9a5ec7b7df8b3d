'use strict'
// "Always valid" through the binding: real Claude Code transcripts, mutated by a seeded generator
// (cut anywhere, so many start with the assistant's tool calls; lines dropped or repeated; texts
// emptied or blanked; signatures removed; results pointed at calls that are not there), restored,
// then built for every target under varied budgets: each request must pass validateMessages for
// its target. The Rust property test (crates/threadline/tests/validity.rs) covers streams,
// compactions, rewinds and forks; this one covers the real shapes through the JS API.
//
// THREADLINE_VALIDITY_JS_CASES sets the number of transcripts (default 400, 9 builds each).
// THREADLINE_VALIDITY_SEED sets the seed (default 20260223); a failure names the seed and case.

const { test } = require('node:test')
const assert = require('node:assert/strict')

const { lib, readJsonl, expectError } = require('./helpers/util')

const { Session, validateMessages } = lib

const TARGETS = ['anthropic', 'openai-chat', 'openai-responses']
const { mulberry32: prng } = require('./helpers/seeded')
const CASES = Number(process.env.THREADLINE_VALIDITY_JS_CASES ?? 400)
const SEED = Number(process.env.THREADLINE_VALIDITY_SEED ?? 20260223)


const sources = ['short.jsonl', 'tool_heavy.jsonl'].map((f) => readJsonl(f).map((l) => JSON.parse(l)))
// The long session: a few windows of it (all of it would make each case slow).
const long = readJsonl('compacted-session.jsonl').map((l) => JSON.parse(l))
for (let i = 0; i < 4; i++) sources.push(long.slice(i * 300, i * 300 + 60))

function mutate(records, rand) {
  const pick = (n) => Math.floor(rand() * n)
  const start = pick(records.length)
  let out = records.slice(start, start + 5 + pick(40)).map((r) => structuredClone(r))
  const ops = pick(6)
  for (let k = 0; k < ops; k++) {
    const i = pick(Math.max(out.length, 1))
    const r = out[i]
    const content = r?.message?.content
    switch (pick(7)) {
      case 0: out.splice(i, 1); break                               // a record lost
      case 1: if (r) out.splice(i, 0, structuredClone(r)); break    // a record twice
      case 2:                                                        // a text emptied or blanked
      case 3:
        if (Array.isArray(content)) {
          for (const b of content) if (b.type === 'text') b.text = rand() < 0.5 ? '' : ' \n '
        } else if (typeof content === 'string') r.message.content = ''
        break
      case 4:                                                        // thinking left unsigned
        if (Array.isArray(content)) for (const b of content) if (b.type === 'thinking') delete b.signature
        break
      case 5:                                                        // a result whose call is elsewhere
        if (Array.isArray(content)) {
          for (const b of content) if (b.type === 'tool_result') b.tool_use_id = `toolu_gone_${pick(1000)}`
        }
        break
      case 6:                                                        // an assistant record left empty
        if (r?.message?.role === 'assistant') r.message.content = []
        break
    }
  }
  return out
}

test(`buildContext over ${CASES} mutated real transcripts is a valid request for every target and budget`, () => {
  const rand = prng(SEED)
  let builds = 0
  let nonEmpty = 0
  for (let c = 0; c < CASES; c++) {
    const records = mutate(sources[Math.floor(rand() * sources.length)], rand)
    const s = new Session()
    s.restoreMessages(records.map((r) => JSON.stringify(r)))
    const budgets = [{}, { maxTokens: 1 + Math.floor(rand() * 4000) }, { maxMessages: 1 + Math.floor(rand() * 6), toolResultPreviewChars: 50 }]
    for (const target of TARGETS) {
      for (const b of budgets) {
        const options = { target, reasoning: ['keep', 'drop', 'same-model'][Math.floor(rand() * 3)], ...b }
        const ctx = s.buildContext(options)
        const problems = validateMessages(ctx.messages, { target })
        assert.deepEqual(problems, [], `seed ${SEED}, case ${c}, ${JSON.stringify(options)}: ${JSON.stringify(ctx.messages).slice(0, 2000)}`)
        builds++
        if (ctx.messages.length > 0) nonEmpty++
      }
    }
  }
  assert.equal(builds, CASES * 9)
  // The generator makes real requests, not only empty ones (a window with no prompt in it sends
  // nothing: everything before the first prompt is left out).
  assert.ok(nonEmpty > builds / 5, `${nonEmpty} of ${builds} requests had messages`)
})

test('a transcript cut after its first prompt: the leading tool calls and their results are not sent', () => {
  const s = new Session()
  s.restoreMessages([
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.txt' }] },
    { role: 'assistant', content: [{ type: 'text', text: '\n\n' }, { type: 'text', text: 'There is a.txt.' }] },
    { role: 'user', content: [{ type: 'text', text: '' }, { type: 'text', text: 'open it' }] },
  ])
  for (const target of TARGETS) {
    const ctx = s.buildContext({ target })
    assert.deepEqual(validateMessages(ctx.messages, { target }), [], target)
  }
  assert.deepEqual(s.buildContext({ target: 'anthropic' }).messages, [
    { role: 'user', content: [{ type: 'text', text: 'open it' }] },
  ])
  // stored as given
  assert.deepEqual(s.messages[3].content[0], { type: 'text', text: '' })
  assert.equal(s.messages.length, 4)
})

test("append('') is INVALID_INPUT naming the path; empty text inside a message is kept, never sent", () => {
  const s = new Session()
  expectError(() => s.append(''), 'INVALID_INPUT', 'append: content[0].text', 'empty')
  expectError(() => s.append('  \n'), 'INVALID_INPUT', 'append: content[0].text')
  expectError(() => s.appendMany(['ok', '']), 'INVALID_INPUT', 'appendMany: [1].content[0].text')
  assert.equal(s.messages.length, 0, 'nothing written')
  s.append({ role: 'user', content: [{ type: 'text', text: '' }, { type: 'text', text: 'hi' }] })
  assert.equal(s.messages[0].content[0].text, '')
  const ctx = s.buildContext({ target: 'openai-chat' })
  assert.deepEqual(validateMessages(ctx.messages, { target: 'openai-chat' }), [])
  assert.deepEqual(s.buildContext({ target: 'anthropic' }).messages, [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }])
})
