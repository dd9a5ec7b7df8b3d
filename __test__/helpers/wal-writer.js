'use strict'
// Run as a child process by wal.test.js. Appends messages of about `bytes` bytes to one session
// (made if missing), `count` of them (0: until killed), and writes one line to stdout after each
// append returns: `A <uuid>`. When done: `L {"n","p50","p99","max"}` (append latency, ms), then
// it closes the store and exits.
// argv: storePath sessionId durability count bytes
const fs = require('node:fs')
const path = require('node:path')
const { Store } = require(path.join(__dirname, '..', '..'))

const { writeLine: out } = require('./seeded')
const [storePath, sessionId, durability, count, bytes] = process.argv.slice(2)


// Text of about n bytes, different for every message (nothing for the store to share).
function filler(n, seed) {
  let x = seed >>> 0
  let s = ''
  while (s.length < n) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    s += x.toString(36) + ' '
  }
  return s
}

const store = Store.open(storePath, { durability })
let session
try {
  session = store.openSession(sessionId)
} catch (e) {
  if (e.code !== 'NOT_FOUND') throw e
  session = store.createSession({ id: sessionId })
}
out('ready')

const n = Number(count)
const size = Number(bytes)
const ms = []
for (let i = 0; n === 0 || i < n; i++) {
  const text = `${sessionId} ${process.pid} ${i} ${filler(size * (0.75 + Math.random() / 2), process.pid * 7919 + i)}`
  const t0 = process.hrtime.bigint()
  const env = session.append({ role: i % 2 ? 'assistant' : 'user', content: [{ type: 'text', text }] })
  ms.push(Number(process.hrtime.bigint() - t0) / 1e6)
  out(`A ${env.uuid}`)
}
ms.sort((a, b) => a - b)
const at = (p) => ms[Math.min(ms.length - 1, Math.floor(ms.length * p))]
out(`L ${JSON.stringify({ n: ms.length, p50: at(0.5), p99: at(0.99), max: ms[ms.length - 1] })}`)
store.close()
