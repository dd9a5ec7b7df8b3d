'use strict'
// threadline/anthropic against the tool runner on its own (its messages in memory only).
//
//   node bench/anthropic.js [--runs N]
//
// The same scripted run both ways: a tool runner (`thread: false`, thinking on) against the model
// server of the tests on loopback, STEPS replies each with a thinking block and a tool call
// (the tool answers at once), then a final text. Baseline: iterating the runner. Threadline: the
// same runner through `record(session, runner)` into a new session of a SQLite file store (the
// default durability): each reply, each tool-results message and each call's start is a
// durable write. Three modes: plain replies (a `threadline` session), streamed replies (events
// through beginResponse) with a `threadline` session and with a `threadline/promise` one. Runs alternate the order; cost
// per step = the process's CPU time / STEPS, ratio = Threadline / baseline, the median of the
// per-run ratios.

const fs = require('fs')
const os = require('os')
const path = require('path')

const ROOT = path.join(__dirname, '..')
const Anthropic = require('@anthropic-ai/sdk').default
const sync = require(ROOT)
const promise = require(path.join(ROOT, 'promise.js'))
const { record } = require(path.join(ROOT, 'adapters', 'anthropic'))
const { startModelServer, reply } = require(path.join(ROOT, '__test__', 'helpers', 'model-server'))

const args = process.argv.slice(2)
const QUICK = process.env.BENCH_QUICK === '1'
const RUNS = Number(args[args.indexOf('--runs') + 1] || (QUICK ? 3 : 7))
const STEPS = QUICK ? 10 : 30

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

function script({ body }) {
  const done = body.messages.filter((m) => m.role === 'user' && Array.isArray(m.content) && m.content.some((b) => b.type === 'tool_result')).length
  if (done < STEPS) return reply.blocks([reply.thinking(`step ${done + 1}: add the next pair`), reply.toolUse('add', { a: done, b: 1 })])
  return reply.text('All added.')
}

const params = (stream) => ({
  model: 'claude-opus-4-5',
  max_tokens: 4096,
  thinking: { type: 'enabled', budget_tokens: 1024 },
  thread: false,
  stream,
  messages: [{ role: 'user', content: 'Add the pairs one by one.' }],
  tools: [{ name: 'add', description: 'Adds', input_schema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } }, run: async ({ a, b }) => String(a + b) }],
})

/**
 * One scripted run: CPU µs per step (user + system, every thread of the process: the model
 * server's share is the same both ways). CPU time, not wall time: the machines this runs on are
 * shared, and waiting for a busy core is not a cost of either side.
 */
async function once(client, stream, session) {
  const runner = client.beta.messages.toolRunner(params(stream))
  const t0 = process.cpuUsage()
  for await (const item of session ? record(session, runner) : runner) {
    if (stream) await item.finalMessage()
  }
  const d = process.cpuUsage(t0)
  return (d.user + d.system) / STEPS
}

async function run({ log = console.log } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-anthropic-'))
  const server = await startModelServer({ script })
  const client = new Anthropic({ baseURL: server.url, apiKey: 'sk-ant-bench', maxRetries: 0 })
  const out = {}
  try {
    for (const [mode, stream, lib] of [['plain', false, sync], ['streamed', true, sync], ['streamedPromise', true, promise]]) {
      const store = await lib.Store.open(path.join(dir, `${mode}.db`))
      const rows = []
      await once(client, stream) // warm-up: connections, JIT
      for (let r = 0; r < RUNS; r++) {
        const session = await store.createSession({ project: 'bench' })
        let baseline
        let threadline
        if (r % 2) {
          baseline = await once(client, stream)
          threadline = await once(client, stream, session)
        } else {
          threadline = await once(client, stream, session)
          baseline = await once(client, stream)
        }
        rows.push({ baseline, threadline })
        log(`  ${mode} run ${r + 1}/${RUNS}: ${(threadline / baseline).toFixed(2)}x`)
      }
      await store.close()
      out[mode] = {
        baseline: median(rows.map((x) => x.baseline)),
        threadline: median(rows.map((x) => x.threadline)),
        ratio: median(rows.map((x) => x.threadline / x.baseline)),
      }
    }
    if (server.invalid.length) throw new Error(`the model server refused ${server.invalid.length} requests`)
  } finally {
    server.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  return { steps: STEPS, runs: RUNS, ...out }
}

function format(r) {
  const f = (x) => (x / 1000).toFixed(2)
  return [
    `Anthropic tool runner recorded by threadline/anthropic (${r.steps} tool steps with thinking, model server on loopback, median of ${r.runs} runs)`,
    '| replies | runner alone (CPU ms/step) | with record() (CPU ms/step) | ratio | goal |',
    '|---|---|---|---|---|',
    `| plain (threadline) | ${f(r.plain.baseline)} | ${f(r.plain.threadline)} | ${r.plain.ratio.toFixed(2)}x | 1.2x |`,
    `| streamed (threadline) | ${f(r.streamed.baseline)} | ${f(r.streamed.threadline)} | ${r.streamed.ratio.toFixed(2)}x | 1.2x |`,
    `| streamed (threadline/promise) | ${f(r.streamedPromise.baseline)} | ${f(r.streamedPromise.threadline)} | ${r.streamedPromise.ratio.toFixed(2)}x | 1.2x |`,
  ].join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  run().then((r) => console.log(format(r))).catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
