'use strict'
// A pg_auto_failover formation on loopback for the failover test (__test__/failover.test.js): a
// monitor, a primary and a secondary (synchronous replication: the formation's default with one
// standby whose replication quorum is on), each a `pg_autoctl run` keeper over its own
// postmaster, in a temporary directory, on free ports. Debian's postgresql-NN-auto-failover
// package gives pg_autoctl (.ci/run installs it).
//
//   const f = await require('./failover.js').start()
//   f.uri()                 the formation's multi-host URL (`pg_autoctl show uri`)
//   f.primary()             the node that is primary now ({ name, port, pgdata })
//   f.kill(node)            SIGKILL of the node's keeper, postmaster and backends: the node is gone
//   f.revive(node)          its keeper started again: it rejoins as a secondary
//   f.failover()            `pg_autoctl perform failover` (waits until it is done)
//   f.stop()                stops everything and removes the directory
//
// The monitor's health checks are tightened (1 s period, a node unhealthy after 3 s, 3 s for an
// unreachable primary to demote itself) so that a killed primary is replaced within seconds
// rather than the default half minute and more. As root, the
// keepers run as the system user threadline-pg (initdb refuses root), as scripts/postgres.js does.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')

const { USER, ensureUser, freePort } = require('./postgres.js')
const isRoot = process.getuid?.() === 0
// initdb makes the user who runs it the superuser
const SUPERUSER = isRoot ? USER : os.userInfo().username

// The server's binaries (pg_ctl, psql), and pg_autoctl (in /usr/bin from Debian's package).
function binDir() {
  const base = '/usr/lib/postgresql'
  const versions = fs.existsSync(base) ? fs.readdirSync(base).filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a) : []
  const found = versions.map((v) => path.join(base, v, 'bin')).find((d) => fs.existsSync(path.join(d, 'pg_ctl')))
  if (!found) throw new Error('PostgreSQL server binaries not found. Install them: apt-get install postgresql')
  if (spawnSync('pg_autoctl', ['version'], { env: { ...process.env, PATH: `${found}:${process.env.PATH}` } }).status !== 0) {
    throw new Error(`pg_autoctl not found. Install it: apt-get install postgresql-${path.basename(path.dirname(found))}-auto-failover`)
  }
  return found
}

async function start() {
  const bin = binDir()
  ensureUser()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-failover-'))
  if (isRoot) spawnSync('chown', ['-R', USER, dir])
  // pg_autoctl keeps its state under XDG directories: ours, in the formation's directory.
  const env = {
    PATH: `${bin}:${process.env.PATH}`,
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    XDG_DATA_HOME: path.join(dir, 'data'),
    PG_REGRESS_SOCK_DIR: dir,
    PGHOST: dir,
  }
  const keepers = new Map() // name -> child
  const as = (args) => (isRoot ? ['runuser', ['-u', USER, '--', 'env', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...args]] : [args[0], args.slice(1)])
  const sync = (...args) => {
    const [c, a] = as(args)
    const r = spawnSync(c, a, { encoding: 'utf8', cwd: dir, env: { ...process.env, ...env } })
    if (r.status !== 0) throw new Error(`${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`)
    return r.stdout
  }
  // The same, without blocking the caller's event loop (a failover takes seconds, and the fault
  // test's controller goes on meanwhile).
  const later = (...args) => new Promise((resolve, reject) => {
    const [c, a] = as(args)
    const child = spawn(c, a, { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { out += d })
    child.on('error', reject)
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${args.join(' ')} failed (${code}):\n${out}`))))
  })
  const run = (node) => {
    const [c, a] = as(['pg_autoctl', 'run', '--pgdata', node.pgdata])
    const log = fs.openSync(path.join(dir, `${node.name}.log`), 'a')
    const child = spawn(c, a, { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', log, log], detached: true })
    fs.closeSync(log)
    keepers.set(node.name, child)
  }
  const monitor = { name: 'monitor', pgdata: path.join(dir, 'monitor'), port: await freePort() }
  const nodes = []
  // Everything started is stopped, on success by `stop()`, on a failure here at once.
  const stopAll = () => {
    for (const [, k] of keepers) { try { process.kill(-k.pid, 'SIGTERM') } catch {} }
    for (const n of [...nodes, monitor]) {
      const ctl = as([path.join(bin, 'pg_ctl'), 'stop', '-D', n.pgdata, '-m', 'immediate'])
      spawnSync(ctl[0], ctl[1], { stdio: 'ignore' })
    }
    for (const [, k] of keepers) { try { process.kill(-k.pid, 'SIGKILL') } catch {} }
    fs.rmSync(dir, { recursive: true, force: true })
  }
  try {
    return await formation()
  } catch (e) {
    stopAll()
    throw e
  }

  async function formation() {
    sync('pg_autoctl', 'create', 'monitor', '--pgdata', monitor.pgdata, '--pgport', String(monitor.port), '--hostname', '127.0.0.1',
      '--auth', 'trust', '--no-ssl', '--pgctl', path.join(bin, 'pg_ctl'))
    run(monitor)
    const monitorUrl = `postgres://autoctl_node@127.0.0.1:${monitor.port}/pg_auto_failover?sslmode=disable`
    const psql = (url, statement) => sync('psql', url, '-v', 'ON_ERROR_STOP=1', '-qAtc', statement).trim()
    await until(() => { try { psql(monitorUrl, 'SELECT 1'); return true } catch { return false } }, 'the monitor answers')
    const monitorAdmin = `postgres://${SUPERUSER}@127.0.0.1:${monitor.port}/pg_auto_failover?sslmode=disable`
    for (const [k, v] of [['health_check_period', 1000], ['health_check_timeout', 1000], ['health_check_max_retries', 1],
      ['health_check_retry_delay', 500], ['node_considered_unhealthy_timeout', 3000],
      // how long the monitor waits for an unreachable primary to demote itself before it promotes
      // the standby (default 30 s, against a split brain; ours is known dead)
      ['primary_demote_timeout', 3000]]) {
      psql(monitorAdmin, `ALTER SYSTEM SET pgautofailover.${k} = ${v}`)
    }
    psql(monitorAdmin, 'SELECT pg_reload_conf()')
    for (const name of ['node1', 'node2']) {
      const node = { name, pgdata: path.join(dir, name), port: await freePort() }
      sync('pg_autoctl', 'create', 'postgres', '--pgdata', node.pgdata, '--pgport', String(node.port), '--hostname', '127.0.0.1',
        '--listen', '127.0.0.1', '--name', name, '--dbname', 'threadline_test', '--auth', 'trust', '--no-ssl', '--monitor', monitorUrl, '--pgctl', path.join(bin, 'pg_ctl'))
      run(node)
      nodes.push(node)
      // the first is primary before the second is made, so the second is its standby
      await until(() => states(psql, monitorUrl).some((s) => s.name === name && /^(single|primary|secondary)$/.test(s.reported)), `${name} is up`)
    }
    await until(() => settled(states(psql, monitorUrl)), 'a primary and a secondary')

    const f = {
      dir,
      nodes,
      monitorUrl,
      states: () => states(psql, monitorUrl),
      uri: () => sync('pg_autoctl', 'show', 'uri', '--pgdata', monitor.pgdata, '--formation', 'default').trim(),
      // (alone after a failure, a primary is wait_primary: it commits without a standby)
      primary: () => nodes.find((n) => states(psql, monitorUrl).some((s) => s.name === n.name && /^(primary|wait_primary)$/.test(s.reported) && s.goal === s.reported)),
      sql: (node, statement) => psql(`postgres://${SUPERUSER}@127.0.0.1:${node.port}/threadline_test?sslmode=disable`, statement),
      kill(node) {
        const keeper = keepers.get(node.name)
        const pid = Number(fs.readFileSync(path.join(node.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0])
        // its backends too: one left alone answers its client until it sees the postmaster gone
        const backends = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).stdout
          .split('\n').map(Number).filter(Boolean)
        // the keeper first (it would restart the postmaster), its whole process group, then the
        // postmaster and its backends: the node is gone, as when its host dies
        try { process.kill(-keeper.pid, 'SIGKILL') } catch {}
        try { process.kill(pid, 'SIGKILL') } catch {} // gone with its keeper's group already
        for (const b of backends) { try { process.kill(b, 'SIGKILL') } catch {} }
        keepers.delete(node.name)
      },
      revive(node) {
        run(node)
      },
      async failover() {
        await later('pg_autoctl', 'perform', 'failover', '--pgdata', monitor.pgdata, '--formation', 'default', '--wait', '60')
        await until(() => settled(states(psql, monitorUrl)), 'a primary and a secondary after the failover')
      },
      async settle() {
        await until(() => settled(states(psql, monitorUrl)), 'a primary and a secondary')
      },
      stop: stopAll,
    }
    return f
  }
}

// The monitor's view: each node's reported and goal state.
function states(psql, monitorUrl) {
  const out = psql(monitorUrl, "SELECT nodename || ' ' || reportedstate || ' ' || goalstate FROM pgautofailover.node")
  return out.split('\n').filter(Boolean).map((l) => {
    const [name, reported, goal] = l.split(' ')
    return { name, reported, goal }
  })
}

function settled(s) {
  return s.length === 2 && s.some((n) => n.reported === 'primary' && n.goal === 'primary') &&
    s.some((n) => n.reported === 'secondary' && n.goal === 'secondary')
}

async function until(ok, what, ms = 120_000) {
  const end = Date.now() + ms
  while (!ok()) {
    if (Date.now() > end) throw new Error(`failover.js: timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

module.exports = { start }
