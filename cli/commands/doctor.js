'use strict'
// threadline doctor: what needs attention: sessions left active by a process that is gone,
// repairs recover() would make, and the store's integrity check.

const path = require('node:path')
const { colours, print, printJson, jsonText, field, EXIT } = require('../output.js')
const { withStore } = require('../store.js')

// The guide ships in the package (docs/), so the hint is a path that opens where it is installed.
const RECOVERY_DOC = path.join(__dirname, '..', '..', 'docs', 'recovery.md')

async function doctor(opts) {
  return withStore(opts, (store) => {
    const interrupted = store.interruptedSessions().map((s) => ({ id: s.id, project: s.project, updatedAt: s.updatedAt }))
    const repairs = []
    for (const info of store.listSessions({ limit: 1_000_000 })) {
      const s = store.openSession(info.id)
      try {
        const pending = s.pendingRepairs()
        if (pending.length > 0) repairs.push({ sessionId: info.id, repairs: pending })
      } finally {
        s.close()
      }
    }
    const integrity = store.verify({ quick: Boolean(opts.quick) })
    const healthy = interrupted.length === 0 && repairs.length === 0 && integrity.ok
    if (opts.json) {
      printJson({ healthy, interrupted, pendingRepairs: repairs, integrity })
      return healthy ? EXIT.ok : EXIT.problems
    }
    const c = colours(process.stdout)
    const ok = (b) => (b ? c.green('ok') : c.red('attention'))
    const out = [
      `interrupted sessions: ${interrupted.length} ${ok(interrupted.length === 0)}`,
      ...interrupted.map((s) => `  ${field(s.id)} (${s.project === undefined ? 'no project' : field(s.project)}, last written ${field(s.updatedAt)})`),
      `sessions with pending repairs: ${repairs.length} ${ok(repairs.length === 0)}`,
      ...repairs.map((r) => `  ${field(r.sessionId)}: ${r.repairs.map((x) => field(`${x.kind}${x.toolUseId ? ` ${x.toolUseId}` : ''}`)).join(', ')}`),
      `integrity: ${integrity.sessions} sessions, ${integrity.records} records, ${integrity.blobs} blobs checked, ${integrity.damaged.length + integrity.moreDamaged} damaged ${ok(integrity.ok)}`,
      ...integrity.damaged.slice(0, 20).map((d) => `  ${jsonText(d)}`),
    ]
    if (!healthy) out.push(c.dim(`Open a session and call recover() to repair it (${RECOVERY_DOC}).`))
    print(`${out.join('\n')}\n`)
    return healthy ? EXIT.ok : EXIT.problems
  })
}

module.exports = { doctor }
