'use strict'
// A store watcher for watch.test.js: `node store-watch-reader.js LOCATION API PROJECT [SINCE]`.
// It watches the project's sessions with store.watch (from SINCE, a change's cursor, when given)
// and prints `rec <id> <seq> <uuid> <cursor>` for each record, as it comes (and `created <id>`
// for each session made). A line
// `stop { sessionId: count }` on stdin ends the watch once it has given every session's records
// before `count`; then it prints `done` and must exit on its own.

const readline = require('node:readline')

const [location, api, project, since] = process.argv.slice(2)
const { Store } = api === 'promise' ? require('../../promise.js') : require('../..')

async function main() {
  const store = await Store.open(location)
  /** @type {Record<string, number> | null} */
  let target = null
  const next = new Map()
  const stop = new AbortController()
  const reached = () => target !== null && Object.entries(target).every(([id, n]) => (next.get(id) ?? 0) >= n)
  const input = readline.createInterface({ input: process.stdin })
  input.on('line', (line) => {
    if (!line.startsWith('stop ')) return
    target = JSON.parse(line.slice(5))
    if (reached()) stop.abort()
    input.close()
    process.stdin.destroy()
  })
  try {
    for await (const c of store.watch({ project, since, signal: stop.signal })) {
      if (c.type === 'created') process.stdout.write(`created ${c.sessionId}\n`)
      if (c.type !== 'record') continue
      process.stdout.write(`rec ${c.sessionId} ${c.record.seq} ${c.record.uuid} ${c.cursor}\n`)
      next.set(c.sessionId, c.record.seq + 1)
      if (reached()) break
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e
  }
  await store.close()
  process.stdout.write('done\n')
}

main().catch((e) => {
  process.stderr.write(`${e.code} ${e.stack}\n`)
  process.exitCode = 1
})
