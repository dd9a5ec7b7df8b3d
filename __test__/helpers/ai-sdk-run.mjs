// Runs one chat turn as an AI SDK app does (a route handler's body): load the chat, add the
// user's message, save, stream the answer through toUIMessageStream with the store's onStepEnd
// and onEnd. Imported by __test__/ai-sdk.test.js and bench/ai-sdk.js; run as a script it is the
// child process the SIGKILL test kills while its `wait` tool blocks:
//   node ai-sdk-run.mjs <store path or URL> <chatId> <model server url> <marker file> [hooks]
// (`hooks`: the run uses chats.stepHooks instead of onStepEnd / onEnd, `plain`: onStepEnd; both
// with step saves that take 500 ms.)
import fs from 'node:fs'
import { createRequire } from 'node:module'
import { streamText, tool, jsonSchema, stepCountIs, convertToModelMessages } from 'ai'
import { createAnthropic } from '@ai-sdk/anthropic'

const require = createRequire(import.meta.url)

/**
 * The tools of the scripted runs: `note` answers at once, `wait` writes a marker and blocks.
 * `ready`: a promise `wait` awaits before writing the marker (the SIGKILL test's run waits for
 * its first step's save: the AI SDK calls onStepEnd from the UI message stream while streamText
 * already goes on with the next step, so a kill at that moment may come before the save).
 */
export function tools({ marker, ready } = {}) {
  const obj = jsonSchema({ type: 'object', properties: { text: { type: 'string' } } })
  return {
    note: tool({ inputSchema: obj, execute: async ({ text }) => ({ noted: text ?? '' }) }),
    wait: tool({
      inputSchema: obj,
      execute: async () => {
        await ready
        if (marker) fs.writeFileSync(marker, 'running')
        return new Promise(() => {}) // until killed
      },
    }),
  }
}

/**
 * One turn: `text` from the user, then the model's steps until it stops calling tools.
 * `onStepEnd: false` persists only at the end (the AI SDK guide's way). `memory` (an object
 * with `messages`) replaces the store: the framework's own in-memory keeping, for the benchmark.
 */
export async function turn({ chats, chatId, model, text, marker, thinking = true, onStepEnd = true, memory, hooks = false, slowSave = 0 }) {
  const before = memory ? memory.messages : await chats.load(chatId)
  const userMessage = { id: memory ? `u${before.length}` : chats.generateMessageId(), role: 'user', parts: [{ type: 'text', text }] }
  const messages = [...before, userMessage]
  if (!memory) await chats.save(chatId, messages)
  let stepSaved
  const ready = new Promise((resolve) => { stepSaved = resolve })
  // stepHooks: each step saved before the next step's model request (prepareStep waits for it).
  const run = hooks ? chats.stepHooks(chatId) : undefined
  if (run) stepSaved()
  const result = streamText({
    ...(run ? { prepareStep: run.prepareStep } : {}),
    model,
    messages: await convertToModelMessages(messages),
    tools: tools({ marker, ready }),
    stopWhen: stepCountIs(8),
    ...(thinking ? { providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 1024 } } } } : {}),
  })
  let ended
  const done = new Promise((resolve) => { ended = resolve })
  const stream = result.toUIMessageStream({
    originalMessages: messages,
    generateMessageId: memory ? () => `a${messages.length}` : chats.generateMessageId,
    ...(memory
      ? { onStepEnd: (e) => { memory.messages = e.messages } }
      : run ? { onStepEnd: async (e) => { await slow(slowSave); await run.onStepEnd(e) } }
      : onStepEnd ? { onStepEnd: async (e) => { await slow(slowSave); await chats.onStepEnd(chatId)(e); stepSaved() } } : {}),
    onEnd: async (e) => {
      if (memory) memory.messages = e.messages
      else if (run) await run.onEnd(e)
      else await chats.onEnd(chatId)(e)
      ended(e.messages)
    },
  })
  for await (const _ of stream) { /* the client's side of the stream */ }
  // The chat as the client holds it at the end (nothing is read back from the store here).
  return done
}

/** `slowSave`: a step's save that takes that long (a store far away, a busy database). */
const slow = (ms) => (ms ? new Promise((resolve) => setTimeout(resolve, ms)) : undefined)

export function anthropicModel(url) {
  return createAnthropic({ baseURL: `${url}/v1`, apiKey: 'test-key' })('claude-sonnet-4-5')
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fs.realpathSync(new URL(import.meta.url))) {
  const [where, chatId, url, marker, mode] = process.argv.slice(2)
  require('./engine.js')
  const { Store } = require('../../index.js')
  const { ThreadlineChatStore } = require('../../adapters/ai-sdk/index.js')
  const store = Store.open(where)
  const chats = new ThreadlineChatStore(store)
  // hooks / plain: step saves that take 500 ms, with stepHooks or with onStepEnd alone.
  const slowSave = mode === 'hooks' || mode === 'plain' ? 500 : 0
  await turn({ chats, chatId, model: anthropicModel(url), text: 'note something, then wait', marker, hooks: mode === 'hooks', slowSave })
}
