#!/usr/bin/env node
'use strict'
// The fault test (docs/recovery.md, "The fault test"): worker processes append, stream, fork,
// rewind, delete and re-create sessions on one store while they are SIGKILLed and SIGSTOPped (and,
// on SQLite run as root, the disk fills up), readers of every kind read, and a checker compares
// every read with what was acknowledged.
//
//   npm run torture -- [--ops 100000] [--seed N] [--engine sqlite|postgres] [--workers 4]
//                      [--lanes 3] [--paths mixed|real] [--no-damage] [--keep] [--quiet]
//
// PostgreSQL: against THREADLINE_TEST_POSTGRES, else a throwaway server (scripts/postgres.js),
// restarted and frozen among the faults. Exits 1 if any rule was broken.

const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { run } = require('../__test__/helpers/torture/controller')
const { damage } = require('../__test__/helpers/torture/damage')
const { summaryLine, violationLines } = require('../__test__/helpers/torture/report')

// Faults per op. A kill costs a process start (about 0.2 s on 2 cores).
const RATES = { kill: 1 / 120, stop: 1 / 90, restartEvery: 10_000, freeze: 1 / 500, proc: 1 / 150, full: 1 / 400 }

function parse(argv) {
  const o = { ops: 100_000, seed: Date.now() % 1e9, engine: 'sqlite', workers: 4, lanes: 3, paths: 'mixed', damage: true, busyTimeoutMs: 300 }
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k]
    const value = () => argv[++k]
    if (a === '--ops') o.ops = Number(value())
    else if (a === '--seed') o.seed = Number(value())
    else if (a === '--engine') o.engine = value()
    else if (a === '--workers') o.workers = Number(value())
    else if (a === '--lanes') o.lanes = Number(value())
    else if (a === '--paths') o.paths = value()
    else if (a === '--no-damage') o.damage = false
    else if (a === '--keep') o.keep = true
    else if (a === '--quiet') o.quiet = true
    else throw new Error(`unknown argument ${a}`)
  }
  if (!['sqlite', 'postgres'].includes(o.engine)) throw new Error('--engine: sqlite or postgres')
  if (!['mixed', 'real'].includes(o.paths)) throw new Error('--paths: mixed or real')
  return o
}

async function main() {
  const o = parse(process.argv.slice(2))
  if (o.engine === 'postgres' && !process.env.THREADLINE_TEST_POSTGRES_STATE) {
    // A server of our own, which the restarts and freezes may touch.
    const pg = path.join(__dirname, 'postgres.js')
    const r = spawnSync(process.execPath, [pg, 'run', '--', process.execPath, __filename, ...process.argv.slice(2)], { stdio: 'inherit' })
    process.exit(r.status ?? 1)
  }
  const log = o.quiet ? null : (line) => console.error(line)
  console.error(`torture: ${o.engine}, ${o.ops} ops, seed ${o.seed}, ${o.workers} workers (repeat with --seed ${o.seed})`)
  const summary = await run({ ...o, postgres: process.env.THREADLINE_TEST_POSTGRES, rates: RATES, log })
  if (o.engine === 'sqlite' && o.damage) summary.violations.push(...damage({ seed: o.seed }))
  console.log(summaryLine(summary))
  for (const line of violationLines(summary, 8)) console.log(line)
  if (o.keep) console.log(`store kept in ${summary.dir}`)
  process.exitCode = summary.violations.length ? 1 : 0
}

main().catch((e) => {
  console.error(e)
  process.exit(2)
})
