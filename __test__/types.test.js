'use strict'
// Checks of the TypeScript declarations (index.d.ts):
// - __test__/types/tsconfig.good.json compiles with no error: good.ts (correct use), misuse.ts
//   (misuses, each under `// @ts-expect-error`, so a misuse that stops being an error fails it),
//   sdk-converters.ts and documented-paths.ts (the documented paths against the real SDK types:
//   `for await (const ev of stream) writer.push(ev)`, options set to `undefined`, signed thinking);
// - tsconfig.exact.json: the same files under `exactOptionalPropertyTypes`;
// - tsconfig.adapters.json: the adapters (adapters/*/index.d.ts) against the frameworks' own types;
// - __test__/types/tsconfig.bad.json fails, with an error on exactly the lines of bad.ts marked
//   `// BAD TSnnnn`, each with that code;
// - good.ts, compiled to JS, runs against the built library (the types describe real values);
// - index.d.ts stands alone: no import of @anthropic-ai/sdk (or anything), compiles without
//   @types/node, and has no `any` and no `const enum`;
// - the demo (plain JS with // @ts-check and JSDoc types) type-checks against the declarations;
// - every export, class member and error code of index.js is declared, and nothing more;
// - index.js and the facade under lib/ (// @ts-check, JSDoc) type-check against native.d.ts, the
//   declarations napi-rs generates for the native module (tsconfig.index.json: allowJs, checkJs,
//   strict).
// The code blocks of README.md and docs/*.md are compiled by snippets.test.js.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..')
const typesDir = path.join(__dirname, 'types')
const tscBin = path.join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'tsc.cmd' : 'tsc')
const dtsPath = path.join(root, 'index.d.ts')

function tsc(...args) {
  const r = spawnSync(tscBin, ['--pretty', 'false', ...args], {
    cwd: root, encoding: 'utf8', shell: process.platform === 'win32', timeout: 120_000,
  })
  if (r.error) throw r.error
  return { status: r.status, output: `${r.stdout}${r.stderr}` }
}

// `file(line,col): error TSnnnn: message` lines of tsc output.
function diagnostics(output) {
  const out = []
  for (const m of output.matchAll(/^(.+?)\((\d+),(\d+)\): error (TS\d+): (.*)$/gm)) {
    out.push({ file: path.basename(m[1]), line: Number(m[2]), code: m[4], message: m[5] })
  }
  return out
}

const goodFiles = ['documented-paths.ts', 'good.ts', 'misuse.ts', 'promise.ts', 'sdk-converters.ts']

test('tsconfig.good.json (good.ts, misuse.ts, promise.ts, sdk-converters.ts, documented-paths.ts) compiles with no error', () => {
  const config = JSON.parse(fs.readFileSync(path.join(typesDir, 'tsconfig.good.json'), 'utf8'))
  assert.deepEqual(config.files.sort(), goodFiles)
  const { status, output } = tsc('-p', path.join(typesDir, 'tsconfig.good.json'))
  assert.equal(status, 0, `tsc failed:\n${output}`)
})

test('tsconfig.exact.json: the same files compile under exactOptionalPropertyTypes', () => {
  const config = JSON.parse(fs.readFileSync(path.join(typesDir, 'tsconfig.exact.json'), 'utf8'))
  assert.deepEqual(config.files.sort(), goodFiles)
  assert.equal(config.compilerOptions.exactOptionalPropertyTypes, true)
  const { status, output } = tsc('-p', path.join(typesDir, 'tsconfig.exact.json'))
  assert.equal(status, 0, `tsc failed:\n${output}`)
})

test('tsconfig.adapters.json: each adapter is assignable to its framework\'s own interface (strict, exactOptionalPropertyTypes)', () => {
  // The frameworks' declarations need the DOM lib (fetch types), as their own docs say.
  const config = JSON.parse(fs.readFileSync(path.join(typesDir, 'tsconfig.adapters.json'), 'utf8'))
  assert.equal(config.compilerOptions.exactOptionalPropertyTypes, true)
  assert.ok(config.files.includes('claude-agent-sdk.ts'))
  const { status, output } = tsc('-p', path.join(typesDir, 'tsconfig.adapters.json'))
  assert.equal(status, 0, `tsc failed:\n${output}`)
  // The declarations of @openai/agents (TS2420 in agents-core's result.d.ts under
  // exactOptionalPropertyTypes, TS1542 in agents-openai) and of ai 7 (@ai-sdk/provider-utils
  // under exactOptionalPropertyTypes) fail these options themselves: their adapters are checked
  // with skipLibCheck, which still checks every use of the frameworks' types in ours.
  const skip = JSON.parse(fs.readFileSync(path.join(typesDir, 'tsconfig.adapters-skiplib.json'), 'utf8'))
  assert.ok(skip.files.includes('openai-agents.ts') && skip.files.includes('ai-sdk.ts'))
  const skipped = tsc('-p', path.join(typesDir, 'tsconfig.adapters-skiplib.json'))
  assert.equal(skipped.status, 0, `tsc failed:\n${skipped.output}`)
})

test('misuse.ts: each misuse sits under its own @ts-expect-error', () => {
  const text = fs.readFileSync(path.join(typesDir, 'misuse.ts'), 'utf8')
  const lines = text.split('\n')
  const directives = lines.filter((l) => l.trim().startsWith('// @ts-expect-error'))
  assert.ok(directives.length >= 40, `expected the full list of misuses, found ${directives.length}`)
  // A directive covers only the next line: keep each misuse on one line.
  lines.forEach((l, i) => {
    if (l.trim().startsWith('// @ts-expect-error')) {
      const next = lines[i + 1] ?? ''
      assert.ok(next.trim() !== '' && !next.trim().startsWith('//'), `line ${i + 2} should hold the misuse`)
    }
  })
})

test('tsconfig.bad.json fails, on exactly the marked lines of bad.ts, for the marked reasons', () => {
  const lines = fs.readFileSync(path.join(typesDir, 'bad.ts'), 'utf8').split('\n')
  const expected = new Map()
  lines.forEach((l, i) => {
    const m = l.match(/\/\/ BAD (TS\d+): (.*)$/)
    if (m) expected.set(i + 1, { code: m[1], why: m[2] })
  })
  assert.ok(expected.size >= 10, 'bad.ts should hold the misuses')

  const { status, output } = tsc('-p', path.join(typesDir, 'tsconfig.bad.json'))
  assert.notEqual(status, 0, 'bad.ts compiled, but it must not')
  const diags = diagnostics(output)
  assert.ok(diags.length > 0, `no diagnostics parsed from:\n${output}`)
  for (const d of diags) {
    assert.equal(d.file, 'bad.ts', `unexpected error outside bad.ts: ${JSON.stringify(d)}`)
    assert.ok(!/^TS1\d{3}$/.test(d.code), `syntax error, not a type error: ${JSON.stringify(d)}`)
    assert.ok(expected.has(d.line), `unexpected error on unmarked line ${d.line}: ${d.code} ${d.message}`)
  }
  for (const [line, { code, why }] of expected) {
    const here = diags.filter((d) => d.line === line)
    assert.ok(here.length > 0, `bad.ts:${line} (${why}) compiled, but must not`)
    assert.ok(here.some((d) => d.code === code), `bad.ts:${line} (${why}): expected ${code}, got ${here.map((d) => `${d.code} ${d.message}`).join('; ')}`)
  }
})

test('good.ts and promise.ts, compiled to JS, run against the built library', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-types-run-'))
  try {
    // Resolve `require('threadline')` in the emitted JS to this package.
    fs.mkdirSync(path.join(tmp, 'node_modules'))
    fs.symlinkSync(root, path.join(tmp, 'node_modules', 'threadline'), 'junction')
    const out = path.join(tmp, 'out')
    const { status, output } = tsc('-p', path.join(typesDir, 'tsconfig.good.json'), '--noEmit', 'false', '--outDir', out, '--rootDir', typesDir)
    assert.equal(status, 0, output)
    for (const name of ['good', 'promise']) {
      const run = spawnSync(process.execPath, [path.join(out, `${name}.js`)], { cwd: tmp, encoding: 'utf8', timeout: 60_000 })
      assert.equal(run.status, 0, `${name}.js failed:\n${run.stdout}${run.stderr}`)
      assert.match(run.stdout, new RegExp(`${name}\\.ts: ok`))
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
})

test('index.d.ts stands alone: no import of @anthropic-ai/sdk or anything else, no any', () => {
  // (@anthropic-ai/sdk is a devDependency for the stream tests; the declarations must not use it.)
  const ts = require('typescript')
  const text = fs.readFileSync(dtsPath, 'utf8')
  const sf = ts.createSourceFile(dtsPath, text, ts.ScriptTarget.Latest, true)
  assert.equal(sf.referencedFiles.length + sf.typeReferenceDirectives.length + sf.libReferenceDirectives.length, 0, 'no /// <reference>')
  const problems = []
  const visit = (node) => {
    const where = () => `line ${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`
    if (ts.isImportDeclaration(node) || ts.isImportEqualsDeclaration(node) || ts.isImportTypeNode(node)) problems.push(`import at ${where()}`)
    if (ts.isExportDeclaration(node) && node.moduleSpecifier) problems.push(`re-export at ${where()}`)
    if (node.kind === ts.SyntaxKind.AnyKeyword) problems.push(`any at ${where()}`)
    if (ts.isEnumDeclaration(node)) problems.push(`enum at ${where()}`)
    ts.forEachChild(node, visit)
  }
  visit(sf)
  assert.deepEqual(problems, [])

  // Compiles on its own, without @types/node or any other package's types.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-dts-'))
  try {
    const cfg = path.join(tmp, 'tsconfig.json')
    fs.writeFileSync(cfg, JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, types: [], skipLibCheck: false, lib: ['ES2020'], module: 'node16', moduleResolution: 'node16' },
      files: [dtsPath],
    }))
    const { status, output } = tsc('-p', cfg)
    assert.equal(status, 0, output)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
})

test('index.js and lib/ (// @ts-check, JSDoc) type-check against the generated native.d.ts', () => {
  const libFiles = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? libFiles(path.join(dir, e.name)) : e.name.endsWith('.js') ? [path.join(dir, e.name)] : [])
  for (const file of [path.join(root, 'index.js'), ...libFiles(path.join(root, 'lib'))]) {
    assert.match(fs.readFileSync(file, 'utf8'), /^\/\/ @ts-check\n/, path.relative(root, file))
  }
  assert.ok(fs.existsSync(path.join(root, 'native.d.ts')), 'native.d.ts is generated by the build (npm run build)')
  const config = JSON.parse(fs.readFileSync(path.join(typesDir, 'tsconfig.index.json'), 'utf8'))
  assert.deepEqual(config.files, ['../../index.js'])
  assert.deepEqual(config.include, ['../../lib/**/*.js'])
  assert.equal(config.compilerOptions.checkJs, true)
  const { status, output } = tsc('-p', path.join(typesDir, 'tsconfig.index.json'))
  assert.equal(status, 0, `tsc failed:\n${output}`)
})

test('demo/*.js (// @ts-check, JSDoc) type-check against the declarations', () => {
  const { status, output } = tsc('-p', path.join(typesDir, 'tsconfig.demo.json'))
  assert.equal(status, 0, `tsc failed:\n${output}`)
})

// The exported values, classes (static and instance members) and ErrorCode union a d.ts declares.
function declared(file) {
  const ts = require('typescript')
  const sf = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)
  const hasExport = (n) => n.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
  const isStatic = (n) => n.modifiers?.some((m) => m.kind === ts.SyntaxKind.StaticKeyword)
  const isPrivate = (n) => n.modifiers?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)
  const values = []
  const classes = {}
  let errorCodes = null
  for (const st of sf.statements) {
    if (!hasExport(st)) continue
    if (ts.isClassDeclaration(st)) {
      values.push(st.name.text)
      const members = { static: new Set(), instance: new Set() }
      for (const m of st.members) {
        if (!m.name || isPrivate(m)) continue
        ;(isStatic(m) ? members.static : members.instance).add(m.name.text)
      }
      classes[st.name.text] = members
    } else if (ts.isFunctionDeclaration(st)) {
      values.push(st.name.text)
    } else if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) values.push(d.name.text)
    } else if (ts.isTypeAliasDeclaration(st) && st.name.text === 'ErrorCode') {
      errorCodes = st.type.types.map((t) => t.literal.text)
    }
  }
  return { values, classes, errorCodes }
}

function assertMembers(classes, lib, names) {
  const runtimeMembers = (cls) => ({
    static: new Set(Object.getOwnPropertyNames(cls).filter((n) => !['length', 'name', 'prototype'].includes(n))),
    instance: new Set(Object.getOwnPropertyNames(cls.prototype).filter((n) => n !== 'constructor')),
  })
  for (const name of names) {
    const d = classes[name]
    const actual = runtimeMembers(lib[name])
    assert.deepEqual([...d.static].sort(), [...actual.static].sort(), `${name} static members`)
    assert.deepEqual([...d.instance].sort(), [...actual.instance].sort(), `${name} members`)
  }
}

test('declarations match index.js: exports, class members, error codes', () => {
  const lib = require(root)
  const { values, classes, errorCodes } = declared(dtsPath)
  assert.deepEqual(values.sort(), Object.keys(lib).sort(), 'exported values')
  assert.deepEqual(errorCodes, [...lib.ERROR_CODES], 'ErrorCode union = ERROR_CODES')
  assertMembers(classes, lib, ['Store', 'Session'])
})

test('promise.d.ts matches promise.js: its classes and members, the rest re-exported from index.d.ts', () => {
  const promise = require(path.join(root, 'promise.js'))
  const own = declared(path.join(root, 'promise.d.ts'))
  const base = declared(dtsPath)
  const values = new Set([...own.values, ...base.values])
  assert.deepEqual([...values].sort(), Object.keys(promise).sort(), 'exported values')
  assert.match(fs.readFileSync(path.join(root, 'promise.d.ts'), 'utf8'), /^export \* from '\.\/index\.js'$/m)
  assertMembers(own.classes, promise, ['Store', 'Session', 'ResponseWriter'])
})
