'use strict'
// OpenAI Responses: input checks worded as the real API words them, and replies as a response
// object or as its `response.*` server-sent events.

const { randomId, hex, estimateTokens, halves } = require('./reply')

const isObject = (v) => !!v && typeof v === 'object' && !Array.isArray(v)
const isAssistantMessage = (item) => isObject(item) && (item.type === 'message' || item.type === undefined) && item.role === 'assistant'

/** The first refusal for this request as `{ message, param, code }`, or null. */
function validate(body, issued) {
  if (!isObject(body)) return { message: 'We could not parse the JSON body of your request.', param: null, code: null }
  if (typeof body.model !== 'string') return { message: "Missing required parameter: 'model'.", param: 'model', code: 'missing_required_parameter' }
  if (body.previous_response_id != null) {
    // Not kept: tests send the whole conversation, as a client that stores its own history does.
    return {
      message: 'previous_response_id is not supported by the Threadline test model server; send the whole input.',
      param: 'previous_response_id',
      code: null,
    }
  }
  if (body.input === undefined || typeof body.input === 'string') return null
  if (!Array.isArray(body.input)) return { message: "Invalid type for 'input'.", param: 'input', code: 'invalid_type' }
  const input = body.input
  const calls = new Map() // call_id -> answered?
  for (let i = 0; i < input.length; i++) {
    const item = input[i]
    if (!isObject(item)) return { message: `Invalid type for 'input[${i}]'.`, param: `input[${i}]`, code: 'invalid_type' }
    if (item.type === 'function_call') {
      calls.set(item.call_id, false)
    } else if (item.type === 'function_call_output') {
      if (!calls.has(item.call_id)) {
        return { message: `No tool call found for function call output with call_id ${item.call_id}.`, param: 'input', code: null }
      }
      calls.set(item.call_id, true)
    } else if (item.type === 'reasoning') {
      const known = issued.reasoning(item.id)
      if (!known || (item.encrypted_content != null && item.encrypted_content !== known.encrypted_content)) {
        return { message: `Item with id '${item.id}' not found.`, param: 'input', code: null }
      }
      // A reasoning item goes back with the item it produced, right after it.
      const next = input[i + 1]
      const follows =
        (isObject(next) && next.type === 'function_call') || isAssistantMessage(next)
          ? next.id === undefined || next.id === known.followedBy
          : false
      if (!follows) {
        return { message: `Item '${item.id}' of type 'reasoning' was provided without its required following item.`, param: 'input', code: null }
      }
    }
  }
  for (const [callId, answered] of calls) {
    if (!answered) return { message: `No tool output found for function call ${callId}.`, param: 'input', code: null }
  }
  return null
}

/** The reply as a completed response: reasoning, message and function_call output items. */
function toResponse(reply, body, issuer) {
  const wantsEncrypted = Array.isArray(body.include) && body.include.includes('reasoning.encrypted_content')
  const items = reply.blocks.map((b) => {
    switch (b.type) {
      case 'text':
        return {
          id: `msg_${hex(24)}`,
          type: 'message',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: b.text, annotations: [], logprobs: [] }],
        }
      case 'thinking':
      case 'redacted_thinking':
        return {
          id: `rs_${hex(24)}`,
          type: 'reasoning',
          summary: b.type === 'thinking' ? [{ type: 'summary_text', text: b.thinking }] : [],
        }
      case 'tool_use':
        return {
          id: `fc_${hex(24)}`,
          type: 'function_call',
          status: 'completed',
          arguments: JSON.stringify(b.input),
          call_id: b.id || `call_${randomId(24)}`,
          name: b.name,
        }
      default:
        throw new TypeError(`model-server: unknown block type ${b.type}`)
    }
  })
  items.forEach((item, index) => {
    if (item.type !== 'reasoning') return
    const next = items[index + 1]
    const encrypted = issuer.reasoning(item.id, next && next.id, wantsEncrypted)
    if (wantsEncrypted) item.encrypted_content = encrypted
  })
  const inputTokens = reply.usage?.input_tokens ?? estimateTokens(body)
  const outputTokens = reply.usage?.output_tokens ?? estimateTokens(items)
  const reasoningItems = items.filter((i) => i.type === 'reasoning')
  const reasoningTokens = reasoningItems.length ? Math.min(outputTokens, estimateTokens(reasoningItems)) : 0
  return {
    id: `resp_${hex(24)}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output: items,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: body.text ?? { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: 'disabled',
    usage: {
      input_tokens: inputTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: reasoningTokens },
      total_tokens: inputTokens + outputTokens,
    },
    user: null,
    metadata: body.metadata ?? {},
  }
}

/** The events the API streams for this response, as [event, data] pairs. */
function toEvents(response) {
  const events = []
  const push = (type, data) => events.push([type, { type, sequence_number: events.length, ...data }])
  const pending = { ...response, status: 'in_progress', output: [], usage: null }
  push('response.created', { response: pending })
  push('response.in_progress', { response: pending })
  response.output.forEach((item, output_index) => {
    const item_id = item.id
    if (item.type === 'message') {
      push('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } })
      item.content.forEach((part, content_index) => {
        push('response.content_part.added', { item_id, output_index, content_index, part: { ...part, text: '' } })
        for (const delta of halves(part.text)) {
          push('response.output_text.delta', { item_id, output_index, content_index, delta, logprobs: [] })
        }
        push('response.output_text.done', { item_id, output_index, content_index, text: part.text, logprobs: [] })
        push('response.content_part.done', { item_id, output_index, content_index, part })
      })
    } else if (item.type === 'reasoning') {
      push('response.output_item.added', { output_index, item: { ...item, summary: [] } })
      item.summary.forEach((part, summary_index) => {
        push('response.reasoning_summary_part.added', { item_id, output_index, summary_index, part: { ...part, text: '' } })
        for (const delta of halves(part.text)) {
          push('response.reasoning_summary_text.delta', { item_id, output_index, summary_index, delta })
        }
        push('response.reasoning_summary_text.done', { item_id, output_index, summary_index, text: part.text })
        push('response.reasoning_summary_part.done', { item_id, output_index, summary_index, part })
      })
    } else if (item.type === 'function_call') {
      push('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } })
      for (const delta of halves(item.arguments)) push('response.function_call_arguments.delta', { item_id, output_index, delta })
      push('response.function_call_arguments.done', { item_id, output_index, arguments: item.arguments })
    }
    push('response.output_item.done', { output_index, item })
  })
  push('response.completed', { response })
  return events
}

module.exports = { validate, toResponse, toEvents }
