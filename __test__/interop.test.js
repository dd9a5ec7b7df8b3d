'use strict'
// store.import and session.export: other agents' files brought in through both APIs, a second
// import adding only what is new, a bad line reported with its file and line, an import killed
// part-way and run again, and export back to Claude Code JSONL giving the same sessions.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')

const { lib, tmpDir } = require('./helpers/util')
const promiseLib = require('../promise.js')

const { Store, validateMessages } = lib
const ROOT = path.join(__dirname, '..')
const CLAUDE = path.join(ROOT, 'fixtures', 'claude-code')
const CHILD = path.join(__dirname, 'helpers', 'import-child.js')

/** The JSON lines of a file, with a message's string content as the text block the store keeps. */
function linesOf(file) {
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => {
    const v = JSON.parse(l)
    if (v.message && typeof v.message.content === 'string') v.message.content = [{ type: 'text', text: v.message.content }]
    return v
  })
}

function jsonlFiles(dir) {
  return fs.readdirSync(dir).filter((f) => f.endsWith('.jsonl')).map((f) => path.join(dir, f))
}

/** Every session's context passes validateMessages for the three targets. */
function assertValidContexts(store) {
  for (const info of store.listSessions()) {
    const s = store.openSession(info.id)
    for (const target of ['anthropic', 'openai-chat', 'openai-responses']) {
      const c = s.buildContext({ target, system: 'You are terse.' })
      const problems = validateMessages(c.messages, { target })
      assert.deepEqual(problems, [], `${info.id} ${target}`)
    }
  }
}

test('Claude Code files: every line stored as written, progress after each file, a second import adds nothing', async (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'a.db'))
  t.after(() => store.close())
  const files = jsonlFiles(CLAUDE)
  const lines = files.map(linesOf)
  const total = lines.reduce((n, l) => n + l.length, 0)
  const seen = []
  const report = await store.import({ format: 'claude-code', path: CLAUDE }, { onProgress: (p) => seen.push(p) })
  assert.equal(report.sessions, files.length)
  assert.equal(report.newSessions, files.length)
  assert.equal(report.records, total)
  assert.equal(report.newRecords, total)
  assert.deepEqual(report.skipped, [])
  const types = {}
  for (const r of lines.flat()) if (!r.message) types[r.type] = (types[r.type] ?? 0) + 1
  assert.deepEqual(report.events, Object.fromEntries(Object.entries(types).sort()))

  assert.equal(seen.length, files.length)
  const bytes = files.reduce((n, f) => n + fs.statSync(f).size, 0)
  seen.forEach((p, i) => {
    assert.equal(p.files, i + 1)
    assert.equal(p.totalFiles, files.length)
    assert.equal(p.totalBytes, bytes)
  })
  assert.equal(seen.at(-1).bytes, bytes)
  assert.equal(seen.at(-1).records, total)

  files.forEach((file, i) => {
    const id = path.basename(file, '.jsonl')
    const s = store.openSession(id)
    const stored = s.envelopes()
    assert.equal(stored.length, lines[i].length)
    stored.forEach((env, k) => {
      for (const [key, v] of Object.entries(lines[i][k])) assert.deepEqual(env[key], v, `${id} line ${k + 1} ${key}`)
    })
    assert.equal(s.info.metadata.importedFrom.format, 'claude-code')
    const times = lines[i].filter((r) => r.timestamp).map((r) => Date.parse(r.timestamp))
    assert.equal(Date.parse(s.info.createdAt), Math.min(...times), `${id}: began at its first record`)
    assert.equal(Date.parse(s.info.updatedAt), Math.max(...times), `${id}: last written at its last`)
    assert.equal(s.info.project, lines[i].find((r) => r.cwd).cwd)
  })

  const again = await store.import({ format: 'claude-code', path: CLAUDE })
  assert.deepEqual({ ...again, events: undefined }, { sessions: files.length, newSessions: 0, records: total, newRecords: 0, skipped: [], events: undefined })
  assertValidContexts(store)
})

test('threadline/promise imports and exports the same', async (t) => {
  const dir = tmpDir(t)
  const a = Store.open(path.join(dir, 'a.db'))
  const b = await promiseLib.Store.open(path.join(dir, 'b.db'))
  t.after(async () => { a.close(); await b.close() })
  const file = path.join(CLAUDE, 'tool_heavy.jsonl')
  const seen = []
  const ra = await a.import({ format: 'claude-code', path: file })
  const rb = await b.import({ format: 'claude-code', path: file }, { onProgress: (p) => seen.push(p.files) })
  assert.deepEqual(rb, ra)
  assert.deepEqual(seen, [1])
  const sa = a.openSession('tool_heavy')
  const sb = await b.openSession('tool_heavy')
  assert.deepEqual(await sb.info(), sa.info, 'the same times, taken from the file')
  for (const f of ['claude-code', 'markdown', 'html']) assert.equal(await sb.export(f), sa.export(f), f)
  const withEvents = sa.export('markdown', { events: true })
  assert.equal(await sb.export('markdown', { events: true }), withEvents)
  assert.match(withEvents, /\n_progress \(hook\\_progress\)_\n/)
  assert.doesNotMatch(sa.export('markdown'), /_progress/)
  assert.deepEqual(await sb.messages(), sa.messages)
  // a deleted session stays deleted on the next import, unless includeDeleted
  await sb.close()
  await b.deleteSession('tool_heavy')
  const again = await b.import({ format: 'claude-code', path: file })
  assert.deepEqual([again.sessions, again.skipped.length], [0, 1])
  assert.match(again.skipped[0].reason, /^session 'tool_heavy' was deleted on /)
  const back = await b.import({ format: 'claude-code', path: file }, { includeDeleted: true })
  assert.deepEqual([back.newSessions, back.newRecords], [1, ra.records])
  assert.equal((await b.openSession('tool_heavy')).id, 'tool_heavy')
  await assert.rejects(sb.export('pdf'), (e) => e.code === 'INVALID_INPUT')
})

test('a pi tree imports with its branches, an fspec data directory with its fork, compaction and blobs (both APIs)', async (t) => {
  const dir = tmpDir(t)
  const a = Store.open(path.join(dir, 'a.db'))
  const b = await promiseLib.Store.open(path.join(dir, 'b.db'))
  t.after(async () => { a.close(); await b.close() })
  const pi = path.join(ROOT, 'fixtures', 'pi', 'branched.jsonl')
  const entries = linesOf(pi)
  const report = await a.import({ format: 'pi', path: pi })
  assert.deepEqual(report.skipped, [])
  const tree = a.openSession(entries[0].id)
  const parents = new Set(entries.map((e) => e.parentId))
  const leaves = entries.slice(1).map((e) => e.id).filter((id) => !parents.has(id))
  const branches = tree.branches()
  assert.deepEqual(branches.map((br) => br.leafUuid).sort(), leaves.sort())
  assert.equal(branches.find((br) => br.current).leafUuid, entries.at(-1).id, 'pi resumes at its last entry')
  assert.equal((await a.import({ format: 'pi', path: pi })).newRecords, 0)

  const data = path.join(ROOT, 'fixtures', 'fspec', 'data')
  const manifests = fs.readdirSync(path.join(data, 'sessions')).map((f) => JSON.parse(fs.readFileSync(path.join(data, 'sessions', f), 'utf8')))
  const seen = []
  const fspec = await b.import({ format: 'fspec', path: data }, { onProgress: (p) => seen.push(p.files) })
  assert.deepEqual(fspec.skipped, [])
  assert.equal(fspec.newSessions, manifests.length)
  assert.deepEqual(seen, Array.from({ length: manifests.length + 1 }, (_, i) => i + 1), 'the messages file, then each manifest')
  const fork = manifests.find((m) => m.forked_from)
  const info = await (await b.openSession(fork.id)).info()
  assert.deepEqual(info.forkedFrom, { sessionId: fork.forked_from.source_session_id, uuid: fork.messages[fork.forked_from.fork_after_index].message_id })
  assert.equal(info.title, fork.name)
  const compacted = manifests.find((m) => m.compaction)
  const s = await b.openSession(compacted.id)
  assert.equal((await s.allMessages()).length, compacted.messages.length)
  const c = await s.buildContext({ target: 'anthropic' })
  assert.ok(c.messages[0].content[0].text.includes(compacted.compaction.summary.slice(0, 60)))
  assert.equal((await b.import({ format: 'fspec', path: data })).newRecords, 0)
  assertValidContexts(a)
})

test('ccusage, a reader of Claude Code files, counts in our Claude Code exports of pi, fspec and Codex sessions the tokens threadline usage counts', async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'a.db')
  const store = Store.open(file)
  const F = path.join(ROOT, 'fixtures')
  await store.import({ format: 'pi', path: path.join(F, 'pi') })
  await store.import({ format: 'fspec', path: path.join(F, 'fspec', 'data') })
  await store.import({ format: 'codex', path: path.join(F, 'codex', 'sessions') })
  // laid out as ~/.claude/projects/<project>/<session>.jsonl
  const config = path.join(dir, 'claude')
  let lines = 0
  for (const info of store.listSessions({ limit: 1000 })) {
    const project = path.join(config, 'projects', (info.project ?? 'none').replace(/[^A-Za-z0-9]/g, '-'))
    fs.mkdirSync(project, { recursive: true })
    const text = store.openSession(info.id).export('claude-code')
    lines += text.split('\n').length
    fs.writeFileSync(path.join(project, `${info.id.replaceAll('/', '_')}.jsonl`), text)
  }
  store.close()
  assert.ok(lines > 1000)
  const run = (cmd, args, env = {}) => JSON.parse(require('node:child_process').execFileSync(process.execPath, [cmd, ...args], { encoding: 'utf8', env: { ...process.env, ...env } }))
  const ccusage = run(require.resolve('ccusage/package.json').replace('package.json', 'dist/index.js'), ['daily', '--json', '--offline'], { CLAUDE_CONFIG_DIR: config })
  // (on PostgreSQL the store is a schema named for this path, and the command wants the path)
  if (!fs.existsSync(file)) fs.writeFileSync(file, '')
  const ours = run(path.join(ROOT, 'bin', 'threadline.js'), ['usage', '--by', 'day', '--json', '--store', file])
  // every response once (a fork's shared responses too), by day and in total
  const days = (rows, key, fields) => Object.fromEntries(rows.map((r) => [r[key], fields.map((f) => r[f])]))
  assert.deepEqual(
    days(ccusage.daily, 'date', ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheCreationTokens']),
    days(ours.rows, 'key', ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens']),
  )
  assert.ok(ccusage.totals.outputTokens > 100000, 'the real sessions\' responses are all counted')
  assert.equal(ccusage.totals.outputTokens, ours.rows.reduce((n, r) => n + r.outputTokens, 0))
})

test('a grown file adds only its new lines; a line that is not JSON is reported with its file and line, the rest imports', async (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'a.db'))
  t.after(() => store.close())
  const text = fs.readFileSync(path.join(CLAUDE, 'tool_heavy.jsonl'), 'utf8').split('\n').filter(Boolean)
  const file = path.join(dir, 'grown.jsonl')
  const half = Math.floor(text.length / 2)
  fs.writeFileSync(file, text.slice(0, half).join('\n') + '\n')
  const first = await store.import({ format: 'claude-code', path: file })
  assert.equal(first.newRecords, half)
  fs.writeFileSync(file, [...text.slice(0, 5), '{"type": "user", "message": ', ...text.slice(5)].join('\n') + '\n')
  const second = await store.import({ format: 'claude-code', path: file })
  assert.equal(second.newRecords, text.length - half)
  assert.deepEqual(second.skipped.map((s) => [s.file, s.line]), [[file, 6]])
  assert.match(second.skipped[0].reason, /^not JSON/)
  assert.equal(store.openSession('grown').envelopes().length, text.length)
})

test('bad sources and options are INVALID_INPUT naming the field, a missing path NOT_FOUND, and nothing is written', async (t) => {
  const dir = tmpDir(t)
  const store = Store.open(path.join(dir, 'a.db'))
  t.after(() => store.close())
  const cases = [
    [undefined, undefined, 'INVALID_INPUT', /import: source: expected \{ format, path \}/],
    [{ format: 'gemini', path: CLAUDE }, undefined, 'INVALID_INPUT', /source\.format: expected one of 'claude-code', 'codex', 'pi', 'fspec', got 'gemini'/],
    [{ format: 'claude-code' }, undefined, 'INVALID_INPUT', /source\.path: expected a file or folder path/],
    [{ format: 'claude-code', path: CLAUDE, extra: 1 }, undefined, 'INVALID_INPUT', /source\.extra: unknown field/],
    [{ format: 'claude-code', path: CLAUDE }, { onProgress: 3 }, 'INVALID_INPUT', /options\.onProgress: expected a function/],
    [{ format: 'claude-code', path: CLAUDE }, { projct: 'x' }, 'INVALID_INPUT', /options\.projct: unknown option/],
    [{ format: 'claude-code', path: CLAUDE }, { includeDeleted: 'yes' }, 'INVALID_INPUT', /options\.includeDeleted: expected a boolean/],
    [{ format: 'codex', path: CLAUDE }, undefined, 'INVALID_INPUT', /no Codex session files were found in/],
    [{ format: 'claude-code', path: path.join(ROOT, 'fixtures', 'pi', 'branched.jsonl') }, undefined, 'INVALID_INPUT', /not a Claude Code session file: line 1 has no sessionId .*import it as 'pi'/],
    [{ format: 'claude-code', path: path.join(dir, 'nope') }, undefined, 'NOT_FOUND', /no such file or folder/],
  ]
  for (const [source, options, code, message] of cases) {
    await assert.rejects(store.import(source, options), (e) => e.code === code && message.test(e.message), JSON.stringify(source))
  }
  assert.deepEqual(store.listSessions(), [])
  const s = store.createSession()
  assert.throws(() => s.export('pdf'), (e) => e.code === 'INVALID_INPUT' && /export: format: expected one of .* got 'pdf'/.test(e.message))
  assert.throws(() => s.export('markdown', { events: 1 }), (e) => e.code === 'INVALID_INPUT' && /export: options\.events: expected a boolean/.test(e.message))
  assert.throws(() => s.export('markdown', { event: true }), (e) => e.code === 'INVALID_INPUT' && /event/.test(e.message))
  s.close()
  store.close()
  assert.throws(() => store.openSession('x'), (e) => e.code === 'CLOSED')
})

test('Claude Code export gives each imported file back line for line, and imports to the same sessions', async (t) => {
  const dir = tmpDir(t)
  const a = Store.open(path.join(dir, 'a.db'))
  const b = Store.open(path.join(dir, 'b.db'))
  t.after(() => { a.close(); b.close() })
  await a.import({ format: 'claude-code', path: CLAUDE })
  const out = path.join(dir, 'out')
  fs.mkdirSync(out)
  for (const file of jsonlFiles(CLAUDE)) {
    const id = path.basename(file, '.jsonl')
    const text = a.openSession(id).export('claude-code')
    assert.deepEqual(text.trimEnd().split('\n').map((l) => JSON.parse(l)), linesOf(file), id)
    fs.writeFileSync(path.join(out, `${id}.jsonl`), text)
  }
  await b.import({ format: 'claude-code', path: out })
  for (const info of a.listSessions()) {
    const x = a.openSession(info.id)
    const y = b.openSession(info.id)
    assert.deepEqual(y.messages, x.messages, info.id)
    assert.deepEqual(y.allMessages, x.allMessages, info.id)
    assert.deepEqual(y.turns, x.turns, info.id)
    assert.deepEqual(y.tokenTracker, x.tokenTracker, info.id)
  }
})

test('an import SIGKILLed part-way keeps whole files; run again, it completes with every record once', async (t) => {
  const dir = tmpDir(t)
  const src = path.join(dir, 'projects', '-home-user-app')
  fs.mkdirSync(src, { recursive: true })
  const text = fs.readFileSync(path.join(CLAUDE, 'tool_heavy.jsonl'))
  const perFile = linesOf(path.join(CLAUDE, 'tool_heavy.jsonl')).length
  const n = 120
  for (let i = 0; i < n; i++) fs.writeFileSync(path.join(src, `s${String(i).padStart(3, '0')}.jsonl`), text)
  const storePath = path.join(dir, 'kill.db')
  const child = spawn(process.execPath, [CHILD, storePath, 'claude-code', path.join(dir, 'projects')], { stdio: ['ignore', 'pipe', 'inherit'] })
  let acked = 0
  let buffered = ''
  await new Promise((resolve) => {
    child.stdout.on('data', (d) => {
      buffered += d
      const lines = buffered.split('\n')
      buffered = lines.pop()
      acked += lines.filter((l) => l.startsWith('{')).length
      if (acked >= 10 && !child.killed) child.kill('SIGKILL')
    })
    child.on('exit', resolve)
  })
  assert.ok(acked >= 10 && acked < n, `killed part-way (after ${acked} of ${n} files)`)
  const store = Store.open(storePath)
  t.after(() => store.close())
  // every file reported done is there whole
  for (let i = 0; i < acked; i++) assert.equal(store.openSession(`s${String(i).padStart(3, '0')}`).envelopes().length, perFile)
  const before = store.listSessions().reduce((m, s) => m + store.openSession(s.id).envelopes().length, 0)
  const report = await store.import({ format: 'claude-code', path: path.join(dir, 'projects') })
  assert.equal(report.records, n * perFile)
  assert.equal(report.newRecords, n * perFile - before)
  assert.equal(store.listSessions({ limit: 1000 }).length, n)
  for (const s of store.listSessions({ limit: 1000 })) assert.equal(store.openSession(s.id).envelopes().length, perFile, s.id)
})
