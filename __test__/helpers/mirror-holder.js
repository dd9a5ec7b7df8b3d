'use strict'
// A process that mirrors into a store as the Claude Agent SDK does and is told what to do next
// on stdin, one JSON command a line: { op: 'append', key, entries } | { op: 'delete', key } |
// { op: 'close' } | { op: 'exit' }. It prints one JSON line per command once it is done:
// { ok: true } or { code } of the error. The tests of a session held between appends drive it
// (another process is refused while it holds the session) and SIGKILL it while it holds one.
//
//   node mirror-holder.js <store path>

const path = require('node:path')
const readline = require('node:readline')

const ROOT = path.join(__dirname, '..', '..')
const { Store } = require(ROOT)
const { ThreadlineSessionStore } = require(path.join(ROOT, 'adapters', 'claude-agent-sdk'))

const store = Store.open(process.argv[2])
const sessions = new ThreadlineSessionStore(store)
const say = (v) => process.stdout.write(`${JSON.stringify(v)}\n`)

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  const cmd = JSON.parse(line)
  try {
    if (cmd.op === 'append') await sessions.append(cmd.key, cmd.entries)
    else if (cmd.op === 'delete') await sessions.delete(cmd.key)
    else if (cmd.op === 'close') store.close()
    else if (cmd.op === 'exit') process.exit(0)
    say({ ok: true })
  } catch (e) {
    say({ code: /** @type {any} */ (e).code ?? String(e) })
  }
})
