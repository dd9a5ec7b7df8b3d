'use strict'
// The threadline command in a real pseudo-terminal (tmux), as a person sees it: show in colour
// with tool calls and thinking folded (and unfolded with --full), the ls table, and the import
// progress bar redrawn in place.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Store } = require('..')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'threadline.js')
const CLAUDE = path.join(ROOT, 'fixtures', 'claude-code')

const socket = `threadline-test-${process.pid}`
const tmux = (...args) => spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' })

let dir
let storePath
before(() => {
  assert.equal(spawnSync('tmux', ['-V']).status, 0, 'tmux is needed (.ci/run installs it)')
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-tty-'))
  storePath = path.join(dir, 'store.db')
  // Built with the API, so that show and ls are tested whatever import does.
  const store = Store.open(storePath)
  for (const f of fs.readdirSync(CLAUDE).filter((x) => x.endsWith('.jsonl')).sort()) {
    const lines = fs.readFileSync(path.join(CLAUDE, f), 'utf8').split('\n').filter(Boolean)
    const project = lines.map((l) => JSON.parse(l)).find((r) => r.cwd)?.cwd
    store.createSession({ id: path.basename(f, '.jsonl'), project }).restoreMessages(lines)
  }
  store.close()
})
after(() => {
  tmux('kill-server')
  fs.rmSync(dir, { recursive: true, force: true })
})

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Runs `args` in a new tmux window of 160x50 and waits until `done` holds for its screen. With
 * `raw`, every byte the command writes to the terminal is copied to that file (tmux pipe-pane,
 * set up before the command starts), and an OSC 52 clipboard write would make a tmux paste buffer.
 * `inspect(name)` runs before the window is closed.
 */
async function screen(name, args, done, { escapes = false, raw, inspect } = {}) {
  const cmd = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ')
  const env = ['env', '-u', 'NO_COLOR', '-u', 'FORCE_COLOR', 'TERM=xterm-256color']
  const go = path.join(dir, `${name}.go`)
  const wait = raw ? `while [ ! -e '${go}' ]; do sleep 0.05; done; ` : ''
  const r = tmux('new-session', '-d', '-s', name, '-x', '160', '-y', '50', `${wait}${env.join(' ')} ${cmd}; echo "[exit $?]"; sleep 60`)
  assert.equal(r.status, 0, r.stderr)
  if (raw) {
    // and OSC 52 would make a tmux paste buffer (the default, 'external', ignores it)
    assert.equal(tmux('set-option', '-g', 'set-clipboard', 'on').status, 0)
    assert.equal(tmux('pipe-pane', '-t', name, `cat > '${raw}'`).status, 0)
    fs.writeFileSync(go, '')
  }
  let text = ''
  for (let i = 0; i < 200; i++) {
    text = tmux('capture-pane', '-p', ...(escapes ? ['-e'] : []), '-J', '-S', '-1000', '-t', name).stdout
    if (done(text)) break
    await sleep(100)
  }
  if (raw) tmux('pipe-pane', '-t', name)
  if (inspect) inspect(name)
  tmux('kill-session', '-t', name)
  return text
}

test('show in a terminal: colour, headings, tool calls and thinking folded to one line each', async () => {
  const raw = await screen('show', ['--store', storePath, 'show', 'short'], (s) => s.includes('[exit '), { escapes: true })
  assert.match(raw, /\x1b\[[0-9;]*m/, 'colour escapes on a terminal')
  const plain = raw.replace(/\x1b\[[0-9;]*m/g, '')
  assert.match(plain, /\[exit 0\]/)
  assert.match(plain, /^Assistant 2026-02-10 \d\d:\d\d$/m)
  assert.match(plain, /^✻ thinking \(\d+ chars\)$/m)
  assert.match(plain, /^▸ Bash \{"command":"mix phx\.server 2>&1 \| head -80","timeout":30000\}$/m)
  assert.match(plain, /^◂ error \(1 line\) The user doesn't want to proceed/m)
  // the heading of an assistant message is blue and bold, a user's green
  assert.match(raw, /\x1b\[34m\x1b\[1mAssistant|\x1b\[1m\x1b\[34mAssistant|\x1b\[34;1mAssistant|\x1b\[1;34mAssistant/)
})

test('show --full in a terminal unfolds thinking and tool results', async () => {
  const plain = await screen('full', ['--store', storePath, 'show', 'short', '--full'], (s) => s.includes('[exit '))
  assert.match(plain, /^✻ thinking$/m)
  assert.match(plain, /^◂ error$/m)
})

test('ls in a terminal: the table', async () => {
  const plain = await screen('ls', ['--store', storePath, 'ls'], (s) => s.includes('[exit '))
  assert.match(plain, /ID\s+UPDATED\s+PROJECT\s+TITLE OR FIRST PROMPT\s+MSGS\s+STATUS/)
  assert.match(plain, /short\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+\/home\/marco\/projects\/spotter\s+mix phx\.server doesnt seem to start\s+9\s+active/)
})

test('search in a terminal: the match highlighted in the snippet', async () => {
  const raw = await screen('search', ['--store', storePath, 'search', 'phx', '--limit', '2'], (s) => s.includes('[exit '), { escapes: true })
  const plain = raw.replace(/\x1b\[[0-9;]*m/g, '')
  assert.match(plain, /\[exit 0\]/)
  assert.match(plain, /^short #\d+ \d{4}-\d\d-\d\d \d\d:\d\d user text$/m)
  assert.ok(!plain.includes('**'), 'the markers become colour')
  assert.match(raw, /\x1b\[[0-9;]*m(\x1b\[[0-9;]*m)?phx/i, 'the match in colour')
})

test('import in a terminal: a progress bar on one line, then the summary', async () => {
  const src = path.join(dir, 'many')
  fs.mkdirSync(src)
  const text = fs.readFileSync(path.join(CLAUDE, 'tool_heavy.jsonl'))
  for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(src, `s${i}.jsonl`), text)
  const plain = await screen('import', ['--store', path.join(dir, 'bar.db'), 'import', 'claude-code', src], (s) => s.includes('[exit '))
  const lines = plain.split('\n')
  const bars = lines.filter((l) => l.includes('files'))
  assert.equal(bars.length, 1, `the bar is redrawn on one line:\n${plain}`)
  assert.match(bars[0], /^█{30} 40\/40 files {2}[\d.]+\/[\d.]+ MB {2}\d+ records$/)
  assert.match(plain, /^40 new of 40 sessions, \d+ new of \d+ records$/m)
  assert.match(plain, /\[exit 0\]/)
})

test('data cannot drive the terminal: a clipboard write, a window title and a screen clear in a title and a message are shown as text', async () => {
  // OSC 52 (tmux makes it a paste buffer when set-clipboard is on), OSC 0 (the pane title), ESC[2J
  const payload = '\x1b]52;c;aGFja2Vk\x07\x1b]0;pwned\x07\x1b[2J'
  const file = path.join(dir, 'hostile.db')
  const store = Store.open(file)
  const s = store.createSession({ id: 'evil', project: 'p', title: `title${payload}` })
  s.append({ role: 'user', content: [{ type: 'text', text: `body${payload}\nsecond line` }] })
  s.close()
  store.close()
  // export writes a document: to a file or a pipe as it is, to a terminal with the same care
  for (const args of [['show', 'evil'], ['ls'], ['search', 'body'], ['export', 'evil', '--format', 'markdown']]) {
    const name = `hostile-${args[0]}`
    const raw = path.join(dir, `${name}.raw`)
    let title = ''
    const inspect = (n) => (title = tmux('display-message', '-p', '-t', n, '#{pane_title}').stdout)
    const shown = await screen(name, ['--store', file, ...args], (x) => x.includes('[exit '), { escapes: true, raw, inspect })
    const bytes = fs.readFileSync(raw, 'latin1')
    // every ESC the command wrote starts one of its own colours (SGR, ESC [ ... m)
    const escapes = bytes.match(/\x1b[^\n]{0,12}/g) ?? []
    if (args[0] !== 'export') assert.ok(escapes.length > 0, 'the command colours its output')
    for (const e of escapes) assert.match(e, /^\x1b\[[0-9;]*m/, `${args[0]}: an escape from the data reached the terminal: ${JSON.stringify(e)}`)
    assert.ok(!/[\x00-\x08\x0b-\x0c\x0e-\x1a\x1c-\x1f\x7f]/.test(bytes), `${args[0]}: a control character reached the terminal`)
    const plain = shown.replace(/\x1b\[[0-9;]*m/g, '')
    assert.match(plain, /\[exit 0\]/)
    assert.ok(plain.includes('\\x1b]52;c;aGFja2Vk\\x07\\x1b]0;pwned\\x07\\x1b[2J'), `${args[0]}: the payload shown as text:\n${plain}`)
    if (args[0] === 'show') assert.match(plain, /^title\\x1b\]52;.*\n(.*\n)*body\\x1b\]52;.*\nsecond line$/m, 'the screen was not cleared: the title line is still there')
    assert.equal(tmux('list-buffers').stdout, '', `${args[0]}: the clipboard was written`)
    assert.ok(title.trim() !== '' && !title.includes('pwned'), `${args[0]}: the window title was set: ${title}`)
  }
})
