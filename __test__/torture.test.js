'use strict'
// The fault test (docs/recovery.md, "The fault test"; the long run is `npm run torture`): worker
// processes append, stream, fork, rewind, delete and re-create sessions on one store, reached
// through its real path, symlinks and a relative path, while they are SIGKILLed and SIGSTOPped at
// random (and, on PostgreSQL, the server is restarted and frozen); readers of every kind read
// meanwhile (on SQLite the disk fills up now and then), and a final read in fresh processes ends
// each run. The checker compares every read with what the writers were told
// (__test__/helpers/torture/). 2,000 ops per run, per engine: a fixed seed and a random one
// (THREADLINE_TORTURE_SEED repeats it). Any violation fails.
// First, the checker on a made-up history: it reports each rule it enforces.

const { test } = require('node:test')
const assert = require('node:assert/strict')

const { run } = require('./helpers/torture/controller')
const { canFill } = require('./helpers/torture/faults')
const { damage } = require('./helpers/torture/damage')
const { summaryLine, violationLines, byRule } = require('./helpers/torture/report')
const { Model } = require('./helpers/torture/model')
const check = require('./helpers/torture/checker')
const { tag } = require('./helpers/torture/content')

const OPS = 2000
const FIXED = 230
const RANDOM = Number(process.env.THREADLINE_TORTURE_SEED) || Date.now() % 1e9
const RATES = { kill: 1 / 60, stop: 1 / 60, restartEvery: 700, freeze: 1 / 250, proc: 1 / 100, full: 1 / 150 }

test('the checker reports a violation of each rule in a made-up history', () => {
  const m = new Model()
  const x = m.addInc('s0', 1, 0)
  x.createAcked = 1
  const tags = [0, 1, 2].map((n) => tag('s0', 1, 'w0', n, 0))
  tags.forEach((t, n) => m.attempt({ i: n, kind: 'append', sid: 's0', inc: 1 }, [t], 1))
  m.attempt({ i: 3, kind: 'many', sid: 's0', inc: 1 }, [tag('s0', 1, 'w0', 3, 0), tag('s0', 1, 'w0', 3, 1)], 1)
  m.ackRecords(x, tags.slice(0, 2).map((t, n) => ({ u: `u${n}`, s: n, p: n ? `u${n - 1}` : null, t, ts: '' })), 2, 'real')
  const rec = (n, s, t = tags[n]) => ({ u: `u${n}`, s, p: n ? `u${n - 1}` : null, ty: 'user', t, ok: true })
  const found = (fn) => {
    const rules = []
    fn((rule) => rules.push(rule))
    return rules
  }
  const win = (sent) => ({ sent, done: sent + 1 })
  const ctx = { i: 9, who: 'test' }
  const read = (recs, at = 5) => found((add) => check.checkEnvelopes(m, 's0', { inc: 1, recs }, win(at), ctx, add))
  assert.deepEqual(read([rec(0, 0), rec(1, 1)]), [], 'a true read')
  assert.deepEqual(read([rec(0, 0), rec(1, 1), rec(2, 2)]), [], 'an unacknowledged record may appear')
  assert.ok(read([rec(1, 0), rec(0, 1)]).includes('R1'), 'R1: acknowledged records moved')
  assert.ok(read([rec(0, 0), rec(1, 1), { ...rec(2, 2), ok: false }]).includes('R1'), 'R1: content')
  assert.deepEqual(read([rec(0, 0)]), ['R3'], 'R3: an acknowledged record missing')
  assert.deepEqual(read([rec(0, 0), rec(1, 1), rec(5, 2, tag('s0', 1, 'w0', 5, 0))]), ['R4'], 'R4: never attempted')
  assert.deepEqual(read([rec(0, 0), rec(1, 1), rec(3, 2, tag('s0', 1, 'w0', 3, 1))]), ['R4'], 'R4: half an appendMany')
  assert.deepEqual(read([rec(0, 0), rec(1, 1), rec(2, 2), { ...rec(2, 3), u: 'u9' }]), ['R4'], 'R4: a record twice')
  // A stream whose finish failed: its chunks were stored as they came (`stream` records), its
  // message was not.
  const st = tag('s0', 1, 'w0', 4, 0)
  m.attempt({ i: 4, kind: 'stream', sid: 's0', inc: 1 }, [st], 1)
  m.settle(4, 'failed', 'NOT_FOUND')
  assert.deepEqual(read([rec(0, 0), rec(1, 1), { ...rec(4, 2, st), ty: 'stream' }]), [], 'a failed stream\'s chunks may stay')
  assert.deepEqual(read([rec(0, 0), rec(1, 1), { ...rec(4, 2, st), ty: 'assistant' }]), ['R4'], 'R4: a failed stream\'s message')
  x.deletes.push({ sent: 6, done: 7 })
  x.deleted = 7
  assert.ok(read([rec(0, 0), rec(1, 1)], 10).includes('R2'), 'R2: a deleted incarnation read back')
  const y = m.addInc('s0', 2, 8)
  y.createAcked = 9
  assert.deepEqual(read([rec(0, 0)], 10).slice(0, 1), ['R2'], 'R2: a deleted incarnation\'s record in the next one')
  const lost = new Model()
  const z = lost.addInc('s1', 1, 0)
  z.createAcked = 1
  const zt = [0, 1].map((n) => tag('s1', 1, 'w0', n, 0))
  zt.forEach((t, n) => lost.attempt({ i: n, kind: 'append', sid: 's1', inc: 1 }, [t], 1))
  lost.ackRecords(z, [{ u: 'u0', s: 0, p: null, t: zt[0], ts: '' }], 2, 'real')
  lost.ackRecords(z, [{ u: 'u1', s: 1, p: 'u0', t: zt[1], ts: '' }], 2, 'file-link')
  const final = (recs) => found((add) => check.checkEnvelopes(lost, 's1', { inc: 1, recs }, win(5), { ...ctx, final: true }, add))
  assert.deepEqual(final([{ u: 'u1', s: 0, p: 'u0', ty: 'user', t: zt[1], ok: true }]).sort(), ['R1', 'R1'], 'R1: lost in the final read (and u1 moved)')
  assert.deepEqual(final([{ u: 'u0', s: 0, p: null, ty: 'user', t: zt[0], ok: true }]), ['R6'], 'R6: written through a link, lost to the real path')
  const stops = [{ w: 'w1', i: 1, start: 100, end: 300 }]
  const blocked = [{ w: 'w2', write: true, sent: 110, done: 310, ok: true, lat: 200, busy: 0 }]
  assert.deepEqual(found((add) => check.r5(stops, blocked, [], add)), ['R5'], 'R5: appends held up for the whole stop')
  assert.deepEqual(found((add) => check.r5(stops, [...blocked, { ...blocked[0], done: 150, lat: 40 }], [], add)), [], 'R5: one went through')
})

function postgresServer(t) {
  const url = process.env.THREADLINE_TEST_POSTGRES
  if (!url || !process.env.THREADLINE_TEST_POSTGRES_STATE) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but there is no server of ours (run through `npm test`)')
    t.diagnostic('no PostgreSQL server of ours (THREADLINE_TEST_POSTGRES_STATE): run through `npm test`')
    return null
  }
  return url
}

for (const engine of ['sqlite', 'postgres']) {
  for (const seed of [FIXED, RANDOM]) {
    test(`${engine}, seed ${seed}: ${OPS} ops with kills, stops, deletes, re-creates, links and readers break no rule`, { timeout: 300_000 }, async (t) => {
      const postgres = engine === 'postgres' ? postgresServer(t) : null
      if (engine === 'postgres' && !postgres) return
      t.diagnostic(`seed ${seed} (THREADLINE_TORTURE_SEED=${seed}, or npm run torture -- --engine ${engine} --ops ${OPS} --seed ${seed})`)
      const s = await run({ engine, ops: OPS, seed, workers: 4, lanes: 3, paths: 'mixed', busyTimeoutMs: 300, rates: RATES, postgres })
      t.diagnostic(summaryLine(s))
      const lines = violationLines(s, 5)
      for (const line of lines) t.diagnostic(line)
      // The run did what it says.
      assert.ok(s.stats.faults.kill >= 10 && s.stats.faults.stop >= 10, 'workers were killed and stopped')
      if (engine === 'postgres') assert.ok(s.stats.faults.restart >= 2, 'the server was restarted')
      // A full disk needs a file system of its own (a tmpfs: root); CI runs as root.
      if (engine === 'sqlite' && (canFill() || process.env.CI)) assert.ok(s.stats.faults.full >= 3, `the disk was filled (${s.diskFull})`)
      assert.ok(s.stats.ops.delete >= 3 && s.recreated >= 1, 'sessions were deleted and re-created')
      assert.ok(s.stats.ops.fork >= 1 && s.stats.ops.stream >= 10, 'forks and streamed responses')
      assert.ok(s.stats.paths.size === 4 && s.stats.readonly > 50 && s.stats.procReads >= 3, 'four paths, readonly readers, reader processes')
      assert.ok(s.acked > 1000, `records were acknowledged (${s.acked})`)
      assert.deepEqual(byRule(s.violations), byRule([]), `violations (seed ${seed}):\n${lines.join('\n')}`)
    })
  }
}

test('sqlite: damage to a dead writer\'s append log is reported, never silent (R7)', { timeout: 60_000 }, (t) => {
  for (const seed of [FIXED, RANDOM]) {
    const found = damage({ seed })
    for (const v of found) t.diagnostic(v.msg)
    assert.deepEqual(found.map((v) => v.msg), [], `seed ${seed}`)
  }
})
