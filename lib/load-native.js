// @ts-check
'use strict'
// Loads the native module through the generated loader (native.js, which napi-rs writes and this
// package must not edit) from every place the package runs: CommonJS, ESM, and bundles (esbuild,
// --format=cjs or esm, --loader:.node=copy). When that fails, the error says what was wrong: only
// a binary that is really absent is blamed on the install.
//
// In an ESM bundle the CommonJS files here are wrapped and esbuild turns each `require` into a stub
// that throws ("Dynamic require of "fs" is not supported") unless a global `require` exists when
// it is called. The ESM entry points (index.mjs, promise.mjs) first import lib/esm-require.mjs,
// which leaves a `require` made by createRequire(import.meta.url) (the bundle's own URL, so the
// .node file the copy loader put beside the bundle resolves) under REQUIRE_KEY; it is installed as
// the global `require` only while native.js loads, then the global is put back as it was.

const REQUIRE_KEY = Symbol.for('threadline.esmRequire')

/**
 * @returns {{ native: typeof import('../native.js'), path: typeof import('node:path'), fs: typeof import('node:fs') }}
 */
function loadNative() {
  /** @type {any} */
  const g = globalThis
  const given = g[REQUIRE_KEY]
  delete g[REQUIRE_KEY]
  // A `require` that cannot load a builtin is esbuild's stub in an ESM bundle.
  const stubbed = !canRequire()
  const had = Object.getOwnPropertyDescriptor(g, 'require')
  if (stubbed && typeof given === 'function') g.require = given
  try {
    return { native: require('../native.js'), path: require('node:path'), fs: require('node:fs') }
  } catch (cause) {
    throw explain(cause, stubbed && typeof given !== 'function')
  } finally {
    if (stubbed && typeof given === 'function') {
      if (had) Object.defineProperty(g, 'require', had)
      else delete g.require
    }
  }
}

function canRequire() {
  try {
    return typeof require('node:path').resolve === 'function'
  } catch {
    return false
  }
}

/** @param {unknown} e */
function messageOf(e) {
  try {
    return e instanceof Error ? (e.message.split('\n')[0] ?? '') : String(e)
  } catch {
    return 'unknown error'
  }
}

// The messages of an error and its causes, outermost first (native.js chains one per candidate).
/** @param {unknown} err */
function causes(err) {
  /** @type {string[]} */
  const out = []
  const seen = new Set()
  for (let e = /** @type {any} */ (err); e != null && !seen.has(e) && out.length < 64; e = e.cause) {
    seen.add(e)
    out.push(messageOf(e))
  }
  return out
}

/**
 * @param {unknown} cause
 * @param {boolean} noRequire the code runs where `require` is a stub and no ESM entry gave one
 */
function explain(cause, noRequire) {
  const report = /** @type {{ header?: { glibcVersionRuntime?: string } } | undefined} */ (process.report?.getReport())
  const libc = process.platform === 'linux' ? (report?.header?.glibcVersionRuntime ? '-gnu' : '-musl') : ''
  const abi = process.platform === 'win32' ? '-msvc' : libc
  const target = `${process.platform}-${process.arch}${abi}`
  const pkg = `threadline-${target}`
  const messages = causes(cause)
  // native.js wraps the attempts (this folder's .node file, then the platform package, then WASI)
  // in one "Cannot find native binding" error; each attempt is a cause.
  const attempts = /^Cannot find native binding/.test(messages[0] ?? '') ? messages.slice(1) : messages
  /** @param {string} m */
  const missing = (m) => /^Cannot find module /.test(m)
  // The attempt that matters: one that found a file and failed, else the platform package's.
  const first =
    attempts.find((m) => !missing(m)) ?? attempts.find((m) => m.includes(`'${pkg}'`)) ?? attempts[0] ?? messages[0] ?? 'unknown error'
  let text
  if (noRequire || /Dynamic require of /.test(messages.join('\n'))) {
    text =
      'threadline: could not load its native module: this code runs as an ES module bundle in which ' +
      '`require` is a stub (the CommonJS entry, require(\'threadline\'), was bundled into ESM output). ' +
      "Import it instead (import { Store } from 'threadline' or 'threadline/promise'), whose ESM entry provides " +
      'require, bundle with --format=cjs, or give the bundle a require: --banner:js="import { createRequire } from ' +
      "'node:module'; const require = createRequire(import.meta.url);\". The installed package is not at fault. " +
      `Cause: ${first}`
  } else if (attempts.length > 0 && attempts.every(missing)) {
    text =
      `threadline: could not load the native binary for ${target} ` +
      `(package ${pkg}). Prebuilt binaries exist for linux x64/arm64 ` +
      '(glibc >= 2.17, musl), darwin x64/arm64 and win32 x64/arm64, installed as optional dependencies: ' +
      'reinstall without --omit=optional / --no-optional, and keep the lockfile from another platform out of the way ' +
      '(delete node_modules and package-lock.json, then npm install). Elsewhere, build from a clone (needs Rust). ' +
      `Cause: ${first}`
  } else {
    text =
      `threadline: the native binary for ${target} (package ${pkg}) was found but could not be loaded: ${first}` +
      (/GLIBC_/.test(first) ? ' (the linux-gnu binaries need glibc >= 2.17; on an older system use the musl binary)' : '')
  }
  const err = new Error(text)
  err.cause = cause
  return err
}

module.exports = { loadNative, explain }
