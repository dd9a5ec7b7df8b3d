'use strict'
// Run by failover.test.js: a writer process on one session of a formation's store, driven by
// its stdin, one command a line, each answered by one line on stdout:
//   append <text>   A <uuid> <seq>          acknowledged
//                   E <code> <message>      refused (nothing retried)
//   envelopes       S <uuid>,<uuid>,...     the session's records in seq order (the checker)
//   exit            (closes the store and exits)
// It says `ready` once the store is open. argv: storeUrl sessionId
const path = require('node:path')
const crypto = require('node:crypto')
const readline = require('node:readline')
const { Store } = require(path.join(__dirname, '..', '..'))
const { writeLine: out } = require('./seeded')

const [url, id] = process.argv.slice(2)
const store = Store.open(url, { busyTimeoutMs: 10_000 })
let session = null
out('ready')
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const [cmd, ...rest] = line.split(' ')
  if (cmd === 'exit') {
    try { store.close() } catch {}
    process.exit(0)
  }
  try {
    session ??= store.openSession(id)
    if (cmd === 'append') {
      const uuid = crypto.randomUUID()
      const env = session.append({ type: 'user', uuid, message: { role: 'user', content: [{ type: 'text', text: rest.join(' ') }] } })
      out(`A ${env.uuid} ${env.seq}`)
    } else if (cmd === 'envelopes') {
      out(`S ${session.envelopes().map((e) => e.uuid).join(',')}`)
    }
  } catch (e) {
    out(`E ${e.code} ${String(e.message).replace(/\n/g, ' ')}`)
  }
})
