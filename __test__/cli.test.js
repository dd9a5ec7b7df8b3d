'use strict'
// The threadline command in child processes, as a script runs it: every command, its --json
// output checked against the API's own answers, exit codes, and bad arguments.

const { test, before } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { lib } = require('./helpers/util')

const { Store } = lib
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

let dir
let storePath
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-cli-'))
  storePath = path.join(dir, 'store.db')
  const r = cli('--store', storePath, 'import', 'claude-code', CLAUDE)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stderr, '', 'no progress bar without a terminal')
  assert.match(r.stdout, /^3 new of 3 sessions, 1566 new of 1566 records/)
})

test('ls: every session, newest first; filters; --json is listSessions', () => {
  const store = Store.open(storePath, { readonly: true })
  const expected = store.listSessions()
  store.close()
  assert.deepEqual(json('ls', '--store', storePath), expected)
  assert.deepEqual(json('ls', '--store', storePath, '--limit', '1').map((s) => s.id), [expected[0].id])
  assert.deepEqual(json('ls', '--store', storePath, '--project', '/home/marco/projects/spotter').map((s) => s.id), ['tool_heavy', 'short'])
  const table = cli('ls', '--store', storePath).stdout.split('\n')
  assert.match(table[0], /ID\s+UPDATED\s+PROJECT\s+TITLE OR FIRST PROMPT\s+MSGS\s+STATUS/)
  assert.deepEqual(table.slice(1, 4).map((l) => l.trim().split(/\s+/)[0]), expected.map((s) => s.id))
  assert.match(table[3], /mix phx\.server doesnt seem to start\s+9\s+active$/, 'the first prompt of a session without a title')
  assert.ok(!/\x1b\[/.test(table.join('\n')), 'no colour when not on a terminal')
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
  assert.equal(cli('rm', 'shorter', '--store', storePath).stdout, 'deleted shorter\n')
})

test('search: --json is store.search with the same options; hits printed with their session', () => {
  const store = Store.open(storePath)
  const expected = store.search('renderer', { sessionId: 'compacted-session', roles: ['assistant'], fields: ['text', 'tool_input'], limit: 3 })
  store.close()
  assert.deepEqual(json('search', 'renderer', '--store', storePath, '--session', 'compacted-session', '--role', 'assistant', '--field', 'text', '--field', 'tool_input', '--limit', '3'), expected)
  const out = cli('search', 'renderer', '--store', storePath, '--limit', '3').stdout
  assert.equal(out.split('\n').filter((l) => l.startsWith('compacted-session #')).length, 3)
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

test('import: --json is the report; a second import adds nothing; a missing path is NOT_FOUND', () => {
  const other = path.join(dir, 'other.db')
  const first = json('import', 'claude-code', path.join(CLAUDE, 'short.jsonl'), '--store', other, '--project', 'p')
  assert.deepEqual({ ...first, events: undefined }, { sessions: 1, newSessions: 1, records: 15, newRecords: 15, skipped: [], events: undefined })
  assert.equal(json('import', 'claude-code', path.join(CLAUDE, 'short.jsonl'), '--store', other).newRecords, 0)
  assert.deepEqual(json('ls', '--store', other).map((s) => s.project), ['p'])
  assertOneLineError(cli('import', 'claude-code', path.join(dir, 'missing'), '--store', other), 1, 'NOT_FOUND')
  assertOneLineError(cli('import', 'gemini', CLAUDE, '--store', other), 1, 'INVALID_INPUT')
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
  const sum = (k) => [...seen.values()].reduce((n, x) => n + (x.u[k] ?? 0), 0)
  return { models: [...new Set([...seen.values()].map((x) => x.model))], input: sum('input_tokens'), output: sum('output_tokens'), cacheRead: sum('cache_read_input_tokens'), cacheWrite: sum('cache_creation_input_tokens') }
}

test('usage: tokens per response counted once, by day and model; cost from the price table, which --prices overrides', () => {
  const want = usageFromFiles()
  const byDay = json('usage', '--store', storePath)
  assert.deepEqual(
    [byDay.totals.inputTokens, byDay.totals.outputTokens, byDay.totals.cacheReadTokens, byDay.totals.cacheWriteTokens],
    [want.input, want.output, want.cacheRead, want.cacheWrite],
  )
  assert.deepEqual(byDay.unpricedModels, want.models, 'a model the table does not name is not guessed')
  assert.equal(byDay.totals.costUSD, null)
  const prices = path.join(dir, 'prices.json')
  const p = { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 }
  fs.writeFileSync(prices, JSON.stringify(Object.fromEntries(want.models.map((m) => [m, p]))))
  const byModel = json('usage', '--by', 'model', '--prices', prices, '--store', storePath)
  assert.deepEqual(byModel.rows.map((r) => r.key), want.models)
  const cost = (want.input * p.input + want.output * p.output + want.cacheRead * p.cacheRead + want.cacheWrite * p.cacheWrite) / 1e6
  assert.ok(Math.abs(byModel.totals.costUSD - cost) < 1e-9, `${byModel.totals.costUSD} vs ${cost}`)
  assert.deepEqual(byModel.unpricedModels, [])
  const table = cli('usage', '--by', 'model', '--prices', prices, '--store', storePath).stdout
  assert.match(table, new RegExp(`^total .* \\$${cost.toFixed(2).replace('.', '\\.')}$`, 'm'))
  assertOneLineError(cli('usage', '--by', 'week', '--store', storePath), 2, 'USAGE')
  assertOneLineError(cli('usage', '--prices', path.join(dir, 'none.json'), '--store', storePath), 2, 'USAGE')
})

test('doctor: exit 0 on a healthy store; exit 3 naming a session with a call left without its result', () => {
  const healthy = cli('doctor', '--store', storePath, '--json')
  assert.equal(healthy.status, 0, healthy.stderr)
  const report = JSON.parse(healthy.stdout)
  assert.equal(report.healthy, true)
  assert.equal(report.integrity.records, 1566)
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
  cli('import', 'claude-code', CLAUDE, '--store', copy)
  assert.deepEqual(json('rm', 'short', '--store', copy), { deleted: 'short' })
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

test('--store takes a postgres:// URL', (t) => {
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (!base) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `npm test` for PostgreSQL')
    return
  }
  const url = `${base}${base.includes('?') ? '&' : '?'}schema=cli_${process.pid}_${Date.now() % 1e8}`
  assert.equal(json('import', 'claude-code', CLAUDE, '--store', url).newRecords, 1566)
  assert.deepEqual(json('ls', '--store', url).map((s) => s.id), json('ls', '--store', storePath).map((s) => s.id))
  assert.equal(cli('export', 'short', '--format', 'claude-code', '--store', url).stdout, cli('export', 'short', '--format', 'claude-code', '--store', storePath).stdout)
})
