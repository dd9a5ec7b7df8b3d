'use strict'
// The package as a user gets it: the linux-x64-gnu platform package is built the way it is
// published (zig, glibc 2.17), both it and the root package are packed with `npm pack`, and the two
// tarballs are installed into a fresh project with a PATH that has no cargo or rustc and with
// install scripts enabled. There, CommonJS and ESM scripts open a store, append, and read back in
// a new process; tsc --strict compiles a consumer under module nodenext and bundler resolution;
// an esbuild bundle runs from another folder.

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
    state.platform = pack(platformDir, tarballs)
    assert.deepEqual(state.platform.files, ['README.md', nodeFile, 'package.json'].sort())
    state.root = pack(root, tarballs)
    assert.deepEqual(state.root.files, [
      'CHANGELOG.md', 'LICENSE', 'README.md', 'bin/threadline.js',
      'cli/commands/doctor.js', 'cli/commands/ls.js', 'cli/commands/rm.js', 'cli/commands/search.js',
      'cli/commands/show.js', 'cli/commands/transfer.js', 'cli/commands/usage.js',
      'cli/ids.js', 'cli/main.js', 'cli/output.js', 'cli/prices.js', 'cli/store.js',
      'index.d.mts', 'index.d.ts', 'index.js', 'index.mjs',
      'native.d.ts', 'native.js', 'package.json', 'promise.d.mts', 'promise.d.ts', 'promise.js', 'promise.mjs',
    ])
    const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
    assert.equal(manifest.scripts.install, undefined, 'no install script: users never build')
    assert.equal(manifest.scripts.preinstall, undefined)
    assert.equal(manifest.scripts.postinstall, undefined)
    assert.equal(manifest.optionalDependencies[`threadline-linux-${arch}-gnu`], manifest.version)
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

  await t.test('without its platform package (--omit=optional), require says which package is missing', () => {
    const pkg = path.join(project, 'node_modules', `threadline-linux-${arch}-gnu`)
    const aside = path.join(work, 'aside')
    fs.renameSync(pkg, aside)
    try {
      const r = spawnSync(process.execPath, ['-e', "require('threadline')"], { cwd: project, env, encoding: 'utf8' })
      assert.notEqual(r.status, 0)
      assert.match(r.stderr, new RegExp(`could not load the native binary for linux-${arch}-gnu \\(package threadline-linux-${arch}-gnu\\)`))
      assert.match(r.stderr, /--omit=optional/)
    } finally {
      fs.renameSync(aside, pkg)
    }
  })

  await t.test('an esbuild bundle (--loader:.node=copy) runs from another folder', () => {
    fs.writeFileSync(path.join(project, 'app.js'), `
      const { Store } = require('threadline')
      const store = Store.open(process.argv[2])
      const s = store.createSession({ id: 'bundled' })
      s.append('from a bundle')
      console.log(JSON.stringify(Store.open(process.argv[2]).openSession('bundled').messages[0]))
    `)
    run(bin('esbuild'), ['app.js', '--bundle', '--platform=node', '--loader:.node=copy', '--outdir=dist', '--log-level=warning'], { cwd: project, env })
    const elsewhere = path.join(work, 'elsewhere')
    fs.cpSync(path.join(project, 'dist'), elsewhere, { recursive: true })
    fs.rmSync(path.join(project, 'node_modules'), { recursive: true })
    assert.ok(fs.readdirSync(elsewhere).some((f) => f.endsWith('.node')), 'the binary was copied beside the bundle')
    const out = run(process.execPath, ['app.js', path.join(work, 'bundled.db')], { cwd: elsewhere, env })
    assert.deepEqual(JSON.parse(out), { role: 'user', content: [{ type: 'text', text: 'from a bundle' }] })
  })

  console.log(`# root tarball ${state.root?.size} bytes, platform tarball ${state.platform?.size} bytes`)
})
