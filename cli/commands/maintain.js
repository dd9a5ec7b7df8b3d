'use strict'
// threadline recover ID, threadline close ID, threadline backup FILE: fixing a session and
// copying the store from the command line.

const { print, printJson, field, EXIT } = require('../output.js')
const { withStore, resolveId } = require('../store.js')
const { size } = require('./doctor.js')

/** session.recover() with the default policy (a call whose outcome is unknown is marked). */
async function recover(id, opts) {
  return withStore(opts, async (store) => {
    const s = store.openSession(resolveId(store, id))
    try {
      const report = await s.recover()
      if (opts.json) {
        printJson({ sessionId: s.id, ...report })
        return EXIT.ok
      }
      const out = [report.clean ? `${field(s.id)}: nothing to repair` : `${field(s.id)}: ${report.repairs.length} repairs, ${report.recordsWritten} records written`]
      for (const r of report.repairs) out.push(`  ${field(r.kind)}${r.toolUseId ? ` ${field(r.toolUseId)}` : ''}${r.name ? ` (${field(r.name)})` : ''}: ${field(r.reason)}`)
      print(`${out.join('\n')}\n`)
      return EXIT.ok
    } finally {
      s.close()
    }
  })
}

/** The status `close` gives a session, and why: how its last turn ended. */
function verdict(session) {
  const pending = session.pendingRepairs()
  if (pending.length > 0) {
    return { status: 'interrupted', reason: `${pending.length} repairs pending (threadline recover repairs them)` }
  }
  const last = session.turns.at(-1)
  if (last === undefined) return { status: 'interrupted', reason: 'it holds no turn' }
  if (last.status === 'complete') return { status: 'completed', reason: 'its last turn ended with the answer' }
  if (last.status === 'awaiting_tool_results') return { status: 'interrupted', reason: 'its last turn stopped waiting for tool results' }
  return { status: 'interrupted', reason: "its last turn stopped waiting for the model's response" }
}

/** Marks a session left 'active' as interrupted or completed (--as forces which). */
async function close(id, opts) {
  return withStore(opts, (store) => {
    const s = store.openSession(resolveId(store, id))
    try {
      const before = s.info.status
      let result
      if (before !== 'active') {
        result = { sessionId: s.id, status: before, changed: false, reason: `it is already ${before}` }
      } else {
        const v = opts.as ? { status: opts.as, reason: 'as --as says' } : verdict(s)
        s.setStatus(v.status)
        result = { sessionId: s.id, status: v.status, changed: true, reason: v.reason }
      }
      if (opts.json) printJson(result)
      else print(`${field(result.sessionId)}: ${result.changed ? `marked ${result.status}` : 'unchanged'}: ${field(result.reason)}\n`)
      return EXIT.ok
    } finally {
      s.close()
    }
  })
}

/** A copy of every session in a new SQLite file. */
async function backup(file, opts) {
  return withStore(opts, (store) => {
    const report = store.backup(file)
    if (opts.json) printJson(report)
    else print(`${field(report.path)}: ${report.sessions} sessions, ${report.records} records, ${size(report.bytes)}\n`)
    return EXIT.ok
  })
}

module.exports = { recover, close, backup }
