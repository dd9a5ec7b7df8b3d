'use strict'
// Run as a child process by crash.test.js, which SIGKILLs it at a random moment. Appends forever
// to one session: single records and appendMany batches of 2-5 records (batch id in metadata),
// some with long strings stored as blobs. After each append returns it writes one line to stdout:
//   S <uuid>                       a single record
//   B <batchId> <uuid>,<uuid>,...   a batch
// argv: storePath sessionId childTag
const fs = require('node:fs')
const path = require('node:path')
const { Store } = require(path.join(__dirname, '..', '..'))

const { writeLine: out } = require('./seeded')
const [storePath, sessionId, tag] = process.argv.slice(2)


const store = Store.open(storePath)
const session = store.openSession(sessionId)
const shared = 'shared blob '.repeat(1200) // > 10 KB, the same in every child: de-duplicated
out('ready')

let n = 0
for (;;) {
  const r = Math.random()
  if (r < 0.45) {
    const env = session.append({ role: 'user', content: `single ${tag}/${n}` }, { metadata: { child: tag, n, batch: null } })
    out(`S ${env.uuid}`)
  } else if (r < 0.55) {
    const big = `unique ${tag}/${n} `.repeat(900) + Math.random()
    const env = session.append({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: `t-${tag}-${n}`, content: big }, { type: 'text', text: shared }],
    }, { metadata: { child: tag, n, batch: null } })
    out(`S ${env.uuid}`)
  } else {
    const size = 2 + Math.floor(Math.random() * 4)
    const batch = `${tag}/${n}`
    const records = []
    for (let i = 0; i < size; i++) {
      records.push({
        type: i % 2 ? 'assistant' : 'user',
        message: { role: i % 2 ? 'assistant' : 'user', content: [{ type: 'text', text: i === 1 && n % 3 === 0 ? shared : `batch ${batch} #${i}` }] },
        metadata: { child: tag, n, batch, size, i },
      })
    }
    const envs = session.appendMany(records)
    out(`B ${batch} ${envs.map((e) => e.uuid).join(',')}`)
  }
  n++
}
