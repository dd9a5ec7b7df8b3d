'use strict'
// The loopback model server (__test__/helpers/model-server) for the Python tests of the Claude
// Agent SDK (test_claude_agent_sdk.py): prints `URL <url>`, then answers each line on stdin with
// `STATE <json>` ({ invalid, modelRequests: [{ messages }], issued }); exits when stdin ends.
// The script is the Node test's (__test__/claude-agent-sdk.test.js): two Bash tool calls, each
// after a signed thinking block, then a text answer; side calls (no tools) get a text.
const path = require('node:path')
const readline = require('node:readline')
const { startModelServer, reply } = require(path.join(__dirname, '..', '..', '__test__', 'helpers', 'model-server'))

const toolResults = (body) => body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []).filter((b) => b.type === 'tool_result'))

;(async () => {
  const server = await startModelServer({
    script: ({ body }) => {
      if (!body.tools?.length) return reply.text('Echo twice')
      const done = toolResults(body).length
      if (done < 2) return reply.blocks([reply.thinking(`step ${done + 1}`), reply.toolUse('Bash', { command: `echo step-${done + 1}`, description: 'echo a step' })])
      return reply.text(`Done after ${done} steps.`)
    },
  })
  console.log(`URL ${server.url}`)
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', () => {
    const state = {
      invalid: server.invalid,
      modelRequests: server.modelRequests.map((r) => ({ messages: r.body.messages })),
      issued: server.issued,
    }
    console.log(`STATE ${JSON.stringify(state)}`)
  })
  lines.on('close', () => server.close())
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
