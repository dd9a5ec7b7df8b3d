'use strict'
// Paths are paths: a store path is never read as an SQLite URI, nothing is created that the
// caller did not ask for, and what is created is private (0600 files, 0700 directories).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { lib, ROOT, tmpDir, expectError } = require('./helpers/util')

const { Store } = lib
const mode = (p) => fs.statSync(p).mode & 0o777

test('a file: name is a relative path, not a URI: mode=memory, nolock and immutable do nothing', (t) => {
  const dir = tmpDir(t)
  fs.mkdirSync(path.join(dir, 'file:'))
  for (const query of ['mode=memory', 'nolock=1', 'immutable=1']) {
    const name = `file:/s-${query.replace('=', '')}.db?${query}`
    const r = spawnSync(process.execPath, ['-e', `
      const { Store } = require(${JSON.stringify(ROOT)})
      const s = Store.open(process.argv[1]); s.createSession({ id: 'x' }).append('kept on disk'); s.close()
      const back = Store.open(process.argv[1]).openSession('x').messages
      process.stdout.write(JSON.stringify(back))
    `, name], { cwd: dir, encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.deepEqual(JSON.parse(r.stdout), [{ role: 'user', content: [{ type: 'text', text: 'kept on disk' }] }])
    // The file is where the path says, under the directory named `file:` of the working dir.
    const onDisk = path.join(dir, 'file:', `s-${query.replace('=', '')}.db?${query}`)
    assert.ok(fs.statSync(onDisk).size > 0, `${query}: written to ${onDisk}`)
  }
})

test('a path whose directory does not exist is STORE_IO naming it, and nothing is created', (t) => {
  const dir = tmpDir(t)
  const missing = path.join(dir, 'no', 'such')
  expectError(() => Store.open(path.join(missing, 's.db')), 'STORE_IO', missing)
  assert.deepEqual(fs.readdirSync(dir), [])
  // The same for a file: name: no stray `file:` directory tree.
  const r = spawnSync(process.execPath, ['-e', `
    const { Store } = require(${JSON.stringify(ROOT)})
    try { Store.open('file:/x/s.db?mode=memory'); process.exit(3) } catch (e) { process.stdout.write(e.code) }
  `], { cwd: dir, encoding: 'utf8' })
  assert.equal(r.stdout, 'STORE_IO', r.stderr)
  assert.deepEqual(fs.readdirSync(dir), [])
})

test('the default location is created, its directories 0700 and the file 0600', (t) => {
  const home = path.join(tmpDir(t), 'a', 'b')
  const r = spawnSync(process.execPath, ['-e', `
    const { Store } = require(${JSON.stringify(ROOT)})
    const s = Store.open(); s.createSession().append('hi'); s.close()
  `], { env: { ...process.env, THREADLINE_HOME: home }, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(mode(home), 0o700)
  assert.equal(mode(path.dirname(home)), 0o700)
  assert.equal(mode(path.join(home, 'threadline.db')), 0o600)
})

test('a dangling symlink at the store path: its target is created 0600', (t) => {
  const dir = tmpDir(t)
  const target = path.join(dir, 'real.db')
  const link = path.join(dir, 'link.db')
  fs.symlinkSync(target, link)
  const old = process.umask(0o022)
  try {
    const store = Store.open(link)
    store.createSession().append('secret')
    store.close()
  } finally {
    process.umask(old)
  }
  assert.equal(mode(target), 0o600)
})

test('a postgres:// URL is never taken for a file path: malformed ones name the problem, and no file is made', (t) => {
  const dir = tmpDir(t)
  const cwd = process.cwd()
  process.chdir(dir)
  t.after(() => process.chdir(cwd))
  expectError(() => Store.open('postgres://me@127.0.0.1:5432/db?schema=Team'), 'INVALID_INPUT', "schema 'Team'", 'lowercase')
  expectError(() => Store.open('postgresql://me@127.0.0.1/db?sslmode=verify-full&sslrootcert=ca.pem'), 'INVALID_INPUT', 'sslrootcert', "cannot read 'ca.pem'")
  // a well-formed one is a server to connect to (nothing listens on port 1)
  expectError(() => Store.open('postgres://me@127.0.0.1:1/db', { busyTimeoutMs: 500 }), 'STORE_IO')
  assert.deepEqual(fs.readdirSync(dir), [])
})
