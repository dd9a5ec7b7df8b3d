'use strict'
// Opening the store a command works on, and finding a session by its id or an unambiguous
// prefix of it.

const { Store, defaultStorePath } = require('..')
const { UsageError } = require('./output.js')

/** @param {{ store?: string }} opts */
function openStore(opts, options) {
  return Store.open(opts.store ?? defaultStorePath(), options)
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
  const e = new Error(`no session '${id}'`)
  e.code = 'NOT_FOUND'
  throw e
}

/** Runs `fn(store)` and closes the store after, whatever happens. */
async function withStore(opts, fn, options) {
  const store = openStore(opts, options)
  try {
    return await fn(store)
  } finally {
    store.close()
  }
}

module.exports = { openStore, resolveId, withStore }
