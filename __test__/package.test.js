'use strict'
// The package as a user gets it: the linux-x64-gnu platform package is built the way it is
// published (zig, glibc 2.17), both it and the root package are packed with `npm pack`, and the two
// tarballs are installed into a fresh project with a PATH that has no cargo or rustc and with
// install scripts enabled. There, CommonJS and ESM scripts open a store, append, and read back in
// a new process; tsc --strict compiles a consumer under module nodenext and bundler resolution;
// esbuild bundles (cjs and esm output) of CommonJS and ESM apps through both entry points run from
// another folder; the docs ship and every link in them resolves inside the installed package; the
// manifest has no install-time script, and packing builds nothing.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..')
const bin = (name) => path.join(root, 'node_modules', '.bin', name)
const arch = process.arch
const supported = process.platform === 'linux' && (arch === 'x64' || arch === 'arm64') && !isMusl()
const platformDir = path.join(root, 'npm', `linux-${arch}-gnu`)
const nodeFile = `threadline.linux-${arch}-gnu.node`

function isMusl() {
  const report = process.report?.getReport()
  return !report?.header?.glibcVersionRuntime
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 600_000, ...opts })
  if (r.error) throw r.error
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} exited with ${r.status}\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

// The versions of glibc a binary needs: the GLIBC_x.y names of its version-needed entries.
function glibcVersions(file) {
  const out = run('readelf', ['--version-info', '--wide', file])
  const found = new Set([...out.matchAll(/Name: GLIBC_(\d+)\.(\d+)(?:\.(\d+))?/g)].map((m) => m.slice(1, 4).map((x) => Number(x ?? 0))))
  return [...found].sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2])
}

// A PATH that still finds node and npm but no Rust toolchain.
function pathWithoutRust() {
  const dirs = [path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin']
  const clean = [...new Set(dirs)].filter((d) => !['cargo', 'rustc'].some((t) => fs.existsSync(path.join(d, t))))
  assert.ok(clean.includes(path.dirname(process.execPath)), 'node must stay on the PATH')
  return clean.join(path.delimiter)
}

// GitHub's heading anchors: lower case, punctuation dropped, each space a hyphen, repeats numbered.
function anchors(md) {
  const out = new Set()
  for (const line of md.replace(/^```[\s\S]*?^```/gm, '').split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*$/.exec(line)
    if (!m) continue
    const text = m[1].replace(/`/g, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    let s = slug
    for (let n = 1; out.has(s); n++) s = `${slug}-${n}`
    out.add(s)
  }
  return out
}

// The links of the installed package's README and docs that do not resolve inside it: a relative
// link to a file that is not there (or outside the package), or to a heading that is not there;
// and the docs/*.md the type declarations and the README name in their text.
function brokenLinks(pkgDir) {
  const problems = []
  const docs = fs.readdirSync(path.join(pkgDir, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)
  for (const rel of ['README.md', 'CHANGELOG.md', ...docs]) {
    const file = path.join(pkgDir, rel)
    const md = fs.readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '')
    for (const [, target] of md.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue
      const [p, hash] = target.split('#')
      const dest = p === '' ? file : path.resolve(path.dirname(file), p)
      if (!dest.startsWith(pkgDir + path.sep) || !fs.existsSync(dest)) problems.push(`${rel}: (${target}) is not in the package`)
      else if (hash && dest.endsWith('.md') && !anchors(fs.readFileSync(dest, 'utf8')).has(hash)) problems.push(`${rel}: (${target}): no such heading`)
    }
  }
  for (const rel of ['README.md', 'index.d.ts', 'index.d.mts', 'promise.d.ts', 'promise.d.mts']) {
    for (const [named] of fs.readFileSync(path.join(pkgDir, rel), 'utf8').matchAll(/\bdocs\/[\w.-]+\.md\b/g)) {
      if (!fs.existsSync(path.join(pkgDir, named))) problems.push(`${rel}: names ${named}, which is not in the package`)
    }
  }
  return problems
}

function pack(dir, dest) {
  const out = JSON.parse(run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dest], { cwd: dir }))
  return { file: path.join(dest, out[0].filename), files: out[0].files.map((f) => f.path).sort(), size: out[0].size }
}

const state = {}

test('packing and installing the published layout', { skip: !supported && `needs linux ${arch} glibc` }, async (t) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-pkg-'))
  t.after(() => fs.rmSync(work, { recursive: true, force: true }))
  const tarballs = path.join(work, 'tarballs')
  fs.mkdirSync(tarballs)

  await t.test('the platform binary is built against glibc 2.17 at most', () => {
    run(process.execPath, [path.join(root, 'scripts', 'build-release-gnu.js')], { stdio: ['ignore', 'pipe', 'pipe'] })
    const versions = glibcVersions(path.join(platformDir, nodeFile))
    assert.ok(versions.length > 0, 'the binary names the glibc versions it needs')
    const highest = versions[versions.length - 1]
    assert.ok(highest[0] === 2 && highest[1] <= 17, `highest GLIBC symbol version is ${highest.join('.')}, above 2.17`)
  })

  await t.test('the tarballs hold exactly what a user needs', () => {
    // Each adapter is a subpath export of its own folder (adapters/<name>/, CommonJS and ESM).
    const ADAPTERS = fs.readdirSync(path.join(root, 'adapters')).sort()
    assert.deepEqual(ADAPTERS, Object.keys(JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).exports)
      .filter((k) => !['.', './promise', './package.json'].includes(k)).map((k) => k.slice(2)).sort())
    state.platform = pack(platformDir, tarballs)
    assert.deepEqual(state.platform.files, ['README.md', nodeFile, 'package.json'].sort())
    state.root = pack(root, tarballs)
    const docs = fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)
    assert.ok(docs.includes('docs/api.md') && docs.includes('docs/recovery.md'))
    assert.deepEqual(state.root.files, [
      'CHANGELOG.md', 'LICENSE', 'README.md',
      ...ADAPTERS.flatMap((a) => ['index.d.mts', 'index.d.ts', 'index.js', 'index.mjs'].map((f) => `adapters/${a}/${f}`)),
      'bin/threadline.js',
      'cli/commands/doctor.js', 'cli/commands/ls.js', 'cli/commands/maintain.js', 'cli/commands/rm.js', 'cli/commands/search.js',
      'cli/commands/show.js', 'cli/commands/transfer.js', 'cli/commands/usage.js',
      'cli/follow.js', 'cli/ids.js', 'cli/main.js', 'cli/output.js', 'cli/prices.js', 'cli/store.js',
      ...docs,
      'index.d.mts', 'index.d.ts', 'index.js', 'index.mjs',
      'lib/args.js', 'lib/binding.js', 'lib/claude-code.js', 'lib/convert.js', 'lib/envelope.js', 'lib/errors.js', 'lib/esm-require.mjs',
      'lib/json.js', 'lib/load-native.js', 'lib/pages.js', 'lib/promise.js', 'lib/run.js',
      'lib/steps/session.js', 'lib/steps/store.js', 'lib/steps/writer.js', 'lib/store-watch.js', 'lib/symbols.js', 'lib/sync.js', 'lib/telemetry.js', 'lib/watch.js',
      'native.d.ts', 'native.js', 'package.json', 'promise.d.mts', 'promise.d.ts', 'promise.js', 'promise.mjs',
    ].sort())
  })

  await t.test('the packed manifest has no install-time script, and names the repository', () => {
    const manifest = JSON.parse(run('tar', ['-xzOf', state.root.file, 'package/package.json']))
    for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) {
      assert.equal(manifest.scripts?.[s], undefined, `scripts.${s}: npm would run it when the package is installed`)
    }
    assert.equal(manifest.optionalDependencies[`threadline-linux-${arch}-gnu`], manifest.version)
    assert.deepEqual(manifest.repository, { type: 'git', url: 'git+https://github.com/threadline-dev/threadline.git' })
    assert.equal(manifest.homepage, 'https://github.com/threadline-dev/threadline#readme')
    assert.deepEqual(manifest.bugs, { url: 'https://github.com/threadline-dev/threadline/issues' })
  })

  await t.test('npm pack with scripts enabled builds nothing (it works with no Rust toolchain)', () => {
    const env = { ...process.env, PATH: pathWithoutRust(), npm_config_update_notifier: 'false' }
    const before = fs.statSync(path.join(root, 'native.js')).mtimeMs
    const out = JSON.parse(run('npm', ['pack', '--dry-run', '--json'], { cwd: root, env }))
    assert.equal(out[0].name, 'threadline')
    assert.equal(fs.statSync(path.join(root, 'native.js')).mtimeMs, before, 'native.js was not regenerated')
  })

  const project = path.join(work, 'consumer')
  const env = { ...process.env, PATH: pathWithoutRust(), npm_config_update_notifier: 'false' }
  delete env.CARGO_HOME
  delete env.RUSTUP_HOME

  await t.test('npm install of the two tarballs works with no Rust toolchain on the PATH', () => {
    const noCargo = spawnSync('cargo', ['--version'], { env })
    assert.ok(noCargo.error && noCargo.error.code === 'ENOENT', 'cargo must not be reachable in this test')
    fs.mkdirSync(project)
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }))
    run('npm', ['install', '--no-audit', '--no-fund', state.platform.file, state.root.file], { cwd: project, env })
    const installed = path.join(project, 'node_modules')
    assert.ok(fs.existsSync(path.join(installed, `threadline-linux-${arch}-gnu`, nodeFile)))
    assert.deepEqual(fs.readdirSync(path.join(installed, 'threadline')).filter((f) => f.endsWith('.node')), [], 'the root package ships no binary')
  })

  const dbFile = path.join(work, 'store.db')

  await t.test('CommonJS: open, append, and read back in a new process', () => {
    fs.writeFileSync(path.join(project, 'write.cjs'), `
      const { Store } = require('threadline')
      const store = Store.open(process.argv[2])
      const s = store.createSession({ id: 'cjs', project: 'consumer' })
      s.append('hello from CommonJS')
      s.append({ role: 'assistant', content: [{ type: 'text', text: 'hi' }], usage: { input_tokens: 5, output_tokens: 1 } })
      store.close()
    `)
    fs.writeFileSync(path.join(project, 'read.cjs'), `
      const { Store } = require('threadline')
      const s = Store.open(process.argv[2]).openSession(process.argv[3])
      console.log(JSON.stringify({ messages: s.messages, turns: s.turns.length }))
    `)
    run(process.execPath, ['write.cjs', dbFile], { cwd: project, env })
    const back = JSON.parse(run(process.execPath, ['read.cjs', dbFile, 'cjs'], { cwd: project, env }))
    assert.deepEqual(back.messages.map((m) => m.content[0].text), ['hello from CommonJS', 'hi'])
    assert.equal(back.turns, 1)
  })

  await t.test('npx threadline: the command installed with the package reads the store', () => {
    const listed = JSON.parse(run('npx', ['--no-install', 'threadline', 'ls', '--json', '--store', dbFile], { cwd: project, env }))
    assert.deepEqual(listed.map((s) => s.id), ['cjs'])
    assert.match(run('npx', ['--no-install', 'threadline', 'show', 'cjs', '--store', dbFile], { cwd: project, env }), /hello from CommonJS/)
  })

  await t.test('the docs ship: every link of the README and docs, and every doc the types name, resolves in the installed package', () => {
    const installed = path.join(project, 'node_modules', 'threadline')
    assert.ok(fs.existsSync(path.join(installed, 'docs', 'api.md')))
    assert.ok(fs.existsSync(path.join(installed, 'LICENSE')))
    assert.deepEqual(brokenLinks(installed), [])
  })

  await t.test("threadline doctor's hint names a guide that is in the installed package", () => {
    const broken = path.join(work, 'doctor.db')
    fs.writeFileSync(path.join(project, 'cut.cjs'), `
      const { Store } = require('threadline')
      const store = Store.open(process.argv[2])
      const s = store.createSession({ id: 'cut' })
      s.append('run ls')
      s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }] })
      store.close()
    `)
    run(process.execPath, ['cut.cjs', broken], { cwd: project, env })
    const r = spawnSync('npx', ['--no-install', 'threadline', 'doctor', '--store', broken], { cwd: project, env, encoding: 'utf8' })
    assert.equal(r.status, 3, r.stdout + r.stderr)
    const hint = /threadline recover cut \((.+\.md)\)/.exec(r.stdout)
    assert.ok(hint, r.stdout)
    const doc = fs.realpathSync(hint[1])
    assert.ok(doc.startsWith(fs.realpathSync(path.join(project, 'node_modules', 'threadline')) + path.sep), doc)
    assert.match(fs.readFileSync(doc, 'utf8'), /recover\(\)/)
  })

  await t.test('ESM: named and default imports, append, read back in a new process', () => {
    fs.writeFileSync(path.join(project, 'write.mjs'), `
      import { Store, ERROR_CODES } from 'threadline'
      import threadline from 'threadline'
      if (threadline.Store !== Store || !ERROR_CODES.includes('NOT_FOUND')) throw new Error('exports differ')
      const store = Store.open(process.argv[2])
      store.createSession({ id: 'esm' }).append('hello from ESM')
      store.close()
    `)
    fs.writeFileSync(path.join(project, 'read.mjs'), `
      import { Store } from 'threadline'
      const s = Store.open(process.argv[2]).openSession(process.argv[3])
      console.log(JSON.stringify(s.messages))
    `)
    run(process.execPath, ['write.mjs', dbFile], { cwd: project, env })
    const back = JSON.parse(run(process.execPath, ['read.mjs', dbFile, 'esm'], { cwd: project, env }))
    assert.deepEqual(back, [{ role: 'user', content: [{ type: 'text', text: 'hello from ESM' }] }])
    // Both entry points in one process share one module.
    const same = run(process.execPath, ['--input-type=module', '-e',
      "import { Store } from 'threadline'; import { createRequire } from 'node:module'; console.log(createRequire(import.meta.url)('threadline').Store === Store)"],
    { cwd: project, env })
    assert.equal(same.trim(), 'true')
  })

  await t.test('threadline/promise from CommonJS and ESM: open, append, read back in a new process', () => {
    fs.writeFileSync(path.join(project, 'write-promise.cjs'), `
      const { Store } = require('threadline/promise')
      ;(async () => {
        const store = await Store.open(process.argv[2])
        const s = await store.createSession({ id: 'promise-cjs' })
        await s.append('hello from the promise API')
        await store.close()
      })().catch((e) => { console.error(e); process.exit(1) })
    `)
    fs.writeFileSync(path.join(project, 'read-promise.mjs'), `
      import { Store } from 'threadline/promise'
      import sync from 'threadline'
      const store = await Store.open(process.argv[2])
      const s = await store.openSession(process.argv[3])
      if (Store === sync.Store) throw new Error('the promise Store is its own class')
      console.log(JSON.stringify({ messages: await s.messages(), turns: (await s.turns()).length }))
    `)
    run(process.execPath, ['write-promise.cjs', dbFile], { cwd: project, env })
    const back = JSON.parse(run(process.execPath, ['read-promise.mjs', dbFile, 'promise-cjs'], { cwd: project, env }))
    assert.deepEqual(back, { messages: [{ role: 'user', content: [{ type: 'text', text: 'hello from the promise API' }] }], turns: 1 })
  })

  await t.test('tsc --strict compiles a consumer under nodenext (CJS and ESM files) and bundler resolution', () => {
    const consumer = `
      import { Store, type Session, type ContentBlock, type ThreadlineError } from 'threadline'
      import { Store as PStore, type Session as PSession } from 'threadline/promise'
      const store: Store = Store.open('consumer.db')
      const session: Session = store.createSession({ project: 'p' })
      session.append('hello')
      const blocks: ContentBlock[] = session.messages.flatMap((m) => m.content)
      for (const b of blocks) if (b.type === 'tool_use') { const name: string = b.name; void name }
      try { store.openSession('missing') } catch (e) { const code: string = (e as ThreadlineError).code; void code }
      export async function promised(): Promise<number> {
        const ps: PSession = await (await PStore.open('consumer.db')).createSession()
        await ps.append('hello')
        return (await ps.messages()).length + (await ps.turns()).length
      }
    `
    fs.writeFileSync(path.join(project, 'consumer.ts'), consumer)
    fs.writeFileSync(path.join(project, 'consumer.mts'), consumer)
    const base = { strict: true, noEmit: true, target: 'ES2022', lib: ['ES2022'], types: [], skipLibCheck: false, exactOptionalPropertyTypes: true }
    const configs = {
      'tsconfig.nodenext.json': { compilerOptions: { ...base, module: 'nodenext', moduleResolution: 'nodenext' }, files: ['consumer.ts', 'consumer.mts'] },
      'tsconfig.bundler.json': { compilerOptions: { ...base, module: 'esnext', moduleResolution: 'bundler' }, files: ['consumer.ts'] },
    }
    for (const [name, config] of Object.entries(configs)) {
      fs.writeFileSync(path.join(project, name), JSON.stringify(config))
      run(bin('tsc'), ['--pretty', 'false', '-p', name], { cwd: project, env })
    }
    // The check bites: a wrong use is an error under the same configs.
    fs.writeFileSync(path.join(project, 'wrong.ts'), "import { Store } from 'threadline'\nStore.open(42)\nexport {}\n")
    fs.writeFileSync(path.join(project, 'tsconfig.wrong.json'), JSON.stringify({ ...configs['tsconfig.nodenext.json'], files: ['wrong.ts'] }))
    const wrong = spawnSync(bin('tsc'), ['--pretty', 'false', '-p', 'tsconfig.wrong.json'], { cwd: project, env, encoding: 'utf8' })
    assert.notEqual(wrong.status, 0)
    assert.match(wrong.stdout, /wrong\.ts\(2,12\): error TS2345/)
  })

  await t.test('without its platform package (--omit=optional), require and import say which package is missing and to reinstall', () => {
    const pkg = path.join(project, 'node_modules', `threadline-linux-${arch}-gnu`)
    const aside = path.join(work, 'aside')
    fs.renameSync(pkg, aside)
    try {
      for (const args of [['-e', "require('threadline')"], ['--input-type=module', '-e', "import 'threadline/promise'"]]) {
        const r = spawnSync(process.execPath, args, { cwd: project, env, encoding: 'utf8' })
        assert.notEqual(r.status, 0)
        assert.match(r.stderr, new RegExp(`could not load the native binary for linux-${arch}-gnu \\(package threadline-linux-${arch}-gnu\\)`))
        assert.match(r.stderr, /reinstall without --omit=optional/)
        assert.match(r.stderr, new RegExp(`Cause: Cannot find module 'threadline-linux-${arch}-gnu'`))
      }
    } finally {
      fs.renameSync(aside, pkg)
    }
  })

  await t.test('a binary that is there but cannot be loaded is reported as such, not blamed on the install', () => {
    const file = path.join(project, 'node_modules', `threadline-linux-${arch}-gnu`, nodeFile)
    const good = path.join(work, 'good.node')
    fs.copyFileSync(file, good)
    fs.writeFileSync(file, 'not a shared object')
    try {
      const r = spawnSync(process.execPath, ['-e', "require('threadline')"], { cwd: project, env, encoding: 'utf8' })
      assert.notEqual(r.status, 0)
      assert.match(r.stderr, new RegExp(`the native binary for linux-${arch}-gnu \\(package threadline-linux-${arch}-gnu\\) was found but could not be loaded: .*${nodeFile.replace(/\./g, '\\.')}`))
      assert.doesNotMatch(r.stderr, /--omit=optional|reinstall/)
    } finally {
      fs.copyFileSync(good, file)
    }
  })

  await t.test('esbuild bundles (--loader:.node=copy), cjs and esm output, of CommonJS and ESM apps through threadline and threadline/promise run from another folder', () => {
    // Each app appends a prompt and reads it back in a new store handle.
    const sync = () => `
      const store = Store.open(process.argv[2])
      store.createSession({ id: 's' }).append('from a bundle')
      console.log(JSON.stringify(Store.open(process.argv[2]).openSession('s').messages))`
    const promised = `
      Store.open(process.argv[2])
        .then(async (store) => {
          await (await store.createSession({ id: 's' })).append('from a bundle')
          const again = await Store.open(process.argv[2])
          console.log(JSON.stringify(await (await again.openSession('s')).messages()))
        })
        .catch((e) => { console.error(e); process.exit(1) })`
    const apps = {
      'sync.cjs': `const { Store } = require('threadline')\n${sync()}`,
      'promise.cjs': `const { Store } = require('threadline/promise')\n${promised}`,
      'sync.mjs': `import { Store } from 'threadline'\n${sync()}`,
      'promise.mjs': `import { Store } from 'threadline/promise'\n${promised}`,
      'default.mjs': `import threadline from 'threadline'\nconst { Store } = threadline\n${sync()}`,
    }
    const builds = [
      ...Object.keys(apps).map((app) => [app, 'cjs']),
      ...Object.keys(apps).filter((app) => app.endsWith('.mjs')).map((app) => [app, 'esm']),
    ]
    const elsewhere = path.join(work, 'bundles')
    for (const [app, format] of builds) {
      fs.writeFileSync(path.join(project, app), apps[app])
      const out = path.join(project, 'dist', `${app}-${format}`)
      const r = spawnSync(bin('esbuild'), [app, '--bundle', '--platform=node', `--format=${format}`, '--loader:.node=copy',
        `--outdir=${out}`, `--out-extension:.js=${format === 'esm' ? '.mjs' : '.cjs'}`, '--log-level=warning'], { cwd: project, env, encoding: 'utf8' })
      assert.equal(r.status, 0, r.stderr)
      assert.equal(r.stderr, '', `esbuild warned for ${app} (${format}):\n${r.stderr}`)
      assert.ok(fs.readdirSync(out).some((f) => f.endsWith('.node')), `${app} (${format}): the binary was copied beside the bundle`)
      fs.cpSync(out, path.join(elsewhere, `${app}-${format}`), { recursive: true })
    }
    // No node_modules anywhere the bundles could find: they run on what they carry.
    const modules = path.join(project, 'node_modules')
    const aside = path.join(work, 'node_modules-aside')
    fs.renameSync(modules, aside)
    try {
      for (const [app, format] of builds) {
        const dir = path.join(elsewhere, `${app}-${format}`)
        const main = fs.readdirSync(dir).find((f) => /\.[cm]js$/.test(f))
        const r = spawnSync(process.execPath, [main, path.join(work, `bundled-${app}-${format}.db`)], { cwd: dir, env, encoding: 'utf8' })
        assert.equal(r.status, 0, `${app} bundled as ${format}:\n${r.stderr}`)
        assert.deepEqual(JSON.parse(r.stdout), [{ role: 'user', content: [{ type: 'text', text: 'from a bundle' }] }], `${app} (${format})`)
      }
    } finally {
      fs.renameSync(aside, modules)
    }
  })

  await t.test('a CommonJS require bundled into ESM output says so and how to fix it (not the install); with a require banner it runs', () => {
    const build = (out, extra = []) => run(bin('esbuild'), ['sync.cjs', '--bundle', '--platform=node', '--format=esm', '--loader:.node=copy',
      `--outfile=${out}`, '--log-level=error', ...extra], { cwd: project, env })
    build('dist/cjs-in-esm/app.mjs')
    const r = spawnSync(process.execPath, ['dist/cjs-in-esm/app.mjs', path.join(work, 'cjs-in-esm.db')], { cwd: project, env, encoding: 'utf8' })
    assert.notEqual(r.status, 0)
    assert.match(r.stderr, /an ES module bundle in which `require` is a stub/)
    assert.match(r.stderr, /import \{ Store \} from 'threadline'/)
    assert.match(r.stderr, /The installed package is not at fault/)
    assert.doesNotMatch(r.stderr, /--omit=optional/)
    build('dist/cjs-in-esm-banner/app.mjs', ["--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);"])
    const ok = run(process.execPath, ['dist/cjs-in-esm-banner/app.mjs', path.join(work, 'cjs-in-esm-banner.db')], { cwd: project, env })
    assert.equal(JSON.parse(ok)[0].content[0].text, 'from a bundle')
  })

  console.log(`# root tarball ${state.root?.size} bytes, platform tarball ${state.platform?.size} bytes`)
})
