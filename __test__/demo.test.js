'use strict'
// The README's first command: the demo (an agent killed mid-tool, resumed in another process,
// recalling an earlier session through the recall tools) runs to its end and says so.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { ROOT } = require('./helpers/util')

test('npm run demo: nothing acknowledged is lost, and the earlier session is recalled', () => {
  const env = { ...process.env, NO_COLOR: '1' }
  delete env.THREADLINE_HOME // the demo's own temporary store
  const r = spawnSync(process.execPath, [path.join(ROOT, 'demo', 'demo.js')], { encoding: 'utf8', env })
  assert.equal(r.status, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /✓ recalled from the earlier session: Decision: keep every date in UTC/)
  assert.match(r.stdout, /✓ nothing acknowledged was lost/)
  assert.doesNotMatch(r.stdout, /✗ (LOST|the search|the earlier)/)
})
