// A whole file of misuses: compiling it (tsconfig.bad.json) must fail. Each misuse is on one line
// ending with `// BAD TSnnnn: why`; __test__/types.test.js checks that tsc reports exactly those
// lines, each with that error code, and nothing else (so every misuse fails for its own reason,
// and the file is otherwise valid TypeScript). misuse.ts holds the same kind of checks written
// with `// @ts-expect-error`.

import { Session, Store } from 'threadline'

const store = Store.open(':memory:')
const session: Session = store.createSession({ title: 'bad' })

for (const m of session.messages) {
  for (const b of m.content) {
    if (b.type === 'text') console.log(b.input) // BAD TS2339: a text block has no input
    if (b.type === 'tool_result') console.log(b.id) // BAD TS2339: a tool_result has tool_use_id, not id
    if (b.type === 'thinking') b.signature.trim() // BAD TS18048: signature may be absent (thinking stored unsigned)
  }
}

session.append({ role: 'tool', content: 'You are terse.' }) // BAD TS2345: role 'tool' is an OpenAI Chat message (convert it with fromOpenAIChat)
session.append({ role: 'user', content: [{ type: 'tool_result', content: 'ok' }] }) // BAD TS2741: tool_result without tool_use_id
session.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash' }] }) // BAD TS2741: tool_use without input
session.appendMessage('hi') // BAD TS2339: no such method
store.openSessionById(session.id) // BAD TS2551: no such method (openSession)
Store.open('x.db', { durability: 'disk' }) // BAD TS2322: durability is 'process' | 'power'
store.createSession({ contextWindow: '200k' }) // BAD TS2322: contextWindow is a number
session.setStatus('done') // BAD TS2345: not a session status
session.update({ contextWindow: '200k' }) // BAD TS2322: contextWindow is a number or null
const fromJson: string = session.envelopes()[0]?.toolUseResult // BAD TS2322: toolUseResult is an object or a string, maybe absent
void fromJson
