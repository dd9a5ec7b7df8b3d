'use strict'
// Starts restore children for bench/run.js. run.js starts this process first thing, while it is
// still small, and has it start every restore child: Linux carries a process's peak RSS
// (getrusage maxrss, process.resourceUsage().maxRSS) over fork and exec, so a child forked from
// the benchmark process, which by then holds the workload, would start with the parent's peak.
// Protocol: one JSON array of arguments per stdin line -> one JSON line on stdout with the
// child's stdout, or an error.

const { execFileSync } = require('child_process')
const readline = require('readline')

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', (line) => {
  let out
  try {
    const args = JSON.parse(line)
    out = { stdout: execFileSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 20 }) }
  } catch (e) {
    out = { error: String(e && e.stack || e), stderr: e && e.stderr ? String(e.stderr) : undefined }
  }
  process.stdout.write(JSON.stringify(out) + '\n')
})
