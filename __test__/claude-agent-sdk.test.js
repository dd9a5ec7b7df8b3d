'use strict'
// threadline/claude-agent-sdk with the real Claude Code: the SDK's npm package brings the
// `claude` binary, which runs its agent loop against the model server on loopback
// (helpers/model-server), mirrors its transcript into a ThreadlineSessionStore, and resumes from
// it in a new process with its own config directory deleted. The server refuses a request the
// real API would refuse (a tool_use without its tool_result, a thinking signature it did not
// issue), so "every request was valid" is checked, not assumed.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { Store } = require('..')
const { ThreadlineSessionStore } = require('../adapters/claude-agent-sdk')
const { startModelServer, reply } = require('./helpers/model-server')
const { tmpDir } = require('./helpers/util')
const { spawnJsonLines } = require('./helpers/json-lines')

const RUNNER = path.join(__dirname, 'helpers', 'claude-agent-run.mjs')
const BIN = path.join(__dirname, '..', 'bin', 'threadline.js')
const PG = process.env.THREADLINE_TEST_POSTGRES

// Claude Code writes lines about the requests it sent (api-request, -shape, -blob) to its own
// file only; every other line is mirrored, in the same order.
const NOT_MIRRORED = /^api-request/

/** The environment of a run: this server, this config directory, nothing sent elsewhere. */
function claudeEnv(server, configDir) {
  const { NODE_TEST_CONTEXT, NODE_OPTIONS, ...outer } = process.env
  return {
    ...outer,
    ANTHROPIC_BASE_URL: server.url,
    ANTHROPIC_API_KEY: 'sk-ant-test',
    CLAUDE_CONFIG_DIR: configDir,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_AUTOUPDATER: '1',
  }
}

/** A test's folders: the agent's working directory, config directories, the store. */
function place(t) {
  const dir = tmpDir(t, 'threadline-claude-')
  const cwd = path.join(dir, 'work')
  fs.mkdirSync(cwd)
  return { dir, cwd, store: path.join(dir, 'agent.db'), config: (n) => path.join(dir, `config-${n}`) }
}

/** Claude Code's projectKey for a directory: every character not a letter or digit as '-'. */
const projectKey = (cwd) => cwd.replace(/[^a-zA-Z0-9]/g, '-')

/**
 * Starts the runner; `done` resolves with its SDK messages (`lines`) once it exits.
 * `onMessage` sees each one as it arrives (a test kills the run from there).
 */
function run(job, env, onMessage = () => {}) {
  return spawnJsonLines(RUNNER, [JSON.stringify(job)], { env, detached: true }, onMessage)
}

/** Kills the runner and everything it started (the `claude` process, the tool's shell). */
function killAll(child) {
  try {
    process.kill(-child.pid, 'SIGKILL')
  } catch {}
}

const isSubagent = (body) => JSON.stringify(body.system ?? '').includes('cc_is_subagent=true')
const toolResults = (body) => body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []).filter((b) => b.type === 'tool_result'))
const lastIsToolResult = (body) => {
  const last = body.messages.at(-1)
  return Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result')
}

/** The lines of Claude Code's own transcript of `sessionId`, parsed. */
function localLines(configDir, cwd, sessionId, subpath) {
  const base = path.join(configDir, 'projects', projectKey(cwd), sessionId)
  const file = subpath ? path.join(base, `${subpath}.jsonl`) : `${base}.jsonl`
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
}

const resultOf = (r) => r.lines.find((m) => m.type === 'result')
const sessionOf = (r) => r.lines.find((m) => m.type === 'system' && m.subtype === 'init')?.session_id

function cli(args) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', maxBuffer: 64 << 20, env: { ...process.env, NO_COLOR: '1' } })
}

test('a run with two tool calls is mirrored into Threadline: load gives back what Claude Code wrote to its own file', async (t) => {
  const p = place(t)
  const server = await startModelServer({
    script: ({ body }) => {
      if (!body.tools?.length) return reply.text('Echo twice')
      const done = toolResults(body).length
      if (done < 2) return reply.blocks([reply.thinking(`step ${done + 1}`), reply.toolUse('Bash', { command: `echo step-${done + 1}`, description: 'echo a step' })])
      return reply.text('Both steps ran.')
    },
  })
  t.after(() => server.close())
  const r = await run({ store: p.store, api: 'sync', prompt: 'Run two echo steps', cwd: p.cwd }, claudeEnv(server, p.config(1))).done
  assert.equal(r.code, 0, r.stderr)
  assert.equal(resultOf(r)?.subtype, 'success')
  assert.deepEqual(server.invalid, [])
  const sessionId = sessionOf(r)
  const local = localLines(p.config(1), p.cwd, sessionId).filter((l) => !NOT_MIRRORED.test(l.type))

  const store = Store.open(p.store)
  t.after(() => store.close())
  const sessions = new ThreadlineSessionStore(store)
  const key = { projectKey: projectKey(p.cwd), sessionId }
  assert.deepEqual(await sessions.load(key), local)
  assert.deepEqual((await sessions.listSessions(key.projectKey)).map((s) => s.sessionId), [sessionId])

  // An ordinary Threadline session: its calls, their results, the signed thinking.
  const session = store.openSession(sessionId)
  const blocks = session.messages.flatMap((m) => m.content)
  const calls = blocks.filter((b) => b.type === 'tool_use')
  assert.deepEqual(calls.map((c) => c.input.command), ['echo step-1', 'echo step-2'])
  assert.equal(blocks.filter((b) => b.type === 'tool_result').length, 2)
  const issued = new Set(server.issued.map((i) => i.signature).filter(Boolean))
  // Claude Code asks for thinking: every answer begins with a signed thinking block.
  const signed = blocks.filter((b) => b.type === 'thinking')
  assert.equal(signed.length, session.messages.filter((m) => m.role === 'assistant' && m.content[0].type === 'thinking').length)
  assert.ok(signed.length >= 3)
  for (const b of signed) assert.ok(issued.has(b.signature), 'a thinking signature is stored byte for byte')
  assert.equal(session.turns.length, 1)
  session.close()
})

/**
 * The crash test. A first run ends normally (a turn with a tool call). A second process resumes
 * it, and Claude Code starts a tool that does not end; once it has started, that process and its
 * `claude` child are SIGKILLed. A third process with a config directory of its own (another
 * host) resumes the session from the store alone.
 */
async function killAndResume(t, { store, api, flush }) {
  const p = place(t)
  const marker = path.join(p.dir, 'tool-started')
  let phase = 'warmup'
  const server = await startModelServer({
    script: ({ body }) => {
      if (!body.tools?.length) return reply.text('A long task')
      if (phase === 'warmup') {
        return lastIsToolResult(body) ? reply.text('Warmed up.') : reply.toolUse('Bash', { command: 'echo warm', description: 'warm up' })
      }
      if (phase === 'killed') {
        if (lastIsToolResult(body)) return reply.text('The task ended.')
        return reply.blocks([reply.thinking('This runs for a while.'), reply.toolUse('Bash', { command: `echo started > ${marker} && node -e "setInterval(() => {}, 1000)"`, description: 'a long task' })])
      }
      return reply.text('Resumed: the long task was interrupted.')
    },
  })
  t.after(() => server.close())
  const job = { store, api, flush, cwd: p.cwd }
  const warm = await run({ ...job, prompt: 'Warm up' }, claudeEnv(server, p.config(1))).done
  assert.equal(warm.code, 0, warm.stderr)
  const sessionId = sessionOf(warm)
  const key = { projectKey: projectKey(p.cwd), sessionId }
  const open = async () => (api === 'promise' ? require('../promise').Store.open(store) : Store.open(store))
  const reader = await open()
  const afterWarmup = await new ThreadlineSessionStore(reader).load(key)
  await reader.close()

  phase = 'killed'
  const first = run({ ...job, prompt: 'Start the long task', resume: sessionId }, claudeEnv(server, p.config(1)), (m, child) => {
    if (m.type === 'assistant' && m.message.content.some((b) => b.type === 'tool_use')) {
      const wait = setInterval(() => {
        if (fs.existsSync(marker)) {
          clearInterval(wait)
          killAll(child)
        }
      }, 20)
    }
  })
  const killed = await first.done
  assert.equal(killed.signal, 'SIGKILL', killed.stderr)
  fs.rmSync(p.config(1), { recursive: true, force: true })
  const reopened = await open()
  const atKill = await new ThreadlineSessionStore(reopened).load(key)
  await reopened.close()
  // What was stored before the kill is all still there, in order.
  assert.deepEqual(atKill.slice(0, afterWarmup.length), afterWarmup)
  t.diagnostic(`${flush}: ${afterWarmup.length} entries after the first run, ${atKill.length} after the kill`)

  phase = 'resumed'
  const before = server.requests.length
  const second = await run({ ...job, prompt: 'Go on', resume: sessionId }, claudeEnv(server, p.config(2))).done
  assert.equal(second.code, 0, second.stderr)
  assert.equal(resultOf(second)?.subtype, 'success', JSON.stringify(resultOf(second)))
  assert.deepEqual(server.invalid, [], 'every request the model server received was valid')
  const resumed = server.requests.slice(before).filter((r) => r.body?.tools?.length && !isSubagent(r.body))
  assert.ok(resumed.length > 0)
  const request = resumed[0].body
  assert.match(JSON.stringify(request.messages), /Warm up/, 'the first run is in the resumed request')
  return { sessionId, request, afterWarmup, atKill }
}

test('SIGKILL while a tool runs, then resume in another process from the store alone (eager flush)', async (t) => {
  const p = place(t)
  const { request, afterWarmup, atKill } = await killAndResume(t, { store: p.store, api: 'sync', flush: 'eager' })
  // With 'eager' the prompt and the running call reached the store before the kill: the resumed
  // request holds both, and the killed call is answered.
  assert.ok(atKill.length > afterWarmup.length)
  assert.match(JSON.stringify(request.messages), /Start the long task/)
  const call = request.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).find((b) => b.type === 'tool_use' && b.input.description === 'a long task')
  assert.ok(call, 'the killed call is in the resumed request')
  assert.ok(toolResults(request).some((r) => r.tool_use_id === call.id), 'and it is answered')
})

test('SIGKILL with the default batched flush: what was flushed is kept, and the resumed run is valid', async (t) => {
  const p = place(t)
  await killAndResume(t, { store: p.store, api: 'promise', flush: 'batched' })
})

test('on PostgreSQL: killed on one host, resumed on another (another process and config directory, the same database)', { skip: !PG && 'THREADLINE_TEST_POSTGRES is not set (npm test starts a server)' }, async (t) => {
  const url = `${PG}${PG.includes('?') ? '&' : '?'}schema=claude_sdk_${process.pid}`
  const { sessionId, request } = await killAndResume(t, { store: url, api: 'promise', flush: 'eager' })
  assert.ok(request.messages.some((m) => JSON.stringify(m).includes('Start the long task')))
  const store = Store.open(url)
  t.after(() => store.close())
  const session = store.openSession(sessionId)
  assert.ok(session.messages.some((m) => m.content.some((b) => b.type === 'text' && b.text.startsWith('Resumed'))))
  session.close()
})

test('a subagent (the Agent tool) is a subagent session linked to its parent and the call that spawned it', async (t) => {
  const p = place(t)
  const server = await startModelServer({
    script: ({ body }) => {
      if (!body.tools?.length) return reply.text('Delegate')
      if (isSubagent(body)) {
        return lastIsToolResult(body) ? reply.text('The subagent is done.') : reply.toolUse('Bash', { command: 'echo from-subagent', description: 'echo' })
      }
      if (lastIsToolResult(body)) return reply.text('The main agent is done.')
      return reply.toolUse('Agent', { description: 'look around', prompt: 'Run echo from-subagent', subagent_type: 'general-purpose', run_in_background: false })
    },
  })
  t.after(() => server.close())
  const r = await run({ store: p.store, api: 'sync', prompt: 'Delegate a task', cwd: p.cwd, tools: ['Bash', 'Agent', 'Task'] }, claudeEnv(server, p.config(1))).done
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(server.invalid, [])
  const sessionId = sessionOf(r)
  const store = Store.open(p.store)
  t.after(() => store.close())
  const sessions = new ThreadlineSessionStore(store)
  const key = { projectKey: projectKey(p.cwd), sessionId }
  const subkeys = await sessions.listSubkeys(key)
  assert.equal(subkeys.length, 1)
  assert.match(subkeys[0], /^subagents\/agent-[0-9a-f]+$/)
  // The subagent's transcript, and its .meta.json as the SDK mirrors it: an agent_metadata entry.
  const loaded = await sessions.load({ ...key, subpath: subkeys[0] })
  assert.deepEqual(loaded.filter((e) => e.type !== 'agent_metadata'),
    localLines(p.config(1), p.cwd, sessionId, subkeys[0]).filter((l) => !NOT_MIRRORED.test(l.type)))
  const metaFile = path.join(p.config(1), 'projects', projectKey(p.cwd), sessionId, `${subkeys[0]}.meta.json`)
  // (the SDK sends it again when the file changes; the last one is the file)
  assert.deepEqual(loaded.filter((e) => e.type === 'agent_metadata').at(-1), { type: 'agent_metadata', ...JSON.parse(fs.readFileSync(metaFile, 'utf8')) })

  const parent = store.openSession(sessionId)
  const call = parent.messages.flatMap((m) => m.content).find((b) => b.type === 'tool_use' && b.name === 'Agent')
  parent.close()
  const sub = store.openSession(`${sessionId}/${subkeys[0].slice('subagents/'.length)}`)
  assert.equal(sub.info.metadata.parentSessionId, sessionId)
  assert.equal(sub.info.metadata.parentToolUseId, call.id)
  assert.ok(sub.messages.some((m) => m.content.some((b) => b.type === 'tool_use' && b.input.command === 'echo from-subagent')))
  sub.close()
})

test('the mirrored session through the CLI; importSessionToStore copies a local session into the store', async (t) => {
  const p = place(t)
  const server = await startModelServer({
    script: ({ body }) => {
      if (!body.tools?.length) return reply.text('Count files')
      if (lastIsToolResult(body)) return reply.text('There are no files here, counted with ls.')
      return reply.toolUse('Bash', { command: 'ls | wc -l', description: 'count files' })
    },
  })
  t.after(() => server.close())
  const r = await run({ store: p.store, api: 'sync', prompt: 'How many files are there?', cwd: p.cwd }, claudeEnv(server, p.config(1))).done
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(server.invalid, [])
  const sessionId = sessionOf(r)
  const local = localLines(p.config(1), p.cwd, sessionId)
  const mirrored = local.filter((l) => !NOT_MIRRORED.test(l.type))

  // The command line on what Claude Code mirrored.
  const show = cli(['show', sessionId, '--store', p.store])
  assert.equal(show.status, 0, show.stderr)
  assert.match(show.stdout, /How many files are there\?/)
  assert.match(show.stdout, /ls \| wc -l/)
  const search = cli(['search', 'counted', '--store', p.store, '--json'])
  assert.equal(search.status, 0, search.stderr)
  assert.equal(JSON.parse(search.stdout).hits[0].sessionId, sessionId)
  const usage = cli(['usage', '--by', 'model', '--store', p.store, '--json'])
  assert.equal(usage.status, 0, usage.stderr)
  const row = JSON.parse(usage.stdout).rows.find((x) => x.key === 'claude-sonnet-4-5')
  assert.ok(row && row.outputTokens > 0, usage.stdout)
  const exported = cli(['export', sessionId, '--format', 'claude-code', '--store', p.store])
  assert.equal(exported.status, 0, exported.stderr)
  assert.deepEqual(exported.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)), mirrored,
    'the export is Claude Code\'s own file, line for line, but for the api-request lines it never mirrors')

  // importSessionToStore reads CLAUDE_CONFIG_DIR's projects folder, every line of the file.
  const { importSessionToStore } = await import('@anthropic-ai/claude-agent-sdk')
  const store = Store.open(path.join(p.dir, 'imported.db'))
  t.after(() => store.close())
  const sessions = new ThreadlineSessionStore(store)
  const key = { projectKey: projectKey(p.cwd), sessionId }
  const saved = process.env.CLAUDE_CONFIG_DIR
  process.env.CLAUDE_CONFIG_DIR = p.config(1)
  try {
    await importSessionToStore(sessionId, sessions, { dir: p.cwd })
    assert.deepEqual(await sessions.load(key), local)
    // A replay stores no entry with a uuid twice; those without one are appended again, as the
    // SDK's SessionStore contract asks (it cannot tell them apart).
    await importSessionToStore(sessionId, sessions, { dir: p.cwd })
  } finally {
    if (saved === undefined) delete process.env.CLAUDE_CONFIG_DIR
    else process.env.CLAUDE_CONFIG_DIR = saved
  }
  const again = await sessions.load(key)
  assert.deepEqual(again.filter((e) => e.uuid), local.filter((e) => e.uuid))
  assert.deepEqual(again.filter((e) => !e.uuid), [...local.filter((e) => !e.uuid), ...local.filter((e) => !e.uuid)])
})
