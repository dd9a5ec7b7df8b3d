#!/usr/bin/env node
'use strict'
// The `threadline` command: look inside a store, import other agents' sessions, export them.
// docs/cli.md lists the commands, their options and exit codes.

// A reader that stops early (`threadline show ID | head`) closes the pipe: it has what it wanted,
// so that ends the command quietly (exit 0) instead of with an EPIPE stack trace. Nothing was
// being written to the store by a command that prints data. A closed stderr (a progress bar nobody
// reads) is ignored.
process.stdout.on('error', (e) => {
  if (e.code !== 'EPIPE') throw e
  process.exit(0)
})
process.stderr.on('error', () => {})

require('../cli/main.js')
  .main(process.argv)
  .then((code) => {
    process.exitCode = code
  })
