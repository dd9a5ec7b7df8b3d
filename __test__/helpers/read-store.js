'use strict'
// Run as a child process: opens a store, reads one session, writes what it read as JSON to a file.
// argv: storePath sessionId outFile [storeOptionsJson]
const fs = require('node:fs')
const path = require('node:path')
const { Store } = require(path.join(__dirname, '..', '..'))

const [storePath, sessionId, outFile, optionsJson] = process.argv.slice(2)
const store = Store.open(storePath, optionsJson ? JSON.parse(optionsJson) : undefined)
const session = store.openSession(sessionId)
const result = {
  pid: process.pid,
  messages: session.messages,
  allMessages: session.allMessages,
  envelopes: session.envelopes(),
  turns: session.turns,
  tokenTracker: session.tokenTracker,
  contextFill: session.contextFill,
  info: session.info,
}
store.close()
fs.writeFileSync(outFile, JSON.stringify(result))
