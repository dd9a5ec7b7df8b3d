// @ts-check
'use strict'
// store.watch: an async iterator of every change to the sessions of a store (or of a project, or
// of one session), in the order they are committed, each once, by any process: a session
// created, each of its records, its status changed, its deletion. Woken as session.watch is
// (lib/watch.js); at each wake it asks the store which sessions were written since it last
// looked (`watchScanAsync`: their record counts and statuses) and reads only the records it has
// not given yet. Each change carries a cursor: `since` resumes right after it.

const { fail, recode, describe } = require('./errors.js')
const { kNative } = require('./symbols.js')
const { parsePage } = require('./pages.js')
const { watchOptions, abortError, fileWaker, pgWaker, isPostgres, transient, stoppable, PAGE } = require('./watch.js')

const STORE_WATCH_KEYS = ['project', 'sessionId', 'since', 'signal']

/** @typedef {import('./watch.js').Waker} Waker */
/** @typedef {{ num: number, id: string, status: string, records: number, writeSeq: number }} Mark */
/** What the watch has given of a session: [records given, status, id]. */
/** @typedef {[number, string, string]} Seen */

// The cursor: the scope, and for every session of it what the watch had given when the change
// was yielded. A session of the scope that the cursor does not name was made after it.
const CURSOR_PREFIX = 'tlw1.'

/**
 * @param {{ project: string | null, sessionId: string | null }} scope
 * @param {Map<number, Seen>} seen
 */
function encodeCursor(scope, seen) {
  const body = JSON.stringify({ p: scope.project, s: scope.sessionId, m: [...seen].map(([num, v]) => [num, ...v]) })
  return CURSOR_PREFIX + Buffer.from(body).toString('base64url')
}

/**
 * @param {unknown} since
 * @param {{ project: string | null, sessionId: string | null }} scope
 * @returns {Map<number, Seen>}
 */
function decodeCursor(since, scope) {
  const bad = (/** @type {string} */ why) => fail('INVALID_INPUT', `watch: options.since: ${why}`)
  if (typeof since !== 'string') throw bad(`expected a cursor string from a change of store.watch, got ${describe(since)}`)
  /** @type {any} */
  let body = null
  if (since.startsWith(CURSOR_PREFIX)) {
    try {
      body = JSON.parse(Buffer.from(since.slice(CURSOR_PREFIX.length), 'base64url').toString('utf8'))
    } catch {
      body = null
    }
  }
  const entry = (/** @type {any} */ e) =>
    Array.isArray(e) && e.length === 4 && Number.isSafeInteger(e[0]) && Number.isSafeInteger(e[1]) && e[1] >= 0 &&
    typeof e[2] === 'string' && typeof e[3] === 'string'
  if (!body || !Array.isArray(body.m) || !body.m.every(entry)) throw bad('not a cursor of store.watch (take it from a change\'s `cursor`)')
  if (body.p !== scope.project || body.s !== scope.sessionId) {
    const what = (/** @type {any} */ p, /** @type {any} */ s) => [p === null ? null : `project '${p}'`, s === null ? null : `session '${s}'`].filter(Boolean).join(' and ') || 'the whole store'
    throw bad(`the cursor is of a watch of ${what(body.p, body.s)}, not of ${what(scope.project, scope.sessionId)}: resume with the same project and sessionId`)
  }
  return new Map(body.m.map((/** @type {any[]} */ e) => [e[0], [e[1], e[2], e[3]]]))
}

/**
 * What the watch has given, and the cursor of each change: a base map and the edits since,
 * so a change's cursor is made only if asked for, from what was given up to that change.
 */
class Positions {
  /** @param {Map<number, Seen>} seen */
  constructor(seen) {
    this.live = seen
    this.base = new Map(seen)
    /** @type {[number, Seen | null][]} */
    this.edits = []
  }

  /** @param {number} num */
  get(num) {
    return this.live.get(num)
  }

  /** @param {number} num @param {Seen | null} v */
  set(num, v) {
    if (v) this.live.set(num, v)
    else this.live.delete(num)
    this.edits.push([num, v])
    // Start a new base now and then, so a cursor is made from at most a few thousand edits.
    if (this.edits.length >= 4096) {
      this.base = new Map(this.live)
      this.edits = []
    }
  }

  /**
   * The cursor as it is now, made when first read.
   * @param {{ project: string | null, sessionId: string | null }} scope
   * @returns {() => string}
   */
  mark(scope) {
    const { base, edits } = this
    const upto = edits.length
    /** @type {string | undefined} */
    let made
    return () => {
      if (made === undefined) {
        const seen = new Map(base)
        for (const [num, v] of edits.slice(0, upto)) {
          if (v) seen.set(num, v)
          else seen.delete(num)
        }
        made = encodeCursor(scope, seen)
      }
      return made
    }
  }
}

/**
 * @param {Record<string, any>} o
 * @param {string} key
 * @returns {string | null}
 */
function stringOption(o, key) {
  const v = o[key]
  if (v === undefined || v === null) return null
  if (typeof v !== 'string' || v.length === 0) throw fail('INVALID_INPUT', `watch: options.${key}: expected a non-empty string, got ${describe(v)}`)
  return v
}

/**
 * `store.watch(options)` of either API.
 * @param {any} store
 * @param {any} options
 * @returns {AsyncIterableIterator<any>}
 */
function watchStore(store, options) {
  const o = watchOptions(options, 'watch', STORE_WATCH_KEYS)
  const scope = { project: stringOption(o, 'project'), sessionId: stringOption(o, 'sessionId') }
  const resumed = o.since === undefined ? null : decodeCursor(o.since, scope)
  const n = store[kNative]
  const path = n.path
  if (path === ':memory:') {
    throw fail('INVALID_INPUT', 'watch: this store is in memory: no other process can write it, so there is nothing to watch; read it with listSessions() and envelopes()')
  }
  /** @type {AbortSignal | undefined} */
  const signal = o.signal
  const stop = new AbortController()
  const onAbort = () => stop.abort()
  signal?.addEventListener('abort', onAbort, { once: true })
  const pg = isPostgres(path)
  const started = once()
  // Stopped while giving changes: by the signal, an AbortError, as in session.watch.
  const halt = () => {
    if (signal?.aborted) throw abortError(signal)
    return true
  }
  /** @type {Map<number, any>} native sessions the watch reads records through */
  const handles = new Map()

  /**
   * @param {number | null} after
   * @param {number[] | null} nums
   * @returns {Promise<{ marks: Mark[], lastWrite: number, deletions: number }>}
   */
  async function scan(after, nums) {
    try {
      return JSON.parse(await n.watchScanAsync(scope.project, scope.sessionId, after, nums))
    } catch (e) {
      throw recode(e)
    }
  }

  /** @param {number[]} nums @returns {Promise<Map<number, any>>} */
  async function infos(nums) {
    if (nums.length === 0) return new Map()
    try {
      return new Map(JSON.parse(await n.sessionInfosAsync(nums)))
    } catch (e) {
      throw recode(e)
    }
  }

  /**
   * A page of session `mark`'s records from `from`; null when it was deleted meanwhile.
   * @param {Mark} mark
   * @param {number} from
   * @param {number} limit
   * @returns {Promise<any[] | null>}
   */
  async function page(mark, from, limit) {
    try {
      let h = handles.get(mark.num)
      if (!h) {
        h = await n.openSessionAsync(mark.id, null)
        handles.set(mark.num, h)
      }
      return parsePage((await h.envelopesPageAsync(from, limit)).json, 'watch')
    } catch (e) {
      const err = recode(e)
      if (err.code === 'NOT_FOUND') return null
      throw err
    }
  }

  async function* changes() {
    /** @type {Waker | null} */
    let waker = null
    let lastWrite = 0
    let deletions = 0
    // A look failed for a lost connection: the next looks at every session.
    let lost = false
    /** @type {Positions} */
    let positions = new Positions(new Map())
    try {
      if (signal?.aborted) throw abortError(signal)
      // Registered before the first read, so no commit falls between the read and the wait.
      waker = pg ? await pgWaker(n) : fileWaker(path)
      await waker.wait(stop.signal)
      const first = await scan(null, null)
      /** @type {Map<number, Seen>} */
      const start = resumed ?? new Map(first.marks.map((m) => [m.num, [m.records, m.status, m.id]]))
      positions = new Positions(start)
      lastWrite = first.lastWrite
      deletions = first.deletions
      started.resolve()
      // Without `since`, the watch starts at the end the first look found.
      /** @type {{ marks: Mark[], whole: boolean } | null} */
      let todo = resumed ? { marks: first.marks, whole: true } : null
      for (;;) {
        if (todo === null) {
          const woke = await waker.wait(stop.signal)
          if (stop.signal.aborted) break
          try {
            todo = await look(lost ? null : woke)
            lost = false
          } catch (e) {
            if (pg && transient(e)) {
              lost = true // the listener reconnects, then everything is looked at
              continue
            }
            throw e
          }
        }
        const current = todo
        todo = null
        try {
          const vanished = yield* give(current)
          // A session deleted while its records were read: the whole scope is looked at again.
          if (vanished) todo = await look(null)
        } catch (e) {
          // The server went away mid-look: what was given is kept; the listener reconnects and
          // wakes the watch, which then looks at everything.
          if (!(pg && transient(e))) throw e
          lost = true
        }
      }
      if (signal?.aborted) throw abortError(signal)
    } catch (e) {
      started.reject(e)
      throw e
    } finally {
      // ended before its first look (stopped): `ready` says so
      started.reject(abortError(signal?.aborted ? signal : stop.signal))
      waker?.close()
      handles.clear()
      signal?.removeEventListener('abort', onAbort)
    }

    /**
     * Gives the changes a look found; true when a session was deleted while its records were
     * read.
     * @param {{ marks: Mark[], whole: boolean }} todo
     */
    async function* give({ marks, whole }) {
      let vanished = false
      const made = await infos(marks.filter((m) => {
        const was = positions.get(m.num)
        return !was || was[1] !== m.status
      }).map((m) => m.num))
      for (const mark of marks) {
        let was = positions.get(mark.num)
        if (!was) {
          const session = made.get(mark.num)
          if (!session) continue // deleted since the look: nothing to tell
          was = /** @type {Seen} */ ([0, mark.status, mark.id])
          positions.set(mark.num, was)
          yield change({ type: 'created', sessionId: mark.id, session }, positions.mark(scope))
          if (stop.signal.aborted && halt()) return vanished
        }
        // Only the records the look counted: a later one comes after this look's status.
        for (let from = was[0]; from < mark.records;) {
          const items = await page(mark, from, Math.min(PAGE, mark.records - from))
          if (items === null) {
            vanished = true
            break
          }
          for (const record of items) {
            if (record.seq !== from) continue // given already (never expected)
            from = record.seq + 1
            positions.set(mark.num, [from, was[1], mark.id])
            yield change({ type: 'record', sessionId: mark.id, record }, positions.mark(scope))
            if (stop.signal.aborted && halt()) return vanished
          }
          if (items.length === 0) break
        }
        was = /** @type {Seen} */ (positions.get(mark.num))
        if (was[1] !== mark.status) {
          const session = made.get(mark.num)
          if (!session) continue
          positions.set(mark.num, [was[0], mark.status, mark.id])
          yield change({ type: 'status', sessionId: mark.id, session }, positions.mark(scope))
          if (stop.signal.aborted && halt()) return vanished
        }
      }
      if (whole) {
        const present = new Set(marks.map((m) => m.num))
        for (const [num, [, , id]] of [...positions.live]) {
          if (present.has(num)) continue
          positions.set(num, null)
          handles.delete(num)
          yield change({ type: 'deleted', sessionId: id }, positions.mark(scope))
          if (stop.signal.aborted && halt()) return vanished
        }
      }
      return vanished
    }

    /**
     * What to look at after a wake: on PostgreSQL the sessions the notifications named (a
     * deleted one is found missing from a look at all of them), on SQLite the sessions written
     * since the last look (writes are numbered in commit order there), or all of them when a
     * session was deleted meanwhile, the listener reconnected, or it was the first wake.
     * @param {{ num: number, records: number | null }[] | null} woke
     * @returns {Promise<{ marks: Mark[], whole: boolean }>}
     */
    async function look(woke) {
      if (pg && woke !== null && woke.every((c) => c.records !== null)) {
        const got = await scan(null, [...new Set(woke.map((c) => c.num))])
        return { marks: got.marks, whole: false }
      }
      if (!pg && woke === null) {
        const got = await scan(lastWrite, null)
        if (got.deletions === deletions) {
          lastWrite = got.lastWrite
          return { marks: got.marks, whole: false }
        }
      }
      const got = await scan(null, null)
      lastWrite = got.lastWrite
      deletions = got.deletions
      return { marks: got.marks, whole: true }
    }
  }

  const it = changes()
  return withReady(stoppable(it, signal, stop, onAbort), it, started, () => abortError(signal?.aborted ? signal : stop.signal))
}

/**
 * A promise with its `resolve` and `reject` (a promise settles once: later calls do nothing).
 * @returns {{ promise: Promise<void>, resolve: () => void, reject: (e: unknown) => void }}
 */
function once() {
  /** @type {() => void} */
  let resolve = () => {}
  /** @type {(e: unknown) => void} */
  let reject = () => {}
  const promise = new Promise((res, rej) => {
    resolve = () => res(undefined)
    reject = rej
  })
  promise.catch(() => {}) // a watch nobody asked `ready` of: its end is next()'s to report
  return { promise, resolve, reject }
}

/**
 * `watch.ready`: resolves once the watch has made its first look, the point from which it gives
 * every change, so what a caller reads after it (a listing) and what the watch gives leave no gap.
 * Reading it starts the watch (its first `next()`, kept for the caller's); rejects as that
 * `next()` would (NOT_FOUND, an AbortError).
 * @template T
 * @param {AsyncIterableIterator<T>} outer
 * @param {AsyncGenerator<T>} inner
 * @param {ReturnType<typeof once>} started
 * @param {() => Error} ended what `ready` rejects with when the watch ends before its first look
 */
function withReady(outer, inner, started, ended) {
  /** @type {Promise<IteratorResult<T>> | null} */
  let first = null
  let asked = false
  Object.defineProperty(outer, 'ready', {
    enumerable: true,
    get() {
      if (!asked) {
        asked = true
        first = inner.next()
        first.catch(() => {}) // the caller's next() reports it
      }
      return started.promise
    },
  })
  const next = outer.next
  // stoppable() always has one
  const end = /** @type {NonNullable<typeof outer.return>} */ (outer.return)
  outer.return = function (value) {
    started.reject(ended())
    return end.call(outer, value)
  }
  outer.next = function () {
    asked = true
    if (first) {
      const f = first
      first = null
      return f
    }
    return next.call(outer)
  }
  return outer
}

/**
 * A change, with its cursor made when first read.
 * @param {Record<string, any>} fields
 * @param {() => string} cursor
 */
function change(fields, cursor) {
  Object.defineProperty(fields, 'cursor', { get: cursor, enumerable: true })
  return fields
}

module.exports = { watchStore }
