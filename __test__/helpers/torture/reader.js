'use strict'
// A reader in a process of its own: opens the store (readonly, or writable without writing, which
// replays the logs of writers that are gone), lists the sessions and reads every one listed, and
// writes what it saw as JSON to a file. With `verify`, also store.verify().
// argv[2]: JSON { root, path, ro, busyTimeoutMs, out, verify }

const fs = require('node:fs')
const { Lane } = require('./lane')

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const lane = new Lane(require(cfg.root), {
    writer: 'reader',
    path: cfg.ro ? null : cfg.path,
    roPath: cfg.ro ? cfg.path : null,
    ackFile: '/dev/null',
    busyTimeoutMs: cfg.busyTimeoutMs,
  }, (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms))
  const out = { sessions: {} }
  try {
    await lane.open()
  } catch (e) {
    out.open = { code: e.code, message: e.message }
    fs.writeFileSync(cfg.out, JSON.stringify(out))
    return
  }
  out.list = await lane.run({ kind: 'list', ro: cfg.ro })
  if (out.list.ok) {
    for (const { id } of out.list.list) out.sessions[id] = await lane.run({ kind: 'read', sid: id, ro: cfg.ro, what: 'env' })
  }
  if (cfg.verify) {
    const r = (cfg.ro ? lane.ro : lane.store).verify()
    out.verify = { ok: r.ok, damaged: r.damaged.slice(0, 20), moreDamaged: r.moreDamaged }
  }
  await lane.close()
  fs.writeFileSync(cfg.out, JSON.stringify(out))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
