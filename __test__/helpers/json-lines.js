'use strict'
// A runner process that prints one JSON value per line. The tests that kill a real process
// mid-run (a framework's agent loop) start their runner this way, act on each line as it comes
// (kill it once a tool has started), and read what it printed.

const { spawn } = require('node:child_process')

/**
 * Starts `node script ...args`; `onLine(value, child)` sees each printed line, parsed, as it
 * arrives. `done` resolves once the process exits: { code, signal, lines, stderr }.
 * @param {string} script
 * @param {string[]} args
 * @param {{ env?: NodeJS.ProcessEnv, detached?: boolean }} [options] detached: a process group
 *   of its own, so that a test can kill it with everything it started
 * @param {(value: any, child: import('node:child_process').ChildProcess) => void} [onLine]
 */
function spawnJsonLines(script, args, { env = process.env, detached = false } = {}, onLine = () => {}) {
  const child = spawn(process.execPath, [script, ...args], { env, detached, stdio: ['ignore', 'pipe', 'pipe'] })
  const lines = []
  let stderr = ''
  let buf = ''
  child.stdout.on('data', (d) => {
    buf += d
    let nl
    while ((nl = buf.indexOf('\n')) >= 0) {
      const value = JSON.parse(buf.slice(0, nl))
      buf = buf.slice(nl + 1)
      lines.push(value)
      onLine(value, child)
    }
  })
  child.stderr.on('data', (d) => { stderr += d })
  const done = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal, lines, stderr }))
  })
  return { child, done }
}

module.exports = { spawnJsonLines }
