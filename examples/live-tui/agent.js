'use strict'
// A scripted agent: writes a session the way a real one does (a prompt, a response with a tool
// call, the tool's result, the answer), turn by turn with pauses, so that the TUI beside it has
// something to follow. No model: the turns are written out below.
//
//   node examples/live-tui/agent.js STORE [--pause MS]

const { Store } = require('threadline')

const args = process.argv.slice(2)
const file = args.find((a) => !a.startsWith('--'))
const pauseAt = args.indexOf('--pause')
const pause = pauseAt >= 0 ? Number(args[pauseAt + 1]) : 700
if (!file || !Number.isFinite(pause) || pause < 0) {
  console.error('usage: node agent.js STORE [--pause MS]')
  process.exit(2)
}

const TURNS = [
  {
    prompt: 'What is the weather in Paris right now?',
    call: { name: 'get_weather', input: { city: 'Paris' } },
    result: '14°C, light rain, wind 20 km/h from the west',
    answer: 'It is 14°C in Paris with light rain; take an umbrella.',
  },
  {
    prompt: 'And in Lisbon?',
    call: { name: 'get_weather', input: { city: 'Lisbon' } },
    result: '21°C, sunny, wind 10 km/h from the north',
    answer: 'Lisbon is sunny and 21°C: no umbrella needed there.',
  },
]

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function main() {
  const store = Store.open(file)
  const session = store.createSession({ project: 'live-tui-demo', title: 'Weather agent', model: 'scripted' })
  console.log(`writing session ${session.id}`)
  let n = 0
  for (const t of TURNS) {
    session.append({ role: 'user', content: [{ type: 'text', text: t.prompt }] })
    await sleep(pause)
    const id = `toolu_${++n}`
    session.append({
      role: 'assistant',
      content: [
        { type: 'text', text: `Let me check ${t.call.input.city}.` },
        { type: 'tool_use', id, name: t.call.name, input: t.call.input },
      ],
    })
    await sleep(pause)
    session.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: t.result }] })
    await sleep(pause)
    session.append({ role: 'assistant', content: [{ type: 'text', text: t.answer }] })
    await sleep(pause)
  }
  session.setStatus('completed')
  session.close()
  store.close()
  console.log('done')
}

main()
