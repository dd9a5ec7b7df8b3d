'use strict'
// A throwaway PostgreSQL server on loopback for the tests (a temporary directory, a free port),
// so `npm test` and CI run the PostgreSQL tests against a real server.
//
//   node scripts/postgres.js run -- CMD [ARGS...]   start a server, run CMD with
//                                                   THREADLINE_TEST_POSTGRES=<url>, stop it
//                                                   (pass or fail); exits with CMD's status
//   node scripts/postgres.js start                  start one; prints its URL (state in a file
//                                                   named by THREADLINE_TEST_POSTGRES_STATE)
//   node scripts/postgres.js start --read-only      one whose database defaults to read-only
//                                                   transactions (as a standby's sessions are):
//                                                   what target_session_attrs=read-write skips
//   node scripts/postgres.js stop | restart         the server of that state file
//
// The server speaks TLS (and plain connections): a CA and a certificate for localhost and
// 127.0.0.1 are made with openssl; the CA's file is THREADLINE_TEST_POSTGRES_CA. Everyone is
// trusted on loopback but two roles that must use TLS, as on a managed server:
// threadline_scram (password scram-secret) logs in with SCRAM, threadline_cert with the client
// certificate client.crt/client.key beside the CA's file.
// With THREADLINE_TEST_POSTGRES already set, `run` uses that server and starts none.
// initdb refuses to run as root: as root, the server runs as the system user threadline-pg
// (created if missing), through runuser.

const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { spawnSync, spawn } = require('node:child_process')

const USER = 'threadline-pg'
const SCRAM_ROLE = 'threadline_scram'
const CERT_ROLE = 'threadline_cert'
const isRoot = process.getuid?.() === 0

function binDir() {
  const cfg = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' })
  const candidates = []
  if (cfg.status === 0) candidates.push(cfg.stdout.trim())
  const base = '/usr/lib/postgresql'
  if (fs.existsSync(base)) {
    const versions = fs.readdirSync(base).filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a)
    candidates.push(...versions.map((v) => path.join(base, v, 'bin')))
  }
  const found = candidates.find((d) => fs.existsSync(path.join(d, 'initdb')) && fs.existsSync(path.join(d, 'pg_ctl')))
  if (!found) {
    throw new Error('PostgreSQL server binaries (initdb, pg_ctl) not found. Install them: apt-get install postgresql')
  }
  return found
}

function asServerUser(cmd, args, opts = {}) {
  const [c, a] = isRoot ? ['runuser', ['-u', USER, '--', cmd, ...args]] : [cmd, args]
  const r = spawnSync(c, a, { encoding: 'utf8', cwd: os.tmpdir(), ...opts })
  if (r.error) throw r.error
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

function ensureUser() {
  if (!isRoot) return
  if (spawnSync('id', ['-u', USER]).status === 0) return
  const r = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', USER], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`useradd ${USER} failed: ${r.stderr}`)
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

function openssl(args, cwd) {
  const r = spawnSync('openssl', args, { encoding: 'utf8', cwd })
  if (r.error?.code === 'ENOENT') throw new Error('openssl not found (it makes the test server\'s TLS certificates). Install it: apt-get install openssl')
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed (${r.status}):\n${r.stderr}`)
}

// A CA, and a server certificate it signs for localhost and 127.0.0.1; the server's files
// belong to the user it runs as (PostgreSQL refuses a key others can read).
function makeCertificates(dir, owner) {
  const tls = path.join(dir, 'tls')
  fs.mkdirSync(tls)
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '7', '-subj', '/CN=threadline test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], tls)
  openssl(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost'], tls)
  fs.writeFileSync(path.join(tls, 'server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n')
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '7', '-extfile', 'server.ext'], tls)
  // a client certificate for the role that logs in with one (beside ca.crt: client.crt, client.key)
  openssl(['req', ...ec, '-keyout', 'client.key', '-out', 'client.csr', '-subj', `/CN=${CERT_ROLE}`], tls)
  fs.writeFileSync(path.join(tls, 'client.ext'), 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n')
  openssl(['x509', '-req', '-in', 'client.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.crt', '-days', '7', '-extfile', 'client.ext'], tls)
  fs.chmodSync(path.join(tls, 'client.key'), 0o600)
  fs.chmodSync(path.join(tls, 'server.key'), 0o600)
  if (owner) for (const f of ['server.key', 'server.crt']) fs.chownSync(path.join(tls, f), owner.uid, owner.gid)
  return { ca: path.join(tls, 'ca.crt'), cert: path.join(tls, 'server.crt'), key: path.join(tls, 'server.key') }
}

async function start({ readOnly = false } = {}) {
  const bin = binDir()
  ensureUser()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-pg-'))
  const owner = isRoot ? { uid: Number(spawnSync('id', ['-u', USER], { encoding: 'utf8' }).stdout), gid: Number(spawnSync('id', ['-g', USER], { encoding: 'utf8' }).stdout) } : null
  if (owner) fs.chownSync(dir, owner.uid, owner.gid)
  const data = path.join(dir, 'data')
  asServerUser(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync'])
  const tls = makeCertificates(dir, owner)
  const hba = path.join(data, 'pg_hba.conf')
  const only = (role, method) => `hostssl all ${role} 127.0.0.1/32 ${method}\nhost all ${role} 127.0.0.1/32 reject\n`
  fs.writeFileSync(hba, `${only(SCRAM_ROLE, 'scram-sha-256')}${only(CERT_ROLE, 'cert')}${fs.readFileSync(hba, 'utf8')}`)
  const port = await freePort()
  const state = { bin, dir, data, port, tls, url: `postgres://postgres@127.0.0.1:${port}/threadline_test` }
  pgCtl(state, 'start')
  asServerUser(path.join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', 'threadline_test'])
  asServerUser(path.join(bin, 'psql'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', 'threadline_test', '-v', 'ON_ERROR_STOP=1', '-q', '-c',
    `CREATE ROLE ${SCRAM_ROLE} LOGIN PASSWORD 'scram-secret'; GRANT CREATE ON DATABASE threadline_test TO ${SCRAM_ROLE};
     CREATE ROLE ${CERT_ROLE} LOGIN; GRANT CREATE ON DATABASE threadline_test TO ${CERT_ROLE}`])
  if (readOnly) {
    asServerUser(path.join(bin, 'psql'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-q', '-c',
      'ALTER DATABASE threadline_test SET default_transaction_read_only = on'])
  }
  const file = path.join(dir, 'state.json')
  fs.writeFileSync(file, JSON.stringify(state))
  return { ...state, file }
}

function pgCtl(state, action) {
  const settings = [
    '-c listen_addresses=127.0.0.1',
    `-p ${state.port}`,
    `-c unix_socket_directories=${state.dir}`,
    '-c max_connections=300',
    '-c ssl=on',
    `-c ssl_cert_file=${state.tls.cert}`,
    `-c ssl_key_file=${state.tls.key}`,
    `-c ssl_ca_file=${state.tls.ca}`,
  ].join(' ')
  const args = ['-D', state.data, '-l', path.join(state.dir, 'log'), '-w', '-t', '60']
  if (action === 'stop') args.push('-m', 'fast')
  if (action !== 'stop') args.push('-o', settings)
  if (action === 'restart') args.push('-m', 'fast')
  asServerUser(path.join(state.bin, 'pg_ctl'), [action, ...args])
}

function readState(file = process.env.THREADLINE_TEST_POSTGRES_STATE) {
  if (!file) throw new Error('THREADLINE_TEST_POSTGRES_STATE is not set: no server of ours to act on')
  return JSON.parse(fs.readFileSync(file, 'utf8'))
}

function stop(file) {
  const state = readState(file)
  try {
    pgCtl(state, 'stop')
  } finally {
    fs.rmSync(state.dir, { recursive: true, force: true })
  }
}

function restart(file) {
  pgCtl(readState(file), 'restart')
}

async function run(cmd, args) {
  if (process.env.THREADLINE_TEST_POSTGRES) {
    return spawnSync(cmd, args, { stdio: 'inherit' }).status ?? 1
  }
  const server = await start()
  console.error(`postgres.js: PostgreSQL on ${server.url} (${server.dir})`)
  const env = { ...process.env, THREADLINE_TEST_POSTGRES: server.url, THREADLINE_TEST_POSTGRES_STATE: server.file, THREADLINE_TEST_POSTGRES_CA: server.tls.ca }
  const child = spawn(cmd, args, { stdio: 'inherit', env })
  const forward = (sig) => child.kill(sig)
  process.on('SIGINT', forward)
  process.on('SIGTERM', forward)
  const status = await new Promise((resolve) => child.on('exit', (code, sig) => resolve(code ?? (sig ? 128 : 1))))
  try {
    stop(server.file)
  } catch (e) {
    console.error(`postgres.js: stopping the server failed: ${e.message}`)
    return status || 1
  }
  return status
}

async function main() {
  const [command, ...rest] = process.argv.slice(2)
  if (command === 'run') {
    const i = rest.indexOf('--')
    const [cmd, ...args] = i >= 0 ? rest.slice(i + 1) : rest
    if (!cmd) throw new Error('usage: node scripts/postgres.js run -- CMD [ARGS...]')
    process.exitCode = await run(cmd, args)
  } else if (command === 'start') {
    const s = await start({ readOnly: rest.includes('--read-only') })
    console.log(`THREADLINE_TEST_POSTGRES=${s.url}`)
    console.log(`THREADLINE_TEST_POSTGRES_STATE=${s.file}`)
    console.log(`THREADLINE_TEST_POSTGRES_CA=${s.tls.ca}`)
  } else if (command === 'stop') {
    stop()
  } else if (command === 'restart') {
    restart()
  } else {
    throw new Error('usage: node scripts/postgres.js run -- CMD [ARGS...] | start | stop | restart')
  }
}

// USER, ensureUser and freePort: for scripts/failover.js, whose servers run as the same user
module.exports = { start, stop, restart, USER, ensureUser, freePort }

if (require.main === module) {
  main().catch((e) => {
    console.error(`postgres.js: ${e.message}`)
    process.exit(1)
  })
}
