'use strict'
// One full restore in a fresh process (run by bench/run.js):
//   node --expose-gc bench/restore-child.js <engine> <file> <sessionId> <expectedCount>
// Prints one JSON line: wall time of the restore, RSS before it, peak RSS of the process
// (process.resourceUsage().maxRSS) and their difference, plus a fingerprint of what was read.

const { restore } = require('./engines.js')

const [engine, file, sessionId, expected] = process.argv.slice(2)

// Modules are loaded (engines.js requires both native addons) and the heap settled before timing.
function procStatus() {
  try {
    const st = require('fs').readFileSync('/proc/self/status', 'utf8')
    const kb = (k) => { const m = st.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm')); return m ? Number(m[1]) * 1024 : null }
    return { hwm: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') }
  } catch {
    return { hwm: null, anon: null, file: null }
  }
}
if (global.gc) { global.gc(); global.gc() }
const before = procStatus()
const rssBefore = process.memoryUsage().rss
const t0 = process.hrtime.bigint()
const r = restore(engine, file, sessionId)
const ms = Number(process.hrtime.bigint() - t0) / 1e6
const maxRss = process.resourceUsage().maxRSS * 1024
const rssAfter = process.memoryUsage().rss

// VmHWM: peak RSS of this address space (reset by exec, unlike maxRSS, a cross-check); and what
// RSS is made of (anonymous vs file-backed, e.g. SQLite's mmap of the store) before and after.
const after = procStatus()

const msgs = r.messages
const last = msgs[msgs.length - 1]
const out = {
  engine,
  ms,
  rssBefore,
  rssAfter,
  maxRss,
  extraPeak: maxRss - rssBefore,
  vmHwm: after.hwm,
  rssAnonBefore: before.anon,
  rssAnonAfter: after.anon,
  rssFileBefore: before.file,
  rssFileAfter: after.file,
  heapUsedAfter: process.memoryUsage().heapUsed,
  count: msgs.length,
  lastId: last && (last.id || (last.content && last.content[0] && (last.content[0].tool_use_id || last.content[0].type))),
  lastBytes: last ? JSON.stringify(last).length : 0,
}
r.close()
if (Number(expected) !== msgs.length) out.error = `expected ${expected} messages, got ${msgs.length}`
process.stdout.write(JSON.stringify(out) + '\n')
