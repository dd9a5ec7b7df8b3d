'use strict'
// threadline doctor (what needs repair and what does not, the store's size, --vacuum), recover,
// close and backup, run as a script runs them.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { lib, tmpDir } = require('./helpers/util')

const { Store } = lib
const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'threadline.js')

function cli(...args) {
  const env = { ...process.env }
  delete env.FORCE_COLOR
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

function json(...args) {
  const r = cli(...args, '--json')
  assert.equal(r.status, 0, `${args.join(' ')}: ${r.stdout}${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** Runs `code` (with `store` open on `file`) in a process that exits without closing anything. */
function leaveActive(file, code) {
  const r = spawnSync(process.execPath, ['-e', `const { Store } = require(${JSON.stringify(ROOT)}); const store = Store.open(process.argv[1]); ${code}`, file], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
}

const ENDED = `const s = store.createSession({ id: 'ended' }); s.append('hi'); s.append({ role: 'assistant', content: [{ type: 'text', text: 'hello' }] })`
const CUT = `const s = store.createSession({ id: 'cut' }); s.append('run ls'); s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }] })`

test('doctor: a session that ended without close() and has nothing to repair is reported, exit 0', (t) => {
  const file = path.join(tmpDir(t), 'ended.db')
  leaveActive(file, ENDED)
  const r = cli('doctor', '--store', file)
  assert.equal(r.status, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /^sessions with pending repairs: 0 ok$/m)
  assert.match(r.stdout, /^sessions ended without close\(\), nothing to repair: 1 ok\n {2}ended \(no project, last written /m)
  assert.match(r.stdout, /Mark one as ended with: threadline close ended/)
  const j = json('doctor', '--store', file)
  assert.equal(j.healthy, true)
  assert.deepEqual(j.endedWithoutClose, ['ended'])
  assert.deepEqual(j.interrupted.map((s) => [s.id, s.needsRepair]), [['ended', false]])
})

test('doctor: a session left with a call and no result needs repair (exit 3, the hint names recover); recover repairs it', (t) => {
  const file = path.join(tmpDir(t), 'cut.db')
  leaveActive(file, CUT)
  const r = cli('doctor', '--store', file)
  assert.equal(r.status, 3, r.stdout + r.stderr)
  assert.match(r.stdout, /^sessions with pending repairs: 1 attention\n {2}cut: never_started toolu_1$/m)
  assert.match(r.stdout, /Repair a session with: threadline recover cut/)
  assert.deepEqual(JSON.parse(cli('doctor', '--store', file, '--json').stdout).interrupted.map((s) => [s.id, s.needsRepair]), [['cut', true]])

  const report = json('recover', 'cut', '--store', file)
  assert.equal(report.sessionId, 'cut')
  assert.equal(report.clean, false)
  assert.deepEqual(report.repairs.map((x) => [x.kind, x.toolUseId]), [['never_started', 'toolu_1']])
  assert.equal(report.recordsWritten, 1)
  const store = Store.open(file, { readonly: true })
  assert.deepEqual(store.openSession('cut').pendingRepairs(), [])
  store.close()
  // repaired: nothing left to do, exit 0; a second recover has nothing to do either
  assert.equal(cli('doctor', '--store', file).status, 0)
  assert.match(cli('recover', 'cut', '--store', file).stdout, /^cut: nothing to repair$/m)
})

test('close: a session left active is marked completed or interrupted by how its last turn ended, and says why', (t) => {
  const file = path.join(tmpDir(t), 'close.db')
  leaveActive(file, `${ENDED}; { ${CUT} }`)
  assert.deepEqual(json('close', 'ended', '--store', file), { sessionId: 'ended', status: 'completed', changed: true, reason: 'its last turn ended with the answer' })
  const cut = json('close', 'cut', '--store', file)
  assert.equal(cut.status, 'interrupted')
  assert.match(cut.reason, /1 repairs pending \(threadline recover repairs them\)/)
  // already closed: unchanged
  assert.deepEqual(json('close', 'ended', '--store', file), { sessionId: 'ended', status: 'completed', changed: false, reason: 'it is already completed' })
  const store = Store.open(file, { readonly: true })
  assert.deepEqual(store.listSessions().map((s) => [s.id, s.status]).sort(), [['cut', 'interrupted'], ['ended', 'completed']])
  store.close()
  // closed, so not ended without close(); 'cut' still needs its repair (exit 3)
  const d = cli('doctor', '--store', file, '--json')
  assert.equal(d.status, 3)
  const report = JSON.parse(d.stdout)
  assert.deepEqual(report.endedWithoutClose, [])
  assert.deepEqual(report.pendingRepairs.map((r) => r.sessionId), ['cut'])

  const other = path.join(tmpDir(t), 'as.db')
  leaveActive(other, CUT)
  assert.match(cli('close', 'cut', '--as', 'completed', '--store', other).stdout, /^cut: marked completed: as --as says$/m)
  const missing = cli('close', 'nope', '--store', other)
  assert.equal(missing.status, 1)
  assert.match(missing.stderr, /^threadline: NOT_FOUND: /)
})

test('doctor shows the store size and free pages; --vacuum gives them back and reports before and after', (t) => {
  const file = path.join(tmpDir(t), 'v.db')
  const store = Store.open(file)
  const s = store.createSession({ id: 'big' })
  for (let i = 0; i < 100; i++) s.append(`${i} ${'words '.repeat(400)}`)
  store.createSession({ id: 'small' }).append('kept')
  store.deleteSession('big')
  store.close()
  const before = json('doctor', '--store', file)
  assert.equal(before.stats.engine, 'sqlite')
  assert.ok(before.stats.freePages > 0, JSON.stringify(before.stats))
  assert.match(cli('doctor', '--store', file).stdout, new RegExp(`^store: sqlite, [0-9.]+ (KB|MB), ${before.stats.freePages} free pages \\([0-9.]+ (KB|MB)\\)\\n(.|\\n)*threadline doctor --vacuum`, 'm'))
  const v = json('doctor', '--vacuum', '--store', file)
  assert.equal(v.vacuum.bytesBefore, before.stats.bytes)
  assert.ok(v.vacuum.bytesAfter < v.vacuum.bytesBefore, JSON.stringify(v.vacuum))
  const after = json('doctor', '--store', file)
  assert.equal(after.stats.freePages, 0)
  assert.equal(after.stats.bytes, v.vacuum.bytesAfter)
  assert.match(cli('doctor', '--vacuum', '--store', file).stdout, /^vacuum: [0-9.]+ \w+ -> [0-9.]+ \w+$/m)
})

test('backup FILE writes a copy that opens as a store; an existing FILE is refused, one line, exit 1', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'src.db')
  const store = Store.open(file)
  store.createSession({ id: 'a' }).append('one')
  store.createSession({ id: 'b' }).append('two')
  store.close()
  const dest = path.join(dir, 'copy.db')
  const report = json('backup', dest, '--store', file)
  assert.deepEqual(report, { path: dest, sessions: 2, records: 2, bytes: fs.statSync(dest).size })
  const copy = Store.open(dest)
  assert.deepEqual(copy.listSessions().map((s) => s.id).sort(), ['a', 'b'])
  copy.close()
  assert.match(cli('backup', path.join(dir, 'copy2.db'), '--store', file).stdout, /copy2\.db: 2 sessions, 2 records, [0-9.]+ KB\n$/)
  const r = cli('backup', dest, '--store', file)
  assert.equal(r.status, 1)
  assert.equal(r.stdout, '')
  assert.match(r.stderr, /^threadline: INVALID_INPUT: backup: path: '.*copy\.db' already exists/)
  assert.equal(r.stderr.trimEnd().split('\n').length, 1)
})

test('--help of doctor, recover, close and backup', () => {
  for (const c of ['doctor', 'recover', 'close', 'backup']) {
    const r = cli(c, '--help')
    assert.equal(r.status, 0, c)
    assert.match(r.stdout, new RegExp(`^Usage: threadline ${c}`), c)
  }
  assert.match(cli('doctor', '--help').stdout, /--vacuum/)
})
