'use strict'
// A writer process for the append log's rules (__test__/append-log-rules.test.js).
// argv: storePath sessionId ackFile mode [count] [prefix]
//   mode 'create' | 'open' (then) action:
//     kill:N      append N prompts back to back, then SIGKILL itself (the last batch in its log)
//     loop        append until killed or stopped, `prefix i` each; prints `ready` after the first
//     take        retry appending one `prefix` prompt until SESSION_LOCKED stops, then exit
//     stop:N      append N prompts, stop itself (SIGSTOP) right after the last one returned, and
//                 once continued append until killed
// Every acknowledged append's uuid and seq is written to ackFile with one writeSync before the
// next begins, so a kill loses no acknowledgement the test counts.

const fs = require('node:fs')
const path = require('node:path')
const { Store } = require(path.join(__dirname, '..', '..'))

const [storePath, sessionId, ackFile, open, action, prefix = 'prompt'] = process.argv.slice(2)
const ack = fs.openSync(ackFile, 'a')
const store = Store.open(storePath)
const session = open === 'create' ? store.createSession({ id: sessionId }) : store.openSession(sessionId)

function append(text) {
  const e = session.append({ role: 'user', content: text })
  fs.writeSync(ack, JSON.stringify({ uuid: e.uuid, seq: e.seq, text }) + '\n')
  return e
}

if (action.startsWith('kill:')) {
  const n = Number(action.slice(5))
  for (let i = 0; i < n; i++) append(`${prefix} ${i}`)
  process.kill(process.pid, 'SIGKILL')
} else if (action === 'loop') {
  // `ready` once an append is acknowledged: a kill after it leaves the session an owner's
  // acknowledged records (before it, on a loaded machine, the first append's claim could still
  // be running, and the kill leave none)
  append(`${prefix} 0`)
  process.stdout.write('ready\n')
  for (let i = 1; ; i++) append(`${prefix} ${i}`)
} else if (action.startsWith('stop:')) {
  const n = Number(action.slice(5))
  for (let i = 0; i < n; i++) append(`${prefix} ${i}`)
  // Stopped outside any commit, with its last batch acknowledged and not yet flushed (a batch is
  // flushed 2 ms after it opens): as Ctrl-Z right after an append.
  process.kill(process.pid, 'SIGSTOP')
  for (let i = n; ; i++) append(`${prefix} ${i}`)
} else if (action === 'take') {
  for (;;) {
    try {
      append(prefix)
      break
    } catch (e) {
      if (e.code !== 'SESSION_LOCKED') throw e
    }
  }
  store.close()
}
