'use strict'
// The same test files again, on PostgreSQL: each file below runs in a `node --test` of its own
// with THREADLINE_TEST_ENGINE=postgres and helpers/engine.js loaded into every node process it
// starts, which opens each store the tests make (a file path, ':memory:') on the test server
// instead, a schema per path. The files that test what only a SQLite file has (its locks, WAL,
// bytes on disk, schema rows, full and read-only disks) run on SQLite only; engines.test.js and
// fleet.test.js test PostgreSQL's own behaviour (its lease, a server restart, SIGKILLed writers).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ENGINE = path.join(__dirname, 'helpers', 'engine.js')
// Every one of these passes whole on both engines.
const FILES = [
  'turns', 'context', 'recall', 'roundtrip', 'interop', 'fixtures', 'validity', 'validate',
  'journal', 'recovery-crash', 'maintenance', 'claude-agent-sdk-store',
]

for (const name of FILES) {
  test(`${name}.test.js on PostgreSQL`, (t) => {
    const base = process.env.THREADLINE_TEST_POSTGRES
    if (!base) {
      assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
      t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `npm test` for PostgreSQL')
      return
    }
    // Without NODE_TEST_CONTEXT the child reports as a test run of its own (TAP), not to this one.
    const { NODE_TEST_CONTEXT, ...outer } = process.env
    const env = {
      ...outer,
      THREADLINE_TEST_ENGINE: 'postgres',
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${ENGINE}`.trim(),
    }
    const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', path.join(__dirname, `${name}.test.js`)], { env, encoding: 'utf8', maxBuffer: 64 << 20 })
    const counts = Object.fromEntries([...r.stdout.matchAll(/^# (pass|fail) (\d+)$/gm)].map((m) => [m[1], Number(m[2])]))
    t.diagnostic(`${name}.test.js on PostgreSQL: ${counts.pass} passed, ${counts.fail} failed`)
    const failed = r.stdout.split('\n').filter((l) => /^\s*not ok/.test(l)).join('\n')
    assert.equal(r.status, 0, `${name}.test.js failed on PostgreSQL:\n${failed}\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-2000)}`)
    assert.ok(counts.pass > 0 && counts.fail === 0)
  })
}
