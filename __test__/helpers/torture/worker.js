'use strict'
// A worker process of the fault test: lane 0 on its main thread through `threadline/promise`,
// lanes 1.. in worker threads through `threadline`, each with its own store handles (opened
// through the paths the controller gave it). The controller sends ops over IPC, one at a time per
// lane; each lane answers when its op is done (its acks are in its ack file before that).
// argv[2]: JSON { writer, lanes: [{ path, roPath, ackFile }], busyTimeoutMs, root }

const { isMainThread, parentPort, workerData, Worker } = require('node:worker_threads')
const { setTimeout: sleep } = require('node:timers/promises')
const { Lane } = require('./lane')

function laneConfig(cfg, n) {
  return { writer: cfg.writer, busyTimeoutMs: cfg.busyTimeoutMs, ...cfg.lanes[n] }
}

if (!isMainThread) {
  // A thread lane: the synchronous API; waits block the thread only.
  const { cfg, n } = workerData
  const block = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
  const lane = new Lane(require(cfg.root), laneConfig(cfg, n), block)
  let queue = lane.open().then(() => parentPort.postMessage({ ready: true }), (e) => parentPort.postMessage({ fatal: `${e.code} ${e.message}` }))
  parentPort.on('message', (m) => {
    queue = queue.then(async () => {
      if (m.exit) {
        await lane.close()
        parentPort.postMessage({ closed: true })
        return
      }
      parentPort.postMessage({ i: m.i, r: await lane.run(m) })
    })
  })
} else {
  const cfg = JSON.parse(process.argv[2])
  const send = (m) => process.send(m)
  const main = new Lane(require(`${cfg.root}/promise.js`), laneConfig(cfg, 0), sleep)
  let mainQueue = Promise.resolve()
  const threads = []
  const ready = [main.open()]
  for (let n = 1; n < cfg.lanes.length; n++) {
    const t = new Worker(__filename, { workerData: { cfg, n } })
    threads.push(t)
    ready.push(new Promise((resolve, reject) => {
      t.once('message', (m) => (m.ready ? resolve() : reject(new Error(m.fatal))))
    }))
    t.on('message', (m) => {
      if (m.i !== undefined) send({ t: 'done', lane: n, i: m.i, r: m.r })
    })
    t.on('error', (e) => {
      send({ t: 'fatal', message: `lane ${n}: ${e.stack}` })
      process.exit(1)
    })
  }
  Promise.all(ready).then(() => send({ t: 'ready' }), (e) => {
    send({ t: 'fatal', message: `open: ${e.code} ${e.message}` })
    process.exit(1)
  })

  async function exit() {
    await mainQueue
    await main.close()
    await Promise.all(threads.map((t) => new Promise((resolve) => {
      t.on('message', (m) => m.closed && resolve())
      t.postMessage({ exit: true })
    })))
    process.exit(0)
  }

  process.on('message', (m) => {
    if (m.t === 'exit') return void exit()
    if (m.lane > 0) return void threads[m.lane - 1].postMessage(m.op)
    mainQueue = mainQueue.then(async () => send({ t: 'done', lane: 0, i: m.op.i, r: await main.run(m.op) }))
  })
  process.on('disconnect', () => process.exit(0))
}
