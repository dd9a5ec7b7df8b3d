'use strict'
// The threadline command on a store of real Claude Code sessions with subagents, imported with
// `threadline import claude-code` as a user would: short ids among top-level sessions, subagents
// under their parent (ls), named beside the Task call that spawned them (show), deleted with it
// (rm); --project by a path's last component; search --cursor; errors as JSON under --json;
// the compaction summary folded; counts with thousands separators.

const { test, before, after } = require('node:test')
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
const SUBAGENTS = path.join(ROOT, 'fixtures', 'claude-code-subagents')
const PARENT = '4d5611e5-241a-462a-8d15-5122611a9569'
const EXPLORE = `${PARENT}/agent-a2898e3`
const COMPACT = `${PARENT}/agent-acompact-e1f845`
// the Task call that spawned the Explore agent (fixtures/claude-code-subagents/README.md)
const TASK_CALL = 'toolu_017pLRuPHYTX5t99EnLyV53m'

function cli(...args) {
  const env = { ...process.env }
  delete env.FORCE_COLOR
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env, maxBuffer: 64 << 20 })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

function json(...args) {
  const r = cli(...args, '--json')
  assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}${r.stdout}`)
  assert.equal(r.stderr, '')
  return JSON.parse(r.stdout)
}

function assertOneLineError(r, status, code) {
  assert.equal(r.status, status, r.stderr)
  assert.equal(r.stdout, '')
  const lines = r.stderr.trimEnd().split('\n')
  assert.equal(lines.length, 1, r.stderr)
  assert.ok(lines[0].startsWith(`threadline: ${code}: `), r.stderr)
}

let dir
let projects
let storePath

/** A fresh store of the fixtures, imported with the command. */
function imported(name) {
  const file = path.join(dir, name)
  const r = cli('import', 'claude-code', projects, '--store', file)
  assert.equal(r.status, 0, r.stderr)
  return file
}

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-cli-ids-'))
  // Claude Code's layout: the session's file with its subagents' folder beside it
  projects = path.join(dir, 'projects', 'spotter')
  fs.mkdirSync(projects, { recursive: true })
  fs.copyFileSync(path.join(CLAUDE, 'compacted-session.jsonl'), path.join(projects, `${PARENT}.jsonl`))
  fs.cpSync(path.join(SUBAGENTS, PARENT), path.join(projects, PARENT), { recursive: true })
  for (const f of ['short.jsonl', 'tool_heavy.jsonl']) fs.copyFileSync(path.join(CLAUDE, f), path.join(projects, f))
  storePath = imported('store.db')
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

/** The ID column of ls's text rows, as printed (indent kept). */
function idColumn(stdout) {
  return stdout.trimEnd().split('\n').slice(1).map((l) => l.match(/^(\s*\S+)/)[1])
}

test('a start of a parent id names the parent, not its subagents; a subagent by its own part, a start of it, or PARENT/part', () => {
  const ids = json('ls', '--store', storePath).map((s) => s.id)
  assert.deepEqual(ids.filter((id) => id.startsWith('4d5611e5')).sort(), [PARENT, COMPACT, EXPLORE].sort())
  const named = (x) => json('show', x, '--store', storePath).info.id
  // docs/export.md's own example
  assert.equal(named('4d5611e5'), PARENT)
  assert.equal(named(PARENT), PARENT)
  for (const x of ['agent-a2898e3', 'agent-a28', `4d5611e5/agent-a2898e3`, `${PARENT}/agent-a2898e3`, '4d5/agent-a2']) assert.equal(named(x), EXPLORE, x)
  assert.equal(named('agent-acompact'), COMPACT)
  // two subagents' parts start with agent-a: both named, the command to tell them apart implied
  const r = cli('show', 'agent-a', '--store', storePath)
  assertOneLineError(r, 2, 'USAGE')
  assert.match(r.stderr, /'agent-a' is the start of 2 session ids \(.*4d5611e5\/agent-a2898e3.*\): give more of it/)
  assertOneLineError(cli('show', '4d5611e5/agent-zz', '--store', storePath), 1, 'NOT_FOUND')
  // search --session and export take the same ids
  const hits = json('search', 'renderer', '--session', 'agent-a2898e3', '--store', storePath).hits
  assert.ok(hits.length > 0)
  assert.deepEqual([...new Set(hits.map((h) => h.sessionId))], [EXPLORE])
  // search's text names the session as ls does: a top-level one short, a subagent through its parent
  const text = cli('search', 'renderer', '--limit', '20', '--store', storePath).stdout.split('\n').filter((l) => !l.startsWith(' ') && l.includes(' #'))
  assert.ok(text.some((l) => l.startsWith('4d5611e5 #')), text.join('\n'))
  assert.ok(text.some((l) => l.startsWith('4d5611e5/agent-a2898e3 #')), text.join('\n'))
  const md = cli('export', 'agent-a2898e3', '--format', 'markdown', '--store', storePath)
  assert.equal(md.status, 0, md.stderr)
  const store = Store.open(storePath, { readonly: true })
  assert.equal(md.stdout, store.openSession(EXPLORE).export('markdown'))
  store.close()
})

test('ls: the parent by its short id, its subagents indented under it; --flat lists every session named through its parent; --json has parentId', () => {
  const rows = idColumn(cli('ls', '--store', storePath).stdout)
  const at = rows.indexOf('4d5611e5')
  assert.ok(at >= 0, rows.join('\n'))
  assert.deepEqual(rows.slice(at + 1, at + 3).sort(), ['  agent-a2898e3', '  agent-acompact-e1f845'])
  assert.deepEqual(rows.filter((r) => !r.startsWith(' ')).sort(), ['4d5611e5', 'short', 'tool_heavy'])
  // what ls prints, show takes
  for (const r of rows) assert.equal(cli('show', r.trim(), '--store', storePath).status, 0, r)

  const flat = idColumn(cli('ls', '--flat', '--store', storePath).stdout)
  assert.deepEqual(flat.slice().sort(), ['4d5611e5', '4d5611e5/agent-a2898e3', '4d5611e5/agent-acompact-e1f845', 'short', 'tool_heavy'])

  const listed = json('ls', '--store', storePath)
  const store = Store.open(storePath, { readonly: true })
  assert.deepEqual(listed, store.listSessions().map((s) => ({ ...s, parentId: s.id.startsWith(`${PARENT}/`) ? PARENT : null })))
  store.close()
  // --limit counts top-level sessions, each with its subagents
  assert.deepEqual(idColumn(cli('ls', '--limit', '1', '--store', storePath).stdout).map((r) => r.trim()).sort(), ['4d5611e5', 'agent-a2898e3', 'agent-acompact-e1f845'])
})

test('show names the subagent beside the Task call that spawned it, and the parent in the subagent\'s header', () => {
  const out = cli('show', '4d5611e5', '--store', storePath).stdout.split('\n')
  const task = out.findIndex((l) => l.startsWith('▸ Task ') && l.includes('Explore'))
  assert.ok(task >= 0)
  assert.equal(out[task + 1], '  ⤷ subagent agent-a2898e3 (threadline show agent-a2898e3)')
  // the compaction agent was spawned by no call: named at the record it began at
  assert.ok(out.includes('  ⤷ compaction agent agent-acompact-e1f845 (threadline show agent-acompact-e1f845)'), out.join('\n'))
  const store = Store.open(storePath, { readonly: true })
  assert.equal(store.openSession(EXPLORE).info.metadata.parentToolUseId, TASK_CALL)
  store.close()
  const sub = cli('show', 'agent-a2898e3', '--store', storePath).stdout.split('\n')
  assert.match(sub[1], new RegExp(`^${EXPLORE} · subagent of 4d5611e5 · `))
})

test('show folds Claude Code\'s compaction summary to one line; --full shows it', () => {
  const store = Store.open(storePath, { readonly: true })
  const summary = store.openSession(PARENT).envelopes().find((e) => e.isCompactSummary)
  store.close()
  const body = summary.message.content.map((b) => b.text ?? '').join('\n')
  const lines = body.split('\n').length
  assert.ok(lines > 100 && body.length > 1000, 'the fixture has a long summary')
  const folded = cli('show', '4d5611e5', '--store', storePath).stdout
  const n = (x) => x.toLocaleString('en-US')
  assert.ok(folded.includes(`\n✂ compaction summary (${n(lines)} lines, ${n(body.length)} chars) folded: --full shows it\n`), folded)
  const second = body.split('\n').find((l, i) => i > 3 && l.trim().length > 30)
  assert.ok(!folded.includes(second), 'the summary itself is not printed')
  assert.ok(cli('show', '4d5611e5', '--full', '--store', storePath).stdout.includes(second))
})

test('rm: a whole id deletes, a start of one only with --yes; a parent goes with its subagents, named in the output', () => {
  const file = imported('rm.db')
  const before = json('ls', '--store', file)
  const refused = cli('rm', '4d5611e5', '--store', file)
  assertOneLineError(refused, 2, 'USAGE')
  assert.match(refused.stderr, new RegExp(`it names ${PARENT} and its 2 subagent sessions; to delete it, give the whole id \\(threadline rm ${PARENT}\\) or add --yes`))
  assertOneLineError(cli('rm', 'agent-a2898e3', '--store', file), 2, 'USAGE')
  assert.deepEqual(json('ls', '--store', file), before, 'a refused rm deletes nothing')

  const r = cli('rm', PARENT, '--store', file)
  assert.equal(r.status, 0, r.stderr)
  const lines = r.stdout.trimEnd().split('\n')
  assert.equal(lines[0], `deleted ${PARENT} and its 2 subagent sessions`)
  assert.deepEqual(lines.slice(1, 3).sort(), [`  ${COMPACT}`, `  ${EXPLORE}`].sort())
  assert.match(lines[3], /import --include-deleted/)
  assert.deepEqual(json('ls', '--store', file).map((s) => s.id).sort(), ['short', 'tool_heavy'])

  const again = imported('rm2.db')
  const yes = json('rm', '4d5611e5', '--yes', '--store', again)
  assert.deepEqual({ ...yes, subagents: yes.subagents.sort() }, { deleted: PARENT, subagents: [COMPACT, EXPLORE].sort() })
  assert.deepEqual(json('ls', '--store', again).map((s) => s.id).sort(), ['short', 'tool_heavy'])
  // a subagent alone, by its whole id
  const third = imported('rm3.db')
  assert.deepEqual(json('rm', EXPLORE, '--store', third), { deleted: EXPLORE, subagents: [] })
  assert.deepEqual(json('ls', '--store', third).map((s) => s.id).sort(), [PARENT, COMPACT, 'short', 'tool_heavy'].sort())
})

test('--project takes a project\'s path, its last component or a unique start of either (ls, search, usage); ambiguous and unknown ones are said', () => {
  const DOV = '/home/USER/projects/spotter-worktrees/spotter-dov'
  const SPOTTER = '/home/marco/projects/spotter'
  const ls = (p) => json('ls', '--project', p, '--flat', '--store', storePath).map((s) => s.id).sort()
  // `spotter` is the last component of one project and the start of the other's: the whole name wins
  assert.deepEqual(ls('spotter'), ['short', 'tool_heavy'])
  assert.deepEqual(ls(SPOTTER), ['short', 'tool_heavy'])
  assert.deepEqual(ls('spotter-d'), [PARENT, COMPACT, EXPLORE].sort())
  assert.deepEqual(ls('/home/USER'), [PARENT, COMPACT, EXPLORE].sort())
  const ambiguous = cli('ls', '--project', '/home', '--store', storePath)
  assertOneLineError(ambiguous, 2, 'USAGE')
  assert.ok(ambiguous.stderr.includes(`--project "/home" matches 2 projects: "${DOV}", "${SPOTTER}"; give more of the path`), ambiguous.stderr)
  for (const args of [['ls'], ['search', 'phoenix'], ['usage']]) {
    const none = cli(...args, '--project', 'nope', '--store', storePath)
    assertOneLineError(none, 1, 'NOT_FOUND')
    assert.ok(none.stderr.includes(`no project matches "nope"; projects: "${DOV}", "${SPOTTER}"`), none.stderr)
  }
  const store = Store.open(storePath)
  assert.deepEqual(json('search', 'phoenix', '--project', 'spotter', '--store', storePath), store.search('phoenix', { project: SPOTTER }))
  store.close()
  assert.deepEqual(json('usage', '--project', 'spotter-dov', '--store', storePath), json('usage', '--project', DOV, '--store', storePath))
  assert.notEqual(json('usage', '--project', 'spotter-dov', '--store', storePath).totals.totalTokens, json('usage', '--store', storePath).totals.totalTokens)

  // two projects with the same last component: both named
  const file = path.join(dir, 'apps.db')
  const two = Store.open(file)
  for (const p of ['/a/app', '/b/app']) two.createSession({ project: p }).append('hi')
  two.close()
  const r = cli('ls', '--project', 'app', '--store', file)
  assertOneLineError(r, 2, 'USAGE')
  assert.ok(r.stderr.includes('--project "app" matches 2 projects: "/a/app", "/b/app"'), r.stderr)
})

test('search --cursor takes the nextCursor search --json prints: the next page', () => {
  const first = json('search', 'phoenix', '--limit', '2', '--store', storePath)
  assert.equal(first.hits.length, 2)
  assert.equal(typeof first.nextCursor, 'string')
  const second = json('search', 'phoenix', '--limit', '2', '--cursor', first.nextCursor, '--store', storePath)
  const store = Store.open(storePath)
  assert.deepEqual(second, store.search('phoenix', { limit: 2, cursor: first.nextCursor }))
  const all = store.search('phoenix', { limit: 4 })
  store.close()
  assert.deepEqual([...first.hits, ...second.hits].map((h) => [h.sessionId, h.seq]), all.hits.map((h) => [h.sessionId, h.seq]))
  // the text says how to read on
  const text = cli('search', 'phoenix', '--limit', '2', '--store', storePath).stdout
  assert.ok(text.endsWith(`(more: the same command with --cursor ${first.nextCursor})\n`), text)
  assertOneLineError(cli('search', 'phoenix', '--limit', '3', '--cursor', first.nextCursor, '--store', storePath), 1, 'INVALID_INPUT')
})

test('under --json an error is { error: { code, message } } on standard output, with the exit code of the text', () => {
  const missing = path.join(dir, 'missing.db')
  for (const [args, status, code] of [
    [['ls', '--project', 'nope'], 1, 'NOT_FOUND'],
    [['show', 'nope'], 1, 'NOT_FOUND'],
    [['show', 'agent-a'], 2, 'USAGE'],
    [['search', '"unclosed'], 1, 'INVALID_INPUT'],
    [['export', 'nope', '--format', 'markdown'], 1, 'NOT_FOUND'],
    [['export', 'short'], 2, 'USAGE'],
    [['usage', '--project', 'nope'], 1, 'NOT_FOUND'],
    [['rm', '4d5611e5'], 2, 'USAGE'],
    [['import', 'gemini', projects], 1, 'INVALID_INPUT'],
    [['ls', '--limit', '0'], 2, 'USAGE'],
    [['frobnicate'], 2, 'USAGE'],
    [['doctor', '--store', missing], 1, 'NOT_FOUND'],
  ]) {
    const text = cli('--store', storePath, ...args)
    assertOneLineError(text, status, code)
    const r = cli('--store', storePath, ...args, '--json')
    assert.equal(r.status, status, `${args.join(' ')}: ${r.stdout}`)
    assert.equal(r.stderr, '', args.join(' '))
    const body = JSON.parse(r.stdout)
    assert.deepEqual(Object.keys(body), ['error'])
    assert.deepEqual(Object.keys(body.error), ['code', 'message'])
    assert.equal(body.error.code, code, args.join(' '))
    // the same message as the text line's
    assert.equal(`threadline: ${code}: ${body.error.message}\n`, text.stderr)
  }
})

test('counts in text have thousands separators: ls, show and usage', () => {
  const file = path.join(dir, 'many.db')
  const store = Store.open(file)
  const s = store.createSession({ id: 'many', project: 'p' })
  s.appendMany(Array.from({ length: 1234 }, (_, i) => (i % 2 ? { role: 'assistant', content: [{ type: 'thinking', thinking: 'x'.repeat(1500), signature: 's' }, { type: 'text', text: `answer ${i}` }], model: 'claude-sonnet-4-5', usage: { input_tokens: 1000, output_tokens: 10 } } : { role: 'user', content: [{ type: 'text', text: `question ${i}` }] })))
  store.close()
  assert.match(cli('ls', '--store', file).stdout, /^many\s.*\s1,234\s+active$/m)
  const show = cli('show', 'many', '--store', file).stdout
  assert.match(show.split('\n')[1], / · 1,234 messages · /)
  assert.match(show, /^✻ thinking \(1,500 chars\)$/m)
  // 617 responses of 1,000 input tokens each
  assert.match(cli('usage', '--store', file).stdout, /^total\s+617,000\s+6,170\s/m)
})

test('a mistake\'s message says what to do', () => {
  const draft = cli('search', '-draft', '--store', storePath)
  assertOneLineError(draft, 2, 'USAGE')
  assert.match(draft.stderr, /a query that starts with - goes after --, e\.g\. threadline search -- '-draft report'/)
  assert.match(cli('show', 'nope', '--store', storePath).stderr, /no session 'nope' \(threadline ls lists the sessions and their ids\)/)
  const empty = path.join(dir, 'empty.db')
  Store.open(empty).close()
  assert.equal(cli('ls', '--store', empty).stdout, "No sessions. (threadline import claude-code ~/.claude/projects brings in Claude Code's)\n")
  assert.equal(cli('ls', '--status', 'failed', '--store', storePath).stdout, 'No sessions match.\n')
  assert.match(cli('search', 'zzzqqq', '--store', storePath).stdout, /^No matches\. \(words match whole words: try prefix\*; thinking and tool output are searched with --field thinking, --field tool_output\)\n$/)
})

test('PostgreSQL: the same ids, tree, subagent lines and rm as SQLite', (t) => {
  const base = process.env.THREADLINE_TEST_POSTGRES
  if (!base) {
    assert.ok(!process.env.THREADLINE_REQUIRE_POSTGRES, 'THREADLINE_REQUIRE_POSTGRES is set, but THREADLINE_TEST_POSTGRES is not')
    t.diagnostic('THREADLINE_TEST_POSTGRES is not set: run through `node scripts/postgres.js run --` for PostgreSQL')
    return
  }
  const url = `${base}${base.includes('?') ? '&' : '?'}schema=cli_ids_${process.pid}_${Date.now() % 1e8}`
  const file = imported('pg-twin.db')
  assert.equal(cli('import', 'claude-code', projects, '--store', url).status, 0)
  for (const args of [['ls'], ['ls', '--flat'], ['show', '4d5611e5'], ['show', 'agent-a28'], ['ls', '--project', 'spotter-d']]) {
    assert.equal(cli(...args, '--store', url).stdout, cli(...args, '--store', file).stdout, args.join(' '))
  }
  // the engines rank hits their own way: the same hits
  const hits = (where) => json('search', 'renderer', '--session', 'agent-a2898e3', '--store', where).hits.map((h) => `${h.sessionId} ${h.seq}`).sort()
  assert.deepEqual(hits(url), hits(file))
  assert.deepEqual(json('ls', '--store', url), json('ls', '--store', file))
  assertOneLineError(cli('rm', '4d5611e5', '--store', url), 2, 'USAGE')
  const rm = (where) => {
    const r = json('rm', PARENT, '--store', where)
    return { ...r, subagents: r.subagents.sort() }
  }
  assert.deepEqual(rm(url), rm(file))
  assert.deepEqual(json('ls', '--store', url).map((s) => s.id), ['tool_heavy', 'short'])
})
