#!/usr/bin/env node
'use strict'
// The `threadline` command: look inside a store, import other agents' sessions, export them.
// docs/cli.md lists the commands, their options and exit codes.

// A write error on standard output (ENOSPC on /dev/full, EBADF) is one line on standard error and
// exit 1; a reader that stops early (EPIPE, `threadline show ID | head`) ends it quietly. The
// command itself runs to its end (it closes its store), its output dropped.
const failedWrite = require('../cli/output.js').watchStreams()

require('../cli/main.js')
  .main(process.argv)
  .then((code) => {
    process.exitCode = failedWrite() ?? code
  })
