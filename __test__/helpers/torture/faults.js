'use strict'
// Where the fault test's processes reach the store, and the faults it injects besides killing
// and stopping workers: a PostgreSQL restart (`pg_ctl restart -m fast`) and a frozen server
// (SIGSTOP of the postmaster and its backends, then SIGCONT). Only the test's own server is
// touched: the one scripts/postgres.js started, named by THREADLINE_TEST_POSTGRES_STATE. On
// SQLite, a full disk: the store's folder is a file system of its own (a tmpfs, which needs
// root) made as small as what it holds for a while.

const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')

const POSTGRES = path.join(__dirname, '..', '..', '..', 'scripts', 'postgres.js')

// SQLite: one store file reached four ways (R6). Returns { dir, variants: { name: path } } with
// paths relative to `dir` where relative (the workers run with `dir` as their cwd).
function sqlitePaths(dir, { smallDisk = false } = {}) {
  fs.mkdirSync(path.join(dir, 'real'))
  if (smallDisk) mountSmall(path.join(dir, 'real'))
  const real = path.join(dir, 'real', 'store.db')
  fs.symlinkSync(real, path.join(dir, 'link.db'))
  fs.symlinkSync(path.join(dir, 'real'), path.join(dir, 'dirlink'))
  return { real, variants: { real, 'file-link': path.join(dir, 'link.db'), 'dir-link': path.join(dir, 'dirlink', 'store.db'), relative: path.join('real', 'store.db') } }
}

// The store's folder as a tmpfs of 1 GiB, so that it can be filled (`fill`). Needs root
// and mount(8): canFill() says whether this run can.
function canFill() {
  return process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0
}

function mountSmall(dir) {
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1g,mode=0755', 'tmpfs', dir], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`mount tmpfs on ${dir}: ${r.stderr}`)
}

function unmountSmall(dir) {
  spawnSync('umount', ['-l', dir])
}

// Fills the file system of `dir` for `ms`: the tmpfs is made as small as what it holds (a
// remount, at once: no ballast to write, which would hold up the controller), then 1 GiB again.
// Resolves once it has room again.
function fill(dir, ms) {
  const mount = (size) => new Promise((resolve) => {
    const child = spawn('mount', ['-o', `remount,size=${size}`, dir], { stdio: 'ignore' })
    child.on('exit', resolve)
    child.on('error', resolve)
  })
  const st = fs.statfsSync(dir)
  const used = (st.blocks - st.bfree) * st.bsize
  return mount(Math.max(used, st.bsize))
    .then(() => new Promise((resolve) => setTimeout(resolve, ms)))
    .then(() => mount('1g'))
}

// PostgreSQL: the same schema through URLs that differ in what does not name the store.
function postgresUrls(base, schema) {
  const url = `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`
  return { real: url, variants: { real: url, 'app-name': `${url}&application_name=torture`, 'ssl-off': `${url}&sslmode=disable`, 'connect-timeout': `${url}&connect_timeout=20` } }
}

// Whether process `pid` holds SQLite's write lock on the store at `real`: a POSIX lock on byte
// 120 of its -shm file (WAL_WRITE_LOCK), as /proc/locks lists it. A process stopped while it
// holds it was inside a commit or a RESTART checkpoint (docs/recovery.md: others wait for it
// until it runs again).
const WRITE_LOCK = 120

// The processes that hold SQLite's write lock on the store at `real` (see holdsWriteLock).
function writeLockHolders(real) {
  let ino
  let locks = ''
  try {
    ino = fs.statSync(`${real}-shm`).ino
    locks = fs.readFileSync('/proc/locks', 'utf8')
  } catch {
    return []
  }
  return locks.split('\n').flatMap((l) => {
    const f = l.trim().split(/\s+/)
    if (f[1] !== 'POSIX' || f[3] !== 'WRITE' || Number(f[5]?.split(':')[2]) !== ino) return []
    return Number(f[6]) <= WRITE_LOCK && (f[7] === 'EOF' || Number(f[7]) >= WRITE_LOCK) ? [Number(f[4])] : []
  })
}
function holdsWriteLock(pid, real) {
  let ino
  try {
    ino = fs.statSync(`${real}-shm`).ino
  } catch {
    return false
  }
  let locks = ''
  try {
    locks = fs.readFileSync('/proc/locks', 'utf8')
  } catch {
    return false
  }
  return locks.split('\n').some((l) => {
    const f = l.trim().split(/\s+/)
    // "1: POSIX  ADVISORY  WRITE 1234 00:2a:5678 120 121": the kernel merges a process's locks
    // on adjacent bytes into one range, so a checkpoint's (write lock 120 and checkpoint lock
    // 121 held together) shows as 120-121. Blocked waiters' lines ("1: -> POSIX ...") hold
    // nothing.
    if (f[1] !== 'POSIX' || f[3] !== 'WRITE' || Number(f[4]) !== pid) return false
    if (Number(f[5]?.split(':')[2]) !== ino) return false
    return Number(f[6]) <= WRITE_LOCK && (f[7] === 'EOF' || Number(f[7]) >= WRITE_LOCK)
  })
}

// The locks process `pid` holds on the files beside the store at `real` (the store, its -wal and
// -shm, the append logs), as /proc/locks lists them: "POSIX WRITE s.db-shm 120-121", "FLOCK WRITE
// ...". Said with an R5 violation: a stopped process holds them until it runs again.
function locksHeld(pid, real) {
  const names = new Map()
  const dir = path.dirname(real)
  const look = (d, depth) => {
    let entries = []
    try {
      entries = fs.readdirSync(d, { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      const p = path.join(d, e.name)
      if (e.isDirectory() && depth < 2) look(p, depth + 1)
      else if (e.isFile()) {
        try {
          names.set(fs.statSync(p).ino, path.relative(dir, p))
        } catch {}
      }
    }
  }
  look(dir, 0)
  let locks = ''
  try {
    locks = fs.readFileSync('/proc/locks', 'utf8')
  } catch {
    return []
  }
  return locks.split('\n').flatMap((l) => {
    const f = l.trim().split(/\s+/)
    if (f[1] === '->' || Number(f[4]) !== pid) return []
    const name = names.get(Number(f[5]?.split(':')[2]))
    return name ? [`${f[1]} ${f[3]} ${name} ${f[6]}-${f[7]}`] : []
  })
}

// Whether process `pid` is stopped (state T).
function isStopped(pid) {
  try {
    return /^\d+ \(.*\) [Tt] /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

function restartServer() {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [POSTGRES, 'restart'], { stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    child.stderr.on('data', (d) => { err += d })
    child.on('exit', (code) => resolve(code === 0 ? null : `pg_ctl restart failed: ${err}`))
  })
}

// The postmaster and its children (backends, background workers).
function serverPids() {
  const state = JSON.parse(fs.readFileSync(process.env.THREADLINE_TEST_POSTGRES_STATE, 'utf8'))
  const postmaster = Number(fs.readFileSync(path.join(state.data, 'postmaster.pid'), 'utf8').split('\n')[0])
  const children = []
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) children.push(Number(p))
    } catch {}
  }
  return [postmaster, ...children]
}

// Freezes the server for `ms`; resolves once it runs again.
function freezeServer(ms) {
  const pids = serverPids()
  const signal = (sig) => {
    for (const pid of pids) {
      try {
        process.kill(pid, sig)
      } catch {}
    }
  }
  signal('SIGSTOP')
  return new Promise((resolve) => setTimeout(() => {
    signal('SIGCONT')
    resolve()
  }, ms))
}

// The ports of a PostgreSQL URL's hosts (a multi-host URL has several; 5432 where none is said).
function serverPorts(url) {
  const hosts = /^[a-z]+:\/\/(?:[^@/]*@)?([^/?]*)/i.exec(url)?.[1] || ''
  return hosts.split(',').map((h) => Number(/:(\d+)$/.exec(h)?.[1]) || 5432)
}

// How many PostgreSQL backends on `ports` have lost their client (a worker SIGKILLed) and not
// ended yet: their sockets in CLOSE_WAIT or CLOSE, still open. Such a backend may still run what
// it was sent before the kill, a COMMIT included, so what the killed worker had in flight is
// decided only once none is left (/proc/net/tcp: the state is the 4th column, the inode the 10th).
function orphanBackends(ports) {
  let n = 0
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = ''
    try {
      text = fs.readFileSync(file, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const c = line.trim().split(/\s+/)
      if (c.length < 10) continue
      const local = parseInt(c[1].split(':')[1], 16)
      if (ports.includes(local) && (c[3] === '08' || c[3] === '07') && c[9] !== '0') n++
    }
  }
  return n
}

module.exports = { orphanBackends, serverPorts, sqlitePaths, canFill, fill, unmountSmall, postgresUrls, restartServer, freezeServer, holdsWriteLock, writeLockHolders, locksHeld, isStopped }
