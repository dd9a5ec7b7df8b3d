'use strict'
// A watcher for watch.test.js: `node watch-reader.js LOCATION API FROM` where API is `sync` or
// `promise` and FROM a JSON object { sessionId: fromSeq }. It watches each session from its
// fromSeq and prints `rec <id> <seq> <uuid>` for each record, as it comes. A line
// `stop { sessionId: count }` on stdin ends each watch once it has yielded the records before
// `count` (with break, or its signal when it already has); then it prints `done` and must exit
// on its own: a stopped watch leaves nothing that keeps a process alive.

const readline = require('node:readline')

const [location, api, fromText] = process.argv.slice(2)
const { Store } = api === 'promise' ? require('../../promise.js') : require('../..')
const from = JSON.parse(fromText)

async function main() {
  const store = await Store.open(location)
  const watches = new Map()
  for (const [id, fromSeq] of Object.entries(from)) {
    const session = await store.openSession(id)
    watches.set(id, { session, next: fromSeq, target: Infinity, stop: new AbortController() })
  }
  const input = readline.createInterface({ input: process.stdin })
  input.on('line', (line) => {
    if (!line.startsWith('stop ')) return
    for (const [id, count] of Object.entries(JSON.parse(line.slice(5)))) {
      const w = watches.get(id)
      w.target = count
      if (w.next >= count) w.stop.abort()
    }
    input.close()
    // Nothing else to read: stdin must not be what keeps the process up.
    process.stdin.destroy()
  })
  await Promise.all([...watches].map(async ([id, w]) => {
    if (w.next >= w.target) return
    try {
      for await (const r of w.session.watch({ fromSeq: w.next, signal: w.stop.signal })) {
        process.stdout.write(`rec ${id} ${r.seq} ${r.uuid}\n`)
        w.next = r.seq + 1
        if (w.next >= w.target) break
      }
    } catch (e) {
      if (e.name !== 'AbortError') throw e
    }
  }))
  await store.close()
  process.stdout.write('done\n')
}

main().catch((e) => {
  process.stderr.write(`${e.code} ${e.stack}\n`)
  process.exitCode = 1
})
