#!/usr/bin/env node
'use strict'
// The `threadline` command: look inside a store, import other agents' sessions, export them.
// docs/cli.md lists the commands, their options and exit codes.

require('../cli/main.js')
  .main(process.argv)
  .then((code) => {
    process.exitCode = code
  })
