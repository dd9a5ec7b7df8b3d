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

/** Runs `args` in a new tmux window of 160x50 and waits until `done` holds for its screen. */
async function screen(name, args, done, { escapes = false } = {}) {
  const cmd = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ')
  const env = ['env', '-u', 'NO_COLOR', '-u', 'FORCE_COLOR', 'TERM=xterm-256color']
  const r = tmux('new-session', '-d', '-s', name, '-x', '160', '-y', '50', `${env.join(' ')} ${cmd}; echo "[exit $?]"; sleep 60`)
  assert.equal(r.status, 0, r.stderr)
  let text = ''
  for (let i = 0; i < 200; i++) {
    text = tmux('capture-pane', '-p', ...(escapes ? ['-e'] : []), '-J', '-S', '-1000', '-t', name).stdout
    if (done(text)) break
    await sleep(100)
  }
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
