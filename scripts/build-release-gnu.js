'use strict'
// Builds the linux-gnu platform package's binary the way it is published: with zig as the linker
// (cargo-zigbuild) against glibc 2.17, so it loads on every glibc Linux since 2014 (CentOS 7,
// Ubuntu 14.04+, Debian 8+, Amazon Linux 2), not just on the build machine's glibc.
// Output: npm/linux-<arch>-gnu/threadline.linux-<arch>-gnu.node
//
// The tools come from the package registries: cargo-zigbuild (crates.io) and zig (the `ziglang`
// package on PyPI). Ones already on PATH are used; otherwise they are installed into .tools/ in
// this checkout (git-ignored), never globally.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const GLIBC = '2.17'
const root = path.join(__dirname, '..')
const tools = path.join(root, '.tools')
const arch = { x64: 'x86_64', arm64: 'aarch64' }[process.arch]
if (process.platform !== 'linux' || !arch) {
  console.error(`build-release-gnu: builds linux x64/arm64 gnu binaries on such a host, not on ${process.platform}-${process.arch}`)
  process.exit(1)
}
const triple = `${arch}-unknown-linux-gnu`
const napiArch = process.arch
const zigDir = path.join(tools, 'ziglang', 'ziglang')
const env = { ...process.env, PATH: [path.join(tools, 'bin'), zigDir, process.env.PATH].join(path.delimiter) }

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', env, cwd: root, ...opts })
  if (r.error) throw r.error
  if (r.status !== 0) {
    console.error(`build-release-gnu: ${cmd} ${args.join(' ')} exited with ${r.status}`)
    process.exit(r.status ?? 1)
  }
}

function found(cmd, args) {
  const r = spawnSync(cmd, args, { env, stdio: 'ignore' })
  return !r.error && r.status === 0
}

if (!found('cargo-zigbuild', ['--version'])) {
  console.log('build-release-gnu: installing cargo-zigbuild into .tools/ (crates.io)')
  run('cargo', ['install', '--locked', '--root', tools, 'cargo-zigbuild'])
}
if (!found('zig', ['version'])) {
  console.log('build-release-gnu: installing zig into .tools/ziglang (the ziglang package on PyPI)')
  run('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', path.join(tools, 'ziglang'), 'ziglang'])
}

run('cargo', ['zigbuild', '--release', '-p', 'threadline-node', '--target', `${triple}.${GLIBC}`])

const built = path.join(root, 'target', triple, 'release', 'libthreadline_node.so')
const dir = path.join(root, 'npm', `linux-${napiArch}-gnu`)
const dest = path.join(dir, `threadline.linux-${napiArch}-gnu.node`)
fs.copyFileSync(built, dest)
console.log(`build-release-gnu: ${path.relative(root, dest)} (glibc >= ${GLIBC}, ${fs.statSync(dest).size} bytes)`)
