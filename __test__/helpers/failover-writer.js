'use strict'
// Run by failover.test.js: a writer process appending to a session of its own on a formation's
// store until the file `stop` names exists. After each append returns it writes one line:
//   A <uuid> <ms>      acknowledged (ms: Date.now() when it returned)
//   R <code> <ms>      STORE_IO or STORE_BUSY (the primary lost, no host can write yet): the same
//                      record is tried again, with the same uuid
// argv: storeUrl sessionId stopFile
const path = require('node:path')
const fs = require('node:fs')
const crypto = require('node:crypto')
const { Store } = require(path.join(__dirname, '..', '..'))
const { writeLine: out } = require('./seeded')

const [url, id, stop] = process.argv.slice(2)
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
const transient = (e) => e.code === 'STORE_IO' || e.code === 'STORE_BUSY'

function retrying(fn) {
  const end = Date.now() + 120_000
  for (;;) {
    try {
      return fn()
    } catch (e) {
      if (!transient(e) || Date.now() > end) throw e
      out(`R ${e.code} ${Date.now()}`)
      sleep(50)
    }
  }
}

const store = retrying(() => Store.open(url, { busyTimeoutMs: 5000 }))
const session = retrying(() => store.openSession(id))
let n = session.info.messageCount
while (!fs.existsSync(stop)) {
  const uuid = crypto.randomUUID()
  const role = n % 2 ? 'assistant' : 'user'
  const env = retrying(() => session.append({ type: role, uuid, message: { role, content: [{ type: 'text', text: `${id}/${n}` }] } }))
  if (env.uuid !== uuid) throw new Error(`stored under ${env.uuid}, not ${uuid}`)
  out(`A ${uuid} ${Date.now()}`)
  n++
}
session.close()
store.close()
