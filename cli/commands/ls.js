'use strict'
// threadline ls: the store's sessions, most recently updated first.

const { colours, print, printJson, table, field, oneLine, when, EXIT } = require('../output.js')
const { withStore } = require('../store.js')

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
 * Each UUID's shortest start (8 characters at least) that no other session id of the store
 * shares, as git abbreviates hashes: `show`, `export` and `rm` take it. Time-ordered ids (UUIDv7)
 * of sessions made close together share their first characters, so a fixed cut would not do.
 * Other ids (chosen by people, or a tool's own) are shown whole.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function shortIds(store) {
  const ids = store.listSessions({ limit: 1_000_000 }).map((s) => s.id).sort()
  const common = (a, b) => {
    let i = 0
    while (i < a.length && i < b.length && a[i] === b[i]) i++
    return i
  }
  const short = new Map()
  ids.forEach((id, i) => {
    const n = Math.max(8, common(id, ids[i - 1] ?? '') + 1, common(id, ids[i + 1] ?? '') + 1)
    short.set(id, UUID.test(id) ? id.slice(0, n) : id)
  })
  return short
}

async function ls(opts) {
  return withStore(opts, (store) => {
    const filter = { limit: opts.limit }
    for (const k of ['project', 'status', 'since', 'until']) if (opts[k] !== undefined) filter[k] = opts[k]
    const sessions = store.listSessions(filter)
    if (opts.json) {
      printJson(sessions)
      return EXIT.ok
    }
    if (sessions.length === 0) {
      print('No sessions.\n')
      return EXIT.ok
    }
    const c = colours(process.stdout)
    const short = shortIds(store)
    const width = process.stdout.columns || 120
    const rows = sessions.map((s) => [
      c.cyan(field(short.get(s.id) ?? s.id)),
      when(s.updatedAt),
      oneLine(s.project, 28),
      oneLine(s.title ?? firstPrompt(store, s.id), process.stdout.isTTY ? Math.max(20, width - 110) : 60),
      String(s.messageCount),
      s.status === 'interrupted' ? c.red(s.status) : field(s.status),
    ])
    print(`${table(['ID', 'UPDATED', 'PROJECT', 'TITLE OR FIRST PROMPT', 'MSGS', 'STATUS'], rows, c)}\n`)
    return EXIT.ok
  })
}

module.exports = { ls }
