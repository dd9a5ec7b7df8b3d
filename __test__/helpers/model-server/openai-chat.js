'use strict'
// OpenAI Chat Completions: request checks worded as the real API words them, and replies as a
// chat.completion or as chat.completion.chunk events ending in `data: [DONE]`.

const { randomId, estimateTokens, halves } = require('./reply')

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function'])
const isObject = (v) => !!v && typeof v === 'object' && !Array.isArray(v)

/** The first refusal for this request as `{ message, param, code }`, or null. */
function validate(body) {
  if (!isObject(body)) return { message: 'We could not parse the JSON body of your request.', param: null, code: null }
  if (typeof body.model !== 'string') return { message: 'you must provide a model parameter', param: null, code: null }
  if (!Array.isArray(body.messages)) {
    return { message: "Missing required parameter: 'messages'.", param: 'messages', code: 'missing_required_parameter' }
  }
  if (body.messages.length === 0) {
    return {
      message: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      param: 'messages',
      code: 'empty_array',
    }
  }
  const strayTool = (i) => ({
    message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    param: `messages.[${i}].role`,
    code: null,
  })
  const messages = body.messages
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]
    if (!isObject(m) || !ROLES.has(m.role)) {
      return { message: `Invalid value for 'messages[${i}].role'.`, param: `messages[${i}].role`, code: 'invalid_value' }
    }
    if (m.role === 'tool') return strayTool(i)
    if (m.role !== 'assistant' || !Array.isArray(m.tool_calls) || m.tool_calls.length === 0) continue
    // The tool messages answering the calls must follow at once, one per call id.
    const pending = new Set(m.tool_calls.map((c) => c && c.id))
    let j = i + 1
    for (; j < messages.length && isObject(messages[j]) && messages[j].role === 'tool'; j++) {
      if (!pending.delete(messages[j].tool_call_id)) return strayTool(j)
    }
    if (pending.size > 0) {
      return {
        message:
          "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
          `The following tool_call_ids did not have response messages: ${[...pending].join(', ')}`,
        param: 'messages',
        code: null,
      }
    }
    i = j - 1
  }
  return null
}

/** The reply as the assistant message and usage (thinking has no place in Chat messages). */
function toCompletion(reply, body) {
  const text = reply.blocks.filter((b) => b.type === 'text').map((b) => b.text)
  const calls = reply.blocks
    .filter((b) => b.type === 'tool_use')
    .map((b) => ({
      id: b.id || `call_${randomId(24)}`,
      type: 'function',
      function: { name: b.name, arguments: JSON.stringify(b.input) },
    }))
  const message = { role: 'assistant', content: text.length ? text.join('') : null, refusal: null, annotations: [] }
  if (calls.length) message.tool_calls = calls
  const prompt = reply.usage?.input_tokens ?? estimateTokens(body)
  const completion = reply.usage?.output_tokens ?? estimateTokens(message)
  return {
    id: `chatcmpl-${randomId(29)}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: calls.length ? 'tool_calls' : 'stop' }],
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    },
    service_tier: 'default',
    system_fingerprint: null,
  }
}

/** The chunks the API streams for this completion (usage in a last chunk without choices). */
function toChunks(completion) {
  const { message, finish_reason } = completion.choices[0]
  const base = { id: completion.id, object: 'chat.completion.chunk', created: completion.created, model: completion.model }
  const chunk = (delta, finish = null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  })
  const chunks = [chunk({ role: 'assistant', content: '', refusal: null })]
  for (const content of halves(message.content || '')) chunks.push(chunk({ content }))
  ;(message.tool_calls || []).forEach((call, index) => {
    const head = { index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }
    chunks.push(chunk({ tool_calls: [head] }))
    for (const args of halves(call.function.arguments)) chunks.push(chunk({ tool_calls: [{ index, function: { arguments: args } }] }))
  })
  chunks.push(chunk({}, finish_reason))
  chunks.push({ ...base, choices: [], usage: completion.usage })
  return chunks
}

module.exports = { validate, toCompletion, toChunks }
