'use strict'
// A model server on 127.0.0.1 for adapter tests: real framework packages (the Claude Agent SDK,
// the Anthropic and OpenAI clients, ...) talk to it as to the Anthropic Messages API and the
// OpenAI Chat Completions / Responses APIs. It answers what the test's script says, and refuses
// with a 400 what the real APIs refuse (tool calls without results, results without calls,
// thinking signatures / reasoning items it did not issue), so an adapter that stores or rebuilds
// a conversation wrongly fails the test. See README.md.

const http = require('node:http')
const crypto = require('node:crypto')

const { reply, lastIsToolResult, toolLoop, randomId } = require('./reply')
const anthropic = require('./anthropic')
const chat = require('./openai-chat')
const responses = require('./openai-responses')

const ROUTES = {
  '/v1/messages': 'anthropic',
  '/v1/messages/count_tokens': 'anthropic',
  '/v1/chat/completions': 'openai-chat',
  '/v1/responses': 'openai-responses',
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
  res.end(text)
}

function sendSse(res, events, headers = {}) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers })
  for (const e of events) {
    // Anthropic and Responses name each event; Chat sends bare `data:` lines.
    if (Array.isArray(e)) res.write(`event: ${e[0]}\ndata: ${JSON.stringify(e[1])}\n\n`)
    else res.write(`data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`)
  }
  res.end()
}

function openaiError(status, message, { type, param = null, code = null } = {}) {
  return { error: { message, type: type || (status === 400 ? 'invalid_request_error' : 'server_error'), param, code } }
}

/**
 * Starts a server. `script(request)` gets `{ api, body, index, path }` for each model request
 * and returns a reply (see `reply`), a lone block, a string (a text reply) or a promise of one; or `script` is
 * an array of those (functions allowed), consumed in order.
 */
async function startModelServer({ script } = {}) {
  if (typeof script !== 'function' && !Array.isArray(script)) {
    throw new TypeError('startModelServer: `script` must be a function or an array of replies')
  }
  const secret = crypto.randomBytes(32)
  const mac = (text) => crypto.createHmac('sha256', secret).update(text).digest('base64')
  const signatures = new Map() // signature -> thinking text it was issued for
  const redacted = new Set()
  const reasoning = new Map() // rs_ id -> { followedBy, encrypted_content }

  const requests = []
  const invalid = []
  const issued = []
  let modelCalls = 0
  // Anthropic message threads (`thread: { type: 'create' | 'continue' }`, the SDK's default for
  // `toolRunner`): each stored reply's whole conversation, by the reply's id.
  const threads = new Map() // msg_ id -> { messages, system, tools, continued }

  // Issues the opaque tokens the real APIs hand out and later check.
  const issuer = {
    sign(thinking) {
      const signature = mac(`thinking\0${thinking}`)
      signatures.set(signature, thinking)
      issued.push({ type: 'thinking', thinking, signature })
      return signature
    },
    redacted() {
      const nonce = crypto.randomBytes(16).toString('base64')
      const data = Buffer.from(`${nonce}.${mac(`redacted\0${nonce}`)}`).toString('base64')
      redacted.add(data)
      issued.push({ type: 'redacted_thinking', data })
      return data
    },
    reasoning(id, followedBy, encrypted) {
      const encrypted_content = encrypted ? Buffer.from(`${id}.${mac(`reasoning\0${id}`)}`).toString('base64') : undefined
      reasoning.set(id, { followedBy, encrypted_content })
      issued.push({ type: 'reasoning', id, followedBy, encrypted_content })
      return encrypted_content
    },
  }
  const known = {
    isSignature: (thinking, signature) => signatures.has(signature) && signatures.get(signature) === thinking,
    isRedacted: (data) => redacted.has(data),
    reasoning: (id) => reasoning.get(id),
  }

  async function nextReply(request) {
    let r = Array.isArray(script) ? script[request.index] : script
    if (r === undefined) throw new Error(`script has no reply for model request ${request.index}`)
    if (typeof r === 'function') r = await r(request)
    if (typeof r === 'string') r = reply.text(r)
    // A lone block (`reply.toolUse(...)`) is a reply of that one block.
    if (r && typeof r.type === 'string' && r.kind === undefined) r = reply.blocks([r])
    if (!r || (r.kind !== 'reply' && r.kind !== 'error')) throw new Error(`script returned no reply: ${JSON.stringify(r)}`)
    return r
  }

  async function handle(req, res) {
    const url = new URL(req.url, 'http://127.0.0.1')
    const api = req.method === 'POST' ? ROUTES[url.pathname] : undefined
    const raw = await readBody(req)
    if (!api) {
      // Claude Code's side calls (`/api/hello`, ...) need only a 200.
      requests.push({ api: null, method: req.method, path: req.url, body: raw || null, status: 200 })
      return sendJson(res, 200, {})
    }
    const entry = { api, path: req.url, body: null, status: 0 }
    requests.push(entry)
    const isAnthropic = api === 'anthropic'
    const fail = (status, message, extra = {}, { refused = false } = {}) => {
      entry.status = status
      entry.error = message
      if (refused) invalid.push(entry)
      if (isAnthropic) return sendJson(res, status, anthropic.errorBody(status, message, extra.type, extra.details), { 'request-id': `req_${randomId(24)}` })
      return sendJson(res, status, openaiError(status, message, extra))
    }
    try {
      entry.body = JSON.parse(raw)
    } catch {
      entry.body = raw
      return fail(400, 'The request body is not valid JSON.', {}, { refused: true })
    }
    const countTokens = url.pathname === '/v1/messages/count_tokens'
    /** The thread a reply to this request is stored in (none for an unthreaded request). */
    let thread
    if (isAnthropic && !countTokens && entry.body && typeof entry.body === 'object' && entry.body.thread !== undefined) {
      // A thread request: `create` sends the whole conversation; `continue` sends only the
      // messages after the reply it names, and no `system` / `tools` (the thread's own). The
      // server answers the whole conversation, which `body` then holds (`sent`: the request).
      const sent = entry.body
      const { thread: field, ...rest } = sent
      entry.sent = sent
      entry.thread = field
      if (field && field.type === 'create') {
        thread = rest
      } else if (field && field.type === 'continue') {
        const previous = threads.get(field.previous_message_id)
        if (!previous) return fail(404, `thread not found: ${field.previous_message_id}`, { type: 'not_found_error', details: { error_code: 'thread_not_found' } })
        if (previous.continued) return fail(409, `thread already continued from ${field.previous_message_id}`, { type: 'invalid_request_error', details: { error_code: 'thread_already_continued' } })
        for (const name of ['system', 'tools']) {
          if (rest[name] !== undefined) return fail(400, `${name}: cannot be set on a thread continue`, {}, { refused: true })
        }
        previous.continued = true
        thread = { ...rest, system: previous.system, tools: previous.tools, messages: [...previous.messages, ...(Array.isArray(rest.messages) ? rest.messages : [])] }
        if (thread.system === undefined) delete thread.system
        if (thread.tools === undefined) delete thread.tools
      } else {
        return fail(400, 'thread.type: Input should be \'create\' or \'continue\'', {}, { refused: true })
      }
      entry.body = thread
    }
    const body = entry.body

    if (isAnthropic) {
      const problem = anthropic.validate(body, known, { countTokens })
      if (problem) return fail(400, problem, {}, { refused: true })
      if (countTokens) {
        entry.status = 200
        return sendJson(res, 200, { input_tokens: Math.max(1, Math.ceil(JSON.stringify(body).length / 4)) })
      }
    } else {
      const problem = api === 'openai-chat' ? chat.validate(body) : responses.validate(body, known)
      if (problem) return fail(400, problem.message, problem, { refused: true })
    }

    const request = { api, body, index: modelCalls++, path: req.url }
    let r
    try {
      r = await nextReply(request)
    } catch (e) {
      // A broken script is the test's fault: a 500 the test sees in `requests` (clients retry
      // 5xx, so tests make them with maxRetries: 0).
      return fail(500, `model-server script failed: ${e && e.message}`)
    }
    if (r.kind === 'error') {
      entry.scripted = true
      return fail(r.status, r.message, { type: r.type })
    }

    const stream = body.stream === true
    const streamError = r.streamError
    if (streamError) {
      entry.scripted = true
      if (!stream) {
        const status = !isAnthropic ? 500 : streamError.type === 'overloaded_error' || !streamError.type ? 529 : 500
        return fail(status, streamError.message, { type: streamError.type })
      }
      entry.error = streamError.message
    }
    entry.status = 200
    if (isAnthropic) {
      const message = anthropic.toMessage(r, body, issuer)
      entry.reply = message
      // The server holds a thread's reply whole or not at all: none for a stream it cuts.
      if (thread && !streamError) {
        threads.set(message.id, { messages: [...body.messages, { role: 'assistant', content: message.content }], system: body.system, tools: body.tools, continued: false })
      }
      const headers = { 'request-id': `req_${randomId(24)}` }
      if (!stream) return sendJson(res, 200, message, headers)
      let events = anthropic.toEvents(message)
      if (streamError) {
        const error = { type: streamError.type || 'overloaded_error', message: streamError.message }
        events = [...events.filter(([name]) => name !== 'message_delta' && name !== 'message_stop'), ['error', { type: 'error', error }]]
      }
      return sendSse(res, events, headers)
    }
    const openaiStreamError = streamError && {
      type: streamError.type || 'server_error',
      code: 'server_error',
      message: streamError.message,
      param: null,
    }
    if (api === 'openai-chat') {
      const completion = chat.toCompletion(r, body)
      entry.reply = completion
      if (!stream) return sendJson(res, 200, completion)
      let chunks = [...chat.toChunks(completion), '[DONE]']
      // Cut before the finish chunk: an error chunk and no [DONE].
      if (streamError) chunks = [...chunks.slice(0, -3), { error: openaiStreamError }]
      return sendSse(res, chunks)
    }
    const response = responses.toResponse(r, body, issuer)
    entry.reply = response
    if (!stream) return sendJson(res, 200, response)
    let events = responses.toEvents(response)
    if (streamError) {
      events = events.slice(0, -1)
      events.push(['error', { type: 'error', sequence_number: events.length, error: openaiStreamError }])
    }
    return sendSse(res, events)
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(e && e.stack) } })
      else res.destroy(e)
    })
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const { port } = server.address()
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    invalid,
    issued,
    /** The model requests only (not the side calls), in order. */
    get modelRequests() {
      return requests.filter((r) => r.api !== null && !r.path.startsWith('/v1/messages/count_tokens'))
    },
    async close() {
      // Clients keep connections alive; close them so `close` does not wait for their timeout.
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

module.exports = { startModelServer, reply, lastIsToolResult, toolLoop }
