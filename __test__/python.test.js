'use strict'
// The Python package (python/, issue 28) in `npm test`: builds its wheel with maturin (cargo's
// cache makes a rebuild of unchanged code take seconds), installs it into the Python venv in
// .tools/py (which .ci/run makes: python3 -m venv .tools/py && .tools/py/bin/pip install maturin
// pytest), and runs its pytest suite, on PostgreSQL too when THREADLINE_TEST_POSTGRES is set.
// Fails when pytest fails; never skips.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, '.tools', 'py', 'bin')
const WHEELS = path.join(ROOT, 'target', 'wheels', 'python')

function run(t, cmd, args, options) {
  // Without NODE_TEST_CONTEXT the Node processes the Python tests start are plain processes.
  const { NODE_TEST_CONTEXT, ...env } = process.env
  const r = spawnSync(cmd, args, { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 64 << 20, ...options })
  assert.ifError(r.error)
  assert.equal(r.status, 0, `${path.basename(cmd)} ${args.join(' ')} failed:\n${r.stdout.slice(-6000)}\n${r.stderr.slice(-4000)}`)
  t.diagnostic(r.stdout.trim().split('\n').slice(-1)[0] ?? '')
  return r
}

test('the Python package: the wheel builds and installs, and its pytest suite passes', { timeout: 40 * 60 * 1000 }, (t) => {
  for (const tool of ['python', 'pip', 'maturin', 'pytest']) {
    assert.ok(fs.existsSync(path.join(BIN, tool)), `.tools/py/bin/${tool} is missing: python3 -m venv .tools/py && .tools/py/bin/pip install maturin pytest claude-agent-sdk mypy (.ci/run does it)`)
  }
  if (!process.env.THREADLINE_TEST_POSTGRES) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: the Python tests run on SQLite only')
  }
  fs.rmSync(WHEELS, { recursive: true, force: true })
  run(t, path.join(BIN, 'maturin'), ['build', '--release', '--quiet', '-o', WHEELS], { cwd: path.join(ROOT, 'python') })
  const wheels = fs.readdirSync(WHEELS).filter((f) => f.endsWith('.whl'))
  assert.equal(wheels.length, 1, `one wheel: ${wheels}`)
  run(t, path.join(BIN, 'pip'), ['install', '--quiet', '--no-index', '--no-deps', '--force-reinstall', path.join(WHEELS, wheels[0])])
  run(t, path.join(BIN, 'pytest'), ['-q', '-p', 'no:cacheprovider', 'python/tests'])
})
