// The documented paths, against the real `@anthropic-ai/sdk` types (a devDependency; index.d.ts
// itself does not import it), compiled under `exactOptionalPropertyTypes` as well as without it
// (tsconfig.good.json and tsconfig.exact.json). Nothing here runs.
//
// - `for await (const ev of stream) writer.push(ev)` with the SDK's `MessageStream` and
//   `Stream<RawMessageStreamEvent>`;
// - option bags and envelope fields accept `undefined` (`{ requestId: response._request_id ?? undefined }`);
// - a `thinking` block read back narrows to `signature: string` (the SDK's `ThinkingBlock`) once
//   checked, while thinking without a signature can still be appended.

import type { Anthropic } from '@anthropic-ai/sdk'
import type { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream'
import type { Stream } from '@anthropic-ai/sdk/core/streaming'

import {
  Session,
  Store,
  fromAnthropic,
  toAnthropic,
  toOpenAIChat,
  validateMessages,
  type AnthropicStreamEvent,
  type EnvelopeOptions,
  type ThinkingBlock,
  type UnsignedThinkingBlock,
} from 'threadline'

// ---- streaming: the SDK's events go into push() as they are -----------------------------------
export async function streamed(session: Session, stream: MessageStream): Promise<void> {
  const writer = session.beginResponse({ requestId: undefined, model: 'claude-sonnet-4-5', provider: 'anthropic' })
  for await (const ev of stream) writer.push(ev)
  writer.finish(await stream.finalMessage())
}

export async function streamedRaw(session: Session, stream: Stream<Anthropic.RawMessageStreamEvent>): Promise<void> {
  const writer = session.beginResponse()
  for await (const ev of stream) writer.push(ev)
  writer.finish()
}

export async function streamedFromClient(client: Anthropic, session: Session): Promise<void> {
  const stream = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [], stream: true })
  const writer = session.beginResponse({ requestId: stream._request_id ?? undefined })
  for await (const ev of stream) writer.push(ev)
  writer.finish()
  const second = client.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [] })
  const w2 = session.beginResponse()
  for await (const ev of second) w2.push(ev)
  w2.finish(await second.finalMessage())
}

// Each SDK event type on its own, and the union, are AnthropicStreamEvents.
export function eachEvent(
  start: Anthropic.RawMessageStartEvent,
  blockStart: Anthropic.RawContentBlockStartEvent,
  delta: Anthropic.RawContentBlockDeltaEvent,
  stop: Anthropic.RawContentBlockStopEvent,
  messageDelta: Anthropic.RawMessageDeltaEvent,
  messageStop: Anthropic.RawMessageStopEvent,
  any: Anthropic.MessageStreamEvent,
): AnthropicStreamEvent[] {
  return [start, blockStart, delta, stop, messageDelta, messageStop, any]
}

// Events written by hand (e.g. replayed from a log) are accepted too, extra fields included.
export function literalEvents(session: Session): void {
  const w = session.beginResponse()
  w.push({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], model: 'claude-sonnet-4-5', stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } } })
  w.push({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
  w.push({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } })
  w.push({ type: 'content_block_stop', index: 0 })
  w.push({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } })
  w.push({ type: 'ping' })
  w.push({ type: 'message_stop' })
  w.finish()
  const simple = session.beginResponse({ model: undefined })
  simple.push({ type: 'reasoning', text: 'hm', signature: undefined })
  simple.push({ type: 'tool_call_delta', id: 'toolu_1', name: 'Read', delta: '{"path":"a"}' })
  simple.fail({ message: 'cut off', code: undefined })
}

// ---- options accept undefined (exactOptionalPropertyTypes) -----------------------------------
export function optionsWithUndefined(response: Anthropic.Message & { _request_id?: string | null }, maybe: string | undefined): void {
  const store = Store.open(undefined, { durability: undefined, readonly: undefined, busyTimeoutMs: undefined, slowOperationMs: undefined, blobThresholdBytes: undefined })
  const session = store.createSession({ id: maybe, project: maybe, title: maybe, provider: maybe, model: maybe, contextWindow: undefined, promptKey: maybe, metadata: undefined })
  session.append(response, { requestId: response._request_id ?? undefined })
  session.append(response, { requestId: maybe, provider: maybe, uuid: maybe, parentUuid: maybe, toolUseResult: undefined, includeInContext: undefined, mode: maybe, runId: maybe, agentId: maybe, metadata: undefined, custom: undefined })
  const env: EnvelopeOptions = { requestId: maybe }
  session.append('next', env)
  session.append({ message: { role: 'user', content: 'hi', id: maybe, model: maybe }, type: undefined, requestId: maybe })
  session.appendEvent('tick', undefined, { runId: maybe })
  session.appendMany([{ role: 'assistant', content: 'ok', id: maybe, usage: { input_tokens: 1, output_tokens: 1, cache_read_input_tokens: undefined } }])
  store.openSession(session.id, { promptKey: maybe })
  store.listSessions({ project: maybe, status: undefined, since: undefined, until: undefined, limit: undefined })
  store.forkSession(session.id, { atUuid: maybe, title: maybe })
  session.envelopes({ fromSeq: undefined, limit: undefined })
  session.toolCalls({ state: undefined })
  session.restoreTokenState({ inputTokens: undefined, outputTokens: 3 })
  session.recordToolOutcome('toolu_1', { content: 'x', is_error: undefined, toolUseResult: undefined, denied: undefined })
  void session.recover({ isSafe: undefined, replay: undefined, unknownOutcome: undefined })
  session.buildContext({ target: 'anthropic', system: maybe, maxTokens: undefined, maxMessages: undefined, toolResultPreviewChars: undefined, reasoning: undefined, model: maybe })
  session.compactionPlan({ targetTokens: 1000, keepTurns: undefined })
  session.compact({ summary: 's', firstKeptUuid: maybe, keepTurns: undefined, trigger: undefined })
  validateMessages(session.messages, { target: undefined })
  toAnthropic(session.messages, { system: maybe })
  toOpenAIChat(session.messages, { system: undefined })
  fromAnthropic([], { system: maybe, idMap: undefined })
}

// ---- thinking: signed on the way back, as the SDK's ThinkingBlock ----------------------------
export function thinking(session: Session): Anthropic.ThinkingBlockParam[] {
  // Appending thinking without a signature is allowed (it is stored, never sent back).
  session.append({ role: 'assistant', content: [{ type: 'thinking', thinking: 'unsigned' }, { type: 'text', text: 'ok' }] })
  session.append({ role: 'assistant', content: [{ type: 'thinking', thinking: 'signed', signature: 'sig' }] })
  const signed: Anthropic.ThinkingBlockParam[] = []
  for (const m of session.messages) {
    for (const b of m.content) {
      if (b.type === 'thinking') {
        const either: ThinkingBlock | UnsignedThinkingBlock = b
        void either
        if (b.signature !== undefined) {
          const sdk: Anthropic.ThinkingBlock = b          // signature: string, as the SDK's
          const s: string = b.signature
          signed.push(b)
          void sdk, s
        }
      }
    }
  }
  return signed
}

// ---- the next request and compaction, as the docs write them --------------------------------
export async function nextRequest(client: Anthropic, session: Session): Promise<void> {
  // With a system prompt given, `ctx.system` is there (no `undefined` to strip under exactOptionalPropertyTypes).
  const ctx = session.buildContext({ target: 'anthropic', system: 'You are terse.', maxTokens: 100_000 })
  await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1024, system: ctx.system, messages: ctx.messages })
  const blocks = session.buildContext({ target: 'anthropic', system: [{ type: 'text', text: 'You are terse.' }] })
  const system: Anthropic.TextBlockParam[] | string = blocks.system
  void system
  // compactionPlan's firstKeptUuid (string | null) goes to compact as it is.
  const plan = session.compactionPlan({ targetTokens: 20_000, keepTurns: 2 })
  session.compact({ summary: 'summary', firstKeptUuid: plan.firstKeptUuid, trigger: 'auto' })
}

// ---- any SDK MessageParam appends as it is (docs/api.md), a system message among them; a recall
// tool call of any kind the openai SDK declares (a custom call too) goes into handle() ----------
export async function sdkMessagesAndCalls(
  session: Session,
  m: Anthropic.MessageParam,
  system: Anthropic.SystemMessageParam,
  response: Anthropic.Beta.BetaMessage,
  call: import('openai').OpenAI.ChatCompletionMessageToolCall,
  calls: import('openai').OpenAI.ChatCompletionMessageToolCall[],
): Promise<void> {
  session.append(m)
  session.append(system)
  session.append({ role: 'system', content: 'Answer in French from now on.' })
  session.appendMany([m, system])
  // a response of the context-management beta, compaction block and all
  session.append(response)
  const messages: Anthropic.MessageParam[] = toAnthropic(session.messages).messages
  void messages
  const tools = Store.open(':memory:').recallTools()
  await tools.handle(call)
  for (const c of calls) await tools.handle(c)
}
