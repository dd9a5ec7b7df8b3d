'use strict'
// A process running the OpenAI Agents SDK over a ThreadlineSession, for __test__/openai-agents.test.js.
// argv: store location, session id, model server url, prompt, marker file. The tool `lookup`
// answers at once unless its `q` is 'block': then it writes the marker file and waits for ever
// (the test SIGKILLs the process there). Prints the run's final output as JSON.
const fs = require('node:fs')
const path = require('node:path')
const { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } = require('@openai/agents')
const OpenAI = require('openai').default
const { Store } = require(path.join(__dirname, '..', '..'))
const { ThreadlineSession } = require(path.join(__dirname, '..', '..', 'adapters', 'openai-agents'))

const [location, sessionId, serverUrl, prompt, marker] = process.argv.slice(2)

function makeAgent() {
  const lookup = tool({
    name: 'lookup',
    description: 'Looks a thing up.',
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'], additionalProperties: false },
    strict: true,
    async execute({ q }) {
      if (q === 'block') {
        fs.writeFileSync(marker, 'running')
        await new Promise(() => {})
      }
      return `found ${q}`
    },
  })
  // store: false + encrypted reasoning: the reasoning items must come back exactly as issued
  return new Agent({
    name: 'helper',
    instructions: 'Be brief.',
    tools: [lookup],
    model: 'gpt-5',
    modelSettings: { store: false, providerData: { include: ['reasoning.encrypted_content'] } },
  })
}

async function main() {
  setTracingDisabled(true)
  setDefaultOpenAIClient(new OpenAI({ baseURL: `${serverUrl}/v1`, apiKey: 'x', maxRetries: 0 }))
  const store = Store.open(location)
  const session = new ThreadlineSession({ store, sessionId })
  const result = await run(makeAgent(), prompt, { session })
  process.stdout.write(JSON.stringify(result.finalOutput))
  store.close()
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}

module.exports = { makeAgent }
