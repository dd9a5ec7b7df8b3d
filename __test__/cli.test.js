'use strict'
// The threadline command in child processes, as a script runs it: every command, its --json
// output checked against the API's own answers, exit codes, and bad arguments.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { lib } = require('./helpers/util')

const { Store } = lib
const { PRICES_AS_OF, priceOf } = require('../cli/prices.js')
const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'threadline.js')
const CLAUDE = path.join(ROOT, 'fixtures', 'claude-code')

/** Runs the command; { status, stdout, stderr }. No TTY: no colour, no progress bar. */
function cli(...args) {
  const env = { ...process.env }
  delete env.FORCE_COLOR
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env, maxBuffer: 64 << 20 })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

function json(...args) {
  const r = cli(...args, '--json')
  assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`)
  assert.equal(r.stderr, '')
  return JSON.parse(r.stdout)
}

/** One line on stderr, starting with the program's name and a code. */
function assertOneLineError(r, status, code) {
  assert.equal(r.status, status, r.stderr)
  assert.equal(r.stdout, '')
  const lines = r.stderr.trimEnd().split('\n')
  assert.equal(lines.length, 1, r.stderr)
  assert.ok(lines[0].startsWith(`threadline: ${code}: `), r.stderr)
}

/**
 * A store of the real Claude Code fixtures, built with the API (createSession + restoreMessages),
 * not with `threadline import`: every command but import is tested whatever import does. The
 * project is the file's cwd, as Claude Code and the import give it.
 */
function buildStore(file) {
  const store = Store.open(file)
  for (const f of fs.readdirSync(CLAUDE).filter((x) => x.endsWith('.jsonl')).sort()) {
    const lines = fs.readFileSync(path.join(CLAUDE, f), 'utf8').split('\n').filter(Boolean)
    const project = lines.map((l) => JSON.parse(l)).find((r) => r.cwd)?.cwd
    const report = store.createSession({ id: path.basename(f, '.jsonl'), project }).restoreMessages(lines)
    assert.deepEqual(report.skipped, [])
  }
  store.close()
}

let dir
let storePath
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-cli-'))
  storePath = path.join(dir, 'store.db')
  buildStore(storePath)
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

test('ls: every session, newest first; filters; --json is listSessions', () => {
  const store = Store.open(storePath, { readonly: true })
  // each session with its parent's id (null: none)
  const expected = store.listSessions().map((s) => ({ ...s, parentId: null }))
  store.close()
  assert.deepEqual(json('ls', '--store', storePath), expected)
  assert.deepEqual(json('ls', '--store', storePath, '--limit', '1').map((s) => s.id), [expected[0].id])
  const spotter = expected.filter((s) => s.project === '/home/marco/projects/spotter').map((s) => s.id)
  assert.deepEqual(spotter.slice().sort(), ['short', 'tool_heavy'])
  assert.deepEqual(json('ls', '--store', storePath, '--project', '/home/marco/projects/spotter').map((s) => s.id), spotter)
  const table = cli('ls', '--store', storePath).stdout.split('\n')
  assert.match(table[0], /ID\s+UPDATED\s+PROJECT\s+TITLE OR FIRST PROMPT\s+MSGS\s+STATUS/)
  assert.deepEqual(table.slice(1, 4).map((l) => l.trim().split(/\s+/)[0]), expected.map((s) => s.id))
  assert.match(table.find((l) => l.startsWith('short ')), /mix phx\.server doesnt seem to start\s+9\s+active$/, 'the first prompt of a session without a title')
  assert.ok(!/\x1b\[/.test(table.join('\n')), 'no colour when not on a terminal')
})

test('ls shows a UUID by its shortest unambiguous start (8 characters at least), which show takes; --json has the whole ids', () => {
  const file = path.join(dir, 'uuids.db')
  const store = Store.open(file)
  const ids = [0, 1, 2].map((i) => {
    const s = store.createSession({ project: 'u' })
    s.append(`prompt ${i}`)
    return s.id
  })
  store.close()
  assert.deepEqual(json('ls', '--store', file).map((s) => s.id).sort(), ids.slice().sort())
  const shown = cli('ls', '--store', file).stdout.split('\n').slice(1, 4).map((l) => l.split(/\s+/)[0])
  for (const [i, id] of ids.entries()) {
    const short = shown.find((x) => id.startsWith(x))
    assert.ok(short && short.length >= 8 && short.length <= id.length, `${id}: ${shown}`)
    assert.equal(ids.filter((other) => other.startsWith(short)).length, 1, 'unambiguous')
    assert.match(cli('show', short, '--store', file).stdout, new RegExp(`^prompt ${i}$`, 'm'))
  }
})

test('show: the transcript with calls folded, --full unfolds; --json is info and envelopes; an id prefix works', () => {
  const store = Store.open(storePath, { readonly: true })
  const s = store.openSession('short')
  const expected = { info: s.info, records: s.envelopes() }
  const thinking = s.messages.flatMap((m) => m.content).find((b) => b.type === 'thinking').thinking
  store.close()
  assert.deepEqual(json('show', 'short', '--store', storePath), expected)
  const folded = cli('show', 'sho', '--store', storePath)
  assert.equal(folded.status, 0, folded.stderr)
  assert.match(folded.stdout, /^User 2026-02-10 \d\d:\d\d\nmix phx\.server doesnt seem to start$/m)
  assert.match(folded.stdout, /^▸ Bash \{"command":"mix phx\.server 2>&1 \| head -80","timeout":30000\}$/m)
  assert.match(folded.stdout, /^✻ thinking \(\d+ chars\)$/m)
  assert.ok(!folded.stdout.includes(thinking), 'thinking folded')
  const full = cli('show', 'short', '--full', '--store', storePath).stdout
  assert.ok(full.includes(thinking), 'thinking in full')
  assert.match(full, /^· file-history-snapshot/m, 'events with --full')
  assertOneLineError(cli('show', 'nope', '--store', storePath), 1, 'NOT_FOUND')
  // 'compacted-session' and 'short' start with different letters; a prefix of two ids is refused
  const two = Store.open(storePath)
  two.createSession({ id: 'shorter' }).append('hi')
  two.close()
  assertOneLineError(cli('show', 'shor', '--store', storePath), 2, 'USAGE')
  assertOneLineError(cli('rm', 'shorter', '--store', storePath, '--bogus'), 2, 'USAGE')
  assert.match(cli('rm', 'shorter', '--store', storePath).stdout, /^deleted shorter\n/)
})

test('search: --json is store.search with the same options; hits printed with their session', () => {
  const store = Store.open(storePath)
  const expected = store.search('renderer', { sessionId: 'compacted-session', roles: ['assistant'], fields: ['text', 'tool_input'], limit: 3 })
  store.close()
  assert.deepEqual(json('search', 'renderer', '--store', storePath, '--session', 'compacted-session', '--role', 'assistant', '--field', 'text', '--field', 'tool_input', '--limit', '3'), expected)
  const out = cli('search', 'renderer', '--store', storePath, '--limit', '3').stdout
  assert.equal(out.split('\n').filter((l) => l.startsWith('compacted-session #')).length, 3)
  assert.match(out, /\*\*[^*\n]+\*\*/, 'in a pipe the matches keep their ** marks')
  assertOneLineError(cli('search', '"unclosed', '--store', storePath), 1, 'INVALID_INPUT')
})

test('export: each format to standard output or a file, as session.export gives it', () => {
  const store = Store.open(storePath, { readonly: true })
  const s = store.openSession('tool_heavy')
  const expected = Object.fromEntries(['claude-code', 'markdown', 'html'].map((f) => [f, s.export(f)]))
  store.close()
  for (const f of ['claude-code', 'markdown', 'html']) {
    const r = cli('export', 'tool_heavy', '--format', f, '--store', storePath)
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, expected[f], f)
  }
  const file = path.join(dir, 'out.jsonl')
  const r = cli('export', 'tool_heavy', '--format', 'claude-code', '-o', file, '--store', storePath)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(fs.readFileSync(file, 'utf8'), expected['claude-code'])
  const snap = JSON.parse(cli('export', 'tool_heavy', '--format', 'snapshot', '--store', storePath).stdout)
  assert.equal(snap.body.session.id, 'tool_heavy')
  assertOneLineError(cli('export', 'tool_heavy', '--format', 'pdf', '--store', storePath), 2, 'USAGE')
  assertOneLineError(cli('export', 'tool_heavy', '--store', storePath), 2, 'USAGE')
})

test('import: the summary, and --json is the report; a second import adds nothing; a missing path is NOT_FOUND', () => {
  // The whole folder: the same sessions, projects and records as the store built with the API.
  const whole = path.join(dir, 'whole.db')
  const r = cli('--store', whole, 'import', 'claude-code', CLAUDE)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stderr, '', 'no progress bar without a terminal')
  const api = Store.open(storePath, { readonly: true })
  const expected = api.listSessions().map((s) => ({ id: s.id, project: s.project, messageCount: s.messageCount, records: api.openSession(s.id).envelopes().length }))
  api.close()
  const records = expected.reduce((n, s) => n + s.records, 0)
  assert.match(r.stdout, new RegExp(`^${expected.length} new of ${expected.length} sessions, ${records} new of ${records} records\n`))
  const imported = Store.open(whole, { readonly: true })
  const got = imported.listSessions().map((s) => ({ id: s.id, project: s.project, messageCount: s.messageCount, records: imported.openSession(s.id).envelopes().length }))
  imported.close()
  const byId = (x, y) => (x.id < y.id ? -1 : 1)
  assert.deepEqual(got.sort(byId), expected.sort(byId))

  const other = path.join(dir, 'other.db')
  const short = expected.find((s) => s.id === 'short')
  const first = json('import', 'claude-code', path.join(CLAUDE, 'short.jsonl'), '--store', other, '--project', 'p')
  assert.deepEqual({ ...first, events: undefined }, { sessions: 1, newSessions: 1, records: short.records, newRecords: short.records, skipped: [], events: undefined })
  assert.deepEqual(json('import', 'claude-code', path.join(CLAUDE, 'short.jsonl'), '--store', other), { ...first, newSessions: 0, newRecords: 0 })
  assert.deepEqual(json('ls', '--store', other).map((s) => s.project), ['p'])
  assertOneLineError(cli('import', 'claude-code', path.join(dir, 'missing'), '--store', other), 1, 'NOT_FOUND')
  assertOneLineError(cli('import', 'gemini', CLAUDE, '--store', other), 1, 'INVALID_INPUT')
  assertOneLineError(cli('import', 'claude-code', '--store', other), 2, 'USAGE')
})

test('import: another agent\'s file or folder is INVALID_INPUT naming what was looked for, and imports nothing; a missing path creates no store', () => {
  const store = path.join(dir, 'wrong.db')
  const rollout = path.join(ROOT, 'fixtures', 'codex', 'sessions', '2026', '01', '02', 'rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl')
  let r = cli('import', 'claude-code', rollout, '--store', store)
  assertOneLineError(r, 1, 'INVALID_INPUT')
  assert.match(r.stderr, /is not a Claude Code session file: line 1 has no sessionId .*import it as 'codex'/)
  r = cli('import', 'codex', CLAUDE, '--store', store)
  assertOneLineError(r, 1, 'INVALID_INPUT')
  assert.match(r.stderr, /no Codex session files were found in '.*claude-code' \(looked for rollout-\*\.jsonl files/)
  r = cli('import', 'pi', path.join(CLAUDE, 'short.jsonl'), '--store', store)
  assertOneLineError(r, 1, 'INVALID_INPUT')
  assert.match(r.stderr, /not a pi session file/)
  assert.deepEqual(json('ls', '--store', store), [])
  const never = path.join(dir, 'never.db')
  r = cli('import', 'claude-code', path.join(dir, 'missing'), '--store', never)
  assertOneLineError(r, 1, 'NOT_FOUND')
  assert.match(r.stderr, /missing/)
  assert.equal(fs.existsSync(never), false, 'the store is not created')
})

test('import: an empty transcript makes no session and is listed as skipped; the summary says nothing was imported', () => {
  const src = path.join(dir, 'empty')
  fs.mkdirSync(src)
  fs.writeFileSync(path.join(src, 'e0000000-0000-4000-8000-000000000000.jsonl'), '')
  const store = path.join(dir, 'empty.db')
  const r = cli('import', 'claude-code', src, '--store', store)
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, /^Nothing imported: no session in what was read\n1 skipped:\n {2}.*e0000000-0000-4000-8000-000000000000\.jsonl: empty file \(0 bytes\): no session to import\n/)
  assert.deepEqual(json('ls', '--store', store), [])
})

test('import: a session deleted with rm is not brought back unless --include-deleted', () => {
  const store = path.join(dir, 'tomb.db')
  json('import', 'claude-code', CLAUDE, '--store', store)
  assert.deepEqual(json('rm', 'short', '--store', store), { deleted: 'short', subagents: [] })
  const again = json('import', 'claude-code', CLAUDE, '--store', store)
  assert.equal(again.newSessions, 0)
  assert.equal(again.skipped.length, 1)
  assert.match(again.skipped[0].reason, /^session 'short' was deleted on \d{4}-\d\d-\d\d \d\d:\d\d UTC; --include-deleted \(includeDeleted: true\) brings it back$/)
  assert.ok(!json('ls', '--store', store).some((s) => s.id === 'short'))
  const back = json('import', 'claude-code', CLAUDE, '--store', store, '--include-deleted')
  assert.deepEqual([back.newSessions, back.skipped], [1, []])
  assert.ok(json('ls', '--store', store).some((s) => s.id === 'short' && s.status === 'completed'))
})

test('export --events: the Markdown transcript with its events; without it, none and one heading per message', () => {
  const store = path.join(dir, 'events.db')
  json('import', 'claude-code', path.join(CLAUDE, 'tool_heavy.jsonl'), '--store', store)
  const plain = cli('export', 'tool_heavy', '--format', 'markdown', '--store', store)
  assert.equal(plain.status, 0, plain.stderr)
  assert.doesNotMatch(plain.stdout, /_progress/)
  assert.doesNotMatch(plain.stdout, /### (User|Assistant) · [^\n]*\n+(?=###|$)/, 'no empty heading')
  const full = cli('export', 'tool_heavy', '--format', 'markdown', '--events', '--store', store)
  assert.equal(full.status, 0, full.stderr)
  assert.match(full.stdout, /\n_progress \(hook\\_progress\)_\n/)
})

test('import: a line that is not JSON is reported with its file and line, and the rest imports', () => {
  const src = path.join(dir, 'bad')
  fs.mkdirSync(src)
  const lines = fs.readFileSync(path.join(CLAUDE, 'short.jsonl'), 'utf8').split('\n').filter(Boolean)
  const file = path.join(src, 'cut.jsonl')
  fs.writeFileSync(file, [lines[0], '{"type": "user", "mess', ...lines.slice(1)].join('\n') + '\n')
  const store = path.join(dir, 'bad.db')
  const r = cli('import', 'claude-code', src, '--store', store)
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, /^1 new of 1 sessions, (\d+) new of \1 records\n/)
  assert.match(r.stdout, new RegExp(`^1 line\\(s\\) skipped:\n {2}${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: `, 'm'))
  const report = json('import', 'claude-code', src, '--store', path.join(dir, 'bad2.db'))
  assert.deepEqual(report.skipped.map((x) => [x.file, x.line]), [[file, 2]])
  assert.deepEqual([report.records, report.newRecords], [lines.length, lines.length], 'every good line imported')
})

// FIFOs and /dev/zero are POSIX; the release workflow tests Windows without them.
test('import: a FIFO, a link to /dev/zero, a dangling link and a link to / are listed, the rest imports; a device as the path is INVALID_INPUT', { skip: process.platform === 'win32' }, () => {
  const src = path.join(dir, 'hostile')
  fs.mkdirSync(src)
  fs.copyFileSync(path.join(CLAUDE, 'short.jsonl'), path.join(src, 'short.jsonl'))
  assert.equal(spawnSync('mkfifo', [path.join(src, 'fifo.jsonl')]).status, 0, 'mkfifo')
  fs.symlinkSync('/dev/zero', path.join(src, 'zero.jsonl'))
  fs.symlinkSync('nowhere.jsonl', path.join(src, 'dangling.jsonl'))
  fs.symlinkSync('/', path.join(src, 'root'))
  const store = path.join(dir, 'hostile-import.db')
  // a time limit: the FIFO hung the import before
  const env = { ...process.env }
  delete env.FORCE_COLOR
  const r = spawnSync(process.execPath, [BIN, 'import', 'claude-code', src, '--store', store], { encoding: 'utf8', env, timeout: 60_000 })
  assert.equal(r.status, 0, `${r.error ?? ''} ${r.stderr}`)
  assert.match(r.stdout, /^1 new of 1 sessions, /)
  const at = (name) => path.join(src, name)
  assert.match(r.stdout, /^4 skipped:$/m)
  for (const [name, reason] of [
    ['dangling.jsonl', "a link to nothing ('nowhere.jsonl' does not exist): not followed"],
    ['fifo.jsonl', 'not a regular file (a FIFO): not read'],
    ['root', 'a link to a folder: links to folders are not followed'],
    ['zero.jsonl', "a link to '/dev/zero', a character device, not a regular file: not read"],
  ]) assert.ok(r.stdout.includes(`\n  ${at(name)}: ${reason}\n`), r.stdout)
  const report = json('import', 'claude-code', src, '--store', store)
  assert.deepEqual(report.skipped.map((x) => [x.file, x.line]), ['dangling.jsonl', 'fifo.jsonl', 'root', 'zero.jsonl'].map((n) => [at(n), undefined]))
  assertOneLineError(cli('import', 'claude-code', '/dev/zero', '--store', store), 1, 'INVALID_INPUT')
  assert.match(cli('import', 'claude-code', '/dev/zero', '--store', store).stderr, /'\/dev\/zero' is a character device, not a file or folder/)
})

/** Each response's usage once, straight from the files: Claude Code repeats it on every block. */
function usageFromFiles() {
  const seen = new Map()
  for (const f of fs.readdirSync(CLAUDE).filter((x) => x.endsWith('.jsonl'))) {
    for (const line of fs.readFileSync(path.join(CLAUDE, f), 'utf8').split('\n').filter(Boolean)) {
      const r = JSON.parse(line)
      if (r.type === 'assistant' && r.message.usage) seen.set(r.message.id, { model: r.message.model, u: r.message.usage })
    }
  }
  return seen
}

/** The same from the store's envelopes (session.envelopes()), by message id. */
function usageFromEnvelopes(file) {
  const seen = new Map()
  const store = Store.open(file, { readonly: true })
  for (const info of store.listSessions()) {
    for (const e of store.openSession(info.id).envelopes()) {
      const m = e.message
      if (m?.role === 'assistant' && m.usage) seen.set(m.id, { model: m.model, u: m.usage })
    }
  }
  store.close()
  return seen
}

function sums(seen) {
  const sum = (k) => [...seen.values()].reduce((n, x) => n + (x.u[k] ?? 0), 0)
  return { models: [...new Set([...seen.values()].map((x) => x.model))].sort(), input: sum('input_tokens'), output: sum('output_tokens'), cacheRead: sum('cache_read_input_tokens'), cacheWrite: sum('cache_creation_input_tokens') }
}

const costOf = (t, p) => (t.input * p.input + t.output * p.output + t.cacheRead * p.cacheRead + t.cacheWrite * p.cacheWrite) / 1e6

test('usage: tokens per response counted once, by day and model; cost from the dated price table, which --prices overrides', () => {
  const want = sums(usageFromEnvelopes(storePath))
  assert.deepEqual(want, sums(usageFromFiles()), 'the envelopes carry the files\' usage')
  const byDay = json('usage', '--store', storePath)
  assert.deepEqual(
    [byDay.totals.inputTokens, byDay.totals.outputTokens, byDay.totals.cacheReadTokens, byDay.totals.cacheWriteTokens],
    [want.input, want.output, want.cacheRead, want.cacheWrite],
  )
  assert.equal(byDay.totals.totalTokens, want.input + want.output + want.cacheRead + want.cacheWrite)
  assert.equal(byDay.pricesAsOf, PRICES_AS_OF)
  assert.match(PRICES_AS_OF, /^\d{4}-\d{2}-\d{2}$/)
  // The fixtures' models are in the table: the cost is the table's, summed per model.
  const { PRICES: table } = require('../cli/prices.js')
  const perModel = want.models.map((m) => sums(new Map([...usageFromEnvelopes(storePath)].filter(([, x]) => x.model === m))))
  const cost = perModel.reduce((n, t, i) => n + costOf(t, priceOf(table, want.models[i])), 0)
  assert.deepEqual(byDay.unpricedModels, [])
  assert.ok(Math.abs(byDay.totals.costUSD - cost) < 1e-9, `${byDay.totals.costUSD} vs ${cost}`)
  assert.ok(Math.abs(byDay.rows.reduce((n, r) => n + r.costUSD, 0) - cost) < 1e-9)

  // --prices overrides the table; --by model names each model once.
  const prices = path.join(dir, 'prices.json')
  const p = { input: 7, output: 11, cacheRead: 0.7, cacheWrite: 8 }
  fs.writeFileSync(prices, JSON.stringify(Object.fromEntries(want.models.map((m) => [m, p]))))
  const byModel = json('usage', '--by', 'model', '--prices', prices, '--store', storePath)
  assert.deepEqual(byModel.rows.map((r) => r.key), want.models)
  assert.ok(Math.abs(byModel.totals.costUSD - costOf(want, p)) < 1e-9, `${byModel.totals.costUSD} vs ${costOf(want, p)}`)
  const text = cli('usage', '--by', 'model', '--prices', prices, '--store', storePath).stdout
  assert.match(text, new RegExp(`^total .* \\$${costOf(want, p).toFixed(2).replace('.', '\\.')}$`, 'm'))
  assert.match(text, new RegExp(`^prices as of ${PRICES_AS_OF} with `, 'm'))

  assertOneLineError(cli('usage', '--by', 'week', '--store', storePath), 2, 'USAGE')
  assertOneLineError(cli('usage', '--prices', path.join(dir, 'none.json'), '--store', storePath), 2, 'USAGE')
  fs.writeFileSync(path.join(dir, 'half.json'), JSON.stringify({ m: { input: 1, output: 2 } }))
  assertOneLineError(cli('usage', '--prices', path.join(dir, 'half.json'), '--store', storePath), 2, 'USAGE')
})

test('usage: a model the table does not name shows its tokens with cost ? and is named; a forked response counts once; dates are local days', () => {
  const file = path.join(dir, 'unpriced.db')
  const store = Store.open(file)
  const s = store.createSession({ id: 'u', project: 'q' })
  const usage = { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 1000, cache_creation_input_tokens: 10 }
  s.append({ uuid: 'a1', timestamp: '2026-03-01T12:00:00.000Z', message: { role: 'user', content: [{ type: 'text', text: 'hi' }] } })
  s.append({ uuid: 'a2', timestamp: '2026-03-01T12:00:01.000Z', message: { id: 'msg_1', role: 'assistant', model: 'acme-large-2', content: [{ type: 'text', text: 'hello' }], usage } })
  s.append({ uuid: 'a3', timestamp: '2026-03-01T12:00:02.000Z', message: { role: 'user', content: [{ type: 'text', text: 'again' }] } })
  s.append({ uuid: 'a4', timestamp: '2026-03-01T12:00:03.000Z', message: { id: 'msg_2', role: 'assistant', model: 'claude-haiku-4-5-20251001', content: [{ type: 'text', text: 'ok' }], usage } })
  store.forkSession('u', { atUuid: 'a4' }) // a copy of both responses: counted once, in 'u'
  store.close()
  const r = json('usage', '--by', 'session', '--store', file)
  assert.deepEqual(r.rows.map((x) => [x.key, x.inputTokens, x.costUSD]), [['u', 200, null]])
  assert.deepEqual(r.unpricedModels, ['acme-large-2'])
  const byModel = json('usage', '--by', 'model', '--store', file)
  const { PRICES: table } = require('../cli/prices.js')
  const haiku = costOf({ input: 100, output: 20, cacheRead: 1000, cacheWrite: 10 }, priceOf(table, 'claude-haiku-4-5-20251001'))
  assert.deepEqual(byModel.rows.map((x) => [x.key, x.outputTokens]), [['acme-large-2', 20], ['claude-haiku-4-5-20251001', 20]])
  assert.equal(byModel.rows[0].costUSD, null)
  assert.ok(Math.abs(byModel.rows[1].costUSD - haiku) < 1e-12)
  const text = cli('usage', '--by', 'model', '--store', file).stdout
  assert.match(text, /^acme-large-2 .* \?$/m)
  assert.match(text, /no price for acme-large-2/)
  // A bare date is a whole local day, at both ends.
  const day = new Date('2026-03-01T12:00:01.000Z')
  const local = `${day.getFullYear()}-${String(day.getMonth() + 1).padStart(2, '0')}-${String(day.getDate()).padStart(2, '0')}`
  assert.equal(json('usage', '--since', local, '--until', local, '--store', file).totals.inputTokens, 200)
  assert.equal(json('usage', '--until', '2026-03-01T12:00:02Z', '--store', file).totals.inputTokens, 100)
})

test('doctor: exit 0 on a healthy store; exit 3 naming a session with a call left without its result', () => {
  const healthy = cli('doctor', '--store', storePath, '--json')
  assert.equal(healthy.status, 0, healthy.stderr)
  const report = JSON.parse(healthy.stdout)
  assert.equal(report.healthy, true)
  const store0 = Store.open(storePath, { readonly: true })
  assert.deepEqual(report.integrity, store0.verify())
  assert.deepEqual(report.interrupted, store0.interruptedSessions())
  store0.close()
  const broken = path.join(dir, 'broken.db')
  const store = Store.open(broken)
  const s = store.createSession({ id: 'cut' })
  s.append('run ls')
  s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }] })
  store.close()
  const r = cli('doctor', '--store', broken)
  assert.equal(r.status, 3, r.stdout + r.stderr)
  assert.match(r.stdout, /sessions with pending repairs: 1 attention\n {2}cut: never_started toolu_1/)
  const j = JSON.parse(cli('doctor', '--store', broken, '--json').stdout)
  assert.deepEqual(j.pendingRepairs.map((x) => x.sessionId), ['cut'])
})

test('rm deletes a session; ls no longer lists it; a missing one is NOT_FOUND', () => {
  const copy = path.join(dir, 'rm.db')
  buildStore(copy)
  assert.deepEqual(json('rm', 'short', '--store', copy), { deleted: 'short', subagents: [] })
  assert.deepEqual(json('ls', '--store', copy).map((s) => s.id).sort(), ['compacted-session', 'tool_heavy'])
  assertOneLineError(cli('rm', 'short', '--store', copy), 1, 'NOT_FOUND')
})

test('--help on every command, --version, and bad usage as one line with exit 2', () => {
  for (const c of ['ls', 'show', 'search', 'import', 'export', 'usage', 'doctor', 'rm']) {
    const r = cli(c, '--help')
    assert.equal(r.status, 0, c)
    assert.match(r.stdout, new RegExp(`^Usage: threadline ${c}`), c)
  }
  assert.equal(cli('--version').stdout.trim(), require('../package.json').version)
  assertOneLineError(cli('frobnicate'), 2, 'USAGE')
  assertOneLineError(cli('show'), 2, 'USAGE')
  assertOneLineError(cli('ls', '--limit', '0'), 2, 'USAGE')
  assertOneLineError(cli('ls', '--since', 'yesterday'), 2, 'USAGE')
})

test('a --store file that does not exist is NOT_FOUND and is not created (import creates it); the default store is THREADLINE_HOME\'s', () => {
  const missing = path.join(dir, 'typo.db')
  for (const args of [['ls'], ['show', 'x'], ['search', 'x'], ['usage'], ['doctor'], ['rm', 'x'], ['export', 'x', '--format', 'markdown']]) {
    const r = cli(...args, '--store', missing)
    assertOneLineError(r, 1, 'NOT_FOUND')
    assert.match(r.stderr, /no store at '.*typo\.db'/)
  }
  assert.ok(!fs.existsSync(missing))
  const home = path.join(dir, 'home', 'deeper')
  const env = { ...process.env, THREADLINE_HOME: home }
  const run = (...args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env })
  assert.equal(run('ls').stdout, "No sessions. (threadline import claude-code ~/.claude/projects brings in Claude Code's)\n", 'a first run: the default store is created, empty')
  assert.equal(JSON.parse(run('usage', '--json').stdout).totals.totalTokens, 0)
  assert.equal(run('import', 'claude-code', path.join(CLAUDE, 'short.jsonl')).status, 0)
  assert.deepEqual(JSON.parse(run('ls', '--json').stdout).map((s) => s.id), ['short'])
  assert.ok(fs.existsSync(path.join(home, 'threadline.db')))
})

test('show: images and documents as a placeholder line, a long tool result cut to one line unless --full', () => {
  const file = path.join(dir, 'media.db')
  const store = Store.open(file)
  const s = store.createSession({ id: 'media' })
  const long = Array.from({ length: 40 }, (_, i) => `line ${i} ${'x'.repeat(50)}`).join('\n')
  s.append({ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }, { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } }] })
  s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Read', input: { path: 'a.txt' } }] })
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: long }] })
  store.close()
  const out = cli('show', 'media', '--store', file).stdout
  assert.match(out, /^\[image: image\/png\]$/m)
  assert.match(out, /^\[document: application\/pdf\]$/m)
  assert.ok(!out.includes('iVBORw0KGgo'), 'no base64 on the screen')
  const result = out.split('\n').find((l) => l.startsWith('◂ result'))
  assert.match(result, /^◂ result \(40 lines\) line 0 x+ line 1 x+…$/)
  assert.ok(result.length <= 130, result)
  assert.ok(cli('show', 'media', '--full', '--store', file).stdout.includes(long), '--full: the whole result')
})

test('show: a rewind and a compaction get a line of their own, so a branched pi session reads in order', () => {
  const file = path.join(dir, 'branched.db')
  const pi = path.join(ROOT, 'fixtures', 'pi', 'branched.jsonl')
  assert.equal(cli('import', 'pi', pi, '--store', file).status, 0)
  const entries = fs.readFileSync(pi, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  const out = cli('show', entries[0].id.slice(0, 8), '--store', file).stdout.split('\n')
  // where pi went back: an entry whose parent is not the entry before it
  const jumps = entries.slice(2).filter((e, i) => e.parentId !== entries[i + 1].id).map((e) => e.parentId)
  const rewinds = out.filter((l) => l.startsWith('↩ rewound to '))
  assert.deepEqual(rewinds.map((l) => l.split(' ')[3].replace(/:$/, '')), jumps)
  assert.match(rewinds[0], /2025-12-0\d \d\d:\d\d$/, 'dated when pi went back, not when imported')
  assert.equal(out.filter((l) => l.startsWith('✂ compacted: ')).length, 1)
  // the abandoned branch's reply, then the rewind, then the new branch's prompt
  const at = out.indexOf(rewinds[0])
  assert.ok(out.slice(0, at).some((l) => l.includes('On branch `refactor` now')))
  assert.ok(out.slice(at).some((l) => l === 'will this also allow us to test the agent core?'))
})

test('a reader that stops early (| head) ends the command quietly', () => {
  const sh = `"${process.execPath}" "${BIN}" show compacted-session --full --store "${storePath}" | head -c 100 >/dev/null; echo "\${PIPESTATUS[0]}"`
  const r = spawnSync('bash', ['-c', sh], { encoding: 'utf8' })
  assert.equal(r.stderr, '', 'no EPIPE stack trace')
  assert.equal(r.stdout.trim(), '0')
})

test('--store takes a postgres:// URL', (t) => {
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (!base) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `npm test` for PostgreSQL')
    return
  }
  const url = `${base}${base.includes('?') ? '&' : '?'}schema=cli_${process.pid}_${Date.now() % 1e8}`
  // the same import into a SQLite file: the same sessions in the same order, the same export
  const file = path.join(dir, 'pg-twin.db')
  assert.equal(json('import', 'claude-code', CLAUDE, '--store', url).newRecords, 1566)
  assert.equal(json('import', 'claude-code', CLAUDE, '--store', file).newRecords, 1566)
  assert.deepEqual(json('ls', '--store', url).map((s) => s.id), json('ls', '--store', file).map((s) => s.id))
  assert.equal(cli('export', 'short', '--format', 'claude-code', '--store', url).stdout, cli('export', 'short', '--format', 'claude-code', '--store', file).stdout)
})

// What a hostile file can carry to a terminal: a clipboard write (OSC 52), a window title (OSC 0),
// a screen clear, CSI in its 8-bit form (C1), DEL and a right-to-left override.
const HOSTILE = '\x1b]52;c;aGFja2Vk\x07\x1b]0;pwned\x07\x1b[2J\u009b31m\x7f\u202e'
// Any of them in what the command printed (a newline and a tab are text).
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/

/** Two sessions whose every field shown by a command carries HOSTILE, and an event of a hostile type. */
function hostileStore(file) {
  const store = Store.open(file)
  for (const n of [1, 2]) {
    const s = store.createSession({ id: `evil${n}${HOSTILE}`, project: `proj${HOSTILE}`, title: `title${HOSTILE}\n# not a row`, model: `model${HOSTILE}` })
    const report = s.restoreMessages([
      { role: 'user', content: [{ type: 'text', text: `hello body${HOSTILE}\nsecond line` }] },
      { role: 'assistant', model: `model${HOSTILE}`, id: `msg${n}`, usage: { input_tokens: 1, output_tokens: 1 }, content: [
        { type: 'thinking', thinking: `thought${HOSTILE}`, signature: 's' },
        { type: 'tool_use', id: `t${n}${HOSTILE}`, name: `Bash${HOSTILE}`, input: { command: `ls${HOSTILE}` } },
        { type: 'image', source: { type: 'base64', media_type: `image/png${HOSTILE}`, data: 'AAAA' } },
      ] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: `t${n}${HOSTILE}`, content: `output${HOSTILE}`, is_error: true }] },
      { type: `weird${HOSTILE}`, subtype: `sub${HOSTILE}`, uuid: `u${n}`, timestamp: '2026-02-10T10:00:00Z' },
      // a call left without its result: doctor names it
      { role: 'assistant', content: [{ type: 'tool_use', id: `open${n}${HOSTILE}`, name: 'Read', input: {} }] },
    ])
    assert.deepEqual(report.skipped, [])
    s.close()
  }
  store.close()
}

function assertVisible(text, what) {
  assert.ok(!CONTROL.test(text), `${what}: a control character from the data reached the output: ${JSON.stringify(text.match(CONTROL))}\n${text}`)
  assert.ok(text.includes('\\x1b]52;c;aGFja2Vk\\x07\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x7f\\u202e'), `${what}: the payload shown as text:\n${text}`)
}

test('data from the store cannot drive the terminal: ls, show, search, usage, doctor, rm and errors show control characters as text', () => {
  const file = path.join(dir, 'hostile.db')
  hostileStore(file)
  const ls = cli('ls', '--store', file)
  assert.equal(ls.status, 0, ls.stderr)
  assertVisible(ls.stdout, 'ls')
  assert.equal(ls.stdout.trimEnd().split('\n').length, 3, `a row per session, a newline in a title is not a row:\n${ls.stdout}`)
  const id = json('ls', '--store', file)[0].id
  for (const args of [['show', id], ['show', id, '--full'], ['search', 'hello'], ['search', 'thought', '--field', 'thinking'], ['usage', '--by', 'model'], ['usage', '--by', 'session'], ['doctor']]) {
    const r = cli(...args, '--store', file)
    assert.ok(r.status === 0 || (args[0] === 'doctor' && r.status === 3), `${args.join(' ')}: ${r.stderr}`)
    assert.equal(r.stderr, '', args.join(' '))
    assertVisible(r.stdout, args.join(' '))
  }
  const full = cli('show', id, '--full', '--store', file).stdout
  assert.match(full, /^hello body.*\nsecond line$/m, 'a message keeps its lines')
  // an error that quotes ids: one line, the ids shown as text
  const ambiguous = cli('show', 'evil', '--store', file)
  assertOneLineError(ambiguous, 2, 'USAGE')
  assertVisible(ambiguous.stderr, 'an error')
  const rm = cli('rm', id, '--store', file)
  assert.equal(rm.status, 0, rm.stderr)
  assertVisible(rm.stdout, 'rm')
})

test('--json keeps the data exact, with C1 controls, DEL and bidi overrides as JSON escapes', () => {
  const file = path.join(dir, 'hostile-json.db')
  hostileStore(file)
  const store = Store.open(file, { readonly: true })
  const expected = store.listSessions().map((s) => ({ ...s, parentId: null }))
  const id = expected[0].id
  const session = store.openSession(id)
  const shown = { info: session.info, records: session.envelopes() }
  store.close()
  for (const [args, want] of [[['ls'], expected], [['show', id], shown]]) {
    const r = cli(...args, '--json', '--store', file)
    assert.equal(r.status, 0, r.stderr)
    assert.ok(!CONTROL.test(r.stdout), `${args[0]} --json: raw control characters`)
    assert.ok(r.stdout.includes('\\u001b]52;c;aGFja2Vk\\u0007\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m\\u007f\\u202e'), r.stdout)
    assert.deepEqual(JSON.parse(r.stdout), want)
  }
})

test('import: a hostile file name and record type are shown as text', () => {
  const src = path.join(dir, 'hostile-src')
  fs.mkdirSync(src)
  const lines = fs.readFileSync(path.join(CLAUDE, 'short.jsonl'), 'utf8').split('\n').filter(Boolean)
  const odd = JSON.stringify({ type: `weird${HOSTILE}`, uuid: 'odd-1', sessionId: 'short', timestamp: '2026-02-10T10:00:00Z' })
  // a name with ESC, BEL and DEL (a file name cannot hold NUL or '/')
  fs.writeFileSync(path.join(src, `f${HOSTILE}.jsonl`), [lines[0], '{"type": "user", "mess', odd, ...lines.slice(1)].join('\n') + '\n')
  const r = cli('import', 'claude-code', src, '--store', path.join(dir, 'hostile-import.db'))
  assert.equal(r.status, 0, r.stderr)
  assertVisible(r.stdout, 'import')
  assert.match(r.stdout, /kept as events: .*weird\\x1b\]52;/)
  assert.match(r.stdout, /^ {2}.*f\\x1b\]52;.*\.jsonl:2: /m)
})

/** Runs the command with standard output on `fd` (a file descriptor of this process). */
function cliTo(fd, ...args) {
  const env = { ...process.env }
  delete env.FORCE_COLOR
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env, stdio: ['ignore', fd, 'pipe'] })
  return { status: r.status, stderr: r.stderr }
}

test('a write error on standard output is one line and exit 1 (/dev/full, a read-only descriptor), never a stack trace', () => {
  const full = fs.openSync('/dev/full', 'w')
  const readOnly = fs.openSync(path.join(dir, 'store.db'), 'r')
  try {
    for (const [fd, code] of [[full, 'ENOSPC'], [readOnly, 'EBADF']]) {
      for (const args of [['ls'], ['ls', '--json'], ['show', 'short', '--full'], ['search', 'phx'], ['export', 'short', '--format', 'markdown'], ['--help']]) {
        const r = cliTo(fd, ...args, '--store', storePath)
        assert.equal(r.status, 1, `${args.join(' ')}: ${r.stderr}`)
        assert.equal(r.stderr, `threadline: ${code}: cannot write to standard output: ${code === 'ENOSPC' ? 'no space left on device' : 'bad file descriptor'}\n`, args.join(' '))
      }
    }
    // and with standard error full too: the exit code says it
    const r = spawnSync(process.execPath, [BIN, 'ls', '--store', storePath], { stdio: ['ignore', full, full] })
    assert.equal(r.status, 1)
  } finally {
    fs.closeSync(full)
    fs.closeSync(readOnly)
  }
})

test('a closed pipe ends the command quietly with exit 0, however many writes follow', async () => {
  const { spawn } = require('node:child_process')
  for (const args of [['ls'], ['search', 'the', '--limit', '50'], ['show', 'compacted-session', '--full']]) {
    const child = spawn(process.execPath, [BIN, ...args, '--store', storePath], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.destroy() // the reader is gone before the command writes
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    const status = await new Promise((resolve) => child.on('close', resolve))
    assert.equal(stderr, '', `${args.join(' ')}: no EPIPE stack trace`)
    assert.equal(status, 0, args.join(' '))
  }
})
