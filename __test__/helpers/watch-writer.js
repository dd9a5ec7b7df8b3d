'use strict'
// A writer for watch.test.js: `node watch-writer.js LOCATION ID,ID,... COUNT` appends COUNT
// records, round robin over the sessions, each with a uuid of its own, and prints
// `ack <id> <seq> <uuid>` once each append is acknowledged. An append that fails because the
// server went away (a PostgreSQL restart) is tried again with the same uuid: a retry of a record
// that did commit is a no-op, so nothing is stored twice.

const { randomUUID } = require('node:crypto')
const { Store } = require('../..')

const [location, ids, count] = process.argv.slice(2)
const store = Store.open(location)
const sessions = ids.split(',').map((id) => store.openSession(id))
const pause = new Int32Array(new SharedArrayBuffer(4))

for (let i = 0; i < Number(count); i++) {
  const s = sessions[i % sessions.length]
  const uuid = randomUUID()
  for (let tries = 0; ; tries++) {
    try {
      const env = s.append({ role: 'user', content: `record ${i}` }, { uuid })
      process.stdout.write(`ack ${s.id} ${env.seq} ${uuid}\n`)
      break
    } catch (e) {
      if (!['STORE_BUSY', 'STORE_IO'].includes(e.code) || tries >= 600) throw e
      Atomics.wait(pause, 0, 0, 50)
    }
  }
}
store.close()
