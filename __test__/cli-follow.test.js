'use strict'
// Following live in a real pseudo-terminal (tmux): `threadline show ID --follow` and
// `threadline ls --follow` while another process writes the store, Ctrl-C ending them, and the
// example TUI (examples/live-tui) following a scripted agent.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { Store } = require('..')
const { pgUrl } = require('./helpers/util')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'threadline.js')

const socket = `threadline-follow-${process.pid}`
const tmux = (...args) => spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' })

let dir
before(() => {
  assert.equal(spawnSync('tmux', ['-V']).status, 0, 'tmux is needed (.ci/run installs it)')
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-follow-'))
})
after(() => {
  tmux('kill-server')
  fs.rmSync(dir, { recursive: true, force: true })
})

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const quote = (a) => `'${a.replace(/'/g, "'\\''")}'`
const plain = (s) => s.replace(/\x1b\[[0-9;]*m/g, '')

/** A shell in a new tmux window of 160x50, without the user's rc files. */
function shell(name) {
  const r = tmux('new-session', '-d', '-s', name, '-x', '160', '-y', '50', 'env -u NO_COLOR -u FORCE_COLOR TERM=xterm-256color PS1="$ " bash --norc --noprofile')
  assert.equal(r.status, 0, r.stderr)
  return {
    type: (line) => assert.equal(tmux('send-keys', '-t', name, '-l', line).status, 0),
    enter: () => assert.equal(tmux('send-keys', '-t', name, 'Enter').status, 0),
    run(line) {
      this.type(line)
      this.enter()
    },
    keys: (...keys) => assert.equal(tmux('send-keys', '-t', name, ...keys).status, 0),
    screen: () => plain(tmux('capture-pane', '-p', '-J', '-S', '-1000', '-t', name).stdout).trimEnd(),
    /** The screen once `done` holds for it (bounded: 20 s), else a failure showing the screen. */
    async until(done, what) {
      let s = ''
      for (let i = 0; i < 200; i++) {
        s = this.screen()
        if (done(s)) return s
        await sleep(100)
      }
      assert.fail(`timed out waiting for ${what}; the screen:\n${s}`)
    },
    close: () => tmux('kill-session', '-t', name),
  }
}

const threadline = (...args) => [process.execPath, BIN, ...args].map(quote).join(' ')

/** Runs `code` in a new node process with `Store` and the arguments (a writer other than the command). */
function other(code, ...args) {
  const r = spawnSync(process.execPath, ['-e', `const { Store } = require(${JSON.stringify(ROOT)}); const args = ${JSON.stringify(args)}; ${code}`], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  return r.stdout
}

const APPEND = `
const store = Store.open(args[0])
const s = store.openSession(args[1])
s.append(args[2])
s.close()
store.close()`

/** A store at `file` with one session `id` holding a user prompt and an answer. */
function seed(file, id, project = '/p/app') {
  const store = Store.open(file)
  const s = store.createSession({ id, project, title: `Session ${id}` })
  s.append({ role: 'user', content: [{ type: 'text', text: 'first prompt here' }] })
  s.append({ role: 'assistant', content: [{ type: 'text', text: 'first answer here' }] })
  s.close()
  store.close()
}

const count = (s, needle) => s.split(needle).length - 1

/** A store file, and a schema on the test server when there is one (THREADLINE_TEST_POSTGRES). */
function engines(t, name) {
  const url = pgUrl(t, name)
  return [['sqlite', path.join(dir, `${name}.db`)], ...(url ? [['postgres', url]] : [])]
}

test('show --follow: the transcript, then what another process appends, formatted as show formats it; Ctrl-C ends it with 130', async (t) => {
  for (const [engine, file] of engines(t, 'show')) {
    seed(file, 'live')
    const sh = shell(`show-${engine}`)
    try {
      sh.run(threadline('--store', file, 'show', 'live', '--follow'))
      await sh.until((s) => s.includes('first answer here'), 'the initial transcript')
      other(APPEND, file, 'live', { role: 'user', content: [{ type: 'text', text: 'second prompt arrives' }] })
      other(APPEND, file, 'live', {
        role: 'assistant',
        content: [
          { type: 'text', text: 'looking it up' },
          { type: 'tool_use', id: 'toolu_1', name: 'Read', input: { path: 'a.txt' } },
        ],
      })
      other(APPEND, file, 'live', { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'line one\nline two' }] })
      const s = await sh.until((x) => x.includes('◂ result'), 'the appended records')
      assert.match(s, /^User \d{4}-\d\d-\d\d \d\d:\d\d\nsecond prompt arrives$/m)
      assert.match(s, /^Assistant \d{4}-\d\d-\d\d \d\d:\d\d\nlooking it up\n▸ Read \{"path":"a\.txt"\}$/m)
      assert.match(s, /^◂ result \(2 lines\) line one line two$/m)
      // nothing printed twice across the initial read and the watch
      for (const t of ['first prompt here', 'first answer here', 'second prompt arrives', 'looking it up']) assert.equal(count(s, t), 1, t)
      sh.keys('C-c')
      sh.run('echo done:$?')
      const end = await sh.until((x) => /^done:\d+$/m.test(x), 'the shell prompt after Ctrl-C')
      assert.match(end, /^done:130$/m)
      assert.ok(!/Error|^\s+at /m.test(end), `no error or stack trace:\n${end}`)
    } finally {
      sh.close()
    }
  }
})

test('show --follow: a subagent made after its tool call was printed is named there once it is made, as show names it', async (t) => {
  for (const [engine, file] of engines(t, 'agents')) {
    seed(file, 'boss')
    const sh = shell(`agents-${engine}`)
    try {
      sh.run(threadline('--store', file, 'show', 'boss', '--follow'))
      await sh.until((s) => s.includes('first answer here'), 'the initial transcript')
      other(APPEND, file, 'boss', {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'toolu_task', name: 'Task', input: { prompt: 'count the files' } }],
      })
      await sh.until((s) => s.includes('▸ Task'), 'the tool call')
      // made as the importer and the Agent SDK adapter make a subagent: linked to its parent and its call
      other(`
        const store = Store.open(args[0])
        const s = store.createSession({ id: 'boss/agent-a1', project: '/p/app', metadata: { parentSessionId: 'boss', parentToolUseId: 'toolu_task' } })
        s.append({ role: 'user', content: 'count the files' })
        s.close()
        store.close()`, file)
      const s = await sh.until((x) => x.includes('⤷ subagent'), 'the subagent named')
      assert.match(s, /▸ Task \{"prompt":"count the files"\}\n {2}⤷ subagent agent-a1 \(threadline show agent-a1\)$/m)
      other(APPEND, file, 'boss', { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_task', content: '12 files' }] })
      const after = await sh.until((x) => x.includes('◂ result'), 'the result after it')
      assert.equal(count(after, '⤷ subagent'), 1, 'named once')
      // the same as show prints it afterwards
      const shown = spawnSync(process.execPath, [BIN, '--store', file, 'show', 'boss'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } })
      assert.match(shown.stdout, /▸ Task \{"prompt":"count the files"\}\n {2}⤷ subagent agent-a1 \(threadline show agent-a1\)$/m)
      sh.keys('C-c')
    } finally {
      sh.close()
    }
  }
})

test('show --follow: a session deleted meanwhile ends it with NOT_FOUND and exit 1', async (t) => {
  for (const [engine, file] of engines(t, 'deleted')) {
    seed(file, 'doomed')
    const sh = shell(`deleted-${engine}`)
    try {
      sh.run(`${threadline('--store', file, 'show', 'doomed', '-f')}; echo "[exit $?]"`)
      await sh.until((s) => s.includes('first answer here'), 'the initial transcript')
      other('const store = Store.open(args[0]); store.deleteSession(args[1]); store.close()', file, 'doomed')
      const s = await sh.until((x) => /^\[exit \d+\]$/m.test(x), 'the command to end')
      assert.match(s, /^threadline: NOT_FOUND: session 'doomed' was deleted while it was followed$/m)
      assert.match(s, /^\[exit 1\]$/m)
      assert.ok(!/^\s+at /m.test(s), `no stack trace:\n${s}`)
    } finally {
      sh.close()
    }
  }
})

test('show --follow --json: one record per line (NDJSON), the existing ones then the new ones; SIGINT ends it with 130', async () => {
  const file = path.join(dir, 'json.db')
  seed(file, 'lines')
  const child = spawn(process.execPath, [BIN, '--store', file, 'show', 'lines', '--follow', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const lines = async (n) => {
    for (let i = 0; i < 200 && out.split('\n').filter(Boolean).length < n; i++) await sleep(100)
    return out.split('\n').filter(Boolean).map((l) => JSON.parse(l))
  }
  assert.equal((await lines(2)).length, 2)
  other(APPEND, file, 'lines', { role: 'user', content: [{ type: 'text', text: 'third' }] })
  const got = await lines(3)
  assert.deepEqual(
    got.map((r) => [r.seq, r.message.content[0].text]),
    [
      [0, 'first prompt here'],
      [1, 'first answer here'],
      [2, 'third'],
    ],
  )
  child.kill('SIGINT')
  assert.deepEqual(await exited, { code: 130, signal: null })
  assert.equal(err, '')
})

test('ls --follow: the table, then a session created by another process, its new messages counted, its status change and its delete; --project narrows them', async (t) => {
  for (const [engine, file] of engines(t, 'ls')) {
    seed(file, 'old-one', '/p/app')
    seed(file, 'elsewhere', '/p/other')
    const sh = shell(`ls-${engine}`)
    try {
      sh.run(threadline('--store', file, 'ls', '--follow', '--project', 'app'))
      const table = await sh.until((s) => s.includes('following changes (Ctrl-C stops)'), 'the table')
      assert.match(table, /^old-one\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+\/p\/app\s+Session old-one\s+2\s+active$/m)
      assert.ok(!table.includes('elsewhere'), 'the filter keeps the table to the project')
      // a change in another project first: had the filter let it through, it would show before the rest
      other('const store = Store.open(args[0]); const s = store.createSession({ id: "other-new", project: "/p/other" }); s.append("x"); s.close(); store.close()', file)
      other(
        `const store = Store.open(args[0])
        const s = store.createSession({ id: 'fresh', project: '/p/app', title: 'Fresh one' })
        s.appendMany([
          { role: 'user', content: [{ type: 'text', text: 'a' }] },
          { role: 'assistant', content: [{ type: 'text', text: 'b' }] },
          { role: 'user', content: [{ type: 'text', text: 'c' }] },
        ])
        s.close()
        store.close()`,
        file,
      )
      await sh.until((s) => /^\d\d:\d\d:\d\d {2}fresh {2}\+3 messages$/m.test(s), 'the messages counted')
      other('const store = Store.open(args[0]); const s = store.openSession("fresh"); s.setStatus("completed"); s.close(); store.close()', file)
      await sh.until((s) => /^\d\d:\d\d:\d\d {2}fresh {2}status completed$/m.test(s), 'the status change')
      other('const store = Store.open(args[0]); store.deleteSession("fresh"); store.close()', file)
      const s = await sh.until((x) => /^\d\d:\d\d:\d\d {2}fresh {2}deleted$/m.test(x), 'the delete')
      const after = s.slice(s.indexOf('following changes'))
      assert.match(after, /^\d\d:\d\d:\d\d {2}fresh {2}created {2}\/p\/app {2}Fresh one$/m)
      const order = ['created', '+3 messages', 'status completed', 'deleted'].map((t) => after.indexOf(`fresh  ${t}`))
      assert.deepEqual([...order].sort((a, b) => a - b), order, `in the order they happened:\n${after}`)
      assert.ok(!after.includes('other-new'), `another project's session is not shown:\n${after}`)
      sh.keys('C-c')
      sh.run('echo done:$?')
      const end = await sh.until((x) => /^done:\d+$/m.test(x), 'the shell prompt after Ctrl-C')
      assert.match(end, /^done:130$/m)
      assert.ok(!/Error|^\s+at /m.test(end), `no error or stack trace:\n${end}`)
    } finally {
      sh.close()
    }
  }
})

test('ls --follow --json: the listing on one line, then each change as store.watch gives it, one per line', async () => {
  const file = path.join(dir, 'lsjson.db')
  seed(file, 'first')
  const child = spawn(process.execPath, [BIN, '--store', file, 'ls', '--follow', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const lines = async (n) => {
    for (let i = 0; i < 200 && out.split('\n').filter(Boolean).length < n; i++) await sleep(100)
    return out.split('\n').filter(Boolean).map((l) => JSON.parse(l))
  }
  const [listed] = await lines(1)
  assert.deepEqual(listed.map((x) => [x.id, x.messageCount, x.parentId]), [['first', 2, null]])
  other('const store = Store.open(args[0]); const s = store.createSession({ id: "second" }); s.append("hello"); s.close(); store.close()', file)
  await lines(3)
  other('const store = Store.open(args[0]); const s = store.openSession("second"); s.setStatus("failed"); s.close(); store.close()', file)
  const got = (await lines(4)).slice(1)
  assert.deepEqual(
    got.map((x) => [x.type, x.sessionId, x.record?.message?.content[0].text ?? x.session?.status]),
    [
      ['created', 'second', 'active'],
      ['record', 'second', 'hello'],
      ['status', 'second', 'failed'],
    ],
  )
  for (const x of got) assert.equal(typeof x.cursor, 'string', 'each change with its cursor (store.watch({ since }) resumes after it)')
  child.kill('SIGINT')
  assert.deepEqual(await exited, { code: 130, signal: null })
  assert.equal(err, '')
})

test('ls --follow with --status or --until is a usage error (exit 2); nothing is followed', () => {
  const file = path.join(dir, 'usage.db')
  seed(file, 'u')
  for (const extra of [['--status', 'active'], ['--until', '2026-01-01']]) {
    const r = spawnSync(process.execPath, [BIN, '--store', file, 'ls', '--follow', ...extra], { encoding: 'utf8', timeout: 20_000 })
    assert.equal(r.status, 2, r.stderr)
    assert.equal(r.stdout, '')
    assert.equal(r.stderr, `threadline: USAGE: ${extra[0]} cannot be used with --follow (it shows every change; --project narrows it)\n`)
  }
})

test('the example TUI: the scripted agent\'s session appears in the list and its transcript fills in live; a later session does not take the selection; k and the arrows select; q quits', async () => {
  const file = path.join(dir, 'tui.db')
  Store.open(file).close()
  const sh = shell('tui')
  try {
    // ink draws only the last frame when CI is set (its is-in-ci check), as under .ci/run.
    sh.run(`env -u CI ${[process.execPath, path.join(ROOT, 'examples', 'live-tui', 'tui.mjs'), file].map(quote).join(' ')}; echo "[exit $?]"`)
    await sh.until((s) => s.includes('Sessions (0)'), 'the TUI')
    const agent = spawn(process.execPath, [path.join(ROOT, 'examples', 'live-tui', 'agent.js'), file, '--pause', '150'], { stdio: 'ignore' })
    const agentDone = new Promise((resolve) => agent.on('exit', resolve))
    let s = await sh.until((x) => x.includes('Lisbon is sunny and 21°C'), "the agent's final answer")
    assert.equal(await agentDone, 0)
    s = await sh.until((x) => /Weather agent\s+8 msgs\s+completed/.test(x), 'the session completed in the list')
    assert.match(s, /Sessions \(1\)/)
    assert.match(s, /User: What is the weather in Paris right now\?/)
    assert.match(s, /Assistant: ▸ get_weather \{"city":"Paris"\}/)
    assert.match(s, /User: ◂ result 14°C, light rain/)
    assert.match(s, /Assistant: It is 14°C in Paris with light rain; take an umbrella\./)
    // another session, created later, is listed first; the selection stays; k/j and the arrows move it
    other('const store = Store.open(args[0]); const s = store.createSession({ title: "Second one" }); s.append("hello from the second\\x1b[2J"); s.close(); store.close()', file)
    s = await sh.until((x) => /Sessions \(2\)/.test(x) && x.includes('Second one'), 'the second session in the list')
    assert.ok(s.indexOf('Second one') < s.indexOf('Weather agent'), 'the most recent first')
    assert.match(s, /Lisbon is sunny/, 'the selection stayed on its session')
    sh.type('k')
    s = await sh.until((x) => x.includes('User: hello from the second'), "the second session's transcript")
    assert.ok(s.includes('hello from the second\\u001b[2J'), 'a control character from the data is shown as text')
    assert.ok(!s.includes('Lisbon is sunny'))
    sh.keys('Down')
    await sh.until((x) => x.includes('Lisbon is sunny'), 'the first session again')
    sh.type('q')
    const end = await sh.until((x) => /^\[exit \d+\]$/m.test(x), 'the TUI to quit')
    assert.match(end, /^\[exit 0\]$/m)
  } finally {
    sh.close()
  }
})
