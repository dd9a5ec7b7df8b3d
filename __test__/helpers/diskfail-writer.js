'use strict'
// Run as a child process by diskfail.test.js: appends the records of a JSON file (an array of
// append inputs) to a new session of a store, writes each acknowledged envelope to stdout as one
// JSON line, then SIGKILLs itself, so the store is left as a crashed writer leaves it (its -wal
// and -shm files still there, nothing checkpointed).
// argv: storePath sessionId recordsJsonFile
const fs = require('node:fs')
const path = require('node:path')
const { Store } = require(path.join(__dirname, '..', '..'))

const [storePath, sessionId, recordsFile] = process.argv.slice(2)
const records = JSON.parse(fs.readFileSync(recordsFile, 'utf8'))

const store = Store.open(storePath)
const session = store.createSession({ id: sessionId, contextWindow: 200000 })
for (const r of records) {
  const env = session.append(r)
  fs.writeSync(1, JSON.stringify(env) + '\n')
}
process.kill(process.pid, 'SIGKILL')
