'use strict'
// `npm install` in a clone runs this (npm's `prepare`): build the addon from source, since a clone
// has no prebuilt binary. An installed package never runs it: users get the binary from the
// platform package (threadline-<target>) listed in optionalDependencies.
// THREADLINE_SKIP_PREPARE=1 skips it (CI jobs that build a binary their own way).

const { spawnSync } = require('node:child_process')
const path = require('node:path')

if (process.env.THREADLINE_SKIP_PREPARE === '1') {
  console.log('threadline: THREADLINE_SKIP_PREPARE=1, not building the addon')
  process.exit(0)
}

const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8', shell: process.platform === 'win32' })
if (cargo.status !== 0) {
  console.error(
    'threadline: building from source needs a Rust toolchain (cargo) and a C compiler, and cargo was not found.\n' +
      'Install Rust from https://rustup.rs, or install the published package (npm install threadline), which needs neither.',
  )
  process.exit(1)
}

const napi = path.join(__dirname, '..', 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const args = [napi, 'build', '--platform', '--release', '--js', 'native.js', '--dts', 'native.d.ts']
const r = spawnSync(process.execPath, args, { stdio: 'inherit', cwd: path.join(__dirname, '..') })
process.exit(r.status ?? 1)
