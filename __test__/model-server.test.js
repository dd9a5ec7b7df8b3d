'use strict'
// The loopback model server the adapter tests drive real framework packages against: the real
// Anthropic and OpenAI clients get well-formed answers, plain and streamed, and the server
// refuses with a 400, worded as the real API, each request the real API refuses.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const AnthropicModule = require('@anthropic-ai/sdk')
const OpenAIModule = require('openai')
const { startModelServer, reply, toolLoop, lastIsToolResult } = require('./helpers/model-server')

const Anthropic = AnthropicModule.default || AnthropicModule
const OpenAI = OpenAIModule.default || OpenAIModule

const MODEL = 'claude-test-model'
const TOOLS = [{ name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }]
const USER = { role: 'user', content: 'list the files' }

/** A server for test `t`, closed when the test ends. */
async function serve(t, script) {
  const server = await startModelServer({ script })
  t.after(() => server.close())
  return server
}

const anthropicClient = (server) => new Anthropic({ baseURL: server.url, apiKey: 'test-key', maxRetries: 0 })
const openaiClient = (server) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'test-key', maxRetries: 0 })

/** Asserts the call fails with the API's 400 `message`, and that the server recorded it as refused. */
async function assertRefused(server, call, message) {
  const before = server.invalid.length
  await assert.rejects(call, (err) => {
    assert.equal(err.status, 400, `expected a 400, got ${err.status}: ${err.message}`)
    // Anthropic errors carry the whole body; OpenAI errors carry its `error` member.
    const detail = err.error && err.error.error ? err.error.error : err.error
    assert.equal(detail.type, 'invalid_request_error')
    assert.equal(detail.message, message)
    return true
  })
  assert.equal(server.invalid.length, before + 1)
  assert.equal(server.invalid[before].error, message)
}

function assertUsage(usage, keys) {
  for (const key of keys) assert.ok(Number.isInteger(usage[key]) && usage[key] > 0, `usage.${key} = ${usage[key]}`)
}

describe('Anthropic Messages', () => {
  test('messages.create answers the scripted text with usage, and the script sees the request', async (t) => {
    const seen = []
    const server = await serve(t, (request) => {
      seen.push(request)
      return reply.text('hello there')
    })
    const message = await anthropicClient(server).messages.create({ model: MODEL, max_tokens: 64, messages: [USER] })
    assert.equal(message.type, 'message')
    assert.equal(message.role, 'assistant')
    assert.equal(message.model, MODEL)
    assert.deepEqual(message.content, [{ type: 'text', text: 'hello there' }])
    assert.equal(message.stop_reason, 'end_turn')
    assert.match(message.id, /^msg_/)
    assertUsage(message.usage, ['input_tokens', 'output_tokens'])
    assert.equal(seen.length, 1)
    assert.equal(seen[0].api, 'anthropic')
    assert.equal(seen[0].index, 0)
    assert.deepEqual(seen[0].body.messages, [USER])
    assert.deepEqual(
      server.requests.map((r) => [r.api, r.path, r.status]),
      [['anthropic', '/v1/messages', 200]],
    )
    assert.deepEqual(server.invalid, [])
  })

  test('messages.stream + finalMessage builds thinking, text and tool_use from the streamed events', async (t) => {
    const server = await serve(t, () =>
      reply.blocks([reply.thinking('let me look'), 'I will run ls.', reply.toolUse('Bash', { command: 'ls -la' })]),
    )
    const stream = anthropicClient(server).messages.stream({ model: MODEL, max_tokens: 64, tools: TOOLS, messages: [USER] })
    const events = []
    stream.on('streamEvent', (event) => events.push(event.type === 'content_block_delta' ? `delta:${event.delta.type}` : event.type))
    const message = await stream.finalMessage()

    const [thinking, text, toolUse] = message.content
    assert.equal(thinking.type, 'thinking')
    assert.equal(thinking.thinking, 'let me look')
    assert.deepEqual(server.issued, [{ type: 'thinking', thinking: 'let me look', signature: thinking.signature }])
    assert.deepEqual(text, { type: 'text', text: 'I will run ls.' })
    assert.equal(toolUse.type, 'tool_use')
    assert.match(toolUse.id, /^toolu_[A-Za-z0-9]+$/)
    assert.equal(toolUse.name, 'Bash')
    assert.deepEqual(toolUse.input, { command: 'ls -la' })
    assert.equal(message.stop_reason, 'tool_use')
    assertUsage(message.usage, ['input_tokens', 'output_tokens'])
    assert.deepEqual(events, [
      'message_start',
      'content_block_start',
      'delta:thinking_delta',
      'delta:thinking_delta',
      'delta:signature_delta',
      'content_block_stop',
      'content_block_start',
      'delta:text_delta',
      'delta:text_delta',
      'content_block_stop',
      'content_block_start',
      'delta:input_json_delta',
      'delta:input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ])
    assert.deepEqual(server.invalid, [])
  })

  test('a tool loop with thinking: the signature round trip is accepted and the script sees the tool result', async (t) => {
    const server = await serve(
      t,
      toolLoop(reply.blocks([reply.thinking('I should list them'), reply.toolUse('Bash', { command: 'ls' })]), reply.text('Two files.')),
    )
    const client = anthropicClient(server)
    const params = { model: MODEL, max_tokens: 64, tools: TOOLS, thinking: { type: 'enabled', budget_tokens: 1024 } }
    const first = await client.messages.stream({ ...params, messages: [USER] }).finalMessage()
    const call = first.content.find((b) => b.type === 'tool_use')
    const messages = [
      USER,
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'a.txt\nb.txt' }] },
    ]
    const second = await client.messages.create({ ...params, messages })
    // With thinking on, the real API always thinks first; the server adds a block the script left out.
    assert.deepEqual(second.content, [
      { type: 'thinking', thinking: 'Let me think.', signature: server.issued[1].signature },
      { type: 'text', text: 'Two files.' },
    ])
    assert.deepEqual(server.invalid, [])
    assert.deepEqual(
      server.requests.map((r) => lastIsToolResult(r)),
      [false, true],
    )

    // An adapter that drops the thinking block of the turn a tool result answers is refused.
    const withoutThinking = [USER, { role: 'assistant', content: first.content.slice(1) }, messages[2]]
    await assertRefused(
      server,
      client.messages.create({ ...params, messages: withoutThinking }),
      'messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. ' +
        'When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the ' +
        'lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous ' +
        'turns. To avoid this requirement, disable `thinking`. Please consult our documentation at ' +
        'https://docs.claude.com/en/docs/build-with-claude/extended-thinking',
    )
    // Without thinking there is no such requirement.
    const plain = await client.messages.create({ model: MODEL, max_tokens: 64, tools: TOOLS, messages: withoutThinking })
    assert.deepEqual(plain.content, [{ type: 'text', text: 'Two files.' }])
  })

  test("thinking display 'omitted' (as Claude Code asks): empty thinking text with a signature that goes back", async (t) => {
    const server = await serve(t, toolLoop(reply.blocks([reply.thinking('secret plan'), reply.toolUse('Bash', { command: 'ls' })]), reply.text('ok')))
    const client = anthropicClient(server)
    const params = { model: MODEL, max_tokens: 64, tools: TOOLS, thinking: { type: 'enabled', budget_tokens: 1024, display: 'omitted' } }
    const first = await client.messages.stream({ ...params, messages: [USER] }).finalMessage()
    assert.equal(first.content[0].thinking, '')
    assert.equal(first.content[0].signature, server.issued[0].signature)
    const result = { role: 'user', content: [{ type: 'tool_result', tool_use_id: first.content[1].id, content: 'a' }] }
    await client.messages.create({ ...params, messages: [USER, { role: 'assistant', content: first.content }, result] })
    assert.deepEqual(server.invalid, [])
  })

  test('a thinking block with a changed signature, or a signature issued for other text, is refused', async (t) => {
    const server = await serve(t, [reply.blocks([reply.thinking('first thought'), 'a']), reply.blocks([reply.thinking('second thought'), 'b'])])
    const client = anthropicClient(server)
    const one = await client.messages.create({ model: MODEL, max_tokens: 64, messages: [USER] })
    const two = await client.messages.create({ model: MODEL, max_tokens: 64, messages: [USER] })
    const send = (thinkingBlock) =>
      client.messages.create({
        model: MODEL,
        max_tokens: 64,
        messages: [USER, { role: 'assistant', content: [thinkingBlock, one.content[1]] }, { role: 'user', content: 'go on' }],
      })
    const message = 'messages.1.content.0: Invalid `signature` in `thinking` block'
    const sig = one.content[0].signature
    const changed = sig.slice(0, 5) + (sig[5] === 'A' ? 'B' : 'A') + sig.slice(6)
    await assertRefused(server, send({ ...one.content[0], signature: changed }), message)
    await assertRefused(server, send({ ...one.content[0], thinking: 'first thought ' }), message)
    await assertRefused(server, send({ ...one.content[0], signature: two.content[0].signature }), message)
    // Refused requests never reach the script (it had two replies; a third call would be a 500).
    assert.deepEqual(
      server.requests.map((r) => r.status),
      [200, 200, 400, 400, 400],
    )
  })

  test('redacted_thinking goes back with the data the server issued; other data is refused', async (t) => {
    const server = await serve(t, () => reply.blocks([reply.redactedThinking(), 'hmm']))
    const client = anthropicClient(server)
    const first = await client.messages.create({ model: MODEL, max_tokens: 64, messages: [USER] })
    assert.equal(first.content[0].type, 'redacted_thinking')
    assert.deepEqual(server.issued, [{ type: 'redacted_thinking', data: first.content[0].data }])
    const send = (block) =>
      client.messages.create({
        model: MODEL,
        max_tokens: 64,
        messages: [USER, { role: 'assistant', content: [block, first.content[1]] }, { role: 'user', content: 'and?' }],
      })
    await send(first.content[0])
    await assertRefused(
      server,
      send({ type: 'redacted_thinking', data: Buffer.from('forged').toString('base64') }),
      'messages.1.content.0: Invalid `data` in `redacted_thinking` block',
    )
  })

  test('a tool_use without its tool_result in the next message is refused', async (t) => {
    const server = await serve(t, () => reply.blocks([reply.toolUse('Bash', { command: 'ls' }), reply.toolUse('Bash', { command: 'pwd' })]))
    const client = anthropicClient(server)
    const first = await client.messages.create({ model: MODEL, max_tokens: 64, tools: TOOLS, messages: [USER] })
    const [a, b] = first.content
    const messages = [
      USER,
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: a.id, content: 'x' }] },
    ]
    await assertRefused(
      server,
      client.messages.create({ model: MODEL, max_tokens: 64, tools: TOOLS, messages }),
      `messages.1: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${b.id}. ` +
        'Each `tool_use` block must have a corresponding `tool_result` block in the next message.',
    )
    // The same with the streaming client.
    await assertRefused(
      server,
      client.messages
        .stream({ model: MODEL, max_tokens: 64, tools: TOOLS, messages: [USER, messages[1], { role: 'user', content: 'what now?' }] })
        .finalMessage(),
      `messages.1: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${a.id}, ${b.id}. ` +
        'Each `tool_use` block must have a corresponding `tool_result` block in the next message.',
    )
  })

  test('a tool_result answering no tool_use of the previous message is refused', async (t) => {
    const server = await serve(t, () => reply.text('never'))
    await assertRefused(
      server,
      anthropicClient(server).messages.create({
        model: MODEL,
        max_tokens: 64,
        messages: [
          USER,
          { role: 'assistant', content: 'Let me check.' },
          { role: 'user', content: [{ type: 'text', text: 'here' }, { type: 'tool_result', tool_use_id: 'toolu_01Nowhere', content: 'x' }] },
        ],
      }),
      'messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01Nowhere. ' +
        'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.',
    )
  })

  test('consecutive same-role turns are merged and system entries accepted; a first assistant turn is refused', async (t) => {
    const server = await serve(
      t,
      toolLoop(reply.blocks([reply.toolUse('Bash', { command: 'ls' }), reply.toolUse('Bash', { command: 'pwd' })]), reply.text('done')),
    )
    const client = anthropicClient(server)
    const first = await client.messages.create({ model: MODEL, max_tokens: 64, tools: TOOLS, messages: [USER] })
    const [ls, pwd] = first.content
    // Claude Code sends one block per message (so one turn over several messages) with system
    // entries between them.
    const second = await client.messages.create({
      model: MODEL,
      max_tokens: 64,
      tools: TOOLS,
      messages: [
        USER,
        { role: 'user', content: [{ type: 'text', text: 'and be quick' }] },
        { role: 'assistant', content: [ls] },
        { role: 'system', content: 'a note from the harness' },
        { role: 'assistant', content: [pwd] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: ls.id, content: 'a.txt' }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: pwd.id, content: '/tmp' }] },
      ],
    })
    assert.deepEqual(second.content, [{ type: 'text', text: 'done' }])
    await assertRefused(
      server,
      client.messages.create({ model: MODEL, max_tokens: 64, messages: [{ role: 'assistant', content: 'Hi' }, USER] }),
      'messages: first message must use the "user" role',
    )
    await assertRefused(
      server,
      client.messages.create({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] }),
      'messages: text content blocks must be non-empty',
    )
  })

  test('count_tokens, the beta path and side calls are answered; a scripted error keeps its status', async (t) => {
    const server = await serve(t, [reply.text('title'), reply.error(529, 'Overloaded')])
    const client = anthropicClient(server)
    const counted = await client.messages.countTokens({ model: MODEL, messages: [USER] })
    assertUsage(counted, ['input_tokens'])
    // Claude Code posts to /v1/messages?beta=true.
    const beta = await fetch(`${server.url}/v1/messages?beta=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 64, messages: [USER] }),
    })
    assert.equal(beta.status, 200)
    assert.deepEqual((await beta.json()).content, [{ type: 'text', text: 'title' }])
    const hello = await fetch(`${server.url}/api/hello`)
    assert.equal(hello.status, 200)
    assert.deepEqual(await hello.json(), {})
    await assert.rejects(client.messages.create({ model: MODEL, max_tokens: 64, messages: [USER] }), (err) => {
      assert.equal(err.status, 529)
      assert.deepEqual(err.error, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })
      return true
    })
    assert.deepEqual(
      server.requests.map((r) => [r.api, r.path, r.status]),
      [
        ['anthropic', '/v1/messages/count_tokens', 200],
        ['anthropic', '/v1/messages?beta=true', 200],
        [null, '/api/hello', 200],
        ['anthropic', '/v1/messages', 529],
      ],
    )
    assert.deepEqual(server.invalid, [])
  })
})

describe('the real claude binary (Claude Agent SDK)', () => {
  test('runs a tool loop with thinking through the server with nothing refused', async (t) => {
    const { query } = await import('@anthropic-ai/claude-agent-sdk')
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-ms-'))
    t.after(() => fs.rmSync(home, { recursive: true, force: true }))
    const server = await serve(t, (request) => {
      if (!Array.isArray(request.body.tools) || request.body.tools.length === 0) return reply.text('A title')
      if (lastIsToolResult(request)) return reply.text('It printed hi.')
      return reply.blocks([reply.thinking('use bash'), reply.toolUse('Bash', { command: 'echo hi', description: 'Say hi' })])
    })
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: 'test-key',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
    }
    const messages = []
    const options = { cwd: home, env, model: 'claude-sonnet-4-5', allowedTools: ['Bash'], settingSources: [] }
    for await (const m of query({ prompt: 'say hi with bash', options })) messages.push(m)
    const result = messages.at(-1)
    assert.equal(result.type, 'result')
    assert.equal(result.subtype, 'success')
    assert.equal(result.result, 'It printed hi.')
    // The tool ran and its output went back to the model.
    const last = server.modelRequests.at(-1).body.messages.at(-1)
    const toolResult = last.content.find((b) => b.type === 'tool_result')
    assert.match(JSON.stringify(toolResult.content), /hi/)
    assert.deepEqual(server.invalid, [])
  })
})

const FUNCTION_TOOLS = [{ type: 'function', function: { name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }]
const RESPONSE_TOOLS = [{ type: 'function', name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } }]

describe('OpenAI Chat Completions', () => {
  const script = () => toolLoop(reply.blocks(['Running it.', reply.toolUse('Bash', { command: 'ls' })]), reply.text('Two files.'))
  const chatUser = { role: 'user', content: 'list the files' }

  test('create: a tool call, then text after the tool message', async (t) => {
    const server = await serve(t, script())
    const client = openaiClient(server)
    const first = await client.chat.completions.create({ model: 'gpt-5', tools: FUNCTION_TOOLS, messages: [chatUser] })
    const choice = first.choices[0]
    assert.equal(first.object, 'chat.completion')
    assert.equal(choice.finish_reason, 'tool_calls')
    assert.equal(choice.message.content, 'Running it.')
    const [call] = choice.message.tool_calls
    assert.match(call.id, /^call_[A-Za-z0-9]+$/)
    assert.deepEqual(call.function, { name: 'Bash', arguments: '{"command":"ls"}' })
    assertUsage(first.usage, ['prompt_tokens', 'completion_tokens', 'total_tokens'])
    const second = await client.chat.completions.create({
      model: 'gpt-5',
      tools: FUNCTION_TOOLS,
      messages: [chatUser, choice.message, { role: 'tool', tool_call_id: call.id, content: 'a.txt\nb.txt' }],
    })
    assert.equal(second.choices[0].message.content, 'Two files.')
    assert.equal(second.choices[0].finish_reason, 'stop')
    assert.deepEqual(server.invalid, [])
  })

  test('stream: chunks, usage and [DONE], assembled by the client', async (t) => {
    const server = await serve(t, script())
    const client = openaiClient(server)
    const chunks = []
    const stream = await client.chat.completions.create({ model: 'gpt-5', tools: FUNCTION_TOOLS, messages: [chatUser], stream: true })
    for await (const chunk of stream) chunks.push(chunk)
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'))
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'tool_calls')
    assertUsage(chunks.at(-1).usage, ['prompt_tokens', 'completion_tokens', 'total_tokens'])

    const final = await client.chat.completions
      .stream({ model: 'gpt-5', tools: FUNCTION_TOOLS, messages: [chatUser] })
      .finalChatCompletion()
    const message = final.choices[0].message
    assert.equal(message.content, 'Running it.')
    assert.equal(message.tool_calls[0].function.arguments, '{"command":"ls"}')
    assert.match(message.tool_calls[0].id, /^call_/)
    assert.deepEqual(server.invalid, [])
  })

  test('an assistant message with tool_calls not followed by a tool message for each id is refused', async (t) => {
    const server = await serve(t, () => reply.blocks([reply.toolUse('Bash', { command: 'ls' }), reply.toolUse('Bash', { command: 'pwd' })]))
    const client = openaiClient(server)
    const first = await client.chat.completions.create({ model: 'gpt-5', tools: FUNCTION_TOOLS, messages: [chatUser] })
    const message = first.choices[0].message
    const [a, b] = message.tool_calls
    await assertRefused(
      server,
      client.chat.completions.create({
        model: 'gpt-5',
        tools: FUNCTION_TOOLS,
        messages: [chatUser, message, { role: 'tool', tool_call_id: a.id, content: 'x' }, { role: 'user', content: 'next' }],
      }),
      "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
        `The following tool_call_ids did not have response messages: ${b.id}`,
    )
  })

  test('a tool message answering no tool call is refused', async (t) => {
    const server = await serve(t, () => reply.toolUse('Bash', { command: 'ls' }))
    const client = openaiClient(server)
    const first = await client.chat.completions.create({ model: 'gpt-5', tools: FUNCTION_TOOLS, messages: [chatUser] })
    const message = first.choices[0].message
    const answer = { role: 'tool', tool_call_id: message.tool_calls[0].id, content: 'x' }
    await assertRefused(
      server,
      client.chat.completions.create({
        model: 'gpt-5',
        tools: FUNCTION_TOOLS,
        messages: [chatUser, message, answer, { role: 'tool', tool_call_id: 'call_other', content: 'y' }],
      }),
      "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    )
    await assertRefused(
      server,
      client.chat.completions.create({
        model: 'gpt-5',
        stream: true,
        messages: [chatUser, { role: 'assistant', content: 'ok' }, { role: 'tool', tool_call_id: 'call_nowhere', content: 'x' }],
      }),
      "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    )
  })
})

describe('OpenAI Responses', () => {
  const script = () =>
    toolLoop(reply.blocks([reply.thinking('list them'), reply.toolUse('Bash', { command: 'ls' })]), reply.text('Two files.'))
  const input = [{ role: 'user', content: 'list the files' }]

  test('create: reasoning and a function_call, then text after the function_call_output', async (t) => {
    const server = await serve(t, script())
    const client = openaiClient(server)
    const first = await client.responses.create({ model: 'gpt-5', tools: RESPONSE_TOOLS, input })
    assert.equal(first.object, 'response')
    assert.equal(first.status, 'completed')
    const [reasoning, call] = first.output
    assert.equal(reasoning.type, 'reasoning')
    assert.deepEqual(reasoning.summary, [{ type: 'summary_text', text: 'list them' }])
    assert.match(reasoning.id, /^rs_/)
    assert.equal(call.type, 'function_call')
    assert.match(call.call_id, /^call_/)
    assert.equal(call.arguments, '{"command":"ls"}')
    assert.deepEqual(server.issued, [{ type: 'reasoning', id: reasoning.id, followedBy: call.id, encrypted_content: undefined }])
    assertUsage(first.usage, ['input_tokens', 'output_tokens', 'total_tokens'])
    const second = await client.responses.create({
      model: 'gpt-5',
      tools: RESPONSE_TOOLS,
      input: [...input, ...first.output, { type: 'function_call_output', call_id: call.call_id, output: 'a.txt' }],
    })
    assert.equal(second.output_text, 'Two files.')
    assert.deepEqual(server.invalid, [])
  })

  test('stream: the response.* events, assembled by the client; encrypted reasoning round-trips', async (t) => {
    const server = await serve(t, script())
    const client = openaiClient(server)
    const params = { model: 'gpt-5', tools: RESPONSE_TOOLS, include: ['reasoning.encrypted_content'], store: false }
    const stream = client.responses.stream({ ...params, input })
    const types = []
    stream.on('event', (event) => types.push(event.type))
    const first = await stream.finalResponse()
    for (const type of [
      'response.created',
      'response.output_item.added',
      'response.reasoning_summary_text.delta',
      'response.function_call_arguments.delta',
      'response.output_item.done',
    ]) {
      assert.ok(types.includes(type), `${type} in ${types}`)
    }
    assert.equal(types.at(-1), 'response.completed')
    const [reasoning, call] = first.output
    assert.deepEqual(reasoning.summary, [{ type: 'summary_text', text: 'list them' }])
    assert.equal(typeof reasoning.encrypted_content, 'string')
    assert.equal(call.arguments, '{"command":"ls"}')
    assertUsage(first.usage, ['input_tokens', 'output_tokens', 'total_tokens'])

    const second = await client.responses.create({
      ...params,
      stream: true,
      input: [...input, reasoning, call, { type: 'function_call_output', call_id: call.call_id, output: 'a.txt' }],
    })
    let text = ''
    for await (const event of second) if (event.type === 'response.output_text.delta') text += event.delta
    assert.equal(text, 'Two files.')
    assert.deepEqual(server.invalid, [])
  })

  test('each invalid input is refused as the real API refuses it', async (t) => {
    const server = await serve(t, script())
    const client = openaiClient(server)
    const first = await client.responses.create({ model: 'gpt-5', tools: RESPONSE_TOOLS, input })
    const [reasoning, call] = first.output
    const output = { type: 'function_call_output', call_id: call.call_id, output: 'a.txt' }
    const send = (items) => client.responses.create({ model: 'gpt-5', tools: RESPONSE_TOOLS, input: [...input, ...items] })

    await assertRefused(server, send([reasoning, call]), `No tool output found for function call ${call.call_id}.`)
    await assertRefused(
      server,
      send([{ ...output, call_id: 'call_nowhere' }]),
      'No tool call found for function call output with call_id call_nowhere.',
    )
    await assertRefused(
      server,
      send([reasoning, output]),
      `Item '${reasoning.id}' of type 'reasoning' was provided without its required following item.`,
    )
    await assertRefused(server, send([{ ...reasoning, id: 'rs_never' }, call, output]), "Item with id 'rs_never' not found.")
    assert.equal(server.requests.length, 5)
  })
})

describe('failing mid-stream', () => {
  const failing = () => reply.blocks(['partial answer'], { streamError: { message: 'Overloaded' } })

  test('Anthropic: the text so far, then an error event instead of message_stop; plain: a 529', async (t) => {
    const server = await serve(t, failing)
    const client = anthropicClient(server)
    const stream = client.messages.stream({ model: MODEL, max_tokens: 64, messages: [USER] })
    let text = ''
    stream.on('text', (delta) => (text += delta))
    await assert.rejects(stream.finalMessage(), (err) => {
      assert.deepEqual(err.error, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })
      return true
    })
    assert.equal(text, 'partial answer')
    await assert.rejects(client.messages.create({ model: MODEL, max_tokens: 64, messages: [USER] }), (err) => err.status === 529)
    assert.deepEqual(
      server.requests.map((r) => [r.status, r.error]),
      [
        [200, 'Overloaded'],
        [529, 'Overloaded'],
      ],
    )
    assert.deepEqual(server.invalid, [])
  })

  test('OpenAI Chat and Responses: the deltas so far, then an error the client throws', async (t) => {
    const server = await serve(t, failing)
    const client = openaiClient(server)
    const deltas = []
    const chat = await client.chat.completions.create({ model: 'gpt-5', messages: [{ role: 'user', content: 'hi' }], stream: true })
    await assert.rejects(
      (async () => {
        for await (const chunk of chat) if (chunk.choices[0]?.delta.content) deltas.push(chunk.choices[0].delta.content)
      })(),
      /Overloaded/,
    )
    assert.equal(deltas.join(''), 'partial answer')

    const events = []
    const response = await client.responses.create({ model: 'gpt-5', input: 'hi', stream: true })
    await assert.rejects(
      (async () => {
        for await (const event of response) events.push(event.type)
      })(),
      /Overloaded/,
    )
    assert.ok(events.includes('response.output_text.delta'))
    assert.ok(!events.includes('response.completed'))
    await assert.rejects(client.responses.create({ model: 'gpt-5', input: 'hi' }), (err) => err.status === 500)
    assert.deepEqual(server.invalid, [])
  })
})
