'use strict'
// A tool-runner agent recorded by threadline/anthropic, in a process of its own so that a test
// can SIGKILL it. argv[2]: JSON { store, url, api: 'sync' | 'promise', stream, sessionId?,
// marker?, stall?, followUp? }. Without `sessionId` it starts a session (printing `{ sessionId }`
// first); with it, it recovers that session and continues from its context (with `followUp` as
// a new user message). The `wait` tool writes `marker` and then blocks until the process is
// killed. With `stall: n` the first response's connection stalls for good after its n-th
// content block (printing `{ stalled: true }`): a kill mid-stream; with `stallDeltas: n`, after
// its n-th content_block_delta event (a kill in the middle of a block). Prints `{ done, text }` at the end.

const fs = require('node:fs')
const path = require('node:path')
const Anthropic = require('@anthropic-ai/sdk').default

const job = JSON.parse(process.argv[2])
const lib = require(path.join(__dirname, '..', '..', job.api === 'promise' ? 'promise.js' : 'index.js'))
const { record } = require(path.join(__dirname, '..', '..', 'adapters', 'anthropic'))

const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`)
/** Blocks until the process is killed (a timer keeps it alive: a bare pending promise would let it exit). */
const hang = () => new Promise(() => setInterval(() => {}, 1 << 30))

/** `fetch` whose first SSE response stops after `job.stall` content blocks and then hangs. */
function stallingFetch() {
  let used = false
  return async (url, init) => {
    const res = await fetch(url, init)
    // The event whose n-th occurrence is the last one delivered.
    const [marker, limit] = job.stallDeltas ? ['event: content_block_delta', job.stallDeltas] : ['event: content_block_stop', job.stall]
    if (!limit || used || !res.body) return res
    used = true
    const reader = res.body.getReader()
    const decoder = new TextDecoder()
    const encoder = new TextEncoder()
    let text = ''
    let stops = 0
    const body = new ReadableStream({
      async pull(controller) {
        if (stops >= limit) return hang()
        const { value, done } = await reader.read()
        if (done) return controller.close()
        text += decoder.decode(value, { stream: true })
        // Whole events only, up to and including the n-th marker event.
        let end
        while (stops < limit && (end = text.indexOf('\n\n')) >= 0) {
          const event = text.slice(0, end + 2)
          text = text.slice(end + 2)
          controller.enqueue(encoder.encode(event))
          if (event.startsWith(marker)) stops++
        }
        if (stops >= limit) print({ stalled: true })
      },
    })
    return new Response(body, { status: res.status, headers: res.headers })
  }
}
const schema = { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } }

async function main() {
  const store = await lib.Store.open(job.store)
  let session
  let messages
  if (job.sessionId === undefined) {
    session = await store.createSession({ project: 'anthropic-run', model: 'claude-opus-4-5' })
    print({ sessionId: session.id })
    messages = [{ role: 'user', content: 'Add 1 and 2, then wait.' }]
  } else {
    session = await store.openSession(job.sessionId)
    const report = await session.recover()
    print({ repairs: report.repairs.map((r) => r.kind) })
    messages = (await session.buildContext({ target: 'anthropic' })).messages
    if (job.followUp) messages.push({ role: 'user', content: job.followUp })
  }
  const client = new Anthropic({ baseURL: job.url, apiKey: 'sk-ant-test', maxRetries: 0, fetch: stallingFetch() })
  const runner = client.beta.messages.toolRunner({
    model: 'claude-opus-4-5',
    max_tokens: 4096,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    thread: false,
    stream: job.stream,
    messages,
    tools: [
      { name: 'add', description: 'Adds two numbers', input_schema: schema, run: async ({ a, b }) => String(a + b) },
      {
        name: 'wait',
        description: 'Waits',
        input_schema: { type: 'object', properties: {} },
        run: () => {
          fs.writeFileSync(job.marker, 'running')
          return hang()
        },
      },
    ],
  })
  const final = await record(session, runner).runUntilDone()
  print({ done: true, text: final.content.filter((b) => b.type === 'text').map((b) => b.text).join('') })
  await store.close()
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`)
  process.exit(1)
})
