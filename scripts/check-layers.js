'use strict'
// Checks the core crate's layering (ARCHITECTURE.md): each module's imports of other modules of
// the crate (`crate::a::b` paths and `super::` paths) must point to its own layer or a layer
// below, modules must not import each other in a cycle, and only storage/ writes SQL. Test modules (`#[cfg(test)]`) are
// left out: a test may build a whole store.
//
//   node scripts/check-layers.js        prints the layer graph; exit status 1 on a violation

const fs = require('node:fs')
const path = require('node:path')

const src = path.join(__dirname, '..', 'crates', 'threadline', 'src')
// Lowest first. A module may use its own layer and the layers before it.
const LAYERS = ['error', 'model', 'storage', 'session', 'store', 'context', 'recovery', 'recall', 'interop']
// context, recovery and recall sit side by side above store; recall may use context's helpers.
const ALLOWED_SIDEWAYS = new Set([])

function files(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? files(p) : e.name.endsWith('.rs') ? [p] : []
  })
}

// `model/convert/mod.rs` -> ['model', 'convert']; `lib.rs` -> []
function modulePath(file) {
  const parts = path.relative(src, file).replace(/\.rs$/, '').split(path.sep)
  if (parts[parts.length - 1] === 'mod' || parts[0] === 'lib') parts.pop()
  return parts
}

function withoutTests(text) {
  const i = text.search(/#\[cfg\(test\)\]\s*\n\s*mod /)
  return i < 0 ? text : text.slice(0, i)
}

function main() {
  const all = files(src)
  const known = new Map(all.map((f) => [modulePath(f).join('::'), f]))
  const edges = new Map()
  const problems = []
  for (const file of all) {
    const me = modulePath(file)
    if (me.length === 0) continue
    const text = withoutTests(fs.readFileSync(file, 'utf8'))
    const targets = new Set()
    for (const m of text.matchAll(/\bcrate((?:::[a-z_][a-z0-9_]*)+)/g)) targets.add(resolve(m[1].slice(2).split('::'), known))
    for (const m of text.matchAll(/\bsuper((?:::[a-z_][a-z0-9_]*)+)/g)) {
      const base = file.endsWith('mod.rs') ? me : me.slice(0, -1)
      targets.add(resolve([...base.slice(0, -1), ...m[1].slice(2).split('::')], known))
    }
    // Only the storage layer writes SQL.
    if (me[0] !== 'storage') {
      for (const m of text.matchAll(/"(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|BEGIN|WITH)\s/g)) {
        problems.push(`${me.join('::')}: SQL outside storage ("${m[1]} ...")`)
      }
    }
    targets.delete(null)
    targets.delete(me.join('::'))
    // A folder is one unit: its mod.rs and its files may use each other (an `impl Session` block
    // in a file of session/ names its parent), so edges between a module and its own ancestors or
    // descendants are not counted.
    const name = me.join('::')
    const out = [...targets].filter((t) => !t.startsWith(name + '::') && !name.startsWith(t + '::'))
    edges.set(me.join('::'), out)
    for (const t of out) {
      const from = layerOf(me[0])
      const to = layerOf(t.split('::')[0])
      if (to > from && !ALLOWED_SIDEWAYS.has(`${me[0]}->${t.split('::')[0]}`)) {
        problems.push(`${me.join('::')} (${me[0]}) imports ${t} (${t.split('::')[0]}), a layer above it`)
      }
    }
  }
  for (const cycle of cycles(edges)) problems.push(`import cycle: ${cycle.join(' -> ')}`)
  for (const p of problems) console.error(p)
  console.log(`${edges.size} modules checked, ${problems.length} problems`)
  process.exit(problems.length ? 1 : 0)
}

function layerOf(top) {
  const i = LAYERS.indexOf(top)
  if (i < 0) throw new Error(`check-layers: top-level module '${top}' has no layer; add it to LAYERS`)
  return i
}

// The longest known module that is a prefix of the path.
function resolve(parts, known) {
  for (let n = parts.length; n > 0; n--) {
    const key = parts.slice(0, n).join('::')
    if (known.has(key)) return key
  }
  return null
}

// Every elementary cycle found by a depth-first search (each reported once, by its smallest node).
function cycles(edges) {
  const found = new Set()
  const out = []
  const walk = (start, node, trail, seen) => {
    for (const next of edges.get(node) ?? []) {
      if (next === start) {
        const key = [...trail].sort().join(',')
        if (!found.has(key)) {
          found.add(key)
          out.push([...trail, start])
        }
      } else if (!seen.has(next) && next > start) {
        seen.add(next)
        walk(start, next, [...trail, next], seen)
        seen.delete(next)
      }
    }
  }
  for (const start of [...edges.keys()].sort()) walk(start, start, [start], new Set([start]))
  return out
}

main()
