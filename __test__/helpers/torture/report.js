'use strict'
// The fault test's summary line and its list of violations (by rule, with the op index).

const RULES = ['R1', 'R2', 'R3', 'R4', 'R5', 'R6', 'R7', 'ERR']

function byRule(violations) {
  const out = Object.fromEntries(RULES.map((r) => [r, 0]))
  for (const v of violations) out[v.rule] = (out[v.rule] || 0) + 1
  return out
}

function summaryLine(s) {
  const f = Object.entries(s.stats.faults).filter(([, n]) => n).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'
  const rules = Object.entries(byRule(s.violations)).map(([r, n]) => `${r} ${n}`).join(' ')
  const errors = Object.entries(s.stats.errors).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'
  return [
    `torture ${s.engine} seed ${s.seed}: ${s.ops} ops (${s.stats.workers} worker processes, ${s.stats.procReads} reader processes)`,
    `faults: ${f}${s.diskFull && s.diskFull !== 'simulated' && s.diskFull !== 'n/a' ? ` (disk full ${s.diskFull})` : ''}`,
    `${s.acked} records acknowledged`,
    `${s.stats.ops.delete || 0} deletes, ${s.recreated} re-created, ${s.stats.ops.fork || 0} forks, ${s.stats.ops.rewind || 0} rewinds, ${s.stats.readonly} readonly reads, paths ${[...s.stats.paths].join(' ')}`,
    `violations: ${rules}`,
    `STORE_BUSY: ${s.stats.busyWrites} writes and ${s.stats.busyOther} other ops failed, ${s.stats.busyRetried} retried, ${s.stopBusy} during stops`,
    `worst append latency during a stop ${s.worstStopLatency.toFixed(0)} ms`,
    `stops inside a commit (SQLite's write lock held) ${s.stopsInCommit ?? 0}`,
    `stops in which others' appends were slow while no process held the write lock ${s.stopsUnlocked ?? 0}`,
    `missing acknowledged records by their writer's path: ${Object.entries(s.stats.missingVia).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
    `${s.stats.locked} SESSION_LOCKED`,
    `errors: ${errors}`,
    `${(s.ms / 1000).toFixed(1)} s`,
  ].join('; ')
}

// A violation's kind: its message without ids, numbers and times (the same bug met again).
function kind(msg) {
  return msg.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, 'ID').replace(/\d+(\.\d+)?/g, '#').replace(/\(via [a-z-]+\)/g, '')
}

// For each rule, the first violation of each kind (up to `per` kinds) and how often that kind
// was met, one per line.
function violationLines(s, per = 5) {
  const lines = []
  for (const rule of RULES) {
    const kinds = new Map()
    for (const v of s.violations.filter((x) => x.rule === rule)) {
      const k = kind(v.msg)
      if (kinds.has(k)) kinds.get(k).n++
      else kinds.set(k, { v, n: 1 })
    }
    for (const { v, n } of [...kinds.values()].slice(0, per)) lines.push(`  ${rule} seed ${s.seed} op ${v.i}: ${v.msg}${n > 1 ? ` [${n - 1} more like it]` : ''}`)
    if (kinds.size > per) lines.push(`  ${rule}: ... ${kinds.size - per} more kinds`)
  }
  return lines
}

module.exports = { summaryLine, violationLines, byRule }
