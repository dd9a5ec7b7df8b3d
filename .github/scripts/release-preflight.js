'use strict'
// Release preflight (run by .github/workflows/release.yml before publishing): checks that
// package.json is ready to be published by the napi-rs pipeline.
//
//   node .github/scripts/release-preflight.js <target triple>...
//
// The triples are the release build matrix; package.json's napi.targets must list exactly those
// (napi create-npm-dirs / artifacts / pre-publish work from napi.targets). On a tag build
// (GITHUB_REF=refs/tags/v<version>) the tag must equal v<package.json version>.
// Prints every problem as a GitHub error annotation and exits 1 if there is any.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const expected = process.argv.slice(2)
const problems = []
const problem = (msg) => problems.push(msg)

// Targets.
const napi = pkg.napi || {}
const targets = Array.isArray(napi.targets) ? napi.targets : []
if (!expected.length) problem('no target triples given on the command line')
for (const t of expected) if (!targets.includes(t)) problem(`napi.targets lacks ${t}, which the release workflow builds`)
for (const t of targets) if (!expected.includes(t)) problem(`napi.targets has ${t}, which the release workflow does not build`)
if (napi.binaryName !== 'threadline') problem(`napi.binaryName is ${JSON.stringify(napi.binaryName)}, expected "threadline"`)

// Version and tag.
const ref = process.env.GITHUB_REF || ''
if (ref.startsWith('refs/tags/')) {
  const tag = ref.slice('refs/tags/'.length)
  if (tag !== `v${pkg.version}`) problem(`tag ${tag} does not match package.json version ${pkg.version} (expected v${pkg.version})`)
}

// npm provenance checks that package.json's repository matches the GitHub repository the
// workflow runs in (and napi create-npm-dirs copies the field to the platform packages).
const repo = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository && pkg.repository.url
if (!repo) {
  problem('package.json has no "repository" (npm publish --provenance needs it to match the GitHub repository)')
} else if (process.env.GITHUB_REPOSITORY && !repo.toLowerCase().includes(process.env.GITHUB_REPOSITORY.toLowerCase())) {
  problem(`package.json repository ${repo} is not github.com/${process.env.GITHUB_REPOSITORY} (provenance would be rejected)`)
}

// An installed package must not build anything: these run on every user's `npm install`.
for (const s of ['preinstall', 'install', 'postinstall']) {
  if (pkg.scripts && pkg.scripts[s]) problem(`scripts.${s} is set (${pkg.scripts[s]}): it would run on users' machines`)
}

// The JS the root package ships must exist in the checkout (native.js and native.d.ts are
// committed, not built in the publish job).
for (const f of pkg.files || []) {
  if (/[*?]/.test(f) || f === 'CHANGELOG.md') continue
  if (!fs.existsSync(path.join(root, f))) problem(`"files" lists ${f}, which is not in the checkout`)
}
for (const f of [pkg.main, pkg.types]) {
  if (f && !fs.existsSync(path.join(root, f))) problem(`${f} (main/types) is not in the checkout`)
}

if (problems.length) {
  for (const p of problems) console.log(`::error file=package.json::${p}`)
  console.log(`${problems.length} problem(s): not ready to publish ${pkg.name}@${pkg.version}`)
  process.exit(1)
}
console.log(`${pkg.name}@${pkg.version}: ready to publish (${targets.length} targets)`)
