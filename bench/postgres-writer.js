'use strict'
// A writer process of bench/postgres.js: appends the workload's messages to one session of the
// store at argv[2] for argv[4] seconds, then prints { appends, seconds }.
// argv: storePathOrUrl sessionId seconds
const { Store } = require('..')
const { generate } = require('./workload.js')

const [location, sessionId, seconds] = process.argv.slice(2)
const messages = generate(500)
const store = Store.open(location, { busyTimeoutMs: 30000 })
const session = store.openSession(sessionId)
const t0 = process.hrtime.bigint()
const end = t0 + BigInt(Math.round(Number(seconds) * 1e9))
let appends = 0
while (process.hrtime.bigint() < end) {
  session.append(messages[appends % messages.length])
  appends++
}
const elapsed = Number(process.hrtime.bigint() - t0) / 1e9
store.close()
process.stdout.write(JSON.stringify({ appends, seconds: elapsed }) + '\n')
