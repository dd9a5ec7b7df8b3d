'use strict'
// threadline doctor: what needs attention (repairs recover() would make, damage: exit 3), what
// needs none (sessions that ended without close(), with nothing to repair: reported, exit 0), and
// the store's size and free pages (--vacuum gives them back).

const path = require('node:path')
const { colours, print, printJson, jsonText, field, EXIT } = require('../output.js')
const { withStore } = require('../store.js')

// The guide ships in the package (docs/), so the hint is a path that opens where it is installed.
const RECOVERY_DOC = path.join(__dirname, '..', '..', 'docs', 'recovery.md')

/** Bytes for people: 1.2 MB. */
function size(n) {
  const units = ['bytes', 'KB', 'MB', 'GB', 'TB']
  let i = 0
  let v = n
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return i === 0 ? `${n} bytes` : `${v.toFixed(1)} ${units[i]}`
}

async function doctor(opts) {
  return withStore(opts, (store) => {
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
    const needsRepair = new Set(repairs.map((r) => r.sessionId))
    // Left 'active' by a process that is gone: needs repair only if recover() has work to do.
    const interrupted = store.interruptedSessions().map((s) => ({ id: s.id, project: s.project, updatedAt: s.updatedAt, needsRepair: needsRepair.has(s.id) }))
    const endedWithoutClose = interrupted.filter((s) => !s.needsRepair)
    const integrity = store.verify({ quick: Boolean(opts.quick) })
    const stats = store.stats()
    const vacuum = opts.vacuum ? store.vacuum() : undefined
    const healthy = repairs.length === 0 && integrity.ok
    if (opts.json) {
      printJson({ healthy, interrupted, endedWithoutClose: endedWithoutClose.map((s) => s.id), pendingRepairs: repairs, integrity, stats, ...(vacuum ? { vacuum } : {}) })
      return healthy ? EXIT.ok : EXIT.problems
    }
    const c = colours(process.stdout)
    const ok = (b) => (b ? c.green('ok') : c.red('attention'))
    const where = (s) => `${s.project === undefined ? 'no project' : field(s.project)}, last written ${field(s.updatedAt)}`
    const out = [
      `sessions with pending repairs: ${repairs.length} ${ok(repairs.length === 0)}`,
      ...repairs.map((r) => `  ${field(r.sessionId)}: ${r.repairs.map((x) => field(`${x.kind}${x.toolUseId ? ` ${x.toolUseId}` : ''}`)).join(', ')}`),
      `sessions ended without close(), nothing to repair: ${endedWithoutClose.length} ${c.green('ok')}`,
      ...endedWithoutClose.map((s) => `  ${field(s.id)} (${where(s)})`),
      `integrity: ${integrity.sessions} sessions, ${integrity.records} records, ${integrity.blobs} blobs checked, ${integrity.damaged.length + integrity.moreDamaged} damaged ${ok(integrity.ok)}`,
      ...integrity.damaged.slice(0, 20).map((d) => `  ${jsonText(d)}`),
      `store: ${stats.engine}, ${size(stats.bytes)}` +
        (stats.freePages === undefined ? '' : `, ${stats.freePages} free pages (${size(stats.freeBytes)})`),
    ]
    if (vacuum) out.push(`vacuum: ${size(vacuum.bytesBefore)} -> ${size(vacuum.bytesAfter)}`)
    if (repairs.length > 0) out.push(c.dim(`Repair a session with: threadline recover ${field(repairs[0].sessionId)} (${RECOVERY_DOC}).`))
    if (!integrity.ok) out.push(c.dim(`Damaged records are listed above; reads refuse them (${RECOVERY_DOC}, "Damage and verify").`))
    if (endedWithoutClose.length > 0) out.push(c.dim(`Mark one as ended with: threadline close ${field(endedWithoutClose[0].id)}`))
    if (!vacuum && stats.freeBytes > 0) out.push(c.dim('Give the free pages back with: threadline doctor --vacuum'))
    print(`${out.join('\n')}\n`)
    return healthy ? EXIT.ok : EXIT.problems
  })
}

module.exports = { doctor, size }
