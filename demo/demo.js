// @ts-check
'use strict'
// Threadline demo: an agent session that survives its process being killed, and recalls an
// earlier session through the recall tools.
//
//   npm run demo            (store in a temp dir, removed at the end)
//   THREADLINE_HOME=dir npm run demo   (store in that dir; the demo session is deleted at the end)
//
// 1. An agent process plays a coding session (prompt, assistant responses with thinking,
//    signatures and tool calls, tool results with stdout/stderr, usage per response). After each
//    append returns (= committed) it reports the record's seq, uuid and content hash to this
//    process on a pipe. Tool calls go through the journal (toolCallStarted right before the
//    tool runs, recordToolOutcome when it is done). Half-way through running two parallel tool
//    calls, it SIGKILLs itself: one finished (recorded), one running (started, no outcome).
// 2. This process opens the store again, checks that every acknowledged record is there,
//    byte for byte, finds the session in interruptedSessions(), shows pendingRepairs(), and
//    recover()s it: the finished call's result is backfilled from the journal, the running one
//    (a read-only grep, safe to re-run) is replayed once. The history passes validateMessages.
// 3. It resumes the session and finishes it; asked about a decision of an earlier session (written
//    at the start, a week before), the model (scripted) calls session_search and session_read,
//    which store.recallTools() answers from the store, and the answer quotes the decision.
// 4. It prints the typed transcript, the turns and the token tracker, builds
//    the next request (Anthropic, whole and under half the budget; OpenAI Chat Completions), and
//    exits 0, or 1 if anything acknowledged was lost or a history or request is invalid.

const { spawn } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Store, defaultStorePath, validateMessages } = require('..')
const { MODEL, steps, crashAt, earlier, recall } = require('./script')
const { c, write, line, pause, stream, preview, num, role, lines } = require('./print')

/** @typedef {import('..').Session} Session */
/** @typedef {import('..').Envelope} Envelope */
/** @typedef {import('./script').Step} Step */
/** @typedef {import('./script').ToolRun} ToolRun */
/** @typedef {{ seq: number, uuid: string, sha: string }} Ack */

/** @param {unknown} value */
const sha = (value) => crypto.createHash('sha256').update(JSON.stringify(value)).digest('hex')

// ---- playing the script ------------------------------------------------------------------------

/** @param {Envelope} env */
const acked = (env) => c.dim(`  ✓ seq ${env.seq}`)
/** Pads `s` with spaces to `n` visible characters (colour codes do not count). @param {string} s @param {number} n */
const pad = (s, n) => `${s.trimEnd()}${' '.repeat(Math.max(0, n - s.trimEnd().replace(/\u001b\[[0-9;]*m/g, '').length))}`
const WIDTH = 64

/**
 * Appends one step (prompt, model response, tool results) and shows it as it happens.
 * @param {Session} session
 * @param {Step} step
 * @returns {Envelope}
 */
function play(session, step) {
  if (step.kind === 'prompt') {
    write(`  ${role('user')}  ${pad(preview(step.text, WIDTH), WIDTH)}`)
    const env = session.append(step.text)
    line(acked(env))
    return env
  }
  if (step.kind === 'response') {
    // The response streams in; the agent appends the complete message once it has arrived.
    write(`  ${role('assistant')}  `)
    const shown = step.message.content.map((b) => {
      if (b.type === 'thinking') return '(thinking)'
      if (b.type === 'text') return b.text
      if (b.type === 'tool_use') return `→ ${b.name} ${Object.values(/** @type {object} */ (b.input)).join(' ')}`
      return b.type
    })
    stream(pad(preview(shown.join(' '), WIDTH), WIDTH).replace('(thinking)', c.dim('(thinking)')).replaceAll('→', c.yellow('→')))
    const env = session.append(step.message, { requestId: step.requestId, provider: 'anthropic' })
    line(acked(env))
    return env
  }
  // Tool results: one user message with a tool_result block per call (what the model sees), and
  // beside it, in the envelope, the raw run data per call (stdout, stderr, exit code) for people.
  const each = Math.floor(WIDTH / step.results.length) - 5
  const outcomes = step.results.map(({ block, run }) =>
    block.is_error ? `${c.red('✗')} exit ${run.exitCode}: ${preview(run.stderr, each - 8)}` : `${c.green('✓')} ${preview(block.content, each)}`)
  write(`  ${c.blue('tool     ')}  ${pad(outcomes.join(' · '), WIDTH)}`)
  const env = session.append(
    { role: 'user', content: step.results.map((r) => r.block) },
    { toolUseResult: Object.fromEntries(step.results.map(({ block, run }) => [block.tool_use_id, run])) },
  )
  line(acked(env))
  return env
}

// ---- the agent process (child) -----------------------------------------------------------------

/** @param {string} dbPath */
function agent(dbPath) {
  /** @param {object} msg */
  const report = (msg) => fs.writeSync(3, `${JSON.stringify(msg)}\n`) // fd 3: a pipe to the parent
  /** @param {Envelope} env */
  const ack = (env) => report({ seq: env.seq, uuid: env.uuid, sha: sha(env) })

  const store = Store.open(dbPath) // durability 'process': a committed append survives SIGKILL
  const session = store.createSession({
    title: 'Fix the failing date test', project: 'demo', provider: 'anthropic', model: MODEL, contextWindow: 200_000,
  })
  report({ session: session.id })
  // An app event: in the log (envelopes), never in what is sent to the model (messages).
  write(`  ${c.dim('event    ')}  ${pad(`agent.started { pid: ${process.pid} }`, WIDTH)}`)
  const started = session.appendEvent('agent.started', { pid: process.pid })
  line(acked(started))
  ack(started)

  steps.forEach((step, i) => {
    if (step.kind === 'tools') {
      // Each tool call is marked started right before it runs (its side effect), and its outcome
      // recorded in the journal as soon as it is known.
      step.results.forEach(({ block, run }, t) => {
        session.toolCallStarted(block.tool_use_id)
        if (i === crashAt.step && t === crashAt.tool) {
          write(`  ${c.blue('tool     ')}  ${pad(`running ${block.tool_use_id} ...`, WIDTH)}`)
          line(c.yellow('▌'))
          pause(300)
          process.kill(process.pid, 'SIGKILL') // mid-tool: started, no outcome
        }
        session.recordToolOutcome(block.tool_use_id, { content: String(block.content ?? ''), ...(block.is_error ? { is_error: true } : {}), toolUseResult: run })
        if (i === crashAt.step) line(`  ${c.blue('tool     ')}  ${pad(`${block.tool_use_id} done, outcome recorded in the journal`, WIDTH)}${c.dim('  ✓')}`)
      })
    }
    ack(play(session, step))
  })
}

/**
 * Runs the agent in a child process; collects what it acknowledged.
 * @param {string} dbPath
 * @returns {Promise<{ sessionId: string | null, acks: Ack[], code: number | null, signal: string | null }>}
 */
function runAgent(dbPath) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [__filename, '--agent', dbPath], { stdio: ['ignore', 'inherit', 'inherit', 'pipe'] })
    line(`${c.bold('agent process')} ${child.pid} ${c.dim('plays the session; ✓ = append returned (committed)')}`)
    /** @type {string | null} */
    let sessionId = null
    /** @type {Ack[]} */
    const acks = []
    let buffered = ''
    const pipe = /** @type {import('node:stream').Readable} */ (child.stdio[3])
    pipe.setEncoding('utf8')
    pipe.on('data', (chunk) => {
      buffered += chunk
      let nl
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const msg = JSON.parse(buffered.slice(0, nl))
        buffered = buffered.slice(nl + 1)
        if (msg.session) sessionId = msg.session
        else acks.push(msg)
      }
    })
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ sessionId, acks, code, signal }))
  })
}

// ---- the demo (parent) -------------------------------------------------------------------------

/**
 * Prints session.messages with their blocks, each tool call with its result.
 * @param {Session} session
 */
function printTranscript(session) {
  const envelopes = session.envelopes().filter((e) => e.message && e.includeInContext !== false)
  /** @type {Map<string, { block: import('..').ToolResultBlock, run: ToolRun | undefined }>} */
  const results = new Map()
  for (const e of envelopes) {
    // The demo's agent keeps the raw run of each tool call under its tool_use_id.
    const runs = /** @type {Record<string, ToolRun>} */ (typeof e.toolUseResult === 'object' ? e.toolUseResult : {})
    for (const b of e.message?.content ?? []) {
      if (b.type === 'tool_result') results.set(b.tool_use_id, { block: b, run: runs[b.tool_use_id] })
    }
  }
  line(c.bold('Transcript') + c.dim('  session.messages: role, blocks; tool calls with their results'))
  session.messages.forEach((m, i) => {
    const parts = []
    /** @type {string[]} */
    const calls = []
    for (const b of m.content) {
      switch (b.type) {
        case 'text': parts.push(`text ${c.dim(`"${preview(b.text, 38)}"`)}`); break
        case 'thinking': parts.push(`thinking${b.signature ? c.dim(' (signed)') : ''}`); break
        case 'tool_use': {
          parts.push('tool_use')
          const r = results.get(b.id)
          const run = r?.run
          const out = run?.stdout ?? (typeof r?.block.content === 'string' ? r.block.content : '')
          const n = lines(out)
          const outcome = !r ? c.yellow('no result yet')
            : r.block.is_error ? `${c.red('✗')} exit ${run?.exitCode}, stderr ${c.dim(`"${preview(run?.stderr ?? '', 24)}"`)}`
              : `${c.green('✓')} ${n} line${n === 1 ? '' : 's'} ${c.dim(`"${preview(out, 30)}"`)}`
          calls.push(`        ${c.yellow('↳')} ${b.name} ${c.dim(preview(JSON.stringify(b.input), 40))} ${c.yellow('→')} ${outcome}`)
          break
        }
        case 'tool_result': parts.push(`tool_result ${b.is_error ? c.red('✗') : c.green('✓')}`); break
        default: parts.push(b.type)
      }
    }
    line(`  ${c.dim(`#${String(i).padEnd(2)}`)} ${role(m.role)}  ${parts.join(c.dim(' · '))}`)
    for (const call of calls) line(call)
  })
}

/** @param {Session} session */
function printTurnsAndTokens(session) {
  line(c.bold('Turns'))
  for (const t of session.turns) {
    const u = t.usage
    const status = t.status === 'complete' ? c.green(t.status) : c.yellow(t.status)
    line(`  #${t.index}  ${status}  messages ${t.startIndex}-${t.endIndex} · ${t.toolUseCount} tool calls · ` +
      `in ${num(u.input_tokens)} · out ${num(u.output_tokens)} · cache read ${num(u.cache_read_input_tokens)} · cache write ${num(u.cache_creation_input_tokens)}`)
  }
  const tt = session.tokenTracker
  const fill = session.contextFill
  line(c.bold('Token tracker'))
  line(`  latest response  in ${num(tt.inputTokens)} · out ${num(tt.outputTokens)} · cache read ${num(tt.cacheReadInputTokens)} · cache write ${num(tt.cacheCreationInputTokens)}`)
  line(`  next request     ≈ ${num(tt.contextTokens)} tokens` +
    (fill.fraction === null ? '' : ` of ${num(fill.contextWindow ?? 0)} (${(fill.fraction * 100).toFixed(1)}% of the context window)`))
  line(`  session total    in ${num(tt.cumulativeInputTokens)} · out ${num(tt.cumulativeOutputTokens)} · cache read ${num(tt.cumulativeCacheReadTokens)} · cache write ${num(tt.cumulativeCacheCreationTokens)}`)
}

/**
 * Builds the next request from the resumed session, for Anthropic under a budget and for OpenAI
 * Chat Completions, and checks each the way that provider would. Returns false if one is invalid.
 * @param {Session} session
 */
function printNextRequest(session) {
  line(c.bold('Next request') + c.dim('  buildContext()'))
  const system = 'You are a coding agent working in the user\'s repository.'
  const full = session.buildContext({ target: 'anthropic', system, model: MODEL })
  const tight = session.buildContext({ target: 'anthropic', system, model: MODEL, maxTokens: Math.ceil(full.stats.estimatedTokens / 2), toolResultPreviewChars: 200 })
  const chat = session.buildContext({ target: 'openai-chat', system })
  let ok = true
  for (const [what, ctx, target] of /** @type {const} */ ([['anthropic', full, 'anthropic'], ['anthropic, half the tokens', tight, 'anthropic'], ['openai-chat', chat, 'openai-chat']])) {
    const problems = validateMessages(ctx.messages, { target })
    ok &&= problems.length === 0
    const s = ctx.stats
    line(`  ${problems.length === 0 ? c.green('✓') : c.red('✗')} ${what.padEnd(26)} ${String(ctx.messages.length).padStart(2)} messages ≈ ${num(s.estimatedTokens)} tokens` +
      c.dim(` · ${s.keptTurns} turns kept, ${s.droppedTurns} dropped · ${s.previewed.length} results previewed · ` +
        `${s.droppedThinking} thinking blocks left out · ${s.warnings.length} warnings${s.warnings[0] ? ` (${s.warnings[0].code}, ...)` : ''}`))
  }
  return ok
}

/**
 * Writes the earlier session (a week before the demo's), which the resumed agent recalls.
 * @param {Store} store
 * @returns {string} its id
 */
function writeEarlier(store) {
  const s = store.createSession({ title: earlier.title, project: 'demo', provider: 'anthropic', model: MODEL })
  const weekAgo = Date.now() - 7 * 24 * 3600 * 1000
  earlier.messages.forEach((message, i) => {
    s.append({ message, timestamp: new Date(weekAgo + i * 60_000).toISOString() })
  })
  s.setStatus('completed')
  line(`${c.bold('earlier session')} ${c.dim(s.id)} "${earlier.title}" ${c.dim(`(${earlier.messages.length} messages, a week ago)`)}`)
  return s.id
}

/**
 * The resumed agent recalls the earlier session through the recall tools: the model's side is
 * scripted, the tool round trip is real (handle() answers from the store, and its results are
 * appended after the calls). Returns false if the recall failed or the history is invalid.
 * @param {Store} store
 * @param {Session} session
 */
async function recallEarlier(store, session) {
  line(c.bold('Recall') + c.dim('  store.recallTools(): the model looks up an earlier session'))
  const tools = store.recallTools({ excludeSessionId: session.id, project: 'demo', maxResultTokens: 1500 })
  write(`  ${role('user')}  ${pad(preview(recall.prompt, WIDTH), WIDTH)}`)
  line(acked(session.append(recall.prompt)))
  /**
   * The model calls a tool; handle() answers; the result is appended after the call.
   * @param {import('..').ToolUseBlock} call
   */
  const round = async (call) => {
    write(`  ${role('assistant')}  ${pad(`${c.yellow('→')} ${preview(`${call.name} ${JSON.stringify(call.input)}`, WIDTH - 2)}`, WIDTH)}`)
    line(acked(session.append(recall.respond([recall.text('Let me check.'), call], 'tool_use', [120, 0, 15900, 40]).message, { provider: 'anthropic' })))
    const result = await tools.handle(call)
    const first = result.content.split('\n').find((l) => /^\s+\S|^\[seq/.test(l)) ?? result.content
    write(`  ${c.blue('tool     ')}  ${pad(`${result.is_error ? c.red('✗') : c.green('✓')} ${preview(first.trim(), WIDTH - 2)}`, WIDTH)}`)
    line(acked(session.append({ role: 'user', content: [result] })))
    return result
  }
  const found = await round(recall.search)
  const hit = found.content.match(/session (\S+) .*? · uuid (\S+) /)
  if (found.is_error || !hit || !hit[1] || !hit[2]) {
    line(c.red(`  ✗ the search found nothing: ${found.content}`))
    return false
  }
  const read = await round(recall.read(hit[1], hit[2]))
  const decision = read.content.split('\n').find((l) => l.includes('Decision:'))
  if (read.is_error || !decision) {
    line(c.red(`  ✗ the earlier decision was not read back: ${read.content}`))
    return false
  }
  const answer = 'Yes. Last week we decided to keep every date in UTC and format with toISOString().slice(0, 10). ' +
    'The fix keeps setUTCDate/getUTCDate and formats the UTC day, so it follows that decision.'
  write(`  ${role('assistant')}  ${pad(preview(answer, WIDTH), WIDTH)}`)
  line(acked(session.append(recall.respond([recall.thinking('The earlier session says: ' + decision.replace(/^\[seq \d+\] /, '')), recall.text(answer)], 'end_turn', [200, 0, 16100, 70]).message, { provider: 'anthropic' })))
  const problems = validateMessages(session.messages)
  line(`  ${problems.length === 0 ? c.green('✓') : c.red('✗')} recalled from the earlier session: ${c.dim(preview(decision.replace(/^\[seq \d+\] assistant: /, ''), 70))}; ` +
    `validateMessages finds ${problems.length === 0 ? 'no problem' : JSON.stringify(problems)}`)
  line()
  return problems.length === 0
}

/**
 * Shows the plan, recovers, and checks the repaired history the way the provider would.
 * @param {Session} session
 */
async function recoverSession(session) {
  line(c.bold('Recovery') + c.dim('  pendingRepairs(), then recover()'))
  for (const r of session.pendingRepairs()) line(`  plan  ${c.yellow(r.kind.padEnd(15))} ${r.toolUseId ?? ''} ${c.dim(r.reason)}`)
  const script = new Map(steps.flatMap((s) => (s.kind === 'tools' ? s.results.map((r) => [r.block.tool_use_id, r]) : [])))
  const report = await session.recover({
    // grep only reads: safe to run again. Anything else would be marked "outcome unknown".
    isSafe: (call) => call.name === 'bash' && String(/** @type {{ command?: string }} */ (call.input).command).startsWith('grep '),
    replay: async (call) => {
      line(`  ${c.blue('replay')} ${call.id} ${c.dim(JSON.stringify(call.input))}`)
      const again = script.get(call.id)
      return { content: again ? String(again.block.content) : '', toolUseResult: again?.run }
    },
  })
  for (const r of report.repairs) line(`  ${c.green('done')}  ${c.yellow(r.kind.padEnd(15))} ${r.toolUseId ?? ''} ${c.dim(`record ${r.recordUuid ?? '-'}`)}`)
  const problems = validateMessages(session.messages)
  if (problems.length > 0) {
    line(c.red(`  ✗ the repaired history is invalid: ${JSON.stringify(problems)}`))
    return false
  }
  const again = await session.recover()
  line(`  ${c.green('✓')} ${report.recordsWritten} repair record written; validateMessages(session.messages) finds no problem; ` +
    `recover() again: ${again.clean ? 'nothing to do' : c.red('changed something')}`)
  line()
  return again.clean
}

async function main() {
  const home = process.env.THREADLINE_HOME
  const tmp = home ? null : fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-demo-'))
  const dbPath = tmp ? path.join(tmp, 'threadline.db') : defaultStorePath()
  if (home) fs.mkdirSync(path.dirname(dbPath), { recursive: true })
  /** @type {Store | null} */
  let store = null
  /** @type {string | null} */
  let sessionId = null
  /** @type {string | null} */
  let earlierId = null
  try {
    line(c.bold('Threadline demo') + ': an agent session that survives SIGKILL')
    line(c.dim(`store ${dbPath} (durability: process)`))
    line()

    // 0. An earlier session, a week before: the resumed agent recalls it (step 3).
    const before = Store.open(dbPath)
    earlierId = writeEarlier(before)
    before.close()
    line()

    // 1. The agent process, killed half-way.
    const run = await runAgent(dbPath)
    sessionId = run.sessionId
    if (run.signal !== 'SIGKILL' || !sessionId) {
      line(c.red(`✗ the agent process ended with code ${run.code}, signal ${run.signal}; expected it to kill itself`))
      return 2
    }
    line(`  ${c.red('✗ SIGKILL')}  the agent process killed itself mid-tool, after ${run.acks.length} acknowledged appends`)
    line()

    // 2. Resume in this process: is everything acknowledged there, exactly?
    line(`${c.bold('resumed')} in process ${process.pid}`)
    store = Store.open(dbPath)
    const session = store.openSession(sessionId)
    const stored = session.envelopes()
    const lost = run.acks.filter((a) => stored[a.seq]?.uuid !== a.uuid || sha(stored[a.seq]) !== a.sha)
    if (lost.length > 0) {
      line(c.red(`  ✗ LOST: ${lost.length} of ${run.acks.length} acknowledged records are missing or changed:`))
      for (const a of lost) line(c.red(`    seq ${a.seq} ${a.uuid}`))
      return 1
    }
    line(`  ${c.green('✓')} all ${run.acks.length} acknowledged records are there, byte for byte ${c.dim(`(${stored.length} records in the log)`)}`)
    const last = session.turns.at(-1)
    line(`  turn #${last?.index} is ${c.yellow(String(last?.status))}: the calls of its latest response have no tool_result`)
    const interrupted = store.interruptedSessions().map((i) => i.id)
    line(`  ${interrupted.includes(sessionId) ? c.green('✓') : c.red('✗')} store.interruptedSessions() lists it: left active by a process that is gone`)
    if (!interrupted.includes(sessionId)) return 1
    line()
    if (!(await recoverSession(session))) return 1
    for (const step of steps.slice(session.messages.length)) play(session, step)
    line()
    if (!(await recallEarlier(store, session))) return 1
    session.setStatus('completed')

    // 3. What the session holds now.
    printTranscript(session)
    line()
    printTurnsAndTokens(session)
    line()
    if (!printNextRequest(session)) return 1
    line()
    line(c.green(c.bold('✓ nothing acknowledged was lost')) + `: ${run.acks.length}/${run.acks.length} records survived SIGKILL; ` +
      `the session was resumed and completed in another process`)
    return 0
  } finally {
    if (store) {
      if (!tmp && sessionId) store.deleteSession(sessionId)
      if (!tmp && earlierId) store.deleteSession(earlierId)
      store.close()
    }
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
    line(c.dim(tmp ? `cleaned up ${tmp}` : `deleted the demo session from ${dbPath}`))
  }
}

const [, , mode, agentDbPath] = process.argv
if (mode === '--agent' && agentDbPath) {
  agent(agentDbPath)
} else {
  main().then(
    (code) => { process.exitCode = code },
    (err) => { console.error(err); process.exitCode = 1 },
  )
}
