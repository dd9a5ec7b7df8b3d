'use strict'
// The suite on PostgreSQL. __test__/postgres.test.js runs test files again with
// THREADLINE_TEST_ENGINE=postgres and this file loaded into every node process they start
// (NODE_OPTIONS=--require). Then every store a test opens by a file path (or ':memory:') is
// opened on the test server instead, in a schema of its own named for that path (so a child
// process opening the same path opens the same schema): the same test files run on both engines,
// as libsql-js runs its suite.

const crypto = require('node:crypto')
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')

function install() {
  if (process.env.THREADLINE_TEST_ENGINE !== 'postgres') return
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (!base) throw new Error('THREADLINE_TEST_ENGINE=postgres needs THREADLINE_TEST_POSTGRES (npm test starts a server)')
  const sep = base.includes('?') ? '&' : '?'
  let memories = 0
  // One schema per path in this process; ':memory:' is a new one each time, as it is on SQLite.
  const url = (p) => {
    if (typeof p === 'string' && p.startsWith('postgres')) return p
    const key = p === undefined || p === ':memory:' ? `memory-${process.pid}-${memories++}-${Date.now()}` : path.resolve(String(p))
    const schema = `t_${crypto.createHash('sha256').update(key).digest('hex').slice(0, 20)}`
    return `${base}${sep}schema=${schema}`
  }
  for (const mod of [require(ROOT), require(path.join(ROOT, 'promise.js'))]) {
    const open = mod.Store.open
    mod.Store.open = (p, o) => open.call(mod.Store, url(p), o)
    if (mod.Store.openAsync) {
      const openAsync = mod.Store.openAsync
      mod.Store.openAsync = (p, o) => openAsync.call(mod.Store, url(p), o)
    }
  }
}

install()

module.exports = { onPostgres: process.env.THREADLINE_TEST_ENGINE === 'postgres' }
