// A process that runs the real Claude Code through the Claude Agent SDK's query(), with a
// ThreadlineSessionStore as its sessionStore (or none), against a model server on loopback.
// Its job comes as JSON in argv[2]: { store?: path | postgres URL, api: 'sync' | 'promise',
// prompt, resume?, cwd, flush?, tools? }; the environment gives ANTHROPIC_BASE_URL and
// CLAUDE_CONFIG_DIR. Every SDK message is printed as one JSON line, so the test can read the
// session id and see the run end (or kill this process and its `claude` child mid-run).
import { query } from '@anthropic-ai/claude-agent-sdk'
import { ThreadlineSessionStore } from 'threadline/claude-agent-sdk'
import * as sync from 'threadline'
import * as promise from 'threadline/promise'

const job = JSON.parse(process.argv[2])

async function openStore() {
  if (!job.store) return undefined
  return job.api === 'promise' ? promise.Store.open(job.store) : sync.Store.open(job.store)
}

const store = await openStore()
const options = {
  cwd: job.cwd,
  model: 'claude-sonnet-4-5',
  // As root Claude Code refuses bypassPermissions: name the tools it may use instead.
  allowedTools: job.tools ?? ['Bash'],
  settingSources: [],
  ...(store ? { sessionStore: new ThreadlineSessionStore(store), sessionStoreFlush: job.flush ?? 'batched' } : {}),
  ...(job.resume ? { resume: job.resume } : {}),
}
for await (const message of query({ prompt: job.prompt, options })) {
  process.stdout.write(`${JSON.stringify(message)}\n`)
}
await store?.close()
