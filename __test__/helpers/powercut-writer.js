'use strict'
// Run as a child process by powercut.test.js, on a file system whose disk loses what was not
// flushed when the power is cut. Opens the store with the durability asked for, creates three
// sessions, then appends to them at random, forever: single records, records with a long string
// (stored as a blob), and appendMany batches of 2-5 records. After each append returns it writes
// one line to stdout:
//   ready
//   S <sessionId> <uuid> <time>                      a single record
//   B <sessionId> <batchId> <uuid>,<uuid>,... <time>  a batch
//   E <code> <message>   an append failed (the disk fails every write after the cut): then it
//                        waits to be killed
// (time: Date.now() when the append returned). argv: storePath durability seed [paceMs: the time
// between two appends, default 0]
const path = require('node:path')
const { Store } = require(path.join(__dirname, '..', '..'))
const { mulberry32, writeLine: out } = require('./seeded')

const [storePath, durability, seed, paceMs = '0'] = process.argv.slice(2)
const pause = new Int32Array(new SharedArrayBuffer(4))
const random = mulberry32(Number(seed))

const store = Store.open(storePath, { durability })
const sessions = ['s0', 's1', 's2'].map((id) => store.createSession({ id }))
const shared = 'shared blob '.repeat(1200) // > 10 KB: a blob, de-duplicated
out('ready')

function appendOne(n) {
  const session = sessions[Math.floor(random() * sessions.length)]
  const r = random()
  if (r < 0.45) {
    const env = session.append({ role: 'user', content: `single ${n}` }, { metadata: { n, batch: null } })
    out(`S ${session.id} ${env.uuid} ${Date.now()}`)
  } else if (r < 0.55) {
    const env = session.append({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: `t-${n}`, content: `unique ${n} `.repeat(900) }, { type: 'text', text: shared }],
    }, { metadata: { n, batch: null } })
    out(`S ${session.id} ${env.uuid} ${Date.now()}`)
  } else {
    const size = 2 + Math.floor(random() * 4)
    const records = []
    for (let i = 0; i < size; i++) {
      records.push({
        type: i % 2 ? 'assistant' : 'user',
        message: { role: i % 2 ? 'assistant' : 'user', content: [{ type: 'text', text: `batch ${n} #${i}` }] },
        metadata: { n, batch: String(n), size, i },
      })
    }
    const envs = session.appendMany(records)
    out(`B ${session.id} ${n} ${envs.map((e) => e.uuid).join(',')} ${Date.now()}`)
  }
}

for (let n = 0; ; n++) {
  if (Number(paceMs) > 0) Atomics.wait(pause, 0, 0, Number(paceMs))
  try {
    appendOne(n)
  } catch (e) {
    out(`E ${e.code} ${String(e.message).split('\n')[0]}`)
    setInterval(() => {}, 1 << 30)
    break
  }
}
