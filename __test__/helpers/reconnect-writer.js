'use strict'
// A second handle of a store, in a worker thread (the same process, another connection): it
// claims session 's', then on 'go' appends four records and reports how that went.
const { workerData, parentPort } = require('node:worker_threads')
const { lib } = require('./util')

const a = lib.Store.open(workerData.url)
const s = a.openSession('s')
s.append({ role: 'user', content: 'first' })
parentPort.postMessage({ claimed: true })
parentPort.once('message', () => {
  try {
    s.appendMany([1, 2, 3, 4].map((n) => ({ role: 'user', content: `m${n}` })))
    parentPort.postMessage({ acknowledged: true })
  } catch (e) {
    parentPort.postMessage({ failed: e.code })
  }
})
