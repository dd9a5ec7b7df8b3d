'use strict'
// threadline ls: the store's sessions, most recently updated first, each with its subagents.

const { colours, print, printJson, jsonText, table, field, oneLine, when, num, UsageError, EXIT } = require('../output.js')
const { withStore, idsOf, resolveProject } = require('../store.js')
const { stopOnInterrupt, isAbort } = require('../follow.js')

/** The first thing a person typed in the session, for sessions without a title. */
function firstPrompt(store, id) {
  const s = store.openSession(id)
  try {
    for (const env of s.envelopes({ limit: 50 })) {
      const m = env.message
      if (!m || m.role !== 'user' || env.isMeta) continue
      const text = (m.content ?? []).find((b) => b.type === 'text' && b.text.trim() !== '')
      if (text) return text.text
    }
    return ''
  } finally {
    s.close()
  }
}

/**
 * The rows to print: with `flat`, each session as listed; else each top-level session followed
 * by its subagents (those the filters keep), indented, and a subagent whose parent the filters
 * left out at the top level. `limit` counts the top-level rows.
 */
function rows(sessions, ids, { flat, limit }) {
  if (flat) return sessions.slice(0, limit).map((s) => ({ s, depth: 0 }))
  const kept = new Map(sessions.map((s) => [s.id, s]))
  const under = new Map()
  const heads = []
  for (const s of sessions) {
    const p = ids.parentOf(s.id)
    if (p !== null && kept.has(p)) {
      if (!under.has(p)) under.set(p, [])
      under.get(p).push(s)
    } else heads.push(s)
  }
  const out = []
  const add = (s, depth) => {
    out.push({ s, depth })
    for (const k of under.get(s.id) ?? []) add(k, depth + 1)
  }
  for (const s of heads.slice(0, limit)) add(s, 0)
  return out
}

async function ls(opts) {
  if (opts.follow) {
    // A followed list shows every change of the sessions --project keeps: a filter on what a
    // session is now (its status) or on a past time would drop changes without saying so.
    for (const k of ['status', 'until']) if (opts[k] !== undefined) throw new UsageError(`--${k} cannot be used with --follow (it shows every change; --project narrows it)`)
  }
  return withStore(opts, async (store) => {
    const filter = {}
    if (opts.project !== undefined) filter.project = resolveProject(store, opts.project)
    for (const k of ['status', 'since', 'until']) if (opts[k] !== undefined) filter[k] = opts[k]
    const changes = opts.follow ? startWatch(store, filter.project) : null
    try {
      return await list(store, opts, filter, changes)
    } finally {
      changes?.cancel()
    }
  })
}

async function list(store, opts, filter, changes) {
  // The listing is read after the watch's first look: the watch gives what is committed after
  // it, so a change made meanwhile is not missed (it may show in the table and again as a line).
  if (changes) await changes.ready
  const ids = idsOf(store)
  if (opts.json) {
    const sessions = store.listSessions({ ...filter, limit: opts.limit })
    const listed = sessions.map((s) => ({ ...s, parentId: ids.parentOf(s.id) }))
    if (!changes) {
      printJson(listed)
      return EXIT.ok
    }
    // Followed: one JSON document per line, the listing first, then each change as store.watch gives it.
    print(`${jsonText(listed)}\n`)
    return await changes.follow((change) => print(`${jsonText(change)}\n`))
  }
  const c = colours(process.stdout)
  const shown = rows(store.listSessions({ ...filter, limit: opts.flat ? opts.limit : 1_000_000 }), ids, opts)
  if (shown.length === 0) {
    print(ids.byId.size === 0 ? 'No sessions. (threadline import claude-code ~/.claude/projects brings in Claude Code\'s)\n' : 'No sessions match.\n')
  } else {
    const width = process.stdout.columns || 120
    const table_ = shown.map(({ s, depth }) => [
      // a subagent at the top (flat, or its parent filtered out) is named through its parent
      `${'  '.repeat(depth)}${c.cyan(field(ids.short(s.id, { viaParent: depth === 0 })))}`,
      when(s.updatedAt),
      oneLine(s.project, 28),
      oneLine(s.title ?? firstPrompt(store, s.id), process.stdout.isTTY ? Math.max(20, width - 110) : 60),
      num(s.messageCount),
      s.status === 'interrupted' ? c.red(s.status) : field(s.status),
    ])
    print(`${table(['ID', 'UPDATED', 'PROJECT', 'TITLE OR FIRST PROMPT', 'MSGS', 'STATUS'], table_, c)}\n`)
  }
  if (!changes) return EXIT.ok
  print(`${c.dim('following changes (Ctrl-C stops)')}\n`)
  return await changes.follow(changeLines(store, ids, c))
}

/** A change as a line: the time, the session (as the table names it), what happened. */
function changeLines(store, ids_, c) {
  let ids = ids_
  // Records come a page at a time: those of one session read together are one line ("+3 messages").
  const added = new Map()
  let flushing = false
  const name = (id) => c.cyan(field(ids.short(id)))
  const line = (id, what) => print(`${c.dim(clock())}  ${name(id)}  ${what}\n`)
  const flush = () => {
    flushing = false
    for (const [id, n] of added) {
      const parts = []
      if (n.messages) parts.push(`+${num(n.messages)} message${n.messages === 1 ? '' : 's'}`)
      if (n.events) parts.push(`+${num(n.events)} event${n.events === 1 ? '' : 's'}`)
      line(id, parts.join(', '))
    }
    added.clear()
  }
  return (change) => {
    if (change.type === 'record') {
      const n = added.get(change.sessionId) ?? { messages: 0, events: 0 }
      if (change.record.message) n.messages++
      else n.events++
      added.set(change.sessionId, n)
      // after the records read with this one are counted (the watch's next read waits on I/O)
      if (!flushing) setImmediate(flush)
      flushing = true
      return
    }
    flush()
    if (change.type === 'created') {
      ids = idsOf(store)
      const s = change.session
      line(change.sessionId, `${c.green('created')}  ${oneLine(s.project ?? 'no project', 28)}  ${oneLine(s.title ?? '', 60)}`.trimEnd())
    } else if (change.type === 'status') {
      const st = change.session.status
      line(change.sessionId, `status ${st === 'interrupted' || st === 'failed' ? c.red(st) : field(st)}`)
    } else if (change.type === 'deleted') line(change.sessionId, c.red('deleted'))
  }
}

/** The local time of day, `HH:MM:SS`. */
function clock() {
  const d = new Date()
  const p = (x) => String(x).padStart(2, '0')
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`
}

/**
 * The store's watch of `project`'s sessions (every session's without one), started now: `ready`
 * settles after its first look; `follow(each)` passes each change to `each` until Ctrl-C (130; SIGTERM 143) or
 * until standard output fails; `cancel()` stops it (once the command ends, however it ends).
 */
function startWatch(store, project) {
  const stop = stopOnInterrupt()
  const it = store.watch({ ...(project !== undefined ? { project } : {}), signal: stop.signal })
  return {
    // stopped before the first look (Ctrl-C): follow() then ends with the stop's code at once
    ready: it.ready.catch((e) => {
      if (!isAbort(e)) throw e
    }),
    async follow(each) {
      try {
        for (let r = await it.next(); !r.done; r = await it.next()) each(r.value)
      } catch (e) {
        if (!isAbort(e)) throw e
      }
      return stop.code()
    },
    cancel() {
      stop.release()
    },
  }
}

module.exports = { ls }
