'use strict'
// ThreadlineSessionStore as the Claude Agent SDK calls it, without the `claude` binary: the
// SessionStore contract (append, load, listSessions, listSessionSummaries, delete,
// listSubkeys) on both APIs, checked against the SDK's own InMemorySessionStore and against
// `threadline import claude-code` of the same file. Runs on PostgreSQL too (postgres.test.js).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')

const sync = require('..')
const promise = require('../promise')
const { ThreadlineSessionStore } = require('../adapters/claude-agent-sdk')
const { tmpDir, keyPaths } = require('./helpers/util')

const FIXTURES = path.join(__dirname, '..', 'fixtures')
const PROJECT = '-home-USER-projects-spotter-worktrees-spotter-4te'
const SESSION = 'ae4a77f8-aedd-4bc1-888f-c94edc91af04'
const sdk = () => import('@anthropic-ai/claude-agent-sdk')

/** The lines of a real Claude Code transcript (with its subagents), parsed. */
function lines(file) {
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
}
const mainFile = path.join(FIXTURES, 'claude-code-projects', PROJECT, `${SESSION}.jsonl`)
const subFile = (agent) => path.join(FIXTURES, 'claude-code-projects', PROJECT, SESSION, 'subagents', `agent-${agent}.jsonl`)

/** Batches as the SDK sends them: `size` entries per append. */
function batches(entries, size) {
  const out = []
  for (let i = 0; i < entries.length; i += size) out.push(entries.slice(i, i + size))
  return out
}

const apis = [
  ['threadline', (p) => sync.Store.open(p)],
  ['threadline/promise', (p) => promise.Store.open(p)],
]

for (const [api, open] of apis) {
  test(`${api}: load gives back every appended entry, in order, deep-equal, key order kept`, async (t) => {
    const store = await open(path.join(tmpDir(t), 'a.db'))
    t.after(() => store.close())
    const sessions = new ThreadlineSessionStore(store)
    const key = { projectKey: PROJECT, sessionId: SESSION }
    assert.equal(await sessions.load(key), null, 'a key never written')
    const entries = lines(mainFile)
    for (const b of batches(entries, 7)) await sessions.append(key, b)
    const back = await sessions.load(key)
    assert.deepEqual(back, entries)
    assert.deepEqual(keyPaths(back), keyPaths(entries))
  })

  test(`${api}: a retried batch is stored once; an entry without uuid once per append call`, async (t) => {
    const store = await open(path.join(tmpDir(t), 'a.db'))
    t.after(() => store.close())
    const sessions = new ThreadlineSessionStore(store)
    const key = { projectKey: 'p', sessionId: '11111111-1111-4111-8111-111111111111' }
    const user = { type: 'user', uuid: 'aaaaaaaa-0000-4000-8000-000000000001', parentUuid: null, sessionId: key.sessionId, timestamp: '2026-11-27T10:00:00.000Z', message: { role: 'user', content: 'hello' } }
    const title = { type: 'custom-title', customTitle: 'Greeting', sessionId: key.sessionId }
    await sessions.append(key, [user, title])
    await sessions.append(key, [user, title]) // the SDK's retry of the same batch
    assert.deepEqual(await sessions.load(key), [user, title, title])
  })

  test(`${api}: subagent transcripts are sessions of their own, listed by listSubkeys and deleted with their parent`, async (t) => {
    const store = await open(path.join(tmpDir(t), 'a.db'))
    t.after(() => store.close())
    const sessions = new ThreadlineSessionStore(store)
    const key = { projectKey: PROJECT, sessionId: SESSION }
    await sessions.append(key, lines(mainFile))
    const agent = 'aac57f5'
    const sub = { ...key, subpath: `subagents/agent-${agent}` }
    const meta = { type: 'agent_metadata', agentType: 'general-purpose', description: 'look around' }
    await sessions.append(sub, [...lines(subFile(agent)), meta])
    const nested = { ...key, subpath: `subagents/agent-${agent}/subagents/agent-b0b0b0` }
    await sessions.append(nested, lines(subFile(agent)).slice(0, 2))
    assert.deepEqual((await sessions.listSubkeys(key)).sort(), [sub.subpath, nested.subpath])
    assert.deepEqual(await sessions.load(sub), [...lines(subFile(agent)), meta])

    // The subagent session is linked to its parent, as `threadline import claude-code` links it.
    const s = await store.openSession(`${SESSION}/agent-${agent}`)
    const info = typeof s.info === 'function' ? await s.info() : s.info
    assert.equal(info.metadata.parentSessionId, SESSION)
    assert.equal(info.metadata.agentId, agent)
    await s.close()

    await sessions.delete(nested)
    assert.equal(await sessions.load(nested), null)
    assert.deepEqual(await sessions.listSubkeys(key), [sub.subpath])
    await sessions.delete(key)
    assert.equal(await sessions.load(key), null)
    assert.equal(await sessions.load(sub), null)
    assert.deepEqual(await sessions.listSubkeys(key), [])
    assert.deepEqual(await sessions.listSessions(PROJECT), [])
  })

  test(`${api}: listSessionSummaries gives what the SDK's own InMemorySessionStore gives`, async (t) => {
    const { InMemorySessionStore } = await sdk()
    const store = await open(path.join(tmpDir(t), 'a.db'))
    t.after(() => store.close())
    const ours = new ThreadlineSessionStore(store)
    const theirs = new InMemorySessionStore()
    const a = { projectKey: PROJECT, sessionId: SESSION }
    const b = { projectKey: PROJECT, sessionId: '22222222-2222-4222-8222-222222222222' }
    const other = { projectKey: 'elsewhere', sessionId: '33333333-3333-4333-8333-333333333333' }
    const short = lines(path.join(FIXTURES, 'claude-code', 'short.jsonl'))
    for (const [key, entries] of [[a, lines(mainFile)], [b, short], [other, short]]) {
      for (const batch of batches(entries, 5)) {
        await ours.append(key, batch)
        await theirs.append(key, batch)
      }
    }
    const bySession = (list) => Object.fromEntries(list.map((s) => [s.sessionId, s.data]))
    assert.deepEqual(bySession(await ours.listSessionSummaries(PROJECT)), bySession(await theirs.listSessionSummaries(PROJECT)))
    const listed = await ours.listSessions(PROJECT)
    assert.deepEqual(listed.map((s) => s.sessionId).sort(), [b.sessionId, SESSION].sort())
    for (const s of listed) assert.ok(Number.isInteger(s.mtime) && s.mtime > Date.parse('2026-01-01'))
  })
}

test('a mirrored session is the session `threadline import claude-code` makes of the same file', async (t) => {
  const dir = tmpDir(t)
  const mirrored = sync.Store.open(path.join(dir, 'mirrored.db'))
  const imported = sync.Store.open(path.join(dir, 'imported.db'))
  t.after(() => { mirrored.close(); imported.close() })
  const sessions = new ThreadlineSessionStore(mirrored)
  const key = { projectKey: PROJECT, sessionId: SESSION }
  for (const b of batches(lines(mainFile), 3)) await sessions.append(key, b)
  const projectDir = path.join(dir, 'projects', PROJECT)
  fs.mkdirSync(projectDir, { recursive: true })
  fs.copyFileSync(mainFile, path.join(projectDir, `${SESSION}.jsonl`))
  await imported.import({ format: 'claude-code', path: path.join(projectDir, `${SESSION}.jsonl`) })

  const m = mirrored.openSession(SESSION)
  const i = imported.openSession(SESSION)
  assert.deepEqual(m.messages, i.messages)
  // An entry without a uuid is given one derived from where it came: the import counts lines
  // of the file, the mirror append calls (the SDK asks for such entries once per call). Both mark
  // the keys they filled in; without those the envelopes are the same.
  // The mirror also marks a message whose content was a string (`importedStringContent`), so
  // load gives the string back, not the blocks it is stored as.
  const own = (envelopes) => envelopes.map((e) => {
    const out = { ...e }
    delete out.importedStringContent
    for (const k of e.importedWithout ?? []) delete out[k]
    return out
  })
  assert.deepEqual(own(m.envelopes()), own(i.envelopes()))
  assert.deepEqual(m.turns, i.turns)
  assert.deepEqual(m.tokenTracker, i.tokenTracker)
  for (const k of ['project', 'title', 'model', 'provider']) assert.equal(m.info[k], i.info[k], k)
  m.close()
  i.close()
})

test('bad arguments are refused with INVALID_INPUT and the path of the field; nothing is stored', async (t) => {
  const store = sync.Store.open(path.join(tmpDir(t), 'a.db'))
  t.after(() => store.close())
  const sessions = new ThreadlineSessionStore(store)
  const key = { projectKey: 'p', sessionId: 's1' }
  await assert.rejects(sessions.append({ projectKey: 'p' }, []), { code: 'INVALID_INPUT', message: /key\.sessionId/ })
  await assert.rejects(sessions.append({ ...key, subpath: '' }, []), { code: 'INVALID_INPUT', message: /key\.subpath/ })
  await assert.rejects(sessions.append(key, [{ type: 'user', uuid: 'u1' }, 42]), { code: 'INVALID_INPUT', message: /entries\[1\]/ })
  await assert.rejects(sessions.append(key, [{ uuid: 'u1' }]), { code: 'INVALID_INPUT', message: /entries\[0\]\.type/ })
  assert.equal(await sessions.load(key), null)
  assert.throws(() => new ThreadlineSessionStore({}), { code: 'INVALID_INPUT', message: /store/ })
  assert.throws(() => new ThreadlineSessionStore(store, { projekt: 'x' }), { code: 'INVALID_INPUT', message: /options\.projekt/ })
})

test('two processes mirror two sessions into one store at the same time', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'shared.db')
  const child = (sessionId) => new Promise((resolve, reject) => {
    const code = `
      const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const { ThreadlineSessionStore } = require(${JSON.stringify(path.join(__dirname, '..', 'adapters', 'claude-agent-sdk'))})
      const store = Store.open(${JSON.stringify(file)})
      const sessions = new ThreadlineSessionStore(store)
      ;(async () => {
        const key = { projectKey: 'p', sessionId: ${JSON.stringify(sessionId)} }
        for (let i = 0; i < 200; i++) {
          await sessions.append(key, [{ type: 'user', uuid: ${JSON.stringify(sessionId)} + '-' + i, sessionId: key.sessionId, message: { role: 'user', content: 'm' + i } }])
        }
        store.close()
      })().catch((e) => { console.error(e); process.exit(1) })`
    const p = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'inherit', 'pipe'] })
    let err = ''
    p.stderr.on('data', (d) => { err += d })
    p.on('exit', (c) => (c === 0 ? resolve() : reject(new Error(`child exited ${c}: ${err}`))))
  })
  await Promise.all([child('session-a'), child('session-b')])
  const store = sync.Store.open(file)
  t.after(() => store.close())
  const sessions = new ThreadlineSessionStore(store)
  for (const id of ['session-a', 'session-b']) {
    const back = await sessions.load({ projectKey: 'p', sessionId: id })
    assert.deepEqual(back.map((e) => e.message.content), Array.from({ length: 200 }, (_, i) => `m${i}`))
  }
})

/**
 * Starts helpers/mirror-holder.js on `file`; `send(cmd)` resolves with its answer to `cmd`.
 * @param {import('node:test').TestContext} t
 * @param {string} file
 */
function holder(t, file) {
  const child = spawn(process.execPath, [path.join(__dirname, 'helpers', 'mirror-holder.js'), file], { stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => { try { child.kill('SIGKILL') } catch {} })
  /** @type {Array<(v: any) => void>} */
  const waiting = []
  let buf = ''
  child.stdout.on('data', (d) => {
    buf += d
    let nl
    while ((nl = buf.indexOf('\n')) >= 0) {
      const v = JSON.parse(buf.slice(0, nl))
      buf = buf.slice(nl + 1)
      waiting.shift()?.(v)
    }
  })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  /** @param {any} cmd */
  const send = (cmd) => new Promise((resolve) => {
    waiting.push(resolve)
    child.stdin.write(`${JSON.stringify(cmd)}\n`)
  })
  return { child, send, exited }
}

const entry = (sessionId, i) => ({ type: 'user', uuid: `${sessionId}-${i}`, sessionId, timestamp: '2026-11-27T18:40:06.000Z', message: { role: 'user', content: `m${i}` } })

test('a session stays claimed between appends: another process gets SESSION_LOCKED until the holder deletes it, closes its store, or stops appending for a while', async (t) => {
  const file = path.join(tmpDir(t), 'shared.db')
  const h = holder(t, file)
  const store = sync.Store.open(file)
  t.after(() => store.close())
  const mine = new ThreadlineSessionStore(store)
  const key = (sessionId) => ({ projectKey: 'p', sessionId })
  const contents = async (sessionId) => (await mine.load(key(sessionId)))?.map((e) => e.message.content)

  // delete: the holder lets go of what it deletes
  assert.deepEqual(await h.send({ op: 'append', key: key('s1'), entries: [entry('s1', 0)] }), { ok: true })
  assert.deepEqual(await h.send({ op: 'append', key: key('s1'), entries: [entry('s1', 1)] }), { ok: true })
  await assert.rejects(mine.append(key('s1'), [entry('s1', 2)]), { code: 'SESSION_LOCKED' })
  assert.deepEqual(await contents('s1'), ['m0', 'm1'], 'a refused append stores nothing; reads are never refused')
  assert.deepEqual(await h.send({ op: 'delete', key: key('s1') }), { ok: true })
  await mine.append(key('s1'), [entry('s1', 3)])
  assert.deepEqual(await contents('s1'), ['m3'])

  // a while after its last append, with the holder still running
  assert.deepEqual(await h.send({ op: 'append', key: key('s2'), entries: [entry('s2', 0)] }), { ok: true })
  await assert.rejects(mine.append(key('s2'), [entry('s2', 1)]), { code: 'SESSION_LOCKED' })
  for (let tries = 0; ; tries++) {
    try {
      await mine.append(key('s2'), [entry('s2', 1)])
      break
    } catch (e) {
      assert.equal(/** @type {any} */ (e).code, 'SESSION_LOCKED')
      assert.ok(tries < 300, 'released within a minute')
      await new Promise((r) => setTimeout(r, 200))
    }
  }
  assert.equal(h.child.exitCode, null, 'the holder still runs')
  assert.deepEqual(await contents('s2'), ['m0', 'm1'])

  // the store's close
  assert.deepEqual(await h.send({ op: 'append', key: key('s3'), entries: [entry('s3', 0)] }), { ok: true })
  await assert.rejects(mine.append(key('s3'), [entry('s3', 1)]), { code: 'SESSION_LOCKED' })
  assert.deepEqual(await h.send({ op: 'close' }), { ok: true })
  await mine.append(key('s3'), [entry('s3', 1)])
  assert.deepEqual(await contents('s3'), ['m0', 'm1'])
  h.send({ op: 'exit' })
  assert.equal((await h.exited).code, 0)
})

test('SIGKILL of a process that holds a session between appends: a new process loads every acknowledged entry and appends', async (t) => {
  const file = path.join(tmpDir(t), 'shared.db')
  const h = holder(t, file)
  const key = { projectKey: 'p', sessionId: 'k1' }
  const sent = []
  for (let i = 0; i < 30; i++) {
    // one entry a call, as the SDK's eager flush sends them, and a batch now and then
    const entries = i % 10 === 9 ? [entry('k1', `${i}a`), entry('k1', `${i}b`)] : [entry('k1', i)]
    assert.deepEqual(await h.send({ op: 'append', key, entries }), { ok: true })
    sent.push(...entries)
  }
  h.child.kill('SIGKILL')
  assert.equal((await h.exited).signal, 'SIGKILL')
  const code = `
    const { Store } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const { ThreadlineSessionStore } = require(${JSON.stringify(path.join(__dirname, '..', 'adapters', 'claude-agent-sdk'))})
    const store = Store.open(${JSON.stringify(file)})
    const sessions = new ThreadlineSessionStore(store)
    ;(async () => {
      const key = ${JSON.stringify(key)}
      const before = await sessions.load(key)
      await sessions.append(key, [${JSON.stringify(entry('k1', 'after'))}])
      const after = await sessions.load(key)
      store.close()
      process.stdout.write(JSON.stringify({ before, after }))
    })().catch((e) => { console.error(e); process.exit(1) })`
  const out = await new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let err = ''
    p.stdout.on('data', (d) => { stdout += d })
    p.stderr.on('data', (d) => { err += d })
    p.on('exit', (c) => (c === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`child exited ${c}: ${err}`))))
  })
  assert.deepEqual(out.before, sent, 'every acknowledged entry')
  assert.deepEqual(out.after, [...sent, entry('k1', 'after')])
})
