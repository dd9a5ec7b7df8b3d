'use strict'
// threadline rm ID: deletes a session (its records, journal, and the blobs only it used), with
// its subagent sessions. Only a whole id deletes at once: a start of one (which `show` takes)
// needs --yes, so a few mistyped characters cannot delete another session.

const { colours, print, printJson, field, UsageError, EXIT } = require('../output.js')
const { withStore, resolveId } = require('../store.js')

async function rm(id, opts) {
  return withStore(opts, (store) => {
    const { id: sid, exact, ids } = resolveId(store, id, { full: true })
    const subagents = ids.descendants(sid)
    const what = `${sid}${subagents.length ? ` and its ${subagents.length} subagent session${subagents.length === 1 ? '' : 's'}` : ''}`
    if (!exact && !opts.yes) {
      throw new UsageError(`'${id}' is not a whole id: it names ${what}; to delete it, give the whole id (threadline rm ${sid}) or add --yes`)
    }
    // the subagents first: a failure half way leaves the parent, which rm deletes again
    for (const k of subagents) store.deleteSession(k)
    store.deleteSession(sid)
    if (opts.json) {
      printJson({ deleted: sid, subagents })
      return EXIT.ok
    }
    const c = colours(process.stdout)
    const out = [`deleted ${field(what)}`, ...subagents.map((k) => `  ${field(k)}`)]
    out.push(c.dim('A later `threadline import` of the same files leaves it deleted (`import --include-deleted` brings it back).'))
    print(`${out.join('\n')}\n`)
    return EXIT.ok
  })
}

module.exports = { rm }
