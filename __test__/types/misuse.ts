// Misuses that must NOT compile, each marked `// @ts-expect-error`: this file is part of the
// tsconfig.good.json project, so the project fails to compile as soon as one of these lines
// stops being an error (the declarations got too loose). Compiled only, never run.

import { ERROR_CODES, Session, Store, type ContentBlock, type ErrorCode, type Message, type ThreadlineError } from 'threadline'

export function misuses(store: Store, session: Session, block: ContentBlock, message: Message, err: ThreadlineError): void {
  // ---- a watch yields envelopes ---------------------------------------------------------------
  void (async () => {
    for await (const r of session.watch({ fromSeq: 0, signal: new AbortController().signal })) {
      const seq: number = r.seq
      // @ts-expect-error an envelope's seq is a number
      const s: string = r.seq
      void seq, s
    }
  })()
  // ---- narrowing on block.type -------------------------------------------------------------
  if (block.type === 'text') {
    // @ts-expect-error a text block has no input
    block.input
    // @ts-expect-error a text block has no id
    block.id.length
  }
  if (block.type === 'tool_use') {
    // @ts-expect-error a tool_use block has no tool_use_id (that is on tool_result)
    block.tool_use_id
    // @ts-expect-error input is unknown: check it before use
    block.input.command
  }
  if (block.type === 'redacted_thinking') {
    // @ts-expect-error a redacted_thinking block has no signature
    block.signature
  }
  if (block.type === 'server_tool_use') {
    // @ts-expect-error fields of a block Threadline does not model are unknown
    block.name.toUpperCase()
  }
  // @ts-expect-error not narrowed: not every block has tool_use_id
  block.tool_use_id
  // @ts-expect-error 'tool-use' is not a block type (typo): no overlap
  if (block.type === 'tool-use') return
  // @ts-expect-error not exhaustive: blocks of other types can appear
  if (block.type !== 'text' && block.type !== 'thinking' && block.type !== 'redacted_thinking' && block.type !== 'tool_use' && block.type !== 'tool_result' && block.type !== 'image' && block.type !== 'document') { const none: never = block; void none }

  // ---- append: messages --------------------------------------------------------------------
  // @ts-expect-error role 'tool' is an OpenAI Chat message (convert it with fromOpenAIChat first)
  session.append({ role: 'tool', content: 'You are terse.' })
  // @ts-expect-error a tool_result block needs tool_use_id
  session.append({ role: 'user', content: [{ type: 'tool_result', content: 'ok' }] })
  // @ts-expect-error a tool_use block needs input
  session.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash' }] })
  // @ts-expect-error thinking must be a string
  session.append({ role: 'assistant', content: [{ type: 'thinking', thinking: 42 }] })
  // @ts-expect-error a text block needs text (typo: txt)
  session.append({ role: 'assistant', content: [{ type: 'text', txt: 'hi' }] })
  // @ts-expect-error is_error is a boolean
  session.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', is_error: 'yes' }] })
  // @ts-expect-error an image source needs data (base64) or url
  session.append({ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png' } }] })
  // @ts-expect-error checked inside an envelope too
  session.append({ message: { role: 'user', content: [{ type: 'tool_result', content: 'ok' }] }, requestId: 'req_1' })
  // @ts-expect-error checked in appendMany too
  session.appendMany(['hi', { role: 'user', content: [{ type: 'tool_result', content: 'ok' }] }])
  // @ts-expect-error usage token counts are numbers
  session.append({ role: 'assistant', content: 'x', usage: { input_tokens: '10', output_tokens: 1 } })
  // @ts-expect-error a record without a message needs its own type
  session.append({ uuid: 'u-1', data: 1 })
  // @ts-expect-error not a message, an envelope or a string
  session.append(42)
  // @ts-expect-error content is a string or blocks
  session.append({ role: 'user', content: { type: 'text', text: 'hi' } })
  // @ts-expect-error parentUuid is a string or null
  session.append('hi', { parentUuid: 7 })

  // ---- methods and options -----------------------------------------------------------------
  // @ts-expect-error no such method
  session.appendMessage('hi')
  // @ts-expect-error unknownOutcome is 'mark' or 'leave'
  session.recover({ unknownOutcome: 'ignore' })
  // @ts-expect-error a tool call state is one of the journal's
  session.toolCalls({ state: 'running' })
  // @ts-expect-error recordToolOutcome needs content
  session.recordToolOutcome('toolu_1', { is_error: true })
  // @ts-expect-error fail needs a message
  session.beginResponse().fail({ code: 'x' })
  // @ts-expect-error no such method
  store.getSession(session.id)
  // @ts-expect-error the constructor is private: use Store.open
  new Store()
  // @ts-expect-error durability is 'process' or 'power'
  Store.open('x.db', { durability: 'disk' })
  // @ts-expect-error blobThresholdBytes is a number
  Store.open('x.db', { blobThresholdBytes: '10k' })
  // @ts-expect-error unknown option (readonly, not readOnly)
  Store.open('x.db', { readOnly: true })
  // @ts-expect-error contextWindow is a number
  store.createSession({ contextWindow: '200k' })
  // @ts-expect-error not a session status
  session.setStatus('done')
  // @ts-expect-error not a session status
  store.listSessions({ status: 'running' })
  // @ts-expect-error the range is { fromSeq, limit }
  session.envelopes({ from: 0 })
  // @ts-expect-error watch's options are { fromSeq, signal }
  session.watch({ from: 0 })
  // @ts-expect-error fromSeq is a number
  session.watch({ fromSeq: '3' })
  // @ts-expect-error a watch is async: for await, not for
  for (const r of session.watch()) void r
  // @ts-expect-error token counts are numbers
  session.restoreTokenState({ inputTokens: '5' })
  // @ts-expect-error not a TokenTracker field
  session.restoreTokenState({ tokens: 5 })
  // @ts-expect-error id is read-only
  session.id = 'other'
  // @ts-expect-error messages is read-only
  session.messages = []
  // @ts-expect-error the id is required
  store.openSession()
  // @ts-expect-error envelopesAsync returns a promise
  session.envelopesAsync()[0]

  // ---- read types --------------------------------------------------------------------------
  // @ts-expect-error role is 'user' | 'assistant' | 'system'
  if (message.role === 'tool') return
  // @ts-expect-error content is always blocks when read back (a string comes back as a text block)
  message.content.toUpperCase()
  // @ts-expect-error turn status values are fixed
  if (session.turns[0]?.status === 'done') return
  // @ts-expect-error not an error code
  if (err.code === 'ENOENT') return
  // @ts-expect-error ERROR_CODES is read-only
  ERROR_CODES.push('X')
  // @ts-expect-error ErrorCode is a closed union
  const code: ErrorCode = 'OOPS'
  void code
}

// ---- provider converters ---------------------------------------------------------------------
import { fromOpenAIChat, fromOpenAIResponses, toAnthropic, toOpenAIChat, toOpenAIResponses, validateMessages } from 'threadline'

export function converterMisuses(messages: Message[]): void {
  // @ts-expect-error the neutral model has no developer role: a system message, or the system prompt as an option
  toOpenAIChat([{ role: 'developer', content: 'Be terse.' }])
  // @ts-expect-error the system prompt is a string or text blocks
  toAnthropic(messages, { system: 42 })
  // @ts-expect-error an id map maps strings to strings
  fromOpenAIChat([], { idMap: { tl_1: 1 } })
  // @ts-expect-error fromOpenAIChat takes Chat Completions messages: a tool message needs tool_call_id
  fromOpenAIChat([{ role: 'tool', content: 'ok' }])
  // @ts-expect-error the Chat Completions result is messages, not input
  toOpenAIChat(messages).input
  // @ts-expect-error fromOpenAIResponses takes no system option (system items are in the list)
  fromOpenAIResponses([], { system: 'x' })
  // @ts-expect-error the Responses result has no system beside the items
  toOpenAIResponses(messages).system
  // @ts-expect-error a Chat Completions context has its system prompt in messages[0]
  session.buildContext({ target: 'openai-chat', system: 'Be terse.' }).system
  // @ts-expect-error an unknown target
  session.buildContext({ target: 'gemini' })
  // @ts-expect-error validateMessages checks for a known target
  validateMessages([], { target: 'gemini' })
}

// ---- streaming and thinking --------------------------------------------------------------------
import type { ResponseWriter, ThinkingBlock } from 'threadline'

export function streamMisuses(writer: ResponseWriter, block: ContentBlock): void {
  // @ts-expect-error a chunk of an unknown type
  writer.push({ type: 'bogus' })
  // @ts-expect-error a simple text chunk needs its text
  writer.push({ type: 'text' })
  // @ts-expect-error an Anthropic content_block_delta needs its index
  writer.push({ type: 'content_block_delta', delta: { type: 'text_delta', text: 'x' } })
  // @ts-expect-error a chunk is an object, not a string
  writer.push('text')
  if (block.type === 'thinking') {
    // @ts-expect-error thinking read back may be unsigned: check signature before treating it as signed
    const signed: ThinkingBlock = block
    void signed
  }
}
