'use strict'
// threadline search QUERY: hits across every session, best first.

const { colours, print, printJson, field, oneLine, when, EXIT } = require('../output.js')
const { withStore, idsOf, resolveId, resolveProject } = require('../store.js')

async function search(query, opts) {
  return withStore(opts, (store) => {
    const o = { limit: opts.limit }
    if (opts.project) o.project = resolveProject(store, opts.project)
    if (opts.session) o.sessionId = resolveId(store, opts.session)
    if (opts.since) o.since = opts.since
    if (opts.until) o.until = opts.until
    if (opts.role) o.roles = opts.role
    if (opts.field) o.fields = opts.field
    if (opts.cursor) o.cursor = opts.cursor
    const page = store.search(query, o)
    if (opts.json) {
      printJson(page)
      return EXIT.ok
    }
    const c = colours(process.stdout)
    const ids = idsOf(store)
    if (page.hits.length === 0) {
      // what a first search most often misses: words match whole, thinking and tool output are opt-in
      print(`No matches.${opts.cursor ? '' : c.dim(' (words match whole words: try prefix*; thinking and tool output are searched with --field thinking, --field tool_output)')}\n`)
    }
    for (const h of page.hits) {
      // The library marks matches between **: colour on a terminal, the marks left as they are in a pipe.
      const text = oneLine(h.snippet, 400)
      const snippet = c.isColorSupported ? text.replace(/\*\*(.+?)\*\*/g, (_, w) => c.bold(c.yellow(w))) : text
      // the session as ls and show name it (a subagent through its parent)
      print(`${c.cyan(field(ids.short(h.sessionId, { viaParent: true })))} ${c.dim(`#${h.seq} ${when(h.timestamp)} ${field(h.role)} ${field(h.field)}`)}\n  ${snippet}\n`)
    }
    // the same query and options with the cursor give the next page (the cursor is signed over them)
    if (page.nextCursor) print(c.dim(`(more: the same command with --cursor ${page.nextCursor})\n`))
    return EXIT.ok
  })
}

module.exports = { search }
