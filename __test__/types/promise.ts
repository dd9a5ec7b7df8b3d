// Correct uses of threadline/promise's types. Compiles under `strict` (and
// `exactOptionalPropertyTypes`); __test__/types.test.js also runs it against the built library,
// so the types describe what the promise API really returns.

import { strict as assert } from 'node:assert'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import {
  Store,
  type Session,
  type ResponseWriter,
  type Envelope,
  type Message,
  type Turn,
  type SessionInfo,
  type ThreadlineError,
  type SearchPage,
  type ToolResultBlock,
} from 'threadline/promise'

async function main(dir: string): Promise<void> {
  const store: Store = await Store.open(path.join(dir, 'p.db'), { busyTimeoutMs: 2000 })
  const session: Session = await store.createSession({ project: 'types', title: 'promise' })
  const env: Envelope = await session.append('What is in src/?', { requestId: undefined })
  assert.equal(env.seq, 0)
  await session.append({
    role: 'assistant',
    content: [{ type: 'tool_use', id: 'toolu_1', name: 'ls', input: { path: 'src' } }],
    usage: { input_tokens: 10, output_tokens: 3 },
  })
  await session.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.rs' }] })
  const messages: Message[] = await session.messages()
  assert.equal(messages.length, 3)
  const turns: Turn[] = await session.turns()
  assert.equal(turns[0]?.toolUseCount, 1)
  const info: SessionInfo = await session.info()
  assert.equal(info.messageCount, 3)
  const updated: SessionInfo = await session.update({ model: 'claude-sonnet-4-5' })
  assert.equal(updated.model, 'claude-sonnet-4-5')
  assert.equal((await session.contextFill()).contextWindow, 200000)
  const writer: ResponseWriter = await session.beginResponse()
  void writer.push({ type: 'text', text: 'done' })
  const finished: Envelope = await writer.finish()
  assert.equal(finished.message?.role, 'assistant')
  const page: SearchPage = await store.search('src')
  assert.ok(page.hits.length > 0)
  const tools = await store.recallTools()
  const result: ToolResultBlock = await tools.handle({ name: 'session_list', input: {} })
  assert.equal(result.type, 'tool_result')
  try {
    await store.openSession('missing')
    assert.fail('openSession of a missing session resolved')
  } catch (e) {
    assert.equal((e as ThreadlineError).code, 'NOT_FOUND')
  }
  await store.close()
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-types-promise-'))
main(dir)
  .then(() => {
    fs.rmSync(dir, { recursive: true, force: true })
    console.log('promise.ts: ok')
  })
  .catch((err: unknown) => {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  })
