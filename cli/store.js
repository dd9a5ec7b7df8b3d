'use strict'
// Opening the store a command works on, and finding a session by its id or an unambiguous
// prefix of it.

const fs = require('node:fs')
const { Store, defaultStorePath } = require('..')
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

/** The session id `id` names: itself, or the one session whose id starts with it. */
function resolveId(store, id) {
  try {
    store.openSession(id).close()
    return id
  } catch (e) {
    if (e.code !== 'NOT_FOUND') throw e
  }
  const matches = store.listSessions({ limit: 1_000_000 }).filter((s) => s.id.startsWith(id))
  if (matches.length === 1) return matches[0].id
  if (matches.length > 1) {
    throw new UsageError(`'${id}' is the start of ${matches.length} session ids (${matches.slice(0, 3).map((s) => s.id).join(', ')}, ...): give more of it`)
  }
  throw notFound(`no session '${id}'`)
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

module.exports = { openStore, resolveId, withStore }
