'use strict'
// What ends a `--follow` (show, ls): Ctrl-C (exit 130, as a shell reports a command Ctrl-C
// stopped), SIGTERM (143), or standard output failing (a reader that went away: exit 0).

const { EXIT } = require('./output.js')

/**
 * An AbortSignal for the watch, the exit code it ended with, and `release()` to stop listening
 * for the signals (once the command ends, however it ends).
 */
function stopOnInterrupt() {
  const stop = new AbortController()
  let code = EXIT.ok
  const onInt = () => {
    code = 130
    stop.abort()
  }
  const onTerm = () => {
    code = 143
    stop.abort()
  }
  const onOutputError = () => stop.abort()
  process.on('SIGINT', onInt)
  process.on('SIGTERM', onTerm)
  process.stdout.on('error', onOutputError)
  return {
    signal: stop.signal,
    code: () => code,
    release() {
      stop.abort()
      process.off('SIGINT', onInt)
      process.off('SIGTERM', onTerm)
      process.stdout.off('error', onOutputError)
    },
  }
}

/** @param {unknown} e */
function isAbort(e) {
  return e instanceof Error && e.name === 'AbortError'
}

module.exports = { stopOnInterrupt, isAbort }
