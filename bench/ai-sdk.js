'use strict'
// threadline/ai-sdk against the AI SDK with its messages kept in memory, on the same scripted run.
//
//   node bench/ai-sdk.js [--runs N]
//
// A chat of TURNS turns, each a user message and three model steps (thinking + a tool call,
// thinking + a tool call, thinking + text), streamed by the real `ai` + `@ai-sdk/anthropic`
// from the loopback model server (__test__/helpers/model-server), consumed through
// toUIMessageStream as a route handler streams it. The same code path both ways
// (__test__/helpers/ai-sdk-run.mjs `turn`):
// - in memory: the UI messages kept in a variable (onStepEnd / onEnd assign them);
// - Threadline: `chats.load`, `chats.save` of the user's message, `onStepEnd(chatId)` saving each
//   finished step and `onEnd(chatId)` (a SQLite file store, the default durability);
// - Threadline with `stepHooks(chatId)`: the same, and streamText's prepareStep waits for each
//   step's save before the next step's model request.
// Runs alternate; cost per step = run time / steps; ratio = Threadline / in memory, the median of
// the per-run ratios. Prints a table and writes bench/results-ai-sdk.json.

const fs = require('fs')
const os = require('os')
const path = require('path')

const ROOT = path.join(__dirname, '..')
const { Store } = require(ROOT)
const { ThreadlineChatStore } = require(path.join(ROOT, 'adapters', 'ai-sdk'))
const { startModelServer, reply } = require(path.join(ROOT, '__test__', 'helpers', 'model-server'))

const args = process.argv.slice(2)
const QUICK = process.env.BENCH_QUICK === '1'
const RUNS = Number(args.includes('--runs') ? args[args.indexOf('--runs') + 1] : QUICK ? 3 : 7)
const TURNS = QUICK ? 5 : 20
const STEPS_PER_TURN = 3

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const now = () => process.hrtime.bigint()

/** The scripted model: per turn two tool steps then an answer, each with signed thinking. */
function script() {
  return (req) => {
    const step = req.index % STEPS_PER_TURN
    const text = `step ${req.index}: ${'a considered sentence about the files. '.repeat(6)}`
    if (step < 2) return reply.blocks([reply.thinking(text), reply.toolUse('note', { text: `n${req.index}` })])
    return reply.blocks([reply.thinking(text), `done ${req.index}: ${'the answer in a few words. '.repeat(8)}`])
  }
}

/** One chat of TURNS turns; returns { ms: the whole run, inStore: ms spent in load and save }. */
async function chat(helper, model, { chats, memory, hooks = false }) {
  let inStore = 0n
  if (chats) {
    // The time spent in the adapter itself (onStepEnd and onEnd call save), apart from the run's.
    for (const name of ['load', 'save']) {
      const own = chats[name].bind(chats)
      chats[name] = async (...a) => {
        const t0 = now()
        try {
          return await own(...a)
        } finally {
          inStore += now() - t0
        }
      }
    }
  }
  const t0 = now()
  for (let i = 0; i < TURNS; i++) {
    await helper.turn({ chats, chatId: 'bench', model, text: `question ${i}`, memory, hooks })
  }
  return { ms: Number(now() - t0) / 1e6, inStore: Number(inStore) / 1e6 }
}

async function run({ log = console.log } = {}) {
  const helper = await import(path.join(ROOT, '__test__', 'helpers', 'ai-sdk-run.mjs'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-bench-aisdk-'))
  const rows = []
  try {
    for (let r = 0; r < RUNS + 1; r++) {
      const servers = [await startModelServer({ script: script() }), await startModelServer({ script: script() }), await startModelServer({ script: script() })]
      const store = Store.open(path.join(dir, `run-${r}.db`))
      const hookStore = Store.open(path.join(dir, `run-${r}-hooks.db`))
      const both = {
        memory: () => chat(helper, helper.anthropicModel(servers[0].url), { memory: { messages: [] } }),
        threadline: () => chat(helper, helper.anthropicModel(servers[1].url), { chats: new ThreadlineChatStore(store) }),
        hooks: () => chat(helper, helper.anthropicModel(servers[2].url), { chats: new ThreadlineChatStore(hookStore), hooks: true }),
      }
      const t = {}
      // Alternating which goes first, so both see the same machine.
      for (const k of r % 2 ? ['memory', 'threadline', 'hooks'] : ['hooks', 'threadline', 'memory']) t[k] = await both[k]()
      store.close()
      hookStore.close()
      for (const s of servers) {
        if (s.invalid.length > 0) throw new Error(`the model server refused a request: ${JSON.stringify(s.invalid[0])}`)
        s.close()
      }
      // The first run warms up the modules and the JIT; it is not counted.
      if (r === 0) continue
      const steps = TURNS * STEPS_PER_TURN
      rows.push({ memory: t.memory.ms / steps, threadline: t.threadline.ms / steps, inStore: t.threadline.inStore / steps, hooks: t.hooks.ms / steps })
      log(`  run ${r}/${RUNS}: in memory ${rows.at(-1).memory.toFixed(2)} ms/step, Threadline ${rows.at(-1).threadline.toFixed(2)} ms/step (${rows.at(-1).inStore.toFixed(2)} in load/save), ${(t.threadline.ms / t.memory.ms).toFixed(2)}x`)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  return {
    turns: TURNS,
    stepsPerTurn: STEPS_PER_TURN,
    runs: RUNS,
    memory: median(rows.map((x) => x.memory)),
    threadline: median(rows.map((x) => x.threadline)),
    ratio: median(rows.map((x) => x.threadline / x.memory)),
    added: median(rows.map((x) => x.threadline - x.memory)),
    inStore: median(rows.map((x) => x.inStore)),
    hooks: median(rows.map((x) => x.hooks)),
    hooksRatio: median(rows.map((x) => x.hooks / x.memory)),
  }
}

function format(r) {
  const f = (x, d = 2) => x.toFixed(d)
  return [
    `AI SDK chat (${r.turns} turns of ${r.stepsPerTurn} steps through the loopback model server, median of ${r.runs} runs)`,
    '| per step | AI SDK, messages in memory | ThreadlineChatStore (every step saved) | ratio | goal | wall time inside load/save (overlaps the stream) |',
    '|---|---|---|---|---|---|',
    `| streamText step, toUIMessageStream consumed | ${f(r.memory)} ms | ${f(r.threadline)} ms | ${f(r.ratio)}x | 1.2x | ${f(r.inStore)} ms |`,
    `| the same with stepHooks (each step saved before the next request) | ${f(r.memory)} ms | ${f(r.hooks)} ms | ${f(r.hooksRatio)}x | 1.2x | |`,
  ].join('\n')
}

module.exports = { run, format }

if (require.main === module) {
  run().then((r) => {
    fs.writeFileSync(path.join(__dirname, 'results-ai-sdk.json'), `${JSON.stringify(r, null, 2)}\n`)
    console.log(format(r))
  })
}
