'use strict'
// The append log of a SQLite store (docs/recovery.md, "The append log"): appends acknowledged
// before their batch reached SQLite survive a SIGKILL and come back in a new process; other
// processes see appends within a few milliseconds while the writer lives and after it exits
// without closing; two writer processes take turns instead of one starving the other.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { once } = require('node:events')

const { lib, tmpDir, readInNewProcess } = require('./helpers/util')

const { Store } = lib
const ROOT = path.join(__dirname, '..')

// Runs `code` in a new node process with the library as `Store` and argv after it.
function node(code, args, options = {}) {
  const prelude = `const { Store } = require(${JSON.stringify(ROOT)});`
  return spawnSync(process.execPath, ['-e', prelude + code, ...args], { encoding: 'utf8', maxBuffer: 64 << 20, ...options })
}

const logsOf = (file) => fs.readdirSync(path.dirname(file)).filter((f) => f.startsWith(`${path.basename(file)}-tl-`))

// A writer process that opens session `id` of `file` (`create`: makes it), appends `n` prompts
// back to back and kills itself at once with SIGKILL, its last batch (the last 2 ms of appends)
// in its append log only. Returns the uuids it acknowledged.
function killedWriter(file, id, n, create) {
  const r = node(`
    const store = Store.open(process.argv[1])
    const s = process.argv[3] === 'create' ? store.createSession({ id: process.argv[2] }) : store.openSession(process.argv[2])
    const acked = []
    for (let i = 0; i < Number(process.argv[4]); i++) acked.push(s.append({ role: 'user', content: 'prompt ' + i }).uuid)
    require('fs').writeSync(1, JSON.stringify(acked))
    process.kill(process.pid, 'SIGKILL')
  `, [file, id, create ? 'create' : 'open', String(n)])
  assert.equal(r.signal, 'SIGKILL', r.stderr)
  const acked = JSON.parse(r.stdout)
  assert.equal(acked.length, n)
  return acked
}

test('a writer SIGKILLed with its batch open: every acknowledged append is there in a new process, replayed from its log', (t) => {
  const file = path.join(tmpDir(t), 'killed.db')
  const acked = killedWriter(file, 'k', 300, true)
  assert.equal(logsOf(file).length, 1, 'the killed writer left its append log')

  // What SQLite holds without the log: a readonly store does not replay it.
  const ro = Store.open(file, { readonly: true })
  const committed = ro.openSession('k').envelopes().map((e) => e.uuid)
  ro.close()
  assert.deepStrictEqual(committed, acked.slice(0, committed.length), 'SQLite holds a prefix of the acknowledged appends')

  // A new process that opens it for writing: all 300, in order, and the log is gone.
  const read = readInNewProcess(file, 'k')
  assert.deepStrictEqual(read.envelopes.map((e) => e.uuid), acked)
  read.envelopes.forEach((e, i) => {
    assert.equal(e.seq, i)
    assert.equal(e.parentUuid, i ? acked[i - 1] : null)
  })
  assert.deepStrictEqual(logsOf(file), [])
  // Opening again replays nothing twice.
  const again = Store.open(file)
  assert.equal(again.openSession('k').envelopes().length, 300)
  again.close()
})

test('a process that had the store open before the writer was killed gets its appends from interruptedSessions() and from taking the session over', (t) => {
  const file = path.join(tmpDir(t), 'watch.db')
  const watcher = Store.open(file)
  watcher.createSession({ id: 'w' }).close()
  const acked = killedWriter(file, 'w', 50, false)
  const interrupted = watcher.interruptedSessions()
  assert.deepStrictEqual(interrupted.map((i) => i.id), ['w'])
  assert.equal(interrupted[0].messageCount, 50)
  const s = watcher.openSession('w')
  assert.deepStrictEqual(s.envelopes().map((e) => e.uuid), acked)
  const next = s.append('after the kill')
  assert.equal(next.seq, 50)
  assert.equal(next.parentUuid, acked[49])
  watcher.close()
})

test('another process sees appends within milliseconds while the writer lives, and all of them after it exits without closing', async (t) => {
  const file = path.join(tmpDir(t), 'live.db')
  const child = spawn(process.execPath, ['-e', `
    const { Store } = require(${JSON.stringify(ROOT)})
    const store = Store.open(process.argv[1])
    const s = store.createSession({ id: 'live' })
    for (let i = 0; i < 20; i++) s.append({ role: 'user', content: 'live ' + i })
    process.stdout.write('appended\\n')
    process.stdin.on('data', () => {
      for (let i = 20; i < 30; i++) s.append({ role: 'user', content: 'live ' + i })
      process.exit(0) // no close: the open batch is committed at exit
    })
  `, file], { stdio: ['pipe', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.setEncoding('utf8')
  await new Promise((resolve) => child.stdout.on('data', (d) => { out += d; if (out.includes('appended\n')) resolve() }))
  // The writer is alive and idle: its last batch is committed by its background thread.
  await new Promise((resolve) => setTimeout(resolve, 50))
  const live = readInNewProcess(file, 'live', { readonly: true })
  assert.equal(live.envelopes.length, 20, 'a reader sees every append of a live writer within 50 ms')
  child.stdin.write('go\n')
  const [code] = await once(child, 'exit')
  assert.equal(code, 0)
  const after = readInNewProcess(file, 'live', { readonly: true })
  assert.equal(after.envelopes.length, 30, 'committed at exit')
  assert.deepStrictEqual(logsOf(file), [], 'the log goes with a process that exits')
})

test('two stores of one process on one file, opened with other settings, see each other\'s appends at once', (t) => {
  const file = path.join(tmpDir(t), 'two.db')
  const a = Store.open(file)
  const b = Store.open(file, { busyTimeoutMs: 1234 })
  const ro = Store.open(file, { readonly: true })
  const s = a.createSession({ id: 'two' })
  s.append('first')
  assert.equal(b.openSession('two').envelopes().length, 1)
  assert.equal(ro.openSession('two').envelopes().length, 1)
  s.append('second')
  const sb = b.openSession('two')
  assert.equal(sb.envelopes().length, 2)
  // and the other way round: b writes while a's batch is open
  s.append('third')
  b.createSession({ id: 'other' }).append('from b')
  assert.equal(ro.openSession('other').envelopes().length, 1)
  assert.equal(ro.openSession('two').envelopes().length, 3)
  for (const x of [a, b, ro]) x.close()
})

test('two writer processes appending back to back both make progress (no STORE_BUSY), and every append is stored once', async (t) => {
  const file = path.join(tmpDir(t), 'pair.db')
  const init = Store.open(file)
  init.createSession({ id: 'p0' })
  init.createSession({ id: 'p1' })
  init.close()
  const writer = (id) => spawn(process.execPath, ['-e', `
    const { Store } = require(${JSON.stringify(ROOT)})
    const store = Store.open(process.argv[1])
    const s = store.openSession(process.argv[2])
    const end = Date.now() + 1500
    let n = 0
    while (Date.now() < end) { s.append({ role: 'user', content: 'n ' + n }); n++ }
    store.close()
    process.stdout.write(String(n))
  `, file, id], { stdio: ['ignore', 'pipe', 'pipe'] })
  const children = [writer('p0'), writer('p1')]
  const results = await Promise.all(children.map(async (c) => {
    let out = ''
    let err = ''
    c.stdout.on('data', (d) => { out += d })
    c.stderr.on('data', (d) => { err += d })
    const [code] = await once(c, 'exit')
    return { code, n: Number(out), err }
  }))
  for (const r of results) assert.equal(r.code, 0, r.err)
  const store = Store.open(file)
  results.forEach((r, i) => {
    assert.ok(r.n >= 200, `writer ${i} appended ${r.n} in 1.5 s next to the other`)
    assert.equal(store.openSession(`p${i}`).envelopes().length, r.n)
  })
  store.close()
})
