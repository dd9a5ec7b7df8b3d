'use strict'
// R7, damage to an append log is reported, never silent (SQLite): a writer appends and is
// SIGKILLed with its last appends in its log only; the log is truncated, zeroed in part, or has a
// bit flipped; then a new process opens the store for writing (which replays the log) with
// telemetry on. Either every acknowledged record is there, with its content, or the damage is
// reported: an error from opening or reading, store.verify(), or a telemetry event.
//
// Run as a child with argv `write <store>` or `read <store> <out>`.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { mulberry32 } = require('../seeded')

const ROOT = path.join(__dirname, '..', '..', '..')
const RECORDS = 40
const HEAD = 16 // the log's own header (storage/append_log.rs); damage goes after it

function writer(file) {
  const { Store } = require(ROOT)
  const s = Store.open(file).createSession({ id: 'd' })
  const acked = []
  for (let n = 0; n < RECORDS; n++) acked.push(s.append({ role: 'user', content: `damage ${n}` }).uuid)
  fs.writeSync(1, JSON.stringify(acked))
  process.kill(process.pid, 'SIGKILL')
}

function reader(file, out) {
  const { Store } = require(ROOT)
  const r = {}
  try {
    const store = Store.open(file)
    try {
      r.envs = store.openSession('d').envelopes().map((e) => ({ u: e.uuid, text: e.message.content[0].text }))
    } catch (e) {
      r.readError = `${e.code} ${e.message}`
    }
    const v = store.verify()
    r.verify = v.ok ? null : JSON.stringify(v.damaged.slice(0, 3))
    store.close()
  } catch (e) {
    r.openError = `${e.code} ${e.message}`
  }
  fs.writeFileSync(out, JSON.stringify(r))
}

const HARMS = {
  truncate: (fd, size, rng) => fs.ftruncateSync(fd, HEAD + 1 + Math.floor(rng() * (size - HEAD - 2))),
  zero: (fd, size, rng) => fs.writeSync(fd, Buffer.alloc(32), 0, 32, HEAD + Math.floor(rng() * (size - HEAD - 32))),
  flip: (fd, size, rng) => {
    const at = HEAD + Math.floor(rng() * (size - HEAD))
    const b = Buffer.alloc(1)
    fs.readSync(fd, b, 0, 1, at)
    b[0] ^= 1 << Math.floor(rng() * 8)
    fs.writeSync(fd, b, 0, 1, at)
  },
}

// Returns the violations ({ rule: 'R7', i: -1, msg }) of the three kinds of damage.
function damage({ seed }) {
  const rng = mulberry32(seed)
  const out = []
  for (const [kind, harm] of Object.entries(HARMS)) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-damage-'))
    try {
      const file = path.join(dir, 'store.db')
      const w = spawnSync(process.execPath, [__filename, 'write', file], { encoding: 'utf8' })
      if (w.signal !== 'SIGKILL') throw new Error(`damage writer: ${w.stderr}`)
      const acked = JSON.parse(w.stdout)
      const logs = fs.readdirSync(dir).filter((f) => f.startsWith('store.db-tl-'))
      if (logs.length !== 1) throw new Error(`damage: expected one append log, found ${logs}`)
      const fd = fs.openSync(path.join(dir, logs[0]), 'r+')
      harm(fd, fs.fstatSync(fd).size, rng)
      fs.closeSync(fd)
      const result = path.join(dir, 'read.json')
      const r = spawnSync(process.execPath, [__filename, 'read', file, result], { encoding: 'utf8', env: { ...process.env, THREADLINE_TELEMETRY: 'console' } })
      if (r.status !== 0) throw new Error(`damage reader: ${r.stderr}`)
      const seen = JSON.parse(fs.readFileSync(result, 'utf8'))
      const events = r.stdout.split('\n').filter((l) => l.trim())
      const present = new Map((seen.envs || []).map((e) => [e.u, e.text]))
      const lost = acked.filter((u, n) => present.get(u) !== `damage ${n}`)
      const told = seen.openError || seen.readError || seen.verify || events.length
      if (lost.length && !told) out.push({ rule: 'R7', i: -1, msg: `append log ${kind} (seed ${seed}): ${lost.length} of ${acked.length} acknowledged records lost, and nothing says so (no error, verify ok, no telemetry event)` })
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  return out
}

if (require.main === module) {
  const [mode, file, outFile] = process.argv.slice(2)
  if (mode === 'write') writer(file)
  else reader(file, outFile)
}

module.exports = { damage }
