'use strict'
// threadline/openai-agents: a Threadline session as the OpenAI Agents SDK's `Session`
// (`run(agent, input, { session })`). Each item the SDK adds is one record, in one transaction per
// `addItems`: the item exactly as given (providerData included) under the envelope field
// `openaiAgentsItem`, beside a neutral message converted from it, so Threadline's messages, turns,
// search and export work on the session. Order is the log's seq, never a timestamp.
// `popItem` rewinds the session (one record, durable); `clearSession` deletes it and starts it
// again under the same id. `getItems` answers or leaves out the orphans a killed run left.

// The SDK is an optional peer: without it this adapter has nothing to serve, so say so at once.
try {
  require.resolve('@openai/agents')
} catch {
  const err = /** @type {Error & { code: string }} */ (new Error(
    'threadline/openai-agents needs the OpenAI Agents SDK: npm install @openai/agents',
  ))
  err.code = 'MODULE_NOT_FOUND'
  throw err
}

const { createHash, randomUUID } = require('node:crypto')
const { fromOpenAIResponses } = require('../..')

/** The envelope field holding the SDK item as given. */
const ITEM = 'openaiAgentsItem'
/** The event recording items left out of `getItems` (an orphan no repair can answer). */
const DROPPED = 'openai-agents.dropped'
/** The first record of a session this adapter creates: what a pop of the first item rewinds to. */
const ROOT = 'openai-agents.session'
/** The record of an applied history transaction (its uuid is derived from the operation id). */
const APPLIED = 'openai-agents.transaction'
/** The record written before a replace_suffix rewinds: a retry after a crash finishes from it. */
const REPLACING = 'openai-agents.replacing'

/**
 * @typedef {{ type?: string, [k: string]: unknown }} Item
 * @typedef {{ uuid: string, parentUuid: string | null, seq: number, type: string,
 *   message?: { role: string, content: any[] }, name?: string, data?: any,
 *   [k: string]: unknown }} Envelope
 */

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
 * @param {unknown} v
 * @returns {v is Record<string, any>}
 */
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

/**
 * A tool output as text for the neutral tool_result (the exact output stays in the item).
 * @param {unknown} output
 * @returns {string}
 */
function outputText(output) {
  if (typeof output === 'string') return output
  if (isObject(output) && output.type === 'text' && typeof output.text === 'string') return output.text
  if (Array.isArray(output) && output.every((p) => isObject(p) && p.type === 'text')) {
    return output.map((p) => p.text).join('')
  }
  return JSON.stringify(output) ?? ''
}

/**
 * The neutral message for one SDK item, or `undefined` when it has none (then the record is
 * stored without a message, out of `messages`).
 * The SDK's items are its own protocol (camelCase `callId`, `function_call_result`, reasoning
 * `content`), so the tool items are mapped here and the rest goes through fromOpenAIResponses.
 * @param {Item} item
 */
function toMessage(item) {
  if (item.type === 'function_call' && typeof item.callId === 'string' && typeof item.name === 'string') {
    /** @type {Record<string, unknown>} */
    const wire = { type: 'function_call', call_id: item.callId, name: item.name, arguments: item.arguments }
    if (typeof item.id === 'string') wire.id = item.id
    try {
      return fromOpenAIResponses([/** @type {any} */ (wire)]).messages[0]
    } catch {
      // arguments that are not a JSON object: keep the call, its input as given
      return { role: 'assistant', content: [{ type: 'tool_use', id: item.callId, name: item.name, input: {} }] }
    }
  }
  if (item.type === 'function_call_result' && typeof item.callId === 'string') {
    /** @type {Record<string, unknown>} */
    const block = { type: 'tool_result', tool_use_id: item.callId, content: outputText(item.output) }
    if (item.status === 'incomplete') block.is_error = true
    return { role: 'user', content: [block] }
  }
  if (item.type === 'reasoning') {
    const parts = Array.isArray(item.content) ? item.content : []
    /** @type {Record<string, unknown>} */
    const wire = {
      type: 'reasoning',
      id: typeof item.id === 'string' ? item.id : '',
      summary: parts.filter((p) => isObject(p) && typeof p.text === 'string').map((p) => ({ type: 'summary_text', text: p.text })),
    }
    const pd = isObject(item.providerData) ? item.providerData : {}
    if (typeof pd.encryptedContent === 'string') wire.encrypted_content = pd.encryptedContent
    if (typeof pd.encrypted_content === 'string') wire.encrypted_content = pd.encrypted_content
    return fromOpenAIResponses([/** @type {any} */ (wire)]).messages[0]
  }
  const converted = fromOpenAIResponses([/** @type {any} */ (item)])
  if (converted.messages.length > 0) return converted.messages[0]
  // a lone system / developer message comes back as the result's `system`
  if (converted.system !== undefined) return { role: 'system', content: converted.system }
  return undefined
}

/**
 * JSON with object keys sorted: the same value gives the same text whatever its key order.
 * @param {unknown} value
 * @returns {string}
 */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonical(v))).join(',')}]`
  if (isObject(value)) {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** @param {string} text */
const sha256 = (text) => createHash('sha256').update(text).digest('hex')

/**
 * Whether an item is model output (a response's reasoning, message, call) rather than input.
 * @param {Item} item
 */
function isOutput(item) {
  if (item.type === 'reasoning' || item.type === 'function_call') return true
  if (item.type === undefined || item.type === 'message') return item.role === 'assistant'
  return typeof item.type === 'string' && item.type.endsWith('_call')
}

/**
 * The records for some items: the item as given, beside its neutral message. `usage` (one entry
 * per model response among the items, in order) goes on the last message of each response, so
 * Threadline's turns and token counts see it; given only when the counts match.
 * @param {Item[]} items
 * @param {Array<Record<string, any>>} [usage]
 */
function itemRecords(items, usage) {
  let response = -1
  /** @type {Array<Record<string, any>>} */
  const records = []
  /** @type {Array<Record<string, any>>} the last record of each response */
  const lasts = []
  items.forEach((item, i) => {
    const message = toMessage(item)
    const record = message ? { message, [ITEM]: item } : { type: 'openai-agents-item', includeInContext: false, [ITEM]: item }
    records.push(record)
    if (!isOutput(item)) return
    const previous = items[i - 1]
    if (previous === undefined || !isOutput(previous)) response += 1
    if (message && message.role === 'assistant') lasts[response] = record
  })
  if (usage && usage.length === response + 1) {
    usage.forEach((u, n) => {
      const record = lasts[n]
      if (!record) return
      const input = Number(u.inputTokens) || 0
      const cached = Number(u.inputTokensDetails?.cached_tokens) || 0
      // Anthropic's counting, which Threadline's is: input_tokens leaves the cached part out
      /** @type {Record<string, number>} */
      const counted = { input_tokens: Math.max(0, input - cached), output_tokens: Number(u.outputTokens) || 0 }
      if (cached > 0) counted.cache_read_input_tokens = cached
      record.message = { ...record.message, usage: counted }
    })
  }
  return records
}

/**
 * How many model responses some items hold.
 * @param {Item[]} items
 */
function responses(items) {
  return items.filter((item, i) => isOutput(item) && !(i > 0 && isOutput(/** @type {Item} */ (items[i - 1])))).length
}

/**
 * @param {unknown} args
 * @returns {{ operationId: string, transaction: { type: 'append_items', items: Item[] } | { type: 'replace_suffix', expectedSuffix: Item[], replacement: Item[] } }}
 */
function checkTransaction(args) {
  const what = 'applyHistoryTransaction'
  if (!isObject(args)) throw fail('INVALID_INPUT', `${what}: args: expected { operationId, transaction }`)
  if (typeof args.operationId !== 'string' || args.operationId.trim() === '') {
    throw fail('INVALID_INPUT', `${what}: args.operationId: expected a non-empty string`)
  }
  const tx = args.transaction
  if (!isObject(tx)) throw fail('INVALID_INPUT', `${what}: args.transaction: expected an object`)
  if (tx.type === 'append_items') {
    checkItems(`${what}: args.transaction.items`, tx.items)
  } else if (tx.type === 'replace_suffix') {
    checkItems(`${what}: args.transaction.expectedSuffix`, tx.expectedSuffix)
    checkItems(`${what}: args.transaction.replacement`, tx.replacement)
  } else {
    throw fail('INVALID_INPUT', `${what}: args.transaction.type: expected 'append_items' or 'replace_suffix'`)
  }
  // A snapshot: the caller may change its arrays once this returns.
  return { operationId: args.operationId, transaction: structuredClone(/** @type {any} */ (tx)) }
}

/**
 * Checks the items the SDK gives: objects (each is stored as JSON).
 * @param {string} at the call and the path of the array, e.g. `addItems: items`
 * @param {unknown} items
 * @returns {Item[]}
 */
function checkItems(at, items) {
  if (!Array.isArray(items)) throw fail('INVALID_INPUT', `${at}: expected an array of items`)
  items.forEach((item, i) => {
    if (!isObject(item)) throw fail('INVALID_INPUT', `${at}[${i}]: expected an object (an AgentInputItem)`)
    if (item.type !== undefined && typeof item.type !== 'string') {
      throw fail('INVALID_INPUT', `${at}[${i}].type: expected a string`)
    }
  })
  return items
}

/**
 * The items of the current branch, each with the record holding it, in seq order.
 * Records written by recover() (answers to calls a killed run left) have no SDK item: their
 * tool_results become `function_call_result` items.
 * @param {Envelope[]} envelopes
 * @param {string | undefined} leaf
 * @returns {Array<{ item: Item, env: Envelope }>}
 */
function branchItems(envelopes, leaf) {
  const byUuid = new Map(envelopes.map((e) => [e.uuid, e]))
  /** @type {Set<string>} */
  const onBranch = new Set()
  for (let e = leaf === undefined ? undefined : byUuid.get(leaf); e; e = e.parentUuid === null ? undefined : byUuid.get(e.parentUuid)) {
    if (onBranch.has(e.uuid)) break
    onBranch.add(e.uuid)
  }
  /** @type {Map<string, string>} call id -> tool name, for repaired results */
  const names = new Map()
  /** @type {Array<{ item: Item, env: Envelope }>} */
  const out = []
  for (const env of envelopes) {
    if (!onBranch.has(env.uuid)) continue
    const item = env[ITEM]
    if (isObject(item)) {
      if (item.type === 'function_call' && typeof item.callId === 'string') names.set(item.callId, String(item.name))
      out.push({ item, env })
      continue
    }
    if (!env.message || env.includeInContext === false) continue
    for (const block of env.message.content) {
      if (isObject(block) && block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
        out.push({
          item: {
            type: 'function_call_result',
            name: names.get(block.tool_use_id) ?? '',
            callId: block.tool_use_id,
            status: 'completed',
            output: { type: 'text', text: outputText(Array.isArray(block.content) ? block.content.map((/** @type {any} */ b) => b.text ?? '').join('') : block.content) },
          },
          env,
        })
      }
    }
  }
  return out
}

/**
 * Leaves out what the model API refuses: a call without its output, an output without its call
 * (both only left by a crash or a pop), a reasoning item with no item after it.
 * @param {Array<{ item: Item, env: Envelope }>} list
 */
function withoutOrphans(list) {
  const calls = new Set()
  const results = new Set()
  for (const { item } of list) {
    if (item.type === 'function_call') calls.add(item.callId)
    if (item.type === 'function_call_result') results.add(item.callId)
  }
  /** @type {typeof list} */
  const kept = []
  /** @type {typeof list} */
  const dropped = []
  for (const entry of list) {
    const { item } = entry
    const orphan =
      (item.type === 'function_call' && !results.has(item.callId)) ||
      (item.type === 'function_call_result' && !calls.has(item.callId))
    ;(orphan ? dropped : kept).push(entry)
  }
  // A reasoning item goes with the item it produced (a call or an assistant message, right after
  // it): without one, the API refuses it.
  /** @type {typeof list} */
  const paired = []
  for (const entry of [...kept].reverse()) {
    const next = paired[0]?.item
    const produced = next !== undefined && next.type !== 'reasoning' && next.type !== 'function_call_result' &&
      !(next.role === 'user' || next.role === 'system' || next.role === 'developer')
    if (entry.item.type === 'reasoning' && !produced) dropped.push(entry)
    else paired.unshift(entry)
  }
  kept.length = 0
  kept.push(...paired)
  return { kept, dropped }
}

class ThreadlineSession {
  /** @type {any} */
  #store
  /** @type {string} */
  #id
  /** The SDK passes its run context to each call (see `acceptsRunContext`). */
  acceptsRunContext = /** @type {const} */ (true)
  /** Per run: how many of its model requests' usage entries are stored already. */
  /** @type {WeakMap<object, number>} */
  #usageStored = new WeakMap()
  /** The session's records as last read, in seq order (see #envelopes). */
  /** @type {Envelope[]} */
  #read = []
  /** The session is known to exist (getSessionId need not open it). */
  #exists = false
  /** Operations of this object run one at a time (the SDK may overlap a pop and a read). */
  /** @type {Promise<unknown>} */
  #tail = Promise.resolve()

  /**
   * @param {{ store: any, sessionId?: string | undefined }} options
   */
  constructor(options) {
    if (!isObject(options)) throw fail('INVALID_INPUT', 'ThreadlineSession: options: expected { store, sessionId? }')
    for (const name of Object.keys(options)) {
      if (name !== 'store' && name !== 'sessionId') throw fail('INVALID_INPUT', `ThreadlineSession: options.${name}: unknown option`)
    }
    const { store, sessionId } = options
    if (!isObject(store) || typeof store.openSession !== 'function' || typeof store.createSession !== 'function') {
      throw fail('INVALID_INPUT', 'ThreadlineSession: options.store: expected a Store from threadline or threadline/promise')
    }
    if (sessionId !== undefined && (typeof sessionId !== 'string' || sessionId === '')) {
      throw fail('INVALID_INPUT', 'ThreadlineSession: options.sessionId: expected a non-empty string')
    }
    this.#store = store
    this.#id = sessionId ?? randomUUID()
  }

  /**
   * @template T
   * @param {() => Promise<T>} fn
   * @returns {Promise<T>}
   */
  #serial(fn) {
    const run = this.#tail.then(fn)
    this.#tail = run.catch(() => {})
    return run
  }

  /**
   * Runs `fn` with the Threadline session (created on first use), one operation at a time, and
   * closes it after: a session is owned by the process writing it until it is closed, and another
   * process (another worker serving the same conversation) must be able to write it between runs.
   * @template T
   * @param {(session: any) => Promise<T>} fn
   * @returns {Promise<T>}
   */
  #use(fn) {
    return this.#serial(async () => {
      const session = await this.#open()
      this.#exists = true
      try {
        return await fn(session)
      } finally {
        try {
          await session.close()
        } catch {
          // closing a session deleted meanwhile (clearSession) has nothing to release
        }
      }
    })
  }

  async #open() {
    try {
      return await this.#store.openSession(this.#id)
    } catch (err) {
      if (/** @type {any} */ (err).code !== 'NOT_FOUND') throw err
    }
    let created
    try {
      created = await this.#store.createSession({ id: this.#id, provider: 'openai' })
    } catch (err) {
      // another process created it in between
      if (/** @type {any} */ (err).code !== 'INVALID_INPUT') throw err
      return this.#store.openSession(this.#id)
    }
    // the root a pop of the first item rewinds to (a crash before it: a session without one,
    // whose first item a pop removes by clearing)
    await created.appendEvent(ROOT, null)
    return created
  }

  /**
   * The session's records: those read before (by this object) and the ones after them. The log
   * only grows; a session deleted and started again (clearSession, here or elsewhere) has another
   * record at the last seq read, and is read whole.
   * @param {any} session
   * @returns {Promise<Envelope[]>}
   */
  async #envelopes(session) {
    const known = this.#read
    const last = known.at(-1)
    if (last !== undefined) {
      const tail = /** @type {Envelope[]} */ (await session.envelopes({ fromSeq: last.seq }))
      if (tail[0]?.uuid === last.uuid) {
        if (tail.length > 1) known.push(...tail.slice(1))
        return known
      }
    }
    this.#read = /** @type {Envelope[]} */ (await session.envelopes())
    return this.#read
  }

  /** @param {any} session */
  async #history(session) {
    const envelopes = await this.#envelopes(session)
    const branches = await session.branches()
    const current = branches.find((/** @type {any} */ b) => b.current)
    const leaf = current ? current.leafUuid : envelopes.at(-1)?.uuid
    return { envelopes, leaf, items: branchItems(envelopes, leaf) }
  }

  /** @returns {Promise<string>} */
  async getSessionId() {
    if (!this.#exists) await this.#use(async () => {})
    return this.#id
  }

  /**
   * The most recent `limit` items (all without it), oldest first, as they were added. A run
   * killed mid-way may have left a tool call unanswered: it is answered as `recover()` answers it
   * (an error output saying it never ran, or that its outcome is unknown), and that repair is a
   * record of the session. Any other orphan (a call or output whose partner is gone) is left out,
   * and recorded once as an `openai-agents.dropped` event.
   * @param {number} [limit]
   */
  async getItems(limit) {
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 0)) {
      throw fail('INVALID_INPUT', 'getItems: limit: expected a whole number >= 0')
    }
    return this.#use(async (session) => {
      if ((await session.pendingRepairs()).some((/** @type {any} */ r) => r.recordUuid !== undefined)) {
        await session.recover()
      }
      const { envelopes, items } = await this.#history(session)
      const { kept, dropped } = withoutOrphans(items)
      const recorded = new Set(
        envelopes.filter((e) => e.type === 'event' && e.name === DROPPED).map((e) => e.data?.uuid),
      )
      for (const { env, item } of dropped) {
        if (recorded.has(env.uuid)) continue
        await session.appendEvent(DROPPED, { uuid: env.uuid, seq: env.seq, type: item.type ?? 'message', callId: item.callId })
      }
      let slice = limit === undefined ? kept : kept.slice(kept.length - Math.min(limit, kept.length))
      // A cut must not part an item from the reasoning before it, nor an output from its call.
      const start = kept.length - slice.length
      if (start > 0 && kept[start - 1]?.item.type === 'reasoning') slice = slice.slice(1)
      slice = withoutOrphans(slice).kept
      return slice.map(({ item }) => structuredClone(item))
    })
  }

  /**
   * Adds the items in one transaction, each as given; returns after the commit.
   * @param {Item[]} items
   * @param {unknown} [runContext] the SDK's RunContext: its usage goes on the responses stored
   */
  async addItems(items, runContext) {
    const list = checkItems('addItems: items', items)
    if (list.length === 0) return
    return this.#use(async (session) => {
      const usage = this.#usageFor(runContext, list)
      await session.appendMany(itemRecords(list, usage?.entries))
      usage?.stored()
    })
  }

  /**
   * The usage entries of the responses among `items`: the run's next ones, when the run context
   * has exactly as many not stored yet (else none: a guess could count a response twice).
   * @param {unknown} runContext
   * @param {Item[]} items
   */
  #usageFor(runContext, items) {
    if (!isObject(runContext) || !isObject(runContext.usage)) return undefined
    const all = runContext.usage.requestUsageEntries
    if (!Array.isArray(all)) return undefined
    const calls = all.filter((e) => isObject(e) && (e.endpoint === undefined || e.endpoint === 'responses.create'))
    const from = this.#usageStored.get(runContext) ?? 0
    const count = responses(items)
    if (count === 0 || calls.length - from !== count) return undefined
    return { entries: calls.slice(from), stored: () => this.#usageStored.set(runContext, from + count) }
  }

  /**
   * Removes the latest item and returns it (durable: a rewind of the session). A reasoning item
   * right before it goes with it: alone it could never be sent again.
   * @returns {Promise<Item | undefined>}
   */
  async popItem() {
    return this.#use(async (session) => {
      const { items } = await this.#history(session)
      const last = items.at(-1)
      if (!last) return undefined
      let from = last
      // the reasoning that produced the item goes with it
      for (let i = items.length - 2; last.item.type !== 'reasoning' && i >= 0; i -= 1) {
        const before = /** @type {(typeof items)[number]} */ (items[i])
        if (before.item.type !== 'reasoning') break
        from = before
      }
      const back = from.env.parentUuid
      if (back === null) {
        await this.#clear()
      } else {
        await session.rewind(back)
      }
      return structuredClone(last.item)
    })
  }

  /**
   * The SDK's history transactions: atomic and idempotent by `operationId`. `append_items` is one
   * transaction with the record of the operation. `replace_suffix` records its intent, rewinds,
   * then appends the replacement with the record of the operation: a retry after a crash between
   * those steps finishes the operation rather than failing on the suffix already gone.
   * @param {unknown} args
   * @param {unknown} [runContext]
   */
  async applyHistoryTransaction(args, runContext) {
    const { operationId, transaction } = checkTransaction(args)
    const digest = sha256(canonical(transaction))
    const id = sha256(operationId).slice(0, 32)
    const applied = { type: 'event', name: APPLIED, includeInContext: false, uuid: `openai-agents-op-${id}`, data: { operationId, digest } }
    const intentUuid = `openai-agents-replacing-${id}`
    return this.#use(async (session) => {
      const { envelopes, items, leaf } = await this.#history(session)
      const find = (/** @type {string} */ uuid) => envelopes.find((e) => e.uuid === uuid)
      const same = (/** @type {Envelope | undefined} */ e) => {
        if (e && e.data?.digest !== digest) {
          throw fail('INVALID_INPUT', `applyHistoryTransaction: args.operationId: '${operationId}' was applied with another transaction`)
        }
        return e !== undefined
      }
      if (same(find(applied.uuid))) return
      const commit = async (/** @type {Item[]} */ list) => {
        const usage = this.#usageFor(runContext, list)
        try {
          await session.appendMany([applied, ...itemRecords(list, usage?.entries)])
          usage?.stored()
        } catch (err) {
          // another process applied it first: the uuid is taken
          const now = (await session.envelopes({ fromSeq: envelopes.length })).find((/** @type {Envelope} */ e) => e.uuid === applied.uuid)
          if (!same(now)) throw err
        }
      }
      if (transaction.type === 'append_items') return commit(transaction.items)
      const { expectedSuffix, replacement } = transaction
      const intent = find(intentUuid)
      same(intent)
      if (intent && leaf === intent.data.base) return commit(replacement) // rewound, not yet appended
      const start = items.length - expectedSuffix.length
      if (start < 0 || canonical(items.slice(start).map((e) => e.item)) !== canonical(expectedSuffix)) {
        throw fail('INVALID_INPUT', 'applyHistoryTransaction: args.transaction.expectedSuffix: does not match the end of the session history')
      }
      if (expectedSuffix.length > 0) {
        const base = /** @type {(typeof items)[number]} */ (items[start]).env.parentUuid
        if (base === null) {
          throw fail('INVALID_INPUT', 'applyHistoryTransaction: args.transaction.expectedSuffix: cannot replace the first record of a session this adapter did not create')
        }
        if (!intent) await session.appendEvent(REPLACING, { operationId, digest, base }, { uuid: intentUuid, includeInContext: false })
        await session.rewind(base)
      }
      return commit(replacement)
    })
  }

  /** Deletes every record of the session; the session id stays valid (an empty session). */
  async clearSession() {
    return this.#serial(() => this.#clear())
  }

  async #clear() {
    this.#exists = false
    try {
      await this.#store.deleteSession(this.#id)
    } catch (err) {
      if (/** @type {any} */ (err).code !== 'NOT_FOUND') throw err
    }
  }
}

module.exports = { ThreadlineSession }
