'use strict'
// The Anthropic Messages API: request checks worded as the real API words them, and replies as
// a Message or as its server-sent events.

const { randomId, estimateTokens, halves } = require('./reply')

const TOOL_ID_RE = /^[a-zA-Z0-9_-]+$/

const ERROR_TYPES = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
}

function errorBody(status, message, type, details) {
  const error = { type: type || ERROR_TYPES[status] || 'api_error', message }
  return { type: 'error', error: details === undefined ? error : { ...error, details } }
}

const isObject = (v) => !!v && typeof v === 'object' && !Array.isArray(v)

/**
 * The first reason the real API would refuse this request, or null. `issued` answers whether a
 * thinking signature / redacted data came from this server (for that very thinking text).
 */
function validate(body, issued, { countTokens = false } = {}) {
  if (!isObject(body)) return 'Input should be a valid dictionary'
  if (typeof body.model !== 'string') return 'model: Field required'
  if (!countTokens && body.max_tokens === undefined) return 'max_tokens: Field required'
  if (!Array.isArray(body.messages)) return 'messages: Field required'

  // The API merges consecutive turns of the same role, so roles alternate once merged; `system`
  // entries inside `messages` are accepted and take no part in the turn order.
  const turns = []
  const last = body.messages.length - 1
  for (let i = 0; i <= last; i++) {
    const m = body.messages[i]
    if (!isObject(m)) return `messages.${i}: Input should be a valid dictionary`
    if (m.role === 'system') continue
    if (m.role !== 'user' && m.role !== 'assistant') return `messages.${i}.role: Input should be 'user' or 'assistant'`
    let blocks
    if (typeof m.content === 'string') blocks = m.content === '' ? [] : [{ type: 'text', text: m.content }]
    else if (Array.isArray(m.content)) blocks = m.content
    else return `messages.${i}.content: Input should be a valid list`
    if (blocks.length === 0 && !(i === last && m.role === 'assistant')) {
      return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`
    }
    const entries = []
    for (let k = 0; k < blocks.length; k++) {
      const b = blocks[k]
      if (!isObject(b) || typeof b.type !== 'string') return `messages.${i}.content.${k}: Input should be a valid dictionary`
      if (b.type === 'text' && b.text === '') return 'messages: text content blocks must be non-empty'
      entries.push({ block: b, i, k })
    }
    const prev = turns[turns.length - 1]
    if (prev && prev.role === m.role) prev.entries.push(...entries)
    else turns.push({ role: m.role, entries })
  }
  if (turns.length === 0) return 'messages: at least one message is required'
  if (turns[0].role !== 'user') return 'messages: first message must use the "user" role'

  for (let t = 0; t < turns.length; t++) {
    const turn = turns[t]
    for (const { block: b, i, k } of turn.entries) {
      if (b.type === 'thinking') {
        if (typeof b.signature !== 'string') return `messages.${i}.content.${k}.thinking.signature: Field required`
        if (!issued.isSignature(b.thinking, b.signature)) return `messages.${i}.content.${k}: Invalid \`signature\` in \`thinking\` block`
      } else if (b.type === 'redacted_thinking') {
        if (!issued.isRedacted(b.data)) return `messages.${i}.content.${k}: Invalid \`data\` in \`redacted_thinking\` block`
      } else if (b.type === 'tool_use' && (typeof b.id !== 'string' || !TOOL_ID_RE.test(b.id))) {
        return `messages.${i}.content.${k}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`
      } else if (b.type === 'tool_result') {
        const prev = turns[t - 1]
        const calls = prev ? prev.entries.filter((e) => e.block.type === 'tool_use').map((e) => e.block.id) : []
        if (!calls.includes(b.tool_use_id)) {
          return (
            `messages.${i}.content.${k}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. ` +
            'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.'
          )
        }
      }
    }
    const next = turns[t + 1]
    if (turn.role === 'assistant' && t === turns.length - 2 && thinkingEnabled(body) && hasToolResult(next)) {
      // With thinking on, the turn a tool result answers must go back with its thinking first.
      const { block: b, i } = turn.entries[0] || { block: { type: 'nothing' }, i: -1 }
      if (b.type !== 'thinking' && b.type !== 'redacted_thinking') {
        return (
          `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${b.type}\`. ` +
          'When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the ' +
          'lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous ' +
          'turns. To avoid this requirement, disable `thinking`. Please consult our documentation at ' +
          'https://docs.claude.com/en/docs/build-with-claude/extended-thinking'
        )
      }
    }
    if (turn.role === 'assistant' && next) {
      const answered = new Set(next.entries.filter((e) => e.block.type === 'tool_result').map((e) => e.block.tool_use_id))
      const missing = turn.entries.filter((e) => e.block.type === 'tool_use' && !answered.has(e.block.id))
      if (missing.length > 0) {
        return (
          `messages.${missing[0].i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ` +
          `${missing.map((e) => e.block.id).join(', ')}. ` +
          'Each `tool_use` block must have a corresponding `tool_result` block in the next message.'
        )
      }
    }
  }
  return null
}

const thinkingEnabled = (body) => isObject(body.thinking) && body.thinking.type === 'enabled'
const hasToolResult = (turn) => turn.entries.some((e) => e.block.type === 'tool_result')

/** Thinking text of the block the server puts first when thinking is on and the script gave none. */
const AUTO_THINKING = 'Let me think.'

/** The reply as a Message (content blocks with issued signatures and generated ids). */
function toMessage(reply, body, issuer) {
  let blocks = reply.blocks
  // With thinking on, the real API always answers with a thinking block first.
  if (thinkingEnabled(body) && !['thinking', 'redacted_thinking'].includes(blocks[0] && blocks[0].type)) {
    blocks = [{ type: 'thinking', thinking: AUTO_THINKING }, ...blocks]
  }
  const omitThinking = thinkingEnabled(body) && body.thinking.display === 'omitted'
  const content = blocks.map((b) => {
    switch (b.type) {
      case 'text':
        return { type: 'text', text: b.text }
      case 'thinking': {
        // `display: 'omitted'` (Claude Code asks for it) sends the block with empty text; the
        // signature then goes with that empty text.
        const thinking = omitThinking ? '' : b.thinking
        return { type: 'thinking', thinking, signature: issuer.sign(thinking) }
      }
      case 'redacted_thinking':
        return { type: 'redacted_thinking', data: issuer.redacted() }
      case 'tool_use':
        return { type: 'tool_use', id: b.id || `toolu_01${randomId(22)}`, name: b.name, input: b.input }
      default:
        throw new TypeError(`model-server: unknown block type ${b.type}`)
    }
  })
  const outputTokens = estimateTokens(content)
  return {
    id: `msg_01${randomId(22)}`,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content,
    stop_reason: reply.stopReason || (content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn'),
    stop_sequence: null,
    usage: {
      input_tokens: reply.usage?.input_tokens ?? estimateTokens(body),
      output_tokens: reply.usage?.output_tokens ?? outputTokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  }
}

/** The server-sent events the API streams for this message, as [event, data] pairs. */
function toEvents(message) {
  const events = []
  const start = { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...message.usage, output_tokens: 1 } }
  events.push(['message_start', { type: 'message_start', message: start }])
  events.push(['ping', { type: 'ping' }])
  message.content.forEach((b, index) => {
    const delta = (d) => events.push(['content_block_delta', { type: 'content_block_delta', index, delta: d }])
    if (b.type === 'text') {
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }])
      for (const text of halves(b.text)) delta({ type: 'text_delta', text })
    } else if (b.type === 'thinking') {
      const empty = { type: 'thinking', thinking: '', signature: '' }
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: empty }])
      for (const thinking of halves(b.thinking)) delta({ type: 'thinking_delta', thinking })
      delta({ type: 'signature_delta', signature: b.signature })
    } else if (b.type === 'redacted_thinking') {
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: b }])
    } else if (b.type === 'tool_use') {
      const startBlock = { type: 'tool_use', id: b.id, name: b.name, input: {} }
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: startBlock }])
      for (const partial_json of halves(JSON.stringify(b.input))) delta({ type: 'input_json_delta', partial_json })
    }
    events.push(['content_block_stop', { type: 'content_block_stop', index }])
  })
  events.push([
    'message_delta',
    {
      type: 'message_delta',
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: { ...message.usage },
    },
  ])
  events.push(['message_stop', { type: 'message_stop' }])
  return events
}

module.exports = { validate, toMessage, toEvents, errorBody }
