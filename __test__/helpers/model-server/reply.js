'use strict'
// What a test script answers with. A reply is API-neutral: a list of blocks (text, thinking,
// redacted thinking, tool calls) or an error; each API module renders it in its own shape.

const crypto = require('node:crypto')

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

/** `n` random base62 characters, the alphabet of Anthropic and OpenAI ids. */
function randomId(n) {
  const bytes = crypto.randomBytes(n)
  let out = ''
  for (let i = 0; i < n; i++) out += ALNUM[bytes[i] % ALNUM.length]
  return out
}

const hex = (n) => crypto.randomBytes(n).toString('hex')

function block(value) {
  if (typeof value === 'string') return { type: 'text', text: value }
  if (!value || typeof value !== 'object' || typeof value.type !== 'string') {
    throw new TypeError(`model-server: not a reply block: ${JSON.stringify(value)}`)
  }
  return value
}

const reply = {
  /** An answer of blocks; strings are text blocks. Options: `usage` ({ input_tokens,
   * output_tokens } to report instead of the computed estimate), `stopReason` (Anthropic's
   * stop_reason; `tool_use` / `end_turn` are derived otherwise), `streamError` ({ message, type? }:
   * a streamed answer sends the blocks, then this error instead of its end, as the APIs do when
   * they fail mid-stream; a plain answer is that HTTP error). */
  blocks(blocks, { usage, stopReason, streamError } = {}) {
    if (!Array.isArray(blocks)) throw new TypeError('model-server: reply.blocks takes an array')
    return { kind: 'reply', blocks: blocks.map(block), usage, stopReason, streamError }
  },
  text(text, options) {
    return reply.blocks([{ type: 'text', text }], options)
  },
  /** Thinking (Anthropic `thinking` with an issued signature; a Responses `reasoning` item with
   * the text as its summary; left out of Chat, which has no reasoning in its messages). */
  thinking(thinking) {
    return { type: 'thinking', thinking }
  },
  /** Anthropic `redacted_thinking` with issued `data` (a Responses reasoning item without summary). */
  redactedThinking() {
    return { type: 'redacted_thinking' }
  },
  /** A tool call; the id is generated in the API's form (`toolu_...` / `call_...`) unless given. */
  toolUse(name, input = {}, { id } = {}) {
    return { type: 'tool_use', name, input, id }
  },
  /** An HTTP error in the API's error shape, e.g. `reply.error(529, 'Overloaded')`. Not counted
   * in `server.invalid` (that is for requests the server itself refused). */
  error(status, message, { type } = {}) {
    return { kind: 'error', status, message, type }
  },
}

/** Whether the request's last message / input item carries a tool result, in any API. */
function lastIsToolResult(request) {
  const body = request.body || {}
  if (request.api === 'anthropic') {
    const messages = (body.messages || []).filter((m) => m && m.role !== 'system')
    const last = messages[messages.length - 1]
    return (
      !!last && last.role === 'user' && Array.isArray(last.content) && last.content.some((b) => b && b.type === 'tool_result')
    )
  }
  if (request.api === 'openai-chat') {
    const messages = body.messages || []
    const last = messages[messages.length - 1]
    return !!last && last.role === 'tool'
  }
  const input = Array.isArray(body.input) ? body.input : []
  const last = input[input.length - 1]
  return !!last && last.type === 'function_call_output'
}

/**
 * A script for the usual agent loop: `first` (e.g. a tool call) until a tool result comes back,
 * then `then`. A request that declares no tools (Claude Code's title generation and other side
 * requests) gets `withoutTools`, since a model cannot call a tool it was not given.
 */
function toolLoop(first, then, { withoutTools = reply.text('ok') } = {}) {
  return (request) => {
    const tools = request.body && request.body.tools
    if (!Array.isArray(tools) || tools.length === 0) return withoutTools
    return lastIsToolResult(request) ? then : first
  }
}

/** Token estimate used when a reply names no usage: stable for the same request. */
function estimateTokens(value) {
  const text = typeof value === 'string' ? value : JSON.stringify(value ?? '')
  return Math.max(1, Math.ceil(text.length / 4))
}

/** Splits a string in two (to stream it as more than one delta), leaving out empty parts. */
function halves(text) {
  if (text.length < 2) return text ? [text] : []
  const mid = Math.ceil(text.length / 2)
  return [text.slice(0, mid), text.slice(mid)]
}

module.exports = { reply, lastIsToolResult, toolLoop, randomId, hex, estimateTokens, halves }
