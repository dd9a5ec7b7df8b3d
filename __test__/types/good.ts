// Correct uses of Threadline's public types. Must compile under `strict` with no error
// (tsconfig.good.json); __test__/types.test.js also compiles it to JS and runs it against the
// built library, so every value typed here is checked against what the library really returns.

import { strict as assert } from 'node:assert'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import {
  ERROR_CODES,
  Session,
  Store,
  defaultStorePath,
  type AppendRecord,
  type ContentBlock,
  type ContextFill,
  type Envelope,
  type ErrorCode,
  type EventEnvelope,
  type Message,
  type MessageParamLike,
  type RestoreResult,
  type SessionInfo,
  type SessionStatus,
  type StoreStats,
  type StoreOptions,
  type ThreadlineError,
  type TokenTracker,
  type ToolUseBlock,
  type Turn,
  type ToolCall,
  type ToolResultBlock,
  type Repair,
  type RecoveryReport,
  type ResponseWriter,
  validateMessages,
} from 'threadline'
// The same declarations reached the way a consumer's compiler finds them: package.json "types".
import type * as viaPackageJson from '../..'
import type * as Anthropic from './anthropic-sdk-shapes'

const sameStore: typeof viaPackageJson.Store = Store
void sameStore

// ---- exports ---------------------------------------------------------------------------------
const codes: readonly ErrorCode[] = ERROR_CODES
assert.ok(codes.includes('INVALID_INPUT'))
const home: string = defaultStorePath()
assert.match(home, /threadline\.db$/)

// ---- a store-backed session ------------------------------------------------------------------
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-types-'))
const options: StoreOptions = { durability: 'power', blobThresholdBytes: 4096, busyTimeoutMs: 2000 }
const store: Store = Store.open(path.join(dir, 'good.db'), options)
const storePath: string = store.path
assert.ok(storePath.endsWith('good.db'))

const session: Session = store.createSession({
  project: 'types', title: 'good.ts', model: 'claude-sonnet-4-5', provider: 'anthropic',
  contextWindow: 200_000, promptKey: 'system-v1', metadata: { ticket: 42 },
})
const info: SessionInfo = session.info
const status: SessionStatus = info.status
assert.equal(status, 'active')

// A string is a user prompt.
const prompt: Envelope = session.append('List the files, then read package.json')
const promptUuid: string = prompt.uuid
const first: string | null = prompt.parentUuid
assert.equal(first, null)
assert.equal(prompt.seq, 0)
assert.equal(prompt.message?.content[0]?.type, 'text')

// An SDK response, appended as it is (interfaces, nullable fields, block types Threadline does
// not model), with envelope fields beside it.
const response: Anthropic.Message = {
  id: 'msg_01', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', container: null,
  content: [
    { type: 'thinking', thinking: 'I should list the files first.', signature: 'sig-AAA' },
    { type: 'text', text: 'Listing the files.', citations: null },
    { type: 'tool_use', id: 'toolu_01', name: 'bash', input: { command: 'ls' }, caller: { type: 'direct' } },
    { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'npm' }, caller: { type: 'direct' } },
    { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_01', content: [], caller: { type: 'direct' } },
  ],
  stop_reason: 'tool_use', stop_sequence: null,
  usage: {
    input_tokens: 1200, output_tokens: 80, cache_creation_input_tokens: null, cache_read_input_tokens: 1000,
    cache_creation: null, inference_geo: null, server_tool_use: null, service_tier: 'standard',
  },
}
const assistant: Envelope = session.append(response, { requestId: 'req_01', provider: 'anthropic' })
assert.equal(assistant.type, 'assistant')
assert.equal(assistant.parentUuid, promptUuid)

// An SDK MessageParam (request shape) carrying the tool result.
const toolResult: Anthropic.MessageParam = {
  role: 'user',
  content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'text', text: 'package.json\nsrc' }] }],
}
const resultEnv = session.append(toolResult, { toolUseResult: { stdout: 'package.json\nsrc', stderr: '', interrupted: false } })
assert.equal(resultEnv.type, 'tool_result')
const tur = resultEnv.toolUseResult
if (tur !== undefined && typeof tur !== 'string') assert.equal(tur.stdout, 'package.json\nsrc')

// Object literals: a whole envelope, with extra fields on the message and on blocks (kept).
session.append({
  uuid: '0190-custom-uuid', message: {
    role: 'assistant', id: 'msg_02', model: 'claude-sonnet-4-5', stop_reason: 'tool_use',
    content: [
      { type: 'redacted_thinking', data: 'EnCrYpTeD' },
      { type: 'tool_use', id: 'toolu_02', name: 'read_file', input: { path: 'package.json' }, cache_control: { type: 'ephemeral' } },
      { type: 'mcp_tool_use', id: 'mcptoolu_01', name: 'search', server_name: 'docs', input: {} },
    ],
    usage: { input_tokens: 30, output_tokens: 20, cache_read_input_tokens: 2200, service_tier: 'standard' },
  },
  requestId: 'req_02', mode: 'default', agentId: 'main', metadata: { attempt: 1 },
})
session.append({
  role: 'user',
  content: [
    { type: 'tool_result', tool_use_id: 'toolu_02', content: '{"name":"threadline"}', is_error: false },
    { type: 'text', text: 'Also look at the image.' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
    { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'notes' }, title: null, context: 'notes' },
  ],
}, { toolUseResult: 'Error: no such file' })

// A record of its own type without a message (e.g. a Claude Code progress line).
const progress: Envelope = session.append({ type: 'progress', data: { step: 3 }, includeInContext: false })
assert.equal(progress.type, 'progress')

// Events.
const ev: EventEnvelope = session.appendEvent('tool.started', { toolUseId: 'toolu_02' }, { runId: 'run-1' })
const evName: string = ev.name
assert.equal(evName, 'tool.started')
assert.equal(ev.type, 'event')

// Several records at once, all or nothing.
const batch: Envelope[] = session.appendMany([
  { role: 'assistant', content: 'package.json names the package threadline.', id: 'msg_03', usage: { input_tokens: 5, output_tokens: 9 } },
  'Thanks! Now summarise.',
  { message: { role: 'assistant', content: [{ type: 'text', text: 'Summary: ...' }] }, requestId: 'req_04' },
])
assert.equal(batch.length, 3)

// A record typed as the input union (e.g. built elsewhere) is accepted too.
const records: AppendRecord[] = ['one more prompt', { role: 'assistant', content: 'ok' }]
for (const r of records) session.append(r)

// ---- reading: narrowing on block.type --------------------------------------------------------
function preview(block: ContentBlock): string {
  switch (block.type) {
    case 'text':
      return `text: ${block.text}`
    case 'thinking': {
      const signature: string | undefined = block.signature
      return `thinking: ${block.thinking} (${signature ?? 'unsigned'})`
    }
    case 'redacted_thinking':
      return `redacted: ${block.data.length} chars`
    case 'tool_use': {
      const id: string = block.id
      const name: string = block.name
      const input: unknown = block.input
      return `tool_use ${id} ${name}(${JSON.stringify(input)})`
    }
    case 'tool_result': {
      const forId: string = block.tool_use_id
      const failed: boolean = block.is_error ?? false
      const content = block.content
      const text = typeof content === 'string' ? content : (content ?? []).map(preview).join(' | ')
      return `tool_result for ${forId}${failed ? ' (error)' : ''}: ${text}`
    }
    case 'image': {
      const src = block.source
      if (src.type === 'base64') return `image ${src.media_type}`
      if (src.type === 'url') return `image ${src.url}`
      return `image file ${src.file_id}`
    }
    case 'document':
      return `document ${block.title ?? ''} (${block.source.type})`
    case 'server_tool_use':
      // A block type Threadline does not model: every field is there, as given, typed unknown.
      return `server tool ${String(block.name)}`
    default: {
      const type: string = block.type
      const fields: unknown[] = Object.values(block)
      return `${type} (${fields.length} fields)`
    }
  }
}

const messages: Message[] = session.messages
for (const m of messages) {
  const role: 'user' | 'assistant' | 'system' = m.role
  for (const b of m.content) assert.equal(typeof preview(b), 'string')
  if (role === 'assistant' && m.usage) {
    const cacheRead: number | null | undefined = m.usage.cache_read_input_tokens
    void cacheRead
  }
}

// `if` narrowing narrows the block itself (not only its fields).
const toolUses: ToolUseBlock[] = []
for (const b of messages.flatMap((m) => m.content)) {
  if (b.type === 'tool_use') toolUses.push(b)
  if (b.type === 'tool_result') assert.equal(typeof b.tool_use_id, 'string')
  if (b.type === 'thinking' && b.signature !== undefined) assert.equal(b.signature, 'sig-AAA')
  if (b.type === 'server_tool_use') assert.equal(b.name, 'web_search')
  const typeName: string = b.type
  if (typeName === 'mcp_tool_use') assert.equal(b.type, 'mcp_tool_use')
}
assert.deepEqual(toolUses.map((t) => t.id), ['toolu_01', 'toolu_02'])

// Unknown fields and blocks came back as given.
const first2 = messages[1]
assert.ok(first2)
assert.equal(first2.type, 'message')
assert.deepEqual(first2.container, null)

// Envelopes, turns, token state.
const all: Envelope[] = session.envelopes()
const some: Envelope[] = session.envelopes({ fromSeq: 2, limit: 3 })
assert.equal(some[0]?.seq, 2)
assert.ok(all.some((e) => e.type === 'event'))
const turns: Turn[] = session.turns
for (const t of turns) {
  const s: 'complete' | 'awaiting_tool_results' | 'awaiting_response' = t.status
  const u: number = t.usage.input_tokens + t.usage.output_tokens + t.usage.cache_read_input_tokens + t.usage.cache_creation_input_tokens
  assert.ok(s.length > 0 && u >= 0 && t.endIndex >= t.startIndex)
}
const tokens: TokenTracker = session.tokenTracker
assert.ok(tokens.contextTokens > 0 && tokens.cumulativeOutputTokens > 0)
const fill: ContextFill = session.contextFill
if (fill.fraction !== null && fill.contextWindow !== null) assert.ok(fill.fraction < 1)

session.setStatus('completed')

// Changed after creation; the store's size.
const renamed: SessionInfo = new Session({ title: 'old' }).update({ title: 'new', contextWindow: null, metadata: { k: 1 } })
assert.equal(renamed.title, 'new')
const stats: StoreStats = store.stats()
assert.ok(stats.bytes > 0 && stats.engine === 'sqlite' && stats.freeBytes >= 0)

// Messages read back can be appended elsewhere (Message and Envelope fit the input types).
const copy = new Session({ title: 'copy' })
const asParam: MessageParamLike = messages[0]!
copy.append(asParam)
copy.append(messages[1]!)
copy.append(all[2]!)
// ...and handed to the SDK with a cast (its block unions are closed, Threadline's are open).
const forSdk = copy.messages as Anthropic.MessageParam[]
assert.equal(forSdk.length, 3)

// Restoring a history from elsewhere.
const restored: RestoreResult = new Session().restoreMessages([
  '{"role":"user","content":"hi"}',
  { role: 'assistant', content: 'hello' },
  { role: 'tool', content: 'skipped' },
])
assert.equal(restored.messageCount, 2)
assert.equal(restored.skipped[0]?.index, 2)
copy.restoreTokenState({ inputTokens: 10, cumulativeInputTokens: 10 })

// Listing, reopening, errors.
const listed: SessionInfo[] = store.listSessions({ project: 'types', status: 'completed', since: new Date(0), limit: 10 })
assert.equal(listed[0]?.id, session.id)
const reopened: Session = store.openSession(session.id, { promptKey: 'system-v1' })
assert.equal(reopened.messages.length, messages.length)

function codeOf(fn: () => unknown): ErrorCode | undefined {
  try {
    fn()
  } catch (err) {
    const e = err as ThreadlineError
    assert.ok(e instanceof Error)
    return e.code
  }
  return undefined
}
assert.equal(codeOf(() => store.openSession('no-such-session')), 'NOT_FOUND')
assert.equal(codeOf(() => store.openSession(session.id, { promptKey: 'system-v2' })), 'PROMPT_MISMATCH')
// Values built at run time are checked at run time.
const fromJson = JSON.parse('{"role":"user","content":[{"type":"tool_result","content":"x"}]}') as AppendRecord
assert.equal(codeOf(() => session.append(fromJson)), 'INVALID_INPUT')

async function asyncApi(): Promise<void> {
  const s2: Store = await Store.openAsync(path.join(dir, 'good.db'))
  const opened: Session = await s2.openSessionAsync(session.id)
  const envs: Envelope[] = await opened.envelopesAsync({ limit: 2 })
  assert.equal(envs.length, 2)
  await assert.rejects(s2.openSessionAsync('missing'), (err: ThreadlineError) => err.code === 'NOT_FOUND')
  s2.deleteSession(session.id)
  assert.equal(s2.listSessions().length, 0)
  s2.close()
  assert.equal(codeOf(() => s2.listSessions()), 'CLOSED')
}

// Recovery, typed: a call cut off before its outcome, a recorded one, a streamed response.
async function recoveryApi(): Promise<void> {
  const s = new Session()
  s.append('run the tests')
  s.append({ role: 'assistant', content: [
    { type: 'tool_use', id: 'toolu_a', name: 'Bash', input: { command: 'npm test' } },
    { type: 'tool_use', id: 'toolu_b', name: 'Read', input: { file_path: 'README.md' } },
  ] })
  s.toolCallStarted('toolu_a')
  s.toolCallStarted('toolu_b')
  s.recordToolOutcome('toolu_b', { content: '# Threadline' })
  const calls: ToolCall[] = s.toolCalls({ state: 'started' })
  assert.deepEqual(calls.map((c) => c.id), ['toolu_a'])
  const cached: ToolResultBlock | null = s.cachedToolResult('toolu_b')
  assert.equal(cached?.content, '# Threadline')
  const plan: Repair[] = s.pendingRepairs()
  assert.deepEqual(plan.map((r) => r.kind), ['unknown_outcome', 'backfill'])
  const report: RecoveryReport = await s.recover({
    isSafe: (call: ToolCall) => call.name === 'Bash',
    replay: async (call: ToolCall) => ({ content: `re-ran ${String((call.input as { command: string }).command)}` }),
  })
  assert.deepEqual(report.repairs.map((r) => r.kind), ['replayed', 'backfill'])
  assert.deepEqual(validateMessages(s.messages), [])

  s.append('and summarise')
  const w: ResponseWriter = s.beginResponse({ model: 'claude-sonnet-4-5' })
  w.push({ type: 'text', text: 'All ' })
  w.push({ type: 'text', text: 'green.' })
  const done: Envelope = w.finish()
  assert.equal(done.type, 'assistant')
  const copy: Session = Store.open(':memory:').importSnapshot(s.snapshot())
  assert.deepEqual(copy.messages, s.messages)
}

// Thinking without a signature can be appended; read back, it has none (UnsignedThinkingBlock),
// and a signed one narrows to `signature: string`. Option properties may be `undefined`.
function thinkingApi(): void {
  const t = new Session({ title: undefined })
  t.append('think first', { requestId: undefined })
  t.append({ role: 'assistant', content: [{ type: 'thinking', thinking: 'unsigned' }, { type: 'thinking', thinking: 'signed', signature: 'sig-B' }, { type: 'text', text: 'ok' }] })
  const blocks = t.messages[1]?.content ?? []
  const [unsigned, signed] = blocks
  assert.ok(unsigned?.type === 'thinking' && unsigned.signature === undefined)
  assert.ok(!('signature' in unsigned))
  assert.ok(signed?.type === 'thinking' && signed.signature !== undefined)
  const sig: string = signed.signature
  assert.equal(sig, 'sig-B')
  assert.deepEqual(validateMessages(t.messages).map((p) => p.code), ['unsigned_thinking'])
}

asyncApi()
  .then(thinkingApi)
  .then(recoveryApi)
  .then(() => {
    store.close()
    fs.rmSync(dir, { recursive: true, force: true })
    console.log('good.ts: ok')
  })
  .catch((err: unknown) => {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  })
