'use strict'
// Crash safety: a child process appends in a loop (single records and appendMany batches) and
// reports each acknowledged uuid; it is SIGKILLed at a random moment, 50 times, on the same store
// file. After each kill: every acknowledged record is there, no batch is half-written, seq is
// contiguous, the parent chain is unbroken, and SQLite's integrity_check says ok.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { once } = require('node:events')
const { setTimeout: sleep } = require('node:timers/promises')

const { mulberry32 } = require('./helpers/seeded')
const { lib, tmpDir, openReadonlyDb } = require('./helpers/util')

const { Store } = lib
const WRITER = path.join(__dirname, 'helpers', 'crash-writer.js')
const KILLS = 50
const SHARED = 'shared blob '.repeat(1200) // what crash-writer.js writes as its shared long string


async function waitFor(cond, ms) {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) return false
    await sleep(2)
  }
  return true
}

function integrityCheck(file) {
  const db = openReadonlyDb(file)
  try {
    return db.pragma('integrity_check')
  } finally {
    db.close()
  }
}

test(`${KILLS} SIGKILLs at random moments lose no acknowledged record and half-write no batch`, { timeout: 120000 }, async (t) => {
  const seed = Number(process.env.THREADLINE_CRASH_SEED) || (Date.now() % 1e9)
  t.diagnostic(`seed ${seed} (THREADLINE_CRASH_SEED=${seed} repeats the kill schedule)`)
  const random = mulberry32(seed)
  const dir = tmpDir(t)
  const file = path.join(dir, 'crash.db')
  const init = Store.open(file)
  init.createSession({ id: 'crash' })
  init.close()

  const acked = new Set()
  const ackedBatches = new Map() // batchId -> [uuid...]
  let before = [] // uuids in order, as of the previous check
  let totalAcked = 0
  const started = Date.now()

  for (let k = 0; k < KILLS; k++) {
    const tag = String(k)
    const child = spawn(process.execPath, [WRITER, file, 'crash', tag], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (d) => { out += d })
    child.stderr.setEncoding('utf8')
    child.stderr.on('data', (d) => { err += d })
    let exited = false
    const closed = once(child, 'close').then((r) => { exited = true; return r })

    if (k % 10 === 3) {
      // now and then while the child is still starting up and opening the store
      await sleep(Math.floor(random() * 60))
    } else {
      const ready = await waitFor(() => out.includes('ready\n') || exited, 15000)
      assert.ok(ready, `child ${k} got ready`)
      await sleep(1 + Math.floor(random() * 120))
    }
    child.kill('SIGKILL')
    const [code, signal] = await closed
    assert.equal(signal, 'SIGKILL', `child ${k} was killed, not dead on its own (code ${code}):\n${err}`)

    // only complete lines: a line cut by the kill was never fully reported
    const lines = out.split('\n').slice(0, -1)
    let ackedHere = 0
    for (const line of lines) {
      if (line === 'ready') continue
      const [kind, a, b] = line.split(' ')
      if (kind === 'S') {
        acked.add(a)
        ackedHere++
      } else if (kind === 'B') {
        const uuids = b.split(',')
        ackedBatches.set(a, uuids)
        for (const u of uuids) acked.add(u)
        ackedHere += uuids.length
      } else {
        assert.fail(`unexpected line from child ${k}: ${line}`)
      }
    }
    totalAcked += ackedHere

    // 1. SQLite's own check, read-only, before anything else touches the file
    assert.deepStrictEqual(integrityCheck(file), [{ integrity_check: 'ok' }], `integrity after kill ${k}`)

    // 2. the log as the library reads it
    const store = Store.open(file)
    const s = store.openSession('crash')
    const envs = s.envelopes()
    const uuids = envs.map((e) => e.uuid)
    envs.forEach((e, i) => {
      assert.equal(e.seq, i, `seq contiguous at ${i} after kill ${k}`)
      assert.equal(e.parentUuid, i === 0 ? null : envs[i - 1].uuid, `parent chain at ${i} after kill ${k}`)
    })
    // what earlier checks saw is still there, unchanged, at the front
    assert.deepStrictEqual(uuids.slice(0, before.length), before, `earlier records kept after kill ${k}`)
    const present = new Set(uuids)
    for (const u of acked) assert.ok(present.has(u), `acknowledged record ${u} survived kill ${k}`)
    // batches: all or nothing, contiguous, in order
    const groups = new Map()
    envs.forEach((e, i) => {
      const b = e.metadata && e.metadata.batch
      if (b) {
        if (!groups.has(b)) groups.set(b, [])
        groups.get(b).push(i)
      }
    })
    for (const [b, idx] of groups) {
      const size = envs[idx[0]].metadata.size
      assert.equal(idx.length, size, `batch ${b} complete after kill ${k}`)
      idx.forEach((seq, j) => {
        assert.equal(seq, idx[0] + j, `batch ${b} contiguous`)
        assert.equal(envs[seq].metadata.i, j, `batch ${b} in order`)
      })
    }
    for (const [b, us] of ackedBatches) {
      assert.ok(groups.has(b), `acknowledged batch ${b} present`)
      assert.deepStrictEqual(groups.get(b).map((i) => uuids[i]), us, `acknowledged batch ${b} as reported`)
    }
    // records this child wrote but did not get to acknowledge: at most the one operation in flight
    const unacked = envs.slice(before.length).filter((e) => !acked.has(e.uuid))
    assert.ok(unacked.every((e) => e.metadata.child === tag), `unacknowledged records after kill ${k} are from child ${k}`)
    assert.ok(new Set(unacked.map((e) => e.metadata.n)).size <= 1, `at most one unacknowledged operation after kill ${k}`)
    // long strings (stored once, shared by many records) read back whole
    for (const e of envs.slice(before.length)) {
      const c = e.message.content
      if (e.metadata.batch === null && c.length === 2) {
        assert.equal(c[1].text, SHARED)
        assert.ok(c[0].content.startsWith(`unique ${e.metadata.child}/${e.metadata.n} `))
      }
      if (e.metadata.batch && e.metadata.i === 1 && e.metadata.n % 3 === 0) assert.equal(c[0].text, SHARED)
    }
    assert.equal(s.messages.length, envs.length)
    assert.equal(s.info.messageCount, envs.length)
    store.close()
    before = uuids
  }

  t.diagnostic(`${before.length} records, ${totalAcked} acknowledged, ${ackedBatches.size} batches, ${Date.now() - started} ms`)
  assert.ok(totalAcked > 0, 'the children got to append something')
  assert.ok(ackedBatches.size > 0, 'the children got to append batches')
})
