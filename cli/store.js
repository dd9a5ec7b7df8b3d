'use strict'
// Opening the store a command works on, and finding a session by its id or an unambiguous
// start of it (cli/ids.js).

const fs = require('node:fs')
const { Store, defaultStorePath } = require('..')
const { Ids } = require('./ids.js')
const { UsageError } = require('./output.js')

function notFound(message) {
  const e = new Error(message)
  e.code = 'NOT_FOUND'
  return e
}

/** A file path (not ':memory:', not a postgres:// URL). */
function isFile(where) {
  return where !== ':memory:' && !/^postgres(ql)?:\/\//i.test(where)
}

/**
 * The store `--store` names, else the default one. Store.open creates a missing file; only
 * `import` should: `ls --store typo.db` would otherwise leave an empty store behind and say
 * "No sessions.", hiding the typo. The default store is created as the library creates it (a
 * new user's `threadline ls` says "No sessions.").
 */
function openStore(opts, options, { create = false } = {}) {
  const where = opts.store
  if (where === undefined) {
    // Store.open() with no path creates the default store's directories (defaultStorePath());
    // a readonly open could not create the file, so a first run opens it writable: it is empty.
    const exists = fs.existsSync(defaultStorePath())
    return Store.open(undefined, exists ? options : { ...options, readonly: false })
  }
  if (!create && isFile(where) && !fs.existsSync(where)) {
    throw notFound(`no store at '${where}' (threadline import creates one)`)
  }
  return Store.open(where, options)
}

/** What the ids of the store's sessions name (cli/ids.js). */
function idsOf(store) {
  return new Ids(store.listSessions({ limit: 1_000_000 }))
}

/**
 * The session `id` names: itself, a start of one (a parent before its subagents), or a subagent
 * through its parent or by its own part (cli/ids.js). `{ id, exact, ids }` with `full`.
 */
function resolveId(store, id, { full = false } = {}) {
  const ids = idsOf(store)
  const r = ids.resolve(id)
  return full ? { ...r, ids } : r.id
}

/** A path's last component: `spotter` for `/home/me/src/spotter/`. */
function lastPart(p) {
  return p.replace(/[\\/]+$/, '').split(/[\\/]/).pop()
}

/**
 * The project `name` names (`--project`): a project's whole path, else its last component
 * (`spotter` for `/home/me/src/spotter`), else a unique start of either. Several: a usage error
 * naming them; none: NOT_FOUND naming the projects there are, rather than an empty answer that
 * reads as "no sessions".
 */
function resolveProject(store, name) {
  const projects = [...new Set(store.listSessions({ limit: 1_000_000 }).map((s) => s.project).filter((p) => typeof p === 'string'))].sort()
  if (projects.includes(name)) return name
  const list = (ps) => `${ps.slice(0, 10).map((p) => `"${p}"`).join(', ')}${ps.length > 10 ? `, ... (${ps.length} in all)` : ''}`
  const tiers = [projects.filter((p) => lastPart(p) === name), projects.filter((p) => p.startsWith(name) || lastPart(p).startsWith(name))]
  for (const found of tiers) {
    if (found.length === 1) return found[0]
    if (found.length > 1) throw new UsageError(`--project "${name}" matches ${found.length} projects: ${list(found)}; give more of the path`)
  }
  throw notFound(projects.length === 0 ? `no project matches "${name}": no session in the store has a project` : `no project matches "${name}"; projects: ${list(projects)}`)
}

/** Runs `fn(store)` and closes the store after, whatever happens. */
async function withStore(opts, fn, options, how) {
  const store = openStore(opts, options, how)
  try {
    return await fn(store)
  } finally {
    store.close()
  }
}

module.exports = { openStore, resolveId, idsOf, resolveProject, withStore }
