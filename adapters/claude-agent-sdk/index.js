'use strict'
// threadline/claude-agent-sdk: a Threadline store as the Claude Agent SDK's `SessionStore`.
// Claude Code mirrors every transcript line into it (`append`) and, on `resume`, loads them back
// (`load`). The entries are stored as `threadline import claude-code` stores a file's lines, so
// the mirrored session is an ordinary Threadline session (messages, turns, tokens, search,
// export, recover) and a subagent's transcript is a subagent session linked to its parent.
// The work is the core's (one transaction per append); this file checks arguments, keeps the
// SDK's session summaries and serialises a session's appends within the process.
// An append leaves its session claimed by this process (the next append neither claims nor
// releases it): it is released HOLD_MS after the session's last append, by `delete`, or by the
// store's `close()`; a process killed meanwhile holds nothing (the next writer takes it over).

// The SDK is an optional peer: without it this adapter has nothing to serve, so say so at once.
try {
  require.resolve('@anthropic-ai/claude-agent-sdk')
} catch {
  const err = /** @type {Error & { code: string }} */ (new Error(
    "threadline/claude-agent-sdk needs the Claude Agent SDK: npm install @anthropic-ai/claude-agent-sdk",
  ))
  err.code = 'MODULE_NOT_FOUND'
  throw err
}

const HOOK = Symbol.for('threadline.claudeCode')
/** How long a session stays claimed after its last append (another process may take it then). */
const HOLD_MS = 5000

/**
 * @typedef {{ projectKey: string, sessionId: string, subpath?: string }} SessionKey
 * @typedef {{ type: string, uuid?: string, timestamp?: string, [k: string]: unknown }} Entry
 * @typedef {{ sessionId: string, mtime: number, data: Record<string, unknown> }} Summary
 */

/** @type {Promise<any> | undefined} */
let sdk
/** The SDK is ESM only; its `foldSessionSummary` keeps the summaries the SDK lists. */
function theSdk() {
  sdk ??= import('@anthropic-ai/claude-agent-sdk')
  return sdk
}

/**
 * @param {string} code
 * @param {string} message
 */
function fail(code, message) {
  const err = /** @type {Error & { code: string }} */ (new Error(message))
  err.code = code
  return err
}

/**
 * @param {string} what
 * @param {unknown} key
 * @param {boolean} [withSubpath]
 * @returns {SessionKey}
 */
function checkKey(what, key, withSubpath = true) {
  if (key === null || typeof key !== 'object') {
    throw fail('INVALID_INPUT', `${what}: key: expected { projectKey, sessionId, subpath? }`)
  }
  const k = /** @type {Record<string, unknown>} */ (key)
  for (const name of ['projectKey', 'sessionId']) {
    if (typeof k[name] !== 'string' || k[name] === '') {
      throw fail('INVALID_INPUT', `${what}: key.${name}: expected a non-empty string`)
    }
  }
  if (withSubpath && k.subpath !== undefined && (typeof k.subpath !== 'string' || k.subpath === '')) {
    throw fail('INVALID_INPUT', `${what}: key.subpath: expected a non-empty string or undefined (the main transcript)`)
  }
  /** @type {SessionKey} */
  const out = { projectKey: /** @type {string} */ (k.projectKey), sessionId: /** @type {string} */ (k.sessionId) }
  if (withSubpath && k.subpath !== undefined) out.subpath = /** @type {string} */ (k.subpath)
  return out
}

/**
 * @param {unknown} entries
 * @returns {Entry[]}
 */
function checkEntries(entries) {
  if (!Array.isArray(entries)) throw fail('INVALID_INPUT', 'append: entries: expected an array')
  entries.forEach((e, i) => {
    if (e === null || typeof e !== 'object' || Array.isArray(e)) {
      throw fail('INVALID_INPUT', `append: entries[${i}]: expected an object`)
    }
    if (typeof e.type !== 'string') throw fail('INVALID_INPUT', `append: entries[${i}].type: expected a string`)
  })
  return entries
}

/**
 * Whether a stored summary was folded by another language's SDK: the Python SDK's fold writes
 * snake_case keys (`first_prompt`), this one camelCase (`firstPrompt`). Such a summary is not this
 * SDK's to read; it is folded again from the session's entries.
 * @param {unknown} summary
 */
const foreign = (summary) => summary === null || typeof summary !== 'object' || Object.keys(summary).some((k) => k.includes('_'))

/** @param {SessionKey} key */
const summaryKey = (key) => `${key.projectKey}\u0000${key.sessionId}`
/** @param {SessionKey} key */
const heldKey = (key) => `${summaryKey(key)}\u0000${key.subpath ?? ''}`

class ThreadlineSessionStore {
  /** @type {any} */
  #store
  /** @type {string | undefined} */
  #project
  /** Each main session's folded summary, as last stored by this process. */
  /** @type {Map<string, Summary | undefined>} */
  #summaries = new Map()
  /** The append in flight per session: the next waits for it (the summary folds on it). */
  /** @type {Map<string, Promise<void>>} */
  #tails = new Map()
  /** The sessions an append left claimed, each with the timer that releases it. */
  /** @type {Map<string, { key: SessionKey, timer: ReturnType<typeof setTimeout> }>} */
  #held = new Map()

  /**
   * @param {any} store a `Store` from `threadline` or `threadline/promise`
   * @param {{ project?: string | undefined }} [options]
   */
  constructor(store, options = {}) {
    if (store === null || typeof store !== 'object' || typeof store[HOOK] !== 'function') {
      throw fail('INVALID_INPUT', 'ThreadlineSessionStore: store: expected a Store from threadline or threadline/promise')
    }
    if (options === null || typeof options !== 'object') {
      throw fail('INVALID_INPUT', 'ThreadlineSessionStore: options: expected an object')
    }
    for (const name of Object.keys(options)) {
      if (name !== 'project') throw fail('INVALID_INPUT', `ThreadlineSessionStore: options.${name}: unknown option`)
    }
    if (options.project !== undefined && typeof options.project !== 'string') {
      throw fail('INVALID_INPUT', 'ThreadlineSessionStore: options.project: expected a string')
    }
    this.#store = store
    this.#project = options.project
  }

  /**
   * @param {string} op
   * @param {...unknown} args
   */
  async #core(op, ...args) {
    return this.#store[HOOK](op, ...args)
  }

  /**
   * Mirrors a batch: one transaction, entries with a stored uuid left out (the SDK retries).
   * @param {SessionKey} key
   * @param {Entry[]} entries
   * @returns {Promise<void>}
   */
  async append(key, entries) {
    const k = checkKey('append', key)
    const list = checkEntries(entries)
    try {
      await this.#serial(k, () => this.#appendNow(k, list))
    } finally {
      // a failed append released it already: the release finds nothing
      this.#hold(k)
    }
  }

  /**
   * Runs `fn` after the operation in flight on the session `key` belongs to (its main session).
   * @template T
   * @param {SessionKey} key
   * @param {() => Promise<T>} fn
   * @returns {Promise<T>}
   */
  async #serial(key, fn) {
    const id = summaryKey(key)
    const before = this.#tails.get(id) ?? Promise.resolve()
    const mine = before.then(fn)
    const tail = mine.then(() => {}, () => {})
    this.#tails.set(id, tail)
    try {
      return await mine
    } finally {
      if (this.#tails.get(id) === tail) this.#tails.delete(id)
    }
  }

  /**
   * (Re)starts the timer that releases `key`'s session HOLD_MS from now; unref'd, so a process
   * with nothing else to do exits (its store's close, or its end, releases the session).
   * @param {SessionKey} key
   */
  #hold(key) {
    const id = heldKey(key)
    const held = this.#held.get(id)
    if (held) clearTimeout(held.timer)
    const timer = setTimeout(() => {
      if (this.#held.get(id)?.timer !== timer) return
      this.#held.delete(id)
      this.#serial(key, () => this.#core('release', key)).catch(() => {
        // CLOSED: the store went first, which released it
      })
    }, HOLD_MS)
    timer.unref?.()
    this.#held.set(id, { key, timer })
  }

  /**
   * @param {SessionKey} key
   * @param {Entry[]} entries
   */
  async #appendNow(key, entries) {
    const withProject = this.#project === undefined ? key : { ...key, project: this.#project }
    if (key.subpath !== undefined) {
      await this.#core('append', withProject, entries, null)
      return
    }
    // The summary is folded here and stored in the append's own transaction.
    const mtime = Date.now()
    const prev = await this.#summary(key)
    const { foldSessionSummary } = await theSdk()
    const summary = foldSessionSummary(prev, key, entries, { mtime })
    await this.#core('append', withProject, entries, { mtime, summary: summary.data })
    this.#summaries.set(summaryKey(key), summary)
  }

  /**
   * The session's summary as stored, the first time this process appends to it.
   * @param {SessionKey} key
   * @returns {Promise<Summary | undefined>}
   */
  async #summary(key) {
    const id = summaryKey(key)
    if (this.#summaries.has(id)) return this.#summaries.get(id)
    const sidecar = await this.#sidecar(key.sessionId)
    /** @type {Summary | undefined} */
    let summary
    if (sidecar && sidecar.summary && !foreign(sidecar.summary)) {
      summary = { sessionId: key.sessionId, mtime: sidecar.mtime ?? 0, data: sidecar.summary }
    } else if (sidecar && sidecar.summary) {
      // stored by the Python adapter: folded from the entries, so the next fold starts from ours
      const main = { projectKey: key.projectKey, sessionId: key.sessionId }
      const entries = await this.#core('load', main)
      if (entries) {
        const { foldSessionSummary } = await theSdk()
        summary = foldSessionSummary(undefined, main, entries, { mtime: sidecar.mtime ?? 0 })
      }
    }
    this.#summaries.set(id, summary)
    return summary
  }

  /**
   * What this adapter keeps in a session's metadata (`claudeAgentSdk`), read through the public
   * API of either store; undefined for a session not stored yet.
   * @param {string} sessionId
   * @returns {Promise<{ mtime?: number, summary?: Record<string, unknown> } | undefined>}
   */
  async #sidecar(sessionId) {
    let session
    try {
      session = await this.#store.openSession(sessionId)
    } catch (e) {
      if (/** @type {any} */ (e)?.code === 'NOT_FOUND') return undefined
      throw e
    }
    try {
      const info = typeof session.info === 'function' ? await session.info() : session.info
      return info.metadata?.claudeAgentSdk
    } finally {
      await session.close()
    }
  }

  /**
   * The entries appended to `key`, in order and deep-equal; null if it was never written.
   * @param {SessionKey} key
   * @returns {Promise<Entry[] | null>}
   */
  async load(key) {
    return this.#core('load', checkKey('load', key))
  }

  /**
   * @param {string} projectKey
   * @returns {Promise<Array<{ sessionId: string, mtime: number }>>}
   */
  async listSessions(projectKey) {
    const p = checkProjectKey('listSessions', projectKey)
    const rows = /** @type {Array<{ sessionId: string, mtime: number }>} */ (await this.#core('sessions', p))
    return rows.map((r) => ({ sessionId: r.sessionId, mtime: r.mtime }))
  }

  /**
   * The SDK's summaries of every main session of `projectKey`. A session that has none stored
   * (imported with `threadline import claude-code`) is folded from its entries now.
   * @param {string} projectKey
   * @returns {Promise<Summary[]>}
   */
  async listSessionSummaries(projectKey) {
    const p = checkProjectKey('listSessionSummaries', projectKey)
    const rows = /** @type {Array<{ sessionId: string, mtime: number, summary?: Record<string, unknown> }>} */ (
      await this.#core('sessions', p)
    )
    /** @type {Summary[]} */
    const out = []
    for (const r of rows) {
      if (r.summary && !foreign(r.summary)) {
        out.push({ sessionId: r.sessionId, mtime: r.mtime, data: r.summary })
        continue
      }
      const key = { projectKey: p, sessionId: r.sessionId }
      const entries = await this.#core('load', key)
      if (!entries) continue
      const { foldSessionSummary } = await theSdk()
      out.push(foldSessionSummary(undefined, key, entries, { mtime: r.mtime }))
    }
    return out
  }

  /**
   * Deletes a session and its subagents' transcripts, or (with `subpath`) one subagent's.
   * @param {SessionKey} key
   * @returns {Promise<void>}
   */
  async delete(key) {
    const k = checkKey('delete', key)
    // the core's delete releases what it deletes
    for (const [id, held] of this.#held) {
      if (id === heldKey(k) || (k.subpath === undefined && summaryKey(held.key) === summaryKey(k))) {
        clearTimeout(held.timer)
        this.#held.delete(id)
      }
    }
    await this.#serial(k, () => this.#core('delete', k))
    if (k.subpath === undefined) this.#summaries.delete(summaryKey(k))
  }

  /**
   * The subpaths of a session's subagent transcripts.
   * @param {{ projectKey: string, sessionId: string }} key
   * @returns {Promise<string[]>}
   */
  async listSubkeys(key) {
    const k = checkKey('listSubkeys', key, false)
    return this.#core('subkeys', k.sessionId)
  }
}

/**
 * @param {string} what
 * @param {unknown} projectKey
 * @returns {string}
 */
function checkProjectKey(what, projectKey) {
  if (typeof projectKey !== 'string' || projectKey === '') {
    throw fail('INVALID_INPUT', `${what}: projectKey: expected a non-empty string`)
  }
  return projectKey
}

module.exports = { ThreadlineSessionStore }
