'use strict'
// Compiles every code block of README.md and docs/*.md, so the documentation cannot drift from
// the declarations (index.d.ts) or from the SDKs' types.
//
// - ```ts / ```typescript blocks: each is written as its own ES module (`.mts`, so top-level
//   `await` works) and compiled with tsc under `strict` and `exactOptionalPropertyTypes` (the
//   options of __test__/types/tsconfig.base.json otherwise: module node16, noUncheckedIndexedAccess,
//   `threadline` mapped to the repo's index.d.ts through `paths`; `@anthropic-ai/sdk`, `openai`
//   and @types/node resolve from the repo's node_modules).
// - ```js / ```javascript blocks: the same, as plain JS with `checkJs` (`.cjs` when the block uses
//   `require`, else `.mjs`).
// - Other blocks (sh, json, ...) are not compiled.
//
// A block may use names it does not define (a `session`, a `store`, the SDK clients): declare them
// in an HTML comment right before the fence, which renders as nothing:
//
//   <!-- snippet-preamble
//   import type { Session } from 'threadline'
//   declare const session: Session
//   -->
//   ```ts
//   session.append('hello')
//   ```
//
// The preamble is prepended to the block (only blank lines may stand between the comment and the
// fence). Errors are reported at the line of the Markdown file.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..')
const tscBin = path.join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'tsc.cmd' : 'tsc')

const TS = new Set(['ts', 'typescript'])
const JS = new Set(['js', 'javascript'])

function docs() {
  const dir = path.join(root, 'docs')
  const inDocs = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.md')).sort().map((f) => path.join('docs', f)) : []
  return ['README.md', ...inDocs]
}

/** The code blocks of a Markdown file: { doc, line (1-based line of the first code line), lang, code, preamble }. */
function blocks(doc) {
  const lines = fs.readFileSync(path.join(root, doc), 'utf8').split(/\r?\n/)
  const out = []
  for (let i = 0; i < lines.length; i++) {
    const open = lines[i].match(/^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/)
    if (!open) continue
    const fence = open[2]
    const lang = open[3].toLowerCase()
    let j = i + 1
    while (j < lines.length && !lines[j].trimStart().startsWith(fence)) j++
    assert.ok(j < lines.length, `${doc}:${i + 1}: unclosed code block`)
    // A preamble comment ending right before the fence (blank lines allowed between).
    let preamble = ''
    let k = i - 1
    while (k >= 0 && lines[k].trim() === '') k--
    if (k >= 0 && lines[k].trim() === '-->') {
      let s = k - 1
      while (s >= 0 && !lines[s].includes('<!--')) s--
      if (s >= 0 && lines[s].trim() === '<!-- snippet-preamble') preamble = lines.slice(s + 1, k).join('\n')
    }
    out.push({ doc, line: i + 2, lang, code: lines.slice(i + 1, j).join('\n'), preamble })
    i = j
  }
  return out
}

function tsc(...args) {
  const r = spawnSync(tscBin, ['--pretty', 'false', ...args], {
    cwd: root, encoding: 'utf8', shell: process.platform === 'win32', timeout: 180_000,
  })
  if (r.error) throw r.error
  return { status: r.status, output: `${r.stdout}${r.stderr}` }
}

test('every ts/js code block of README.md and docs/*.md compiles (strict, exactOptionalPropertyTypes)', () => {
  const all = docs().flatMap(blocks)
  const compiled = all.filter((b) => TS.has(b.lang) || JS.has(b.lang))
  const ts = compiled.filter((b) => TS.has(b.lang))

  // It must find the documentation's examples, not pass by finding nothing.
  assert.ok(ts.length >= 10, `expected at least 10 TypeScript blocks, found ${ts.length}`)
  assert.ok(ts.some((b) => b.doc === 'README.md'), 'README.md has TypeScript examples')
  for (const doc of ['docs/api.md', 'docs/context.md', 'docs/recovery.md']) {
    assert.ok(ts.some((b) => b.doc === doc), `${doc} has TypeScript examples`)
  }

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-snippets-'))
  try {
    // @types/node and the SDKs resolve from the repo's node_modules.
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(tmp, 'node_modules'), 'junction')
    const byFile = new Map()
    const files = compiled.map((b, n) => {
      const ext = TS.has(b.lang) ? '.mts' : /\brequire\(/.test(b.code) ? '.cjs' : '.mjs'
      const name = `${b.doc.replace(/[\\/.]/g, '_')}_${b.line}_${n}${ext}`
      const pre = b.preamble ? `${b.preamble}\n` : ''
      fs.writeFileSync(path.join(tmp, name), `${pre}${b.code}\n`)
      byFile.set(name, { ...b, offset: pre === '' ? 0 : pre.split('\n').length - 1 })
      return name
    })
    fs.writeFileSync(path.join(tmp, 'tsconfig.json'), JSON.stringify({
      extends: path.join(__dirname, 'types', 'tsconfig.base.json'),
      compilerOptions: {
        strict: true,
        exactOptionalPropertyTypes: true,
        noEmit: true,
        allowJs: true,
        checkJs: true,
        module: 'node16',
        moduleResolution: 'node16',
        moduleDetection: 'force',
        types: ['node'],
        // The frameworks' declarations need the DOM lib's fetch types, and @openai/agents' and ai's own
        // .d.ts files do not compile under these options (types.test.js checks the library's
        // declarations with skipLibCheck off); the snippets are what is checked here.
        lib: ['ES2022', 'DOM'],
        skipLibCheck: true,
        paths: {
          threadline: [path.join(root, 'index.d.ts')],
          'threadline/promise': [path.join(root, 'promise.d.ts')],
          'threadline/claude-agent-sdk': [path.join(root, 'adapters', 'claude-agent-sdk', 'index.d.ts')],
          'threadline/anthropic': [path.join(root, 'adapters', 'anthropic', 'index.d.ts')],
          'threadline/openai-agents': [path.join(root, 'adapters', 'openai-agents', 'index.d.ts')],
          'threadline/ai-sdk': [path.join(root, 'adapters', 'ai-sdk', 'index.d.ts')],
        },
      },
      files,
    }, null, 2))

    const { status, output } = tsc('-p', path.join(tmp, 'tsconfig.json'))
    const problems = []
    for (const m of output.matchAll(/^(.+?)\((\d+),(\d+)\): error (TS\d+): (.*)$/gm)) {
      const b = byFile.get(path.basename(m[1]))
      const line = Number(m[2])
      if (!b) problems.push(`${m[1]}:${line}: ${m[4]} ${m[5]}`)
      else if (line <= b.offset) problems.push(`${b.doc}:${b.line} (preamble line ${line}): ${m[4]} ${m[5]}`)
      else problems.push(`${b.doc}:${b.line + line - b.offset - 1}: ${m[4]} ${m[5]}`)
    }
    assert.deepEqual(problems, [], `code blocks that do not compile:\n${problems.join('\n')}`)
    assert.equal(status, 0, `tsc failed:\n${output}`)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
})

test('README.md and docs/*.md link only inside the repository, to files that exist', () => {
  const problems = []
  for (const doc of docs()) {
    const text = fs.readFileSync(path.join(root, doc), 'utf8')
    // The sibling folder a development checkout has beside it (not in a clone).
    const outside = ['..', 'shared'].join('/')
    if (text.includes(outside)) problems.push(`${doc}: refers to ${outside}`)
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      // A file that does not ship in the npm package (BENCHMARKS.md, crates/, ...) is linked as
      // this repository's page on GitHub, so the link works from the installed package too; it
      // is checked like a relative link.
      const own = /^https:\/\/github\.com\/threadline-dev\/threadline\/(?:blob|tree)\/main\/(.+)$/.exec(m[1])
      const target = own ? own[1] : m[1]
      if (/^[a-z]+:/i.test(target)) { problems.push(`${doc}: external link ${target}`); continue }
      const [file, anchor] = target.split('#')
      const resolved = own ? path.join(root, file) : file === '' ? path.join(root, doc) : path.resolve(path.dirname(path.join(root, doc)), file)
      if (!resolved.startsWith(root)) { problems.push(`${doc}: link outside the repository ${target}`); continue }
      // fixtures/ is copied in by the packaging work; every other target must exist.
      if (!fs.existsSync(resolved) && !path.relative(root, resolved).startsWith('fixtures')) problems.push(`${doc}: broken link ${target}`)
      if (anchor && resolved.endsWith('.md') && fs.existsSync(resolved)) {
        const slugs = new Set(fs.readFileSync(resolved, 'utf8').split('\n').filter((l) => /^#+ /.test(l))
          .map((l) => l.replace(/^#+ /, '').trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')))
        if (!slugs.has(anchor)) problems.push(`${doc}: no heading for #${anchor} in ${file || doc}`)
      }
    }
  }
  assert.deepEqual(problems, [])
})
