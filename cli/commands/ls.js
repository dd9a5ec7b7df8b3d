'use strict'
// threadline ls: the store's sessions, most recently updated first, each with its subagents.

const { colours, print, printJson, table, field, oneLine, when, num, EXIT } = require('../output.js')
const { withStore, idsOf, resolveProject } = require('../store.js')

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
  return withStore(opts, (store) => {
    const ids = idsOf(store)
    const filter = {}
    if (opts.project !== undefined) filter.project = resolveProject(store, opts.project)
    for (const k of ['status', 'since', 'until']) if (opts[k] !== undefined) filter[k] = opts[k]
    if (opts.json) {
      const sessions = store.listSessions({ ...filter, limit: opts.limit })
      printJson(sessions.map((s) => ({ ...s, parentId: ids.parentOf(s.id) })))
      return EXIT.ok
    }
    const shown = rows(store.listSessions({ ...filter, limit: opts.flat ? opts.limit : 1_000_000 }), ids, opts)
    if (shown.length === 0) {
      print(ids.byId.size === 0 ? 'No sessions. (threadline import claude-code ~/.claude/projects brings in Claude Code\'s)\n' : 'No sessions match.\n')
      return EXIT.ok
    }
    const c = colours(process.stdout)
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
    return EXIT.ok
  })
}

module.exports = { ls }
