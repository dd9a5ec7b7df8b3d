'use strict'
// The seeded benchmark workload: a coding-agent session in the Anthropic Messages API wire shape,
// modelled on the Claude Code session files in fixtures/claude-code/:
//   - prompts: user messages with a text block;
//   - assistant responses (model, msg_ id, type 'message', stop_reason, stop_sequence, usage with
//     input/output/cache-read/cache-creation tokens and the cache_creation split, service_tier)
//     mixing thinking blocks (with a base64 signature), text and tool_use blocks (Bash, Read, Edit,
//     Grep, Glob, TodoWrite inputs), sometimes two parallel tool calls;
//   - tool_result messages: one user message holding the tool_result block(s), 200 B to 4 KB of
//     output each, 2% of them 20 to 100 KB; some as an array of text blocks, a few is_error;
//   - a few non-ASCII characters (arrows, box drawing, check marks, the odd emoji) scattered in tool
//     output like real output of `ls`, `git`, test runners and Claude Code's own tools.
// About 2.4 KB of JSON per message on average. Deterministic: the same seed gives the same
// messages, and a shorter run is a prefix of a longer one.

const DEFAULT_SEED = 0x7e1d11e

// sfc32: small, fast, good enough, and the same on every platform.
function prng(seed) {
  let a = 0x9e3779b9, b = 0x243f6a88, c = 0xb7e15162, d = seed >>> 0
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0
    const t = (a + b) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    d = (d + 1) | 0
    const r = (t + d) | 0
    c = (c + r) | 0
    return (r >>> 0) / 4294967296
  }
  for (let i = 0; i < 16; i++) next()
  const rnd = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), // inclusive
    chance: (p) => next() < p,
    pick: (arr) => arr[Math.floor(next() * arr.length)],
  }
  return rnd
}

const WORDS = (
  'the a to of and in is for that this with on we it be as are not by from at or function return ' +
  'const let value error file test session message tool result store append read write index node ' +
  'rust json parse string array object async await import export module config path src lib build ' +
  'cargo npm run check update fix add remove change should when then which also need first next ' +
  'because since before after into each only like other more some than them these those about ' +
  'transcript render live view component computer input output status type field key order number'
).split(' ')
const IDENT = ['session', 'store', 'message', 'record', 'turn', 'usage', 'token', 'render', 'parse',
  'append', 'restore', 'envelope', 'block', 'content', 'result', 'handle', 'worker', 'queue', 'cache']
const EXT = ['.ts', '.js', '.rs', '.ex', '.exs', '.md', '.json', '.toml', '.py']
const DIRS = ['src', 'lib', 'test', 'crates/core/src', 'lib/app_web/live', 'packages/client/src', 'docs']
// Non-ASCII seen in real Claude Code tool output (counts from compacted-session.jsonl: → ─ │ └ ● ⎿ ✓ …)
const NON_ASCII = ['→', '→', '→', '─', '─', '│', '└', '●', '⎿', '✓', '✅', '❌', '·', '—', '↳', '▶', '📋']
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
const B62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

function randChars(rnd, alphabet, n) {
  let s = ''
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(rnd.next() * alphabet.length)]
  return s
}

// Long random runs (signatures) are cut from a pool built once per stream: much faster, still seeded.
function charPool(rnd, alphabet, n) {
  const pool = randChars(rnd, alphabet, n)
  return (len) => {
    const at = rnd.int(0, n - len)
    return pool.slice(at, at + len)
  }
}

function sentence(rnd, minWords, maxWords) {
  const n = rnd.int(minWords, maxWords)
  let s = ''
  for (let i = 0; i < n; i++) s += (i ? ' ' : '') + rnd.pick(WORDS)
  return s.charAt(0).toUpperCase() + s.slice(1) + '.'
}

function prose(rnd, chars) {
  let s = ''
  while (s.length < chars) s += (s ? ' ' : '') + sentence(rnd, 5, 18)
  return s.slice(0, chars)
}

function filePath(rnd) {
  return `/home/USER/projects/app/${rnd.pick(DIRS)}/${rnd.pick(IDENT)}_${rnd.pick(IDENT)}${rnd.pick(EXT)}`
}

// One line of tool output: code, a listing, a log line, a test line.
function outputLine(rnd) {
  switch (rnd.int(0, 7)) {
    case 0: return `${String(rnd.int(1, 900)).padStart(6)}\t  const ${rnd.pick(IDENT)} = await ${rnd.pick(IDENT)}.${rnd.pick(IDENT)}(${rnd.pick(IDENT)}, { ${rnd.pick(IDENT)}: "${rnd.pick(WORDS)}" })`
    case 1: return `${String(rnd.int(1, 900)).padStart(6)}\t    if (${rnd.pick(IDENT)}.length > ${rnd.int(0, 99)}) return ${rnd.pick(IDENT)}.slice(0, -1)`
    case 2: return `${filePath(rnd)}:${rnd.int(1, 999)}:${rnd.int(1, 80)}: ${sentence(rnd, 3, 9)}`
    case 3: return `-rw-r--r-- 1 user user ${String(rnd.int(100, 99999)).padStart(6)} Feb 12 16:0${rnd.int(0, 9)} ${rnd.pick(IDENT)}_${rnd.pick(IDENT)}${rnd.pick(EXT)}`
    case 4: return `  ${rnd.chance(0.9) ? 'ok' : 'not ok'} ${rnd.int(1, 400)} - ${rnd.pick(IDENT)} ${sentence(rnd, 3, 8)} (${rnd.int(0, 300)}ms)`
    case 5: return `[${rnd.int(10, 23)}:${rnd.int(10, 59)}:${rnd.int(10, 59)}.${rnd.int(100, 999)}] ${rnd.pick(['info', 'debug', 'warn'])}: ${sentence(rnd, 4, 12)} path=C:\\Users\\dev\\${rnd.pick(IDENT)}`
    case 6: return `   Compiling ${rnd.pick(IDENT)}-${rnd.pick(IDENT)} v0.${rnd.int(1, 30)}.${rnd.int(0, 9)} (${filePath(rnd)})`
    default: return `    ${rnd.pick(IDENT)}: ${JSON.stringify({ [rnd.pick(IDENT)]: rnd.pick(WORDS), n: rnd.int(0, 9999) })},`
  }
}

// Tool output of about `bytes` characters; some outputs get a few non-ASCII characters.
function toolOutput(rnd, bytes) {
  const lines = []
  let len = 0
  const decorated = rnd.chance(0.35)
  while (len < bytes) {
    let line = outputLine(rnd)
    if (decorated && rnd.chance(0.12)) {
      const at = rnd.int(0, Math.min(8, line.length))
      line = line.slice(0, at) + rnd.pick(NON_ASCII) + ' ' + line.slice(at)
    }
    lines.push(line)
    len += line.length + 1
  }
  const out = lines.join('\n').slice(0, bytes)
  // never cut an emoji's surrogate pair in half (a lone surrogate is not valid Unicode text)
  const last = out.charCodeAt(out.length - 1)
  return last >= 0xd800 && last <= 0xdbff ? out.slice(0, -1) : out
}

function toolResultSize(rnd) {
  return rnd.chance(0.02) ? rnd.int(20 * 1024, 100 * 1024) : rnd.int(200, 4 * 1024)
}

const TOOLS = ['Bash', 'Read', 'Edit', 'Grep', 'Glob', 'Bash', 'Read', 'TodoWrite']

function toolInput(rnd, name) {
  switch (name) {
    case 'Bash': return { command: `cd /home/USER/projects/app && ${rnd.pick(['npm test', 'cargo test --release', 'git status', 'mix test', 'ls -la ' + rnd.pick(DIRS)])} 2>&1 | tail -${rnd.int(20, 80)}`, description: sentence(rnd, 3, 7) }
    case 'Read': return { file_path: filePath(rnd) }
    case 'Edit': return { file_path: filePath(rnd), old_string: toolOutput(rnd, rnd.int(60, 500)), new_string: toolOutput(rnd, rnd.int(60, 700)), replace_all: false }
    case 'Grep': return { pattern: `${rnd.pick(IDENT)}\\(`, path: `/home/USER/projects/app/${rnd.pick(DIRS)}`, output_mode: 'content', '-n': true }
    case 'Glob': return { pattern: `**/*${rnd.pick(EXT)}` }
    default: return { todos: Array.from({ length: rnd.int(2, 5) }, () => ({ content: sentence(rnd, 4, 9), status: rnd.pick(['pending', 'in_progress', 'completed']), activeForm: sentence(rnd, 3, 6) })) }
  }
}

const MODEL = 'claude-opus-4-6'

// An endless stream of messages: turns of prompt -> (assistant with tool calls -> tool results)* ->
// final assistant answer.
function* messages(seed = DEFAULT_SEED) {
  const rnd = prng(seed)
  const signature = charPool(rnd, B64, 1 << 16)
  let cacheRead = 12000
  const usage = (outTokens) => {
    const creation = rnd.int(50, 3000)
    const u = {
      input_tokens: rnd.int(1, 12),
      cache_creation_input_tokens: creation,
      cache_read_input_tokens: cacheRead,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: creation },
      output_tokens: outTokens,
      service_tier: 'standard',
    }
    cacheRead = cacheRead > 180000 ? 12000 : cacheRead + creation
    return u
  }
  const assistant = (content, stop) => ({
    model: MODEL,
    id: 'msg_01' + randChars(rnd, B62, 22),
    type: 'message',
    role: 'assistant',
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage: usage(rnd.int(20, 2500)),
  })
  for (;;) {
    yield { role: 'user', content: [{ type: 'text', text: prose(rnd, rnd.int(40, 1000)) }] }
    const steps = rnd.int(1, 10)
    for (let s = 0; s < steps; s++) {
      const content = []
      if (rnd.chance(s === 0 ? 0.5 : 0.15)) {
        content.push({ type: 'thinking', thinking: prose(rnd, rnd.int(100, 1600)), signature: signature(rnd.int(300, 900)) })
      }
      if (rnd.chance(0.5)) content.push({ type: 'text', text: prose(rnd, rnd.int(30, 800)) })
      const calls = rnd.chance(0.12) ? 2 : 1
      const ids = []
      for (let c = 0; c < calls; c++) {
        const name = rnd.pick(TOOLS)
        const id = 'toolu_01' + randChars(rnd, B62, 22)
        ids.push(id)
        content.push({ type: 'tool_use', id, name, input: toolInput(rnd, name) })
      }
      yield assistant(content, 'tool_use')
      const results = ids.map((id) => {
        const out = toolOutput(rnd, toolResultSize(rnd))
        const block = { tool_use_id: id, type: 'tool_result', content: rnd.chance(0.1) ? [{ type: 'text', text: out }] : out }
        block.is_error = rnd.chance(0.03)
        return block
      })
      yield { role: 'user', content: results }
    }
    yield assistant([{ type: 'text', text: prose(rnd, rnd.int(80, 1600)) }], 'end_turn')
  }
}

// The first n messages as an array.
function generate(n, seed = DEFAULT_SEED) {
  const out = new Array(n)
  const it = messages(seed)
  for (let i = 0; i < n; i++) out[i] = it.next().value
  return out
}

module.exports = { messages, generate, prng, DEFAULT_SEED }

if (require.main === module) {
  // node bench/workload.js [n]: size statistics of the first n messages
  const n = Number(process.argv[2] || 10000)
  const t0 = process.hrtime.bigint()
  const msgs = generate(n)
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  let bytes = 0, nonAscii = 0, big = 0, tr = 0, kinds = {}
  const trSizes = []
  for (const m of msgs) {
    const j = JSON.stringify(m)
    const b = Buffer.byteLength(j)
    bytes += b
    if (/[^\x00-\x7f]/.test(j)) nonAscii++
    const kind = m.role === 'assistant' ? 'assistant' : m.content[0].type === 'tool_result' ? 'tool_result' : 'prompt'
    kinds[kind] = (kinds[kind] || 0) + 1
    if (kind === 'tool_result') {
      for (const bl of m.content) {
        tr++
        const s = typeof bl.content === 'string' ? bl.content : bl.content[0].text
        trSizes.push(s.length)
        if (s.length >= 20 * 1024) big++
      }
    }
  }
  trSizes.sort((a, b) => a - b)
  console.log({
    n, genMs: Math.round(ms), totalMiB: +(bytes / 1048576).toFixed(1), meanBytes: Math.round(bytes / n),
    kinds, messagesWithNonAscii: nonAscii, toolResults: tr, bigToolResults: big,
    toolResultMedianChars: trSizes[trSizes.length >> 1],
  })
}
