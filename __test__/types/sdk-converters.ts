// The provider converters' declared shapes against the official SDKs' own types (the real
// `@anthropic-ai/sdk` and `openai` packages, devDependencies): what `toX` returns is accepted by
// the SDK's request types as it is, and what the SDKs return is accepted by `fromX`. Compiled by
// tsconfig.good.json (no error allowed); nothing here runs.

import type { Anthropic } from '@anthropic-ai/sdk'
import type { OpenAI } from 'openai'

import {
  Session,
  fromAnthropic,
  fromOpenAIChat,
  fromOpenAIResponses,
  toAnthropic,
  toOpenAIChat,
  toOpenAIResponses,
  type ConvertWarning,
  type ConvertWarningCode,
  type FromProviderResult,
  type IdMap,
  type Message,
  type OpenAIChatMessage,
  type OpenAIResponsesItem,
} from 'threadline'

export function requestsTheSdksAccept(messages: Message[]): void {
  // Anthropic: messages and system straight into messages.create
  const a = toAnthropic(messages, { system: 'You are terse.' })
  const anthropicMessages: Anthropic.MessageParam[] = a.messages
  const anthropicRequest: Anthropic.MessageCreateParamsNonStreaming = {
    model: 'claude-sonnet-4-5',
    max_tokens: 1024,
    ...(a.system !== undefined ? { system: a.system } : {}),
    messages: a.messages,
  }
  const withBlocks = toAnthropic(messages, { system: [{ type: 'text', text: 'You are terse.' }] })
  const system: Anthropic.MessageCreateParamsNonStreaming['system'] = withBlocks.system

  // Chat Completions
  const c = toOpenAIChat(messages, { system: 'You are terse.' })
  const chatMessages: OpenAI.Chat.ChatCompletionMessageParam[] = c.messages
  const chatRequest: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = { model: 'gpt-5', messages: c.messages }
  const one: OpenAI.Chat.ChatCompletionMessageParam | undefined = c.messages[0]

  // Responses
  const r = toOpenAIResponses(messages, { system: 'You are terse.' })
  const input: OpenAI.Responses.ResponseInput = r.messages
  const item: OpenAI.Responses.ResponseInputItem | undefined = r.messages[0]
  const responsesRequest: OpenAI.Responses.ResponseCreateParamsNonStreaming = {
    model: 'gpt-5',
    input: r.messages,
    store: false,
    include: ['reasoning.encrypted_content'],
  }

  // warnings and id maps
  const warnings: ConvertWarning[] = [...a.warnings, ...c.warnings, ...r.warnings]
  const codes: ConvertWarningCode[] = warnings.map((w) => w.code)
  const maps: IdMap[] = [a.idMap, c.idMap, r.idMap]

  void [anthropicMessages, anthropicRequest, system, chatMessages, chatRequest, one, input, item, responsesRequest, codes, maps]
}

export function sdkResultsFromXAccepts(
  message: Anthropic.Message,
  params: Anthropic.MessageParam[],
  completion: OpenAI.Chat.ChatCompletion,
  chatParams: OpenAI.Chat.ChatCompletionMessageParam[],
  response: OpenAI.Responses.Response,
  responseInput: OpenAI.Responses.ResponseInput,
  idMap: IdMap,
): void {
  const choice = completion.choices[0]
  const results: FromProviderResult[] = [
    fromAnthropic([message]),
    fromAnthropic(params, { system: 'You are terse.', idMap }),
    fromOpenAIChat(choice ? [choice.message] : []),
    fromOpenAIChat(chatParams, { idMap }),
    fromOpenAIResponses(response.output, { idMap }),
    fromOpenAIResponses(responseInput),
    fromOpenAIResponses('hello'),
  ]
  // what comes back is neutral: it can be appended as it is
  const session = new Session()
  for (const res of results) {
    for (const m of res.messages) session.append(m)
    const sys: string | undefined = typeof res.system === 'string' ? res.system : undefined
    void sys
  }
}

export function roundTrips(messages: Message[]): void {
  // from(to(m)): the same neutral shape
  const c = toOpenAIChat(messages)
  const back: Message[] = fromOpenAIChat(c.messages, { idMap: c.idMap }).messages
  const r = toOpenAIResponses(messages)
  const back2: Message[] = fromOpenAIResponses(r.messages, { idMap: r.idMap }).messages
  const a = toAnthropic(messages)
  const back3: Message[] = fromAnthropic(a.messages, { idMap: a.idMap }).messages
  // the outputs narrow on their discriminants
  for (const m of c.messages as OpenAIChatMessage[]) {
    if (m.role === 'tool') void m.tool_call_id
    if (m.role === 'assistant') for (const call of m.tool_calls ?? []) if (call.type === 'function') void call.function.arguments
  }
  for (const i of r.messages as OpenAIResponsesItem[]) {
    if (i.type === 'function_call') void i.call_id
    if (i.type === 'reasoning') void i.encrypted_content
  }
  void [back, back2, back3]
}

// buildContext's output, per target, goes into the SDKs' create calls as it is.
export function contextsTheSdksAccept(session: Session): void {
  const a = session.buildContext({ target: 'anthropic', system: 'You are terse.', maxTokens: 100_000 })
  const anthropicRequest: Anthropic.MessageCreateParamsNonStreaming = {
    model: 'claude-sonnet-4-5',
    max_tokens: 1024,
    ...(a.system !== undefined ? { system: a.system } : {}),
    messages: a.messages,
  }
  const chat = session.buildContext({ target: 'openai-chat', system: 'You are terse.' })
  const chatRequest: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = { model: 'gpt-5', messages: chat.messages }
  const input = session.buildContext({ target: 'openai-responses', system: 'You are terse.' })
  const responsesRequest: OpenAI.Responses.ResponseCreateParamsNonStreaming = { model: 'gpt-5', input: input.messages }
  const warnings: ConvertWarning[] = [...a.stats.warnings, ...chat.stats.warnings, ...input.stats.warnings]
  const ids: IdMap = chat.stats.idMap
  void anthropicRequest, chatRequest, responsesRequest, warnings, ids
}

// The recall tools as the SDKs take them, and their results as tool_result blocks.
export async function recallToolsTheSdksAccept(store: import('threadline').Store): Promise<void> {
  const tools = store.recallTools({ excludeSessionId: 'current', maxResultTokens: 2000 })
  const anthropicTools: Anthropic.Tool[] = tools.anthropic
  const chatTools: OpenAI.Chat.Completions.ChatCompletionTool[] = tools.openaiChat
  const responsesTools: OpenAI.Responses.FunctionTool[] = tools.openaiResponses
  const request: Anthropic.MessageCreateParamsNonStreaming = {
    model: 'claude-sonnet-4-5', max_tokens: 1024, tools: tools.anthropic,
    messages: [{ role: 'user', content: 'What did we decide last week?' }],
  }
  const response: Anthropic.Message = await new (await import('@anthropic-ai/sdk')).default().messages.create(request)
  for (const block of response.content) {
    if (block.type !== 'tool_use') continue
    const result: Anthropic.ToolResultBlockParam = await tools.handle(block)
    void result
  }
  const chat: OpenAI.Chat.Completions.ChatCompletion = await new (await import('openai')).default().chat.completions.create({
    model: 'gpt-4.1', tools: tools.openaiChat, messages: [{ role: 'user', content: 'hi' }],
  })
  for (const call of chat.choices[0]?.message.tool_calls ?? []) {
    if (call.type === 'function') void (await tools.handle(call))
  }
  const r: OpenAI.Responses.Response = await new (await import('openai')).default().responses.create({
    model: 'gpt-4.1', tools: tools.openaiResponses, input: 'hi',
  })
  for (const item of r.output) {
    if (item.type === 'function_call') void (await tools.handle(item))
  }
  void anthropicTools, chatTools, responsesTools
}
