'use strict'
// The loopback model server (__test__/helpers/model-server) for the Python tests
// (test_openai_agents.py): prints READY <url>, then answers each line on stdin `state` with
// STATE <json> ({ invalid, requests: the model requests' bodies, issued }); exits when stdin ends.
// The model, as in __test__/openai-agents.test.js: reasoning and a call of `lookup` until the last
// input item is a tool output, then reasoning and the answer 'done'. A prompt containing 'block'
// asks for lookup('first'), then lookup('block') (the tool that waits for ever: the test SIGKILLs
// its process there, after the run stored its first call), then answers.
const path = require('node:path')
const readline = require('node:readline')
const { startModelServer, reply } = require(path.join(__dirname, '..', '..', '__test__', 'helpers', 'model-server'))

function script({ body }) {
  const input = Array.isArray(body.input) ? body.input : []
  const last = input.at(-1)
  let from = input.length - 1
  while (from >= 0 && input[from].role !== 'user') from -= 1
  const prompt = JSON.stringify(input[from]?.content ?? '')
  const outputs = input.slice(from + 1).filter((i) => i.type === 'function_call_output').length
  const call = (q) => reply.blocks([reply.thinking('look first'), reply.toolUse('lookup', { q })])
  if (prompt.includes('block') && outputs < 2) return call(outputs === 0 ? 'first' : 'block')
  if (last && last.type === 'function_call_output') return reply.blocks([reply.thinking('now answer'), 'done'])
  return call('x')
}

async function main() {
  const server = await startModelServer({ script })
  console.log(`READY ${server.url}`)
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', (line) => {
    if (line.trim() !== 'state') return
    const state = {
      invalid: server.invalid.map((r) => ({ path: r.path, status: r.status, error: r.error })),
      requests: server.modelRequests.map((r) => r.body),
      issued: server.issued,
    }
    console.log(`STATE ${JSON.stringify(state)}`)
  })
  lines.on('close', () => server.close())
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
