'use strict'
// After a store's connection is made anew, what this process was acknowledged is compared with
// the server (a failover may have lost it: STORE_CORRUPT, docs/engines.md "Failover"). An append
// whose commit failed was never acknowledged: found by the fault test against a formation, where
// another handle's reconnection took the failed append's note for an acknowledged end.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { Client } = require('pg')

const { lib } = require('./helpers/util')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

test('an append whose commit failed while another handle reconnected is not reported as lost acknowledged records', async (t) => {
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (!base) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `npm test` for PostgreSQL')
    return
  }
  const schema = `reconnect_${process.pid}`
  const url = (app) => `${base}${base.includes('?') ? '&' : '?'}schema=${schema}&application_name=${app}`
  const admin = new Client({ connectionString: base })
  await admin.connect()
  t.after(async () => {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await admin.end()
  })
  const b = lib.Store.open(url('handleB'))
  t.after(() => b.close())
  b.createSession({ id: 's' })

  const worker = new Worker(path.join(__dirname, 'helpers', 'reconnect-writer.js'), { workerData: { url: url('handleA') } })
  t.after(() => worker.terminate())
  const said = []
  worker.on('message', (m) => said.push(m))
  const heard = async (key) => {
    while (!said.some((m) => key in m)) await sleep(10)
  }
  await heard('claimed')

  // A's append is held at its write of the session row, then both handles' connections end:
  // B's is made anew (by its next call) while A's append is still open; A's then fails.
  const locker = new Client({ connectionString: base })
  await locker.connect()
  await locker.query('BEGIN')
  await locker.query(`SELECT 1 FROM ${schema}.sessions WHERE id = 's' FOR NO KEY UPDATE`)
  worker.postMessage('go')
  const waiting = async () => {
    for (;;) {
      const r = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'handleA' AND wait_event_type = 'Lock'")
      if (r.rows[0].n > 0) return
      await sleep(20)
    }
  }
  await waiting()
  const end = (app) => admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app])
  await end('handleB')
  assert.equal(b.listSessions().length, 1, 'B works on a new connection')
  await end('handleA')
  await heard('failed')
  assert.deepEqual(said.find((m) => 'failed' in m), { failed: 'STORE_IO' }, "A's append failed: nothing of it was acknowledged")
  await locker.query('ROLLBACK')
  await locker.end()

  const s = b.openSession('s')
  assert.deepEqual(s.messages.map((m) => m.content.map((c) => c.text)), [['first']], 'the session reads whole, with no false report of lost records')
  assert.deepEqual(s.envelopes().map((e) => e.seq), [0])
})
