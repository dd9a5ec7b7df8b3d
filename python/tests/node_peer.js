'use strict'
// The Node side of the two-language tests (test_processes.py), on the same store:
//   hold <store>          creates a session, appends two messages, prints READY <json>, keeps
//                         the session (it wrote it: it holds it) until a line on stdin, then
//                         closes it and prints CLOSED; exits when stdin ends
//   try <store> <id>      opens the session, prints MESSAGES <json>, tries to append, prints
//                         RESULT ok|<code>, closes
const path = require('node:path')
const readline = require('node:readline')
const { Store } = require(path.join(__dirname, '..', '..', 'index.js'))

const [mode, where, id] = process.argv.slice(2)
const store = Store.open(where)
if (mode === 'hold') {
  const session = store.createSession({ project: 'two-languages', model: 'claude-sonnet-4-5' })
  session.append({ role: 'user', content: [{ type: 'text', text: 'written from Node' }], n: 1.5 })
  session.append({ role: 'assistant', content: [{ type: 'text', text: 'still Node' }], stop_reason: 'end_turn' })
  console.log('READY ' + JSON.stringify({ id: session.id, messages: session.messages }))
  const lines = readline.createInterface({ input: process.stdin })
  let closed = false
  lines.on('line', () => {
    if (closed) return
    closed = true
    session.close()
    console.log('CLOSED')
  })
  lines.on('close', () => store.close())
} else if (mode === 'try') {
  const session = store.openSession(id)
  console.log('MESSAGES ' + JSON.stringify(session.messages))
  let result = 'ok'
  try {
    session.append({ role: 'user', content: [{ type: 'text', text: 'from Node again' }] })
  } catch (e) {
    result = e.code
  }
  console.log('RESULT ' + result)
  session.close()
  store.close()
} else {
  throw new Error(`unknown mode ${mode}`)
}
