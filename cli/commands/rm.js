'use strict'
// threadline rm ID: deletes a session (its records, journal, and the blobs only it used).

const { print, printJson, field, EXIT } = require('../output.js')
const { withStore, resolveId } = require('../store.js')

async function rm(id, opts) {
  return withStore(opts, (store) => {
    const sid = resolveId(store, id)
    store.deleteSession(sid)
    if (opts.json) printJson({ deleted: sid })
    else print(`deleted ${field(sid)}\n`)
    return EXIT.ok
  })
}

module.exports = { rm }
