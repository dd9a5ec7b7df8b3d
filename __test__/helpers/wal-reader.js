'use strict'
// Run as a child process by wal.test.js: a long-lived reader of one session, in three ways at
// once: a session handle open and idle, a read-ahead stream of its messages started and left
// unfinished (its first page read, the next read ahead), and a loop that reads all its messages
// again and again. Prints `ready` once all three are under way. On `finish` (a line on stdin) it
// reads the rest of the stream and prints `S <messages in the stream> <reads by the loop>`.
// argv: storePath sessionId
const fs = require('node:fs')
const path = require('node:path')
const { Store } = require(path.join(__dirname, '..', '..'))

const [storePath, sessionId] = process.argv.slice(2)

const store = Store.open(storePath)
const idle = store.openSession(sessionId)
const looping = store.openSession(sessionId)
const kNative = Object.getOwnPropertySymbols(idle).find((s) => s.description === 'native')
const pages = idle[kNative].readMessages(true)
let streamed = JSON.parse(pages.next()).length
let reads = 0
let finishing = false

function loop() {
  if (finishing) return
  reads += looping.messages.length > 0 ? 1 : 0
  setImmediate(loop)
}

process.stdin.setEncoding('utf8')
process.stdin.on('data', (d) => {
  if (!d.includes('finish')) return
  finishing = true
  for (let json = pages.next(); json !== null; json = pages.next()) streamed += JSON.parse(json).length
  fs.writeSync(1, `S ${streamed} ${reads}\n`)
  store.close()
  process.exit(0)
})

fs.writeSync(1, 'ready\n')
setImmediate(loop)
