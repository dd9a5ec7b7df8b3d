'use strict'
// threadline/openai-agents against the SDK's own in-memory session (MemorySession).
//
//   node bench/openai-agents.js [--runs N]
//
// The same scripted run for both: `run(agent, prompt, { session })` of the real @openai/agents,
// its OpenAI provider talking to the loopback model server (Responses API, answers at once): a
// step with reasoning and a tool call, the tool, a step with reasoning and the answer (2 model
// steps, 6 items). A conversation is TURNS such runs in one session, so reads grow with it.
// Threadline: a ThreadlineSession over a SQLite file store (the default durability: each
// addItems committed before it returns). Runs interleave, the order alternating; ratio =
// Threadline / MemorySession per step, the median of the per-run ratios. The time spent inside
// the session's methods is measured too: MemorySession's step plus the difference of the two
// methods' times, over MemorySession's step, is the same ratio with less noise. Writes
// bench/results-openai-agents.json.

const fs = require('fs')
const os = require('os')
const path = require('path')

const ROOT = path.join(__dirname, '..')
const { Store } = require(ROOT)
const { ThreadlineSession } = require(path.join(ROOT, 'adapters', 'openai-agents'))
const { startModelServer, reply } = require(path.join(ROOT, '__test__', 'helpers', 'model-server'))
// The agent of the SIGKILL test (a `lookup` tool, encrypted reasoning), so both run the same one.
const { makeAgent } = require(path.join(ROOT, '__test__', 'helpers', 'openai-agents-run'))
const { run: runAgent, MemorySession, setDefaultOpenAIClient, setTracingDisabled } = require('@openai/agents')
const OpenAI = require('openai').default

const args = process.argv.slice(2)
const QUICK = process.env.BENCH_QUICK === '1'
const RUNS = Number(args[args.indexOf('--runs') + 1] || (QUICK ? 3 : 7))
const TURNS = QUICK ? 10 : 30
const STEPS_PER_TURN = 2

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const now = () => process.hrtime.bigint()

function script({ body }) {
  const last = Array.isArray(body.input) ? body.input.at(-1) : undefined
  if (last && last.type === 'function_call_output') return reply.blocks([reply.thinking('now answer'), 'done'])
  return reply.blocks([reply.thinking('look first'), reply.toolUse('lookup', { q: 'x' })])
}

/** The session with the time spent in its methods counted (the SDK awaits each of them). */
function timed(session) {
  const spent = { ns: 0n }
  for (const name of ['getSessionId', 'getItems', 'addItems', 'popItem', 'clearSession', 'applyHistoryTransaction']) {
    const fn = session[name]
    if (typeof fn !== 'function') continue
    session[name] = async (...a) => {
      const t0 = now()
      try {
        return await fn.apply(session, a)
      } finally {
        spent.ns += now() - t0
      }
    }
  }
  return { session, spent }
}

/** One conversation of TURNS runs: µs per model step, all and in the session's methods. */
async function conversation(agent, plain) {
  const { session, spent } = timed(plain)
  const t0 = now()
  for (let i = 0; i < TURNS; i++) {
    const result = await runAgent(agent, `question ${i}`, { session })
    if (result.finalOutput !== 'done') throw new Error(`run ${i} ended with ${result.finalOutput}`)
  }
  const steps = TURNS * STEPS_PER_TURN
  return { step: Number(now() - t0) / 1e3 / steps, session: Number(spent.ns) / 1e3 / steps }
}

async function run({ log = console.log } = {}) {
  setTracingDisabled(true)
  const server = await startModelServer({ script })
  setDefaultOpenAIClient(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 }))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-oai-'))
  const agent = makeAgent()
  const rows = []
  try {
    await conversation(agent, new MemorySession()) // warm-up: the SDK's first run loads modules
    for (let r = 0; r < RUNS; r++) {
      const store = Store.open(path.join(dir, `run-${r}.db`))
      const ours = () => conversation(agent, new ThreadlineSession({ store, sessionId: `bench-${r}` }))
      const theirs = () => conversation(agent, new MemorySession())
      let threadline
      let memory
      if (r % 2) {
        memory = await theirs()
        threadline = await ours()
      } else {
        threadline = await ours()
        memory = await theirs()
      }
      store.close()
      rows.push({ threadline, memory })
      log(`  run ${r + 1}/${RUNS}: ${threadline.step.toFixed(0)} µs/step vs ${memory.step.toFixed(0)} µs/step, ${(threadline.step / memory.step).toFixed(2)}x`)
    }
    if (server.invalid.length > 0) throw new Error(`the model server refused ${server.invalid.length} requests`)
  } finally {
    server.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  return {
    turns: TURNS,
    stepsPerTurn: STEPS_PER_TURN,
    runs: RUNS,
    threadline: median(rows.map((x) => x.threadline.step)),
    memory: median(rows.map((x) => x.memory.step)),
    ratio: median(rows.map((x) => x.threadline.step / x.memory.step)),
    sessionThreadline: median(rows.map((x) => x.threadline.session)),
    sessionMemory: median(rows.map((x) => x.memory.session)),
    // The same ratio from the time measured inside the session methods only (what the adapter
    // adds to a step), steadier on a busy machine than the difference of two whole runs.
    addedRatio: median(rows.map((x) => (x.memory.step + x.threadline.session - x.memory.session) / x.memory.step)),
  }
}

function format(r) {
  return [
    `OpenAI Agents SDK Session (run() against the loopback model server, ${r.turns} runs of ${r.stepsPerTurn} steps per conversation, median of ${r.runs})`,
    '| per model step | ThreadlineSession (SQLite file) | MemorySession | ratio | goal |',
    '|---|---|---|---|---|',
    `| run(agent, input, { session }) | ${r.threadline.toFixed(0)} µs | ${r.memory.toFixed(0)} µs | ${r.ratio.toFixed(2)}x | 1.2x |`,
    `| of which in the session's methods | ${r.sessionThreadline.toFixed(0)} µs | ${r.sessionMemory.toFixed(0)} µs | ${r.addedRatio.toFixed(2)}x (step + the methods' difference) | 1.2x |`,
  ].join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  run().then((r) => {
    fs.writeFileSync(path.join(__dirname, 'results-openai-agents.json'), `${JSON.stringify(r, null, 2)}\n`)
    console.log(format(r))
  })
}
