// @ts-check
'use strict'
// session.watch: an async iterator of a session's committed records, in seq order, each once, as
// any process commits them. The same iterator for both APIs: its reads run off the main thread
// (envelopesPageAsync). What wakes it: on SQLite, a watch of the store's directory (inotify),
// because every commit, by any process, writes the store's `-wal` file (or the file itself); on
// PostgreSQL, a LISTEN connection the appends' transactions NOTIFY (lib/watch.js `pgWaker`).
// Nothing polls: between commits a watch makes no read and runs no timer.

const { fs: nodeFs, path: nodePath } = require('./binding.js')
const { fail, recode, describe } = require('./errors.js')
const { kNative, kStore } = require('./symbols.js')
const { object } = require('./args.js')
const { parsePage } = require('./pages.js')

const PAGE = 256
// How long after its writer last wrote an append log a watch reads once more (above the 50 ms a
// reader waits for a stopped writer's flush, docs/recovery.md).
const LOG_SETTLE_MS = 150
/** The last of a SQLite watch's re-reads after a change comes this many ms after the one before. */
const MAX_RETRY_MS = 512

/** @typedef {{ wait(stop: AbortSignal): Promise<{ num: number, records: number | null }[] | null>, close(): void }} Waker */
const WATCH_KEYS = ['fromSeq', 'signal']

/**
 * The AbortError Node's own async iterables (events.on, fs.promises.watch, timers/promises'
 * setInterval) throw when their signal aborts: name 'AbortError', code 'ABORT_ERR', the signal's
 * reason as its cause.
 * @param {AbortSignal} signal
 */
function abortError(signal) {
  const err = /** @type {Error & { code: string }} */ (new Error('The operation was aborted', { cause: signal.reason }))
  err.name = 'AbortError'
  err.code = 'ABORT_ERR'
  return err
}

/**
 * @param {any} options
 * @param {string} what
 * @param {string[]} keys
 * @returns {Record<string, any>}
 */
function watchOptions(options, what, keys) {
  const o = object(options, `${what}: options`) ?? {}
  for (const k of Object.keys(o)) {
    if (!keys.includes(k)) throw fail('INVALID_INPUT', `${what}: options.${k}: unknown option (known: ${keys.join(', ')})`)
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw fail('INVALID_INPUT', `${what}: options.signal: expected an AbortSignal, got ${describe(o.signal)}`)
  }
  return o
}

/**
 * What wakes a watch of the store at `path`: `wait(stop)` resolves (null: anything may have
 * changed) at the next commit after the last `wait` returned (or at once when one came
 * meanwhile), `close()` releases everything.
 * @param {string} path
 */
function fileWaker(path) {
  // The logs and SQLite's -wal file are beside the real file (symlinks resolved).
  const real = nodeFs.realpathSync(path)
  const dir = nodePath.dirname(real)
  const base = nodePath.basename(real)
  const names = new Set([base, `${base}-wal`])
  let dirty = true
  /** @type {(() => void) | null} */
  let wake = null
  /** @type {Error | null} */
  let failed = null
  // A change of the -wal file wakes the watch before the commit that wrote it can be seen: SQLite
  // marks a commit in the WAL index (the -shm file, written through shared memory, which inotify
  // does not report) after writing its frames, and with durability 'power' only after an fsync.
  // A read in between finds nothing, and no later change may come (the writer idle). So after
  // each change the watch reads again 1 ms later, then 2, 4 ... 512 ms (about 1 s in all; each
  // change starts over); after that, nothing until the next change.
  let retry = 0
  /** @type {NodeJS.Timeout | null} */
  let timer = null
  const ring = () => {
    dirty = true
    if (wake) {
      const w = wake
      wake = null
      w()
    }
  }
  // An append is acknowledged when its writer's append log (`<file>-tl-...`) has it, and is
  // committed within about 2 ms, which wakes the watch. A writer killed or frozen before its
  // commit commits nothing: a read replays its log (docs/recovery.md), so a log written to with
  // no commit after it gets one read, LOG_SETTLE_MS after it was last written.
  const logs = `${base}-tl-`
  /** @type {NodeJS.Timeout | null} */
  let settle = null
  const afterLog = () => {
    if (settle) settle.refresh()
    else settle = setTimeout(() => { settle = null; ring() }, LOG_SETTLE_MS)
  }
  const watcher = nodeFs.watch(dir, { persistent: true }, (_event, name) => {
    // Some platforms give no name: then any change of the directory wakes the watch.
    if (name === null || names.has(String(name))) {
      retry = 1
      ring()
    } else if (String(name).startsWith(logs) && !String(name).endsWith('.damaged')) afterLog()
  })
  watcher.on('error', (e) => {
    failed = fail('STORE_IO', `watch: the watch of ${dir} failed: ${e.message}`)
    ring()
  })
  return {
    /** @param {AbortSignal} stop */
    async wait(stop) {
      while (!dirty && !stop.aborted && !failed) {
        await new Promise((resolve) => {
          wake = () => resolve(undefined)
          stop.addEventListener('abort', ring, { once: true })
          if (retry > 0 && retry <= MAX_RETRY_MS) {
            timer = setTimeout(ring, retry)
            retry *= 2
          }
        })
        if (timer) clearTimeout(timer)
        timer = null
        stop.removeEventListener('abort', ring)
      }
      if (failed) throw failed
      dirty = false
      return null
    },
    close() {
      if (timer) clearTimeout(timer)
      timer = null
      watcher.close()
      if (settle) clearTimeout(settle)
    },
  }
}

/**
 * The same on PostgreSQL: a listener (its own connection, `LISTEN`) made before the first read;
 * its waits run on the thread pool, and stopping the watch cancels the one under way. A lost
 * connection is made again by the listener, which then wakes the watch for a catch-up read.
 * `wait` returns what the notifications named (`[{ num, records }]`, records null: deleted), or
 * null when anything may have changed (the first wait, a new connection).
 * @param {any} n the native session (or store)
 */
async function pgWaker(n) {
  let listener
  try {
    listener = await n.listenAsync()
  } catch (e) {
    throw recode(e)
  }
  let dirty = true
  return {
    /**
     * @param {AbortSignal} stop
     * @returns {Promise<{ num: number, records: number | null }[] | null>}
     */
    async wait(stop) {
      if (dirty || stop.aborted) {
        dirty = false
        return null
      }
      const cancel = () => listener.cancel()
      stop.addEventListener('abort', cancel, { once: true })
      try {
        const woke = JSON.parse(await listener.waitAsync())
        return woke.wake === 'changes' ? woke.changes : null
      } catch (e) {
        throw recode(e)
      } finally {
        stop.removeEventListener('abort', cancel)
      }
    },
    close() {
      listener.cancel()
      // A wait after the cancel returns at once and closes the connection now, not at GC.
      listener.waitAsync().catch(() => {})
    },
  }
}

/** @param {string} path */
function isPostgres(path) {
  return /^postgres(ql)?:\/\//i.test(path)
}

// A read that failed because the server went away (restart, network): the listener makes a new
// connection and wakes the watch, which reads again from where it was.
/** @param {any} e */
function transient(e) {
  return e && (e.code === 'STORE_BUSY' || e.code === 'STORE_IO')
}

/**
 * @param {any} n the native session
 * @param {number} seq
 */
async function exists(n, seq) {
  return parsePage((await readPage(n, seq, 1)).json, 'watch').length > 0
}

/**
 * @param {any} n
 * @param {number} from
 * @param {number} limit
 * @returns {Promise<{ json: string, next?: number | null }>}
 */
async function readPage(n, from, limit) {
  try {
    return /** @type {any} */ (await n.envelopesPageAsync(from, limit))
  } catch (e) {
    // The read is the watch's: its errors say so (`watch: session '...' was deleted`).
    const err = recode(e)
    if (err && typeof err.message === 'string' && err.message.startsWith('envelopes: ')) {
      err.message = `watch: ${err.message.slice('envelopes: '.length)}`
    }
    throw err
  }
}

// The seq after the session's last record: records are numbered 0, 1, 2... without gaps and keep
// their seq forever, so a doubling probe then a bisection finds it in about 2 log2(n) reads of
// one record.
/** @param {any} n */
async function endOf(n) {
  if (!(await exists(n, 0))) return 0
  let lo = 0
  let hi = 1
  while (await exists(n, hi)) {
    lo = hi
    hi *= 2
  }
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2)
    if (await exists(n, mid)) lo = mid
    else hi = mid
  }
  return lo + 1
}

/**
 * `session.watch(options)` of either API.
 * @param {any} session
 * @param {any} options
 * @returns {AsyncIterableIterator<any>}
 */
function watchSession(session, options) {
  const o = watchOptions(options, 'watch', WATCH_KEYS)
  if (o.fromSeq !== undefined && (!Number.isInteger(o.fromSeq) || o.fromSeq < 0)) {
    throw fail('INVALID_INPUT', `watch: options.fromSeq: expected a whole number >= 0, got ${describe(o.fromSeq)}`)
  }
  const store = session[kStore]
  const path = store ? store[kNative].path : null
  if (path === null || path === ':memory:') {
    throw fail('INVALID_INPUT', 'watch: this session is not in a store file or server (an in-memory store or a Session of its own): no other process can write it, so there is nothing to watch; read it with envelopes()')
  }
  /** @type {AbortSignal | undefined} */
  const signal = o.signal
  const stop = new AbortController()
  const onAbort = () => stop.abort()
  signal?.addEventListener('abort', onAbort, { once: true })
  const n = session[kNative]
  const fromSeq = o.fromSeq
  const pg = isPostgres(path)

  async function* records() {
    /** @type {Waker | null} */
    let waker = null
    try {
      if (signal?.aborted) throw abortError(signal)
      // Registered before the first read, so no commit falls between the read and the wait.
      waker = pg ? await pgWaker(n) : fileWaker(path)
      let next = fromSeq ?? (await endOf(n))
      for (;;) {
        await waker.wait(stop.signal)
        if (stop.signal.aborted) break
        for (;;) {
          let page
          try {
            page = await readPage(n, next, PAGE)
          } catch (e) {
            if (pg && transient(e)) break
            throw e
          }
          const items = parsePage(page.json, 'watch')
          for (const item of items) {
            if (item.seq !== next) continue // a record already yielded (never expected)
            next = item.seq + 1
            yield item
            if (stop.signal.aborted) break
          }
          if (stop.signal.aborted || items.length < PAGE) break
        }
        if (stop.signal.aborted) break
      }
      if (signal?.aborted) throw abortError(signal)
    } finally {
      waker?.close()
      signal?.removeEventListener('abort', onAbort)
    }
  }

  return stoppable(records(), signal, stop, onAbort)
}

/**
 * The iterator a watch returns: `return()` ends it even while a `next()` waits for a commit.
 * @template T
 * @param {AsyncGenerator<T>} it
 * @param {AbortSignal | undefined} signal
 * @param {AbortController} stop
 * @param {() => void} onAbort
 * @returns {AsyncIterableIterator<T>}
 */
function stoppable(it, signal, stop, onAbort) {
  return {
    next() {
      return it.next()
    },
    return(value) {
      stop.abort()
      signal?.removeEventListener('abort', onAbort)
      return it.return(value)
    },
    throw(e) {
      stop.abort()
      return it.throw(e)
    },
    [Symbol.asyncIterator]() {
      return this
    },
  }
}

module.exports = { watchSession, watchOptions, abortError, fileWaker, pgWaker, isPostgres, transient, stoppable, PAGE }
