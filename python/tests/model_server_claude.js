'use strict'
// The loopback model server (__test__/helpers/model-server) for the Python tests of the Claude
// Agent SDK (test_claude_agent_sdk.py): prints `URL <url>`, then answers a stdin line
// `phase <name> <marker>` with `OK` and any other with `STATE <json>` ({ invalid, modelRequests:
// [{ messages, tools }], issued }); exits when stdin ends. Phases: `steps` (the first),
// `killed` (a Bash call that writes <marker> and runs on), `resumed` (a text answer).
// The script is the Node test's (__test__/claude-agent-sdk.test.js): two Bash tool calls, each
// after a signed thinking block, then a text answer; side calls (no tools) get a text.
const path = require('node:path')
const readline = require('node:readline')
const { startModelServer, reply } = require(path.join(__dirname, '..', '..', '__test__', 'helpers', 'model-server'))

let phase = 'steps'
let marker = ''
const lastIsToolResult = (body) => {
  const last = body.messages.at(-1)
  return Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result')
}
const toolResults = (body) => body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []).filter((b) => b.type === 'tool_result'))

;(async () => {
  const server = await startModelServer({
    script: ({ body }) => {
      if (!body.tools?.length) return reply.text('Echo twice')
      if (phase === 'killed') {
        // a tool that runs until the test kills it (its pid in the marker: Claude Code starts the shell
        // in a process group of its own, out of reach of a kill of the run's)
        if (lastIsToolResult(body)) return reply.text('The task ended.')
        return reply.blocks([reply.thinking('This runs for a while.'), reply.toolUse('Bash', { command: `echo $$ > ${marker} && exec sleep 120`, description: 'a long task' })])
      }
      if (phase === 'resumed') return reply.text('Resumed: the long task was interrupted.')
      const done = toolResults(body).length
      if (done < 2) return reply.blocks([reply.thinking(`step ${done + 1}`), reply.toolUse('Bash', { command: `echo step-${done + 1}`, description: 'echo a step' })])
      return reply.text(`Done after ${done} steps.`)
    },
  })
  console.log(`URL ${server.url}`)
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', (line) => {
    const [cmd, ...rest] = line.split(' ')
    if (cmd === 'phase') {
      ;[phase, marker] = rest
      console.log('OK')
      return
    }
    const state = {
      invalid: server.invalid,
      modelRequests: server.modelRequests.map((r) => ({ messages: r.body.messages, tools: Boolean(r.body.tools?.length) })),
      issued: server.issued,
    }
    console.log(`STATE ${JSON.stringify(state)}`)
  })
  lines.on('close', () => server.close())
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
