'use strict'
// threadline show ID: a session's transcript in the terminal, every record in the order written.
// Tool calls, their results and thinking are folded to one line each unless --full; a rewind (the
// lines after it continue an earlier record) and a compaction always get a line; other events
// are shown with --full only.

const { colours, print, printJson, jsonText, field, text, oneLine, when, num, EXIT } = require('../output.js')
const { withStore, resolveId, idsOf } = require('../store.js')
const { stopOnInterrupt, isAbort } = require('../follow.js')

const FOLD = 100

function blockLines(b, c, full, width) {
  const cut = (s) => (full ? s : oneLine(s, width))
  switch (b.type) {
    case 'text':
      return [text(b.text)]
    case 'thinking':
      return full ? [c.dim(c.italic(`✻ thinking\n${text(b.thinking)}`))] : [c.dim(`✻ thinking (${num(b.thinking.length)} chars)`)]
    case 'redacted_thinking':
      return [c.dim('✻ thinking (redacted)')]
    case 'tool_use':
    case 'server_tool_use': {
      const input = jsonText(b.input ?? {}, full ? 2 : 0)
      return [`${c.yellow('▸')} ${c.bold(field(b.name))} ${c.dim(cut(input))}`]
    }
    case 'tool_result': {
      const result = resultText(b.content)
      const lines = result.split('\n').length
      const mark = b.is_error ? c.red('◂ error') : c.green('◂ result')
      return full ? [`${mark}\n${text(result)}`] : [`${mark} ${c.dim(`(${num(lines)} line${lines === 1 ? '' : 's'})`)} ${cut(result)}`]
    }
    case 'image':
    case 'document':
      return [c.magenta(`[${b.type}: ${field(b.source?.media_type ?? b.source?.type ?? '?')}]`)]
    default:
      return [c.dim(`[${field(b.type)}]`)]
  }
}

function resultText(content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((b) => (b.type === 'text' ? b.text : `[${b.type}]`)).join('\n')
}

/** The line of a record that changes what the transcript means, whatever the options. */
function markLine(env, c) {
  if (env.type === 'rewind') {
    const to = env.rewind?.toUuid ?? env.parentUuid ?? '?'
    return c.yellow(`↩ rewound to ${field(to)}: what follows continues from there ${c.dim(when(env.timestamp))}`)
  }
  if (env.type === 'compaction' && env.compaction) {
    const summary = env.compaction.summary ?? ''
    return c.yellow(`✂ compacted: the context restarts from a summary (${num(summary.length)} chars) ${c.dim(when(env.timestamp))}`)
  }
  return null
}

function eventLine(env, c) {
  const sub = env.subtype ?? env.data?.type
  return c.dim(`· ${field(env.type)}${sub ? ` (${field(sub)})` : ''} ${when(env.timestamp)}`)
}

/**
 * The subagent sessions `sid` spawned, by the tool call that spawned each (the importer's
 * metadata.parentToolUseId) and, for one no call spawned (Claude Code's compaction agent), by the
 * record it began at (metadata.parentRecordUuid).
 */
function spawned(ids, sid) {
  const byCall = new Map()
  const byRecord = new Map()
  for (const k of ids.children(sid)) {
    const m = ids.byId.get(k).metadata ?? {}
    if (typeof m.parentToolUseId === 'string') byCall.set(m.parentToolUseId, k)
    else if (typeof m.parentRecordUuid === 'string') byRecord.set(m.parentRecordUuid, k)
  }
  return { byCall, byRecord }
}

/** The line naming a subagent session where it began, with the command that shows it. */
function agentLine(ids, k, c) {
  const name = field(ids.short(k))
  const kind = ids.byId.get(k).metadata?.agentKind === 'compaction' ? 'compaction agent' : 'subagent'
  return c.magenta(`  ⤷ ${kind} ${name} ${c.dim(`(threadline show ${name})`)}`)
}

/** Claude Code's compaction summary: a user record that continues a compacted conversation. */
function compactSummary(m, c) {
  const body = (m.content ?? []).map((b) => (b.type === 'text' ? b.text : '')).join('\n')
  const lines = body.split('\n').length
  return c.yellow(`✂ compaction summary (${num(lines)} lines, ${num(body.length)} chars) folded: --full shows it`)
}

/**
 * Renders records one at a time, as `show` prints them: `lines(env)` gives a record's lines and
 * keeps what the next record's lines depend on (the heading it may share with this one), so the
 * records `--follow` gets later read as if they had been printed with the rest. `render.learn(ids)`
 * takes a newer view of the store's sessions (a subagent made while following) and gives the
 * lines naming the subagents it added whose tool call or record was printed already.
 */
function transcript(opts, ids_, sid, c) {
  let ids = ids_
  let agents = spawned(ids, sid)
  const width = Math.max(40, (process.stdout.columns || 120) - 20)
  let previous = null
  // what was printed that a subagent learnt of later would be named under
  const calls = new Set()
  const uuids = new Set()
  const named = new Set([...agents.byCall.values(), ...agents.byRecord.values()])
  const render = (env) => {
    const out = []
    const m = env.message
    if (!m) {
      const mark = markLine(env, c)
      if (mark) {
        if (previous) out.push('')
        out.push(mark)
        previous = null
      } else if (opts.full) out.push(eventLine(env, c))
      return out
    }
    // Claude Code writes one response as a record per block: one heading for them all.
    const same = previous && previous.role === m.role && m.id !== undefined && previous.id === m.id
    if (!same) {
      if (previous) out.push('')
      const who = m.role === 'assistant' ? c.blue(c.bold('Assistant')) : c.green(c.bold('User'))
      out.push(`${who} ${c.dim(when(env.timestamp))}`)
    }
    previous = m
    if (env.isCompactSummary && !opts.full) out.push(compactSummary(m, c))
    else {
      for (const b of m.content ?? []) {
        if (b.type === 'text' && b.text.trim() === '' && !opts.full) continue
        out.push(...blockLines(b, c, opts.full, Math.min(width, FOLD)))
        if (b.type !== 'tool_use') continue
        calls.add(b.id)
        const agent = agents.byCall.get(b.id)
        if (agent !== undefined) {
          out.push(agentLine(ids, agent, c))
          named.add(agent)
        }
      }
    }
    uuids.add(env.uuid)
    if (agents.byRecord.has(env.uuid)) {
      out.push(agentLine(ids, agents.byRecord.get(env.uuid), c))
      named.add(agents.byRecord.get(env.uuid))
    }
    return out
  }
  render.learn = (newer) => {
    ids = newer
    agents = spawned(ids, sid)
    const out = []
    const late = [...[...agents.byCall].filter(([call]) => calls.has(call)), ...[...agents.byRecord].filter(([uuid]) => uuids.has(uuid))]
    for (const [, k] of late) {
      if (named.has(k)) continue
      named.add(k)
      previous = null
      out.push(agentLine(ids, k, c))
    }
    return out
  }
  /** Whether a subagent of the session is not named yet (its tool call may be learnt later). */
  render.waiting = () => ids.children(sid).some((k) => !named.has(k))
  return render
}

async function show(id, opts) {
  return withStore(opts, async (store) => {
    const { id: sid, ids } = resolveId(store, id, { full: true })
    const s = store.openSession(sid)
    try {
      const info = s.info
      const records = s.envelopes()
      // The seq after the last record printed: the watch starts there, so nothing committed
      // between this read and the watch's first read is missed or printed twice.
      const fromSeq = records.length === 0 ? 0 : records[records.length - 1].seq + 1
      if (opts.json) {
        if (!opts.follow) {
          printJson({ info, records })
          return EXIT.ok
        }
        // Followed, the records are JSON lines (NDJSON), one record each, as they arrive.
        const line = (env) => print(`${jsonText(env)}\n`)
        records.forEach(line)
        return await follow(s, fromSeq, line)
      }
      const c = colours(process.stdout)
      const parent = ids.parentOf(sid)
      const head = [info.id, parent === null ? null : `subagent of ${ids.short(parent)}`, info.project ?? 'no project', info.model, `${num(info.messageCount)} message${info.messageCount === 1 ? '' : 's'}`, info.status]
      const out = [c.bold(oneLine(info.title ?? `Session ${info.id}`)), c.dim(head.filter(Boolean).map(field).join(' · ')), '']
      const render = transcript(opts, ids, sid, c)
      for (const env of records) out.push(...render(env))
      print(`${out.join('\n')}\n`)
      if (!opts.follow) return EXIT.ok
      const printLines = (lines) => {
        if (lines.length > 0) print(`${lines.join('\n')}\n`)
      }
      // A subagent is made after the call that spawns it (and may learn that call only with the
      // call's result): its line is printed when the store says so.
      const learn = () => printLines(render.learn(idsOf(store)))
      const agents = watchSubagents(store, info, sid, learn)
      try {
        return await follow(s, fromSeq, (env) => {
          printLines(render(env))
          if (render.waiting() && env.message?.role === 'user') learn()
        })
      } finally {
        agents.stop()
      }
    } finally {
      s.close()
    }
  })
}

/**
 * Calls `made()` for each session made as a subagent of `sid` while following (a store watch of
 * the session's project), until `stop()`.
 */
function watchSubagents(store, info, sid, made) {
  const stop = new AbortController()
  const scope = info.project == null ? {} : { project: info.project }
  ;(async () => {
    for await (const change of store.watch({ ...scope, signal: stop.signal })) {
      if (change.type === 'created' && change.session.metadata?.parentSessionId === sid) made()
    }
  })().catch(() => {}) // naming subagents is a courtesy: the transcript goes on without it
  return { stop: () => stop.abort() }
}

/**
 * `--follow`: each record committed from `fromSeq` on, by any process, to `each`, until Ctrl-C
 * (exit 130, as a shell reports a command Ctrl-C stopped; SIGTERM 143) or until standard output
 * fails (a reader that went away). A session deleted meanwhile ends it with NOT_FOUND (exit 1).
 */
async function follow(session, fromSeq, each) {
  const stop = stopOnInterrupt()
  try {
    for await (const env of session.watch({ fromSeq, signal: stop.signal })) each(env)
  } catch (e) {
    if (!isAbort(e)) {
      if (e && e.code === 'NOT_FOUND') e.message = `session '${session.id}' was deleted while it was followed`
      throw e
    }
  } finally {
    stop.release()
  }
  return stop.code()
}

module.exports = { show }
