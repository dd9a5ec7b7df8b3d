'use strict'
// Run by fleet.test.js: one of several writer processes on one PostgreSQL store. Until killed it
// picks a session at random, appends 1-4 records to it, and closes it. After each append returns
// it writes one line to stdout:
//   A <sessionId> <uuid>   acknowledged
//   L <sessionId>          SESSION_LOCKED: another live process holds it
//   R <sessionId> <code>   STORE_IO or STORE_BUSY (a restart, a lost connection): the same record
//                          is tried again, with the same uuid
// argv: storeUrl tag sessionCount
const path = require('node:path')
const crypto = require('node:crypto')
const { Store } = require(path.join(__dirname, '..', '..'))
const { writeLine: out } = require('./seeded')

const [url, tag, count] = process.argv.slice(2)
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
const transient = (e) => e.code === 'STORE_IO' || e.code === 'STORE_BUSY'

// Opening waits out a restart too.
function retrying(what, fn) {
  for (let i = 0; ; i++) {
    try {
      return fn()
    } catch (e) {
      if (!transient(e) || i > 200) throw e
      out(`R ${what} ${e.code}`)
      sleep(50)
    }
  }
}

const store = retrying('-', () => Store.open(url, { busyTimeoutMs: 2000 }))
out('ready')
let n = 0
for (;;) {
  const id = `s${Math.floor(Math.random() * Number(count))}`
  const session = retrying(id, () => store.openSession(id))
  const records = 1 + Math.floor(Math.random() * 4)
  for (let i = 0; i < records; i++) {
    const uuid = crypto.randomUUID()
    const message = { role: n % 2 ? 'assistant' : 'user', content: [{ type: 'text', text: `${tag}/${n}` }] }
    try {
      const env = retrying(id, () => session.append({ type: message.role, uuid, message, metadata: { writer: tag, n } }))
      if (env.uuid !== uuid) throw new Error(`stored under ${env.uuid}, not ${uuid}`)
      out(`A ${id} ${uuid}`)
      n++
    } catch (e) {
      if (e.code !== 'SESSION_LOCKED') throw e
      out(`L ${id}`)
      break
    }
  }
  session.close()
}
