'use strict'
// threadline/ai-sdk: Vercel AI SDK (`ai` >= 7) chats kept in a Threadline store.
// The AI SDK defines no storage interface: an app keeps `UIMessage[]` itself. A chat here is a
// Threadline session (id = chatId). Each UIMessage is written twice over, on purpose:
// - as Anthropic-shaped message records (text, thinking with its signature, redacted thinking,
//   tool_use, tool_result), so messages, turns, tokens, search, export and buildContext work on
//   the chat as on any session;
// - as an `ai-sdk.message` event holding the UIMessage itself (only the parts that changed since
//   the previous version), so `load` gives back exactly what was saved.
// Records are only ever appended: a message edited or removed by the client (regenerate, edit)
// rewinds the session to before it, so the abandoned versions stay in the log but leave the
// current branch, which is what `load` and `buildContext` read.

// `ai` is an optional peer: without it this adapter has nothing to serve, so say so at once.
try {
  require.resolve('ai')
} catch {
  const err = /** @type {Error & { code: string }} */ (new Error('threadline/ai-sdk needs the Vercel AI SDK: npm install ai'))
  err.code = 'MODULE_NOT_FOUND'
  throw err
}

const { randomUUID } = require('node:crypto')

const CHAT_EVENT = 'ai-sdk.chat'
const MESSAGE_EVENT = 'ai-sdk.message'
const META = 'ai-sdk'
/** How many chats' states are kept between operations (each is the chat's messages as JSON). */
const STATES = 64
/** How long a session stays open after a run's step with no further operation on the chat. */
const HOLD_MS = 5000

/**
 * Closes a session handle; one whose store was closed meanwhile is closed already.
 * @param {any} session
 */
async function closeQuietly(session) {
  try {
    await session.close()
  } catch {
    // CLOSED: the store went first, which released the session.
  }
}
/** The text an unanswered tool call comes back with after a crash (an `output-error`). */
const INTERRUPTED =
  'interrupted: the run ended (killed or stopped) before this tool call finished; its outcome is unknown'

/**
 * @typedef {{ id: string, role: 'system' | 'user' | 'assistant', metadata?: unknown, parts: any[] }} UIMessage
 * @typedef {{ role: string, content: any[] }} Mirror  a message record as appended
 * @typedef {{ id: string, json: string | undefined, message: UIMessage | undefined,
 *   records: Array<{ seq: number, content: string }>, seqs: number[], before: string | null }} Stored
 *   a stored UIMessage (and its JSON, what a save compares with), the records mirroring it, the
 *   seqs of all its records, and the uuid of the record before its first (what an edit rewinds to)
 */

/** @type {Promise<any> | undefined} */
let ai
/** `ai` is ESM only: loaded when first needed. */
function theAi() {
  ai ??= import('ai')
  return ai
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
 * @param {unknown} chatId
 * @returns {string}
 */
function checkChatId(what, chatId) {
  if (typeof chatId !== 'string' || chatId === '') {
    throw fail('INVALID_INPUT', `${what}: chatId: expected a non-empty string`)
  }
  return chatId
}

/**
 * @param {string} what
 * @param {unknown} messages
 * @returns {UIMessage[]}
 */
function checkMessages(what, messages) {
  if (!Array.isArray(messages)) throw fail('INVALID_INPUT', `${what}: messages: expected an array of UIMessage`)
  const seen = new Set()
  messages.forEach((m, i) => {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) {
      throw fail('INVALID_INPUT', `${what}: messages[${i}]: expected a UIMessage object`)
    }
    if (typeof m.id !== 'string' || m.id === '') {
      throw fail('INVALID_INPUT', `${what}: messages[${i}].id: expected a non-empty string`)
    }
    if (seen.has(m.id)) throw fail('INVALID_INPUT', `${what}: messages[${i}].id: '${m.id}' appears twice`)
    seen.add(m.id)
    if (m.role !== 'user' && m.role !== 'assistant' && m.role !== 'system') {
      throw fail('INVALID_INPUT', `${what}: messages[${i}].role: expected 'user', 'assistant' or 'system'`)
    }
    if (!Array.isArray(m.parts)) throw fail('INVALID_INPUT', `${what}: messages[${i}].parts: expected an array`)
    m.parts.forEach((/** @type {unknown} */ p, /** @type {number} */ j) => {
      if (p === null || typeof p !== 'object' || typeof (/** @type {any} */ (p).type) !== 'string') {
        throw fail('INVALID_INPUT', `${what}: messages[${i}].parts[${j}].type: expected a part with a string type`)
      }
    })
  })
  return /** @type {UIMessage[]} */ (messages)
}

/** @param {any} part */
const isTool = (part) => part.type === 'dynamic-tool' || part.type.startsWith('tool-')
/** @param {any} part */
const toolName = (part) => (part.type === 'dynamic-tool' ? part.toolName : part.type.slice(5))
/** @param {any} part */
const hasOutput = (part) =>
  part.state === 'output-available' || part.state === 'output-error' || part.state === 'output-denied'

/**
 * A reasoning part as Anthropic thinking: its signature (or redacted data) is what the next
 * request must carry back byte for byte, so it is the block's own field, not metadata.
 * @param {any} part
 */
function thinkingBlock(part) {
  const a = part.providerMetadata?.anthropic
  if (a && typeof a.redactedData === 'string') return { type: 'redacted_thinking', data: a.redactedData }
  /** @type {Record<string, unknown>} */
  const block = { type: 'thinking', thinking: part.text ?? '' }
  if (a && typeof a.signature === 'string') block.signature = a.signature
  return block
}

/**
 * A file part as an image or a PDF document; other files stay in the UIMessage only.
 * @param {any} part
 */
function fileBlock(part) {
  const type = typeof part.mediaType === 'string' && part.mediaType.startsWith('image/')
    ? 'image'
    : part.mediaType === 'application/pdf' ? 'document' : null
  if (type === null || typeof part.url !== 'string') return null
  const data = /^data:([^;,]+)?;base64,(.*)$/s.exec(part.url)
  if (data) return { type, source: { type: 'base64', media_type: part.mediaType, data: data[2] } }
  if (/^https?:/.test(part.url)) return { type, source: { type: 'url', url: part.url } }
  return null
}

/** @param {any} part */
function resultBlock(part) {
  if (part.state === 'output-available') {
    const out = part.output
    return { type: 'tool_result', tool_use_id: part.toolCallId, content: typeof out === 'string' ? out : JSON.stringify(out ?? null) }
  }
  const text = part.state === 'output-error'
    ? String(part.errorText ?? 'error')
    : `denied: ${part.approval?.reason ?? 'the user did not approve this tool call'}`
  return { type: 'tool_result', tool_use_id: part.toolCallId, content: text, is_error: true }
}

/**
 * The message records mirroring a UIMessage: one for a user or system message; for an assistant
 * message, per step (parts between `step-start`s) the assistant's blocks, then a user record
 * with the results of that step's tool calls, as the Anthropic API orders them.
 * @param {UIMessage} m
 * @returns {Mirror[]}
 */
function mirror(m) {
  if (m.role === 'system') {
    const text = m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('')
    return text === '' ? [] : [{ role: 'system', content: [{ type: 'text', text }] }]
  }
  if (m.role === 'user') {
    const content = []
    for (const p of m.parts) {
      if (p.type === 'text') content.push({ type: 'text', text: p.text })
      else if (p.type === 'file') {
        const b = fileBlock(p)
        if (b) content.push(b)
      }
    }
    return content.length === 0 ? [] : [{ role: 'user', content }]
  }
  /** @type {Mirror[]} */
  const out = []
  /** @type {any[]} */
  let blocks = []
  /** @type {any[]} */
  let results = []
  /** @type {any} */
  let start
  const flush = () => {
    if (blocks.length > 0) {
      /** @type {any} */
      const rec = { role: 'assistant', content: blocks }
      // @ai-sdk/anthropic reports each response's id, model and usage in a custom part: with
      // them Threadline counts the chat's tokens per response.
      if (typeof start?.id === 'string') rec.id = start.id
      if (typeof start?.model === 'string') rec.model = start.model
      if (start?.usage && typeof start.usage === 'object') rec.usage = start.usage
      out.push(rec)
    }
    if (results.length > 0 && blocks.length > 0) out.push({ role: 'user', content: results })
    blocks = []
    results = []
    start = undefined
  }
  for (const p of m.parts) {
    if (p.type === 'step-start') flush()
    else if (p.type === 'custom' && p.kind === 'anthropic.message_start') start = p.providerMetadata?.anthropic
    else if (p.type === 'reasoning') blocks.push(thinkingBlock(p))
    else if (p.type === 'text') blocks.push({ type: 'text', text: p.text })
    // A provider-executed tool (a server tool) ran at the provider: its call and result are
    // the provider's own blocks, kept in the UIMessage only.
    else if (isTool(p) && !p.providerExecuted) {
      blocks.push({ type: 'tool_use', id: p.toolCallId, name: toolName(p), input: p.input ?? {} })
      if (hasOutput(p)) results.push(resultBlock(p))
    }
  }
  flush()
  return out
}

/**
 * The current branch of the log (what a rewind left aside is not on it), in order.
 * @param {any[]} envs
 */
function currentBranch(envs) {
  if (envs.length === 0) return []
  /** @type {Map<string, any>} */
  const byUuid = new Map(envs.map((e) => [e.uuid, e]))
  const on = new Set()
  for (let e = envs[envs.length - 1]; e; e = e.parentUuid ? byUuid.get(e.parentUuid) : undefined) {
    if (on.has(e.uuid)) break
    on.add(e.uuid)
  }
  return envs.filter((e) => on.has(e.uuid))
}

/**
 * The chat as stored, folded record by record along the current branch: each UIMessage in
 * order with the records that mirror it. Kept per chat and advanced by the records appended
 * since (a save reads only those); a record that does not continue the branch (a rewind) makes
 * it fold the branch again from the start.
 * @typedef {{ lastUuid: string | null, seenSeq: number, byId: Map<string, Stored> }} ChatState
 */

/** @returns {ChatState} */
const emptyState = () => ({ lastUuid: null, seenSeq: -1, byId: new Map() })

/**
 * Folds one record of the branch into the state.
 * @param {ChatState} state
 * @param {any} e
 */
function fold(state, e) {
  const before = state.lastUuid
  state.lastUuid = e.uuid
  if (e.type === 'event' && e.name === MESSAGE_EVENT) {
    const { from, message } = e.data
    let s = state.byId.get(message.id)
    if (!s) {
      s = { id: message.id, json: undefined, message: undefined, records: [], seqs: [], before }
      state.byId.set(message.id, s)
    }
    // The parts before `from` are the previous version's; `parts` keeps its place among the keys.
    s.message = { ...message, parts: (s.message?.parts ?? []).slice(0, from).concat(message.parts) }
    s.json = JSON.stringify(s.message)
    s.seqs.push(e.seq)
    return
  }
  const id = e.metadata?.[META]?.messageId
  if (typeof id !== 'string' || !e.message) return
  let s = state.byId.get(id)
  if (!s) {
    // The records come before the event that names them: the message starts here.
    s = { id, json: undefined, message: undefined, records: [], seqs: [], before }
    state.byId.set(id, s)
  }
  s.records.push({ seq: e.seq, content: JSON.stringify(e.message.content) })
  s.seqs.push(e.seq)
}

/**
 * The stored messages in order (records without their event, left by a writer that died
 * between the two, are not a message).
 * @param {ChatState} state
 * @returns {Stored[]}
 */
const storedMessages = (state) => [...state.byId.values()].filter((s) => s.json !== undefined)

/**
 * What `load` gives: a tool call left without an outcome (the run was killed or stopped while
 * it ran, or it waited for a client that never answered) comes back as an `output-error` saying
 * so, as the provider needs every call answered before the next turn.
 * @param {UIMessage} m
 * @returns {UIMessage}
 */
function settled(m) {
  if (m.role !== 'assistant' || !m.parts.some((p) => isTool(p) && (p.state === 'input-streaming' || p.state === 'input-available'))) {
    return m
  }
  const parts = m.parts.map((p) => {
    if (!isTool(p) || (p.state !== 'input-streaming' && p.state !== 'input-available')) return p
    const { output: _o, ...rest } = p
    return { ...rest, state: 'output-error', input: p.input ?? {}, errorText: INTERRUPTED }
  })
  return { ...m, parts }
}

/**
 * The longest common prefix of two part lists, compared as stored (JSON).
 * @param {any[]} a
 * @param {any[]} b
 */
function commonParts(a, b) {
  let i = 0
  while (i < a.length && i < b.length && JSON.stringify(a[i]) === JSON.stringify(b[i])) i++
  return i
}

/**
 * A mirror record as appended, naming the UIMessage it belongs to.
 * @param {string} messageId
 * @param {Mirror} rec
 */
const mirrorRecord = (messageId, rec) => ({ message: rec, metadata: { [META]: { messageId } } })

/**
 * The event keeping a UIMessage exactly: its parts from `from` on (those before are the
 * previous version's).
 * @param {number} from
 * @param {UIMessage} message
 */
const messageEvent = (from, message) => ({ type: 'event', name: MESSAGE_EVENT, data: { from, message } })

class ThreadlineChatStore {
  /** @type {any} */
  #store
  /** The chats' states as last folded (least recently used first); what was appended since is read on use. */
  /** @type {Map<string, ChatState>} */
  #states = new Map()
  /** Sessions left open between the steps of a run, with the timer closing them if it dies. */
  /** @type {Map<string, { session: any, timer: ReturnType<typeof setTimeout> }>} */
  #held = new Map()
  /** The write in flight per chat: the next waits for it (it diffs against what that wrote). */
  /** @type {Map<string, Promise<unknown>>} */
  #tails = new Map()

  /**
   * @param {any} store a `Store` from `threadline` or `threadline/promise`
   */
  constructor(store) {
    if (store === null || typeof store !== 'object' || typeof store.openSession !== 'function' || typeof store.createSession !== 'function') {
      throw fail('INVALID_INPUT', 'ThreadlineChatStore: store: expected a Store from threadline or threadline/promise')
    }
    this.#store = store
    // An IdGenerator (a plain function) for toUIMessageStream's generateMessageId: ids made by
    // one process sort in the order they were made (milliseconds, then a counter within one).
    let lastMs = 0
    let count = 0
    this.generateMessageId = () => {
      const ms = Date.now()
      if (ms > lastMs) {
        lastMs = ms
        count = 0
      } else count++
      const tail = randomUUID().replace(/-/g, '').slice(0, 12)
      return `msg-${lastMs.toString(36).padStart(9, '0')}${count.toString(36).padStart(4, '0')}-${tail}`
    }
  }

  /**
   * Runs `fn` after the chat's previous write, so writes to one chat never interleave.
   * @template T
   * @param {string} chatId
   * @param {() => Promise<T>} fn
   * @returns {Promise<T>}
   */
  async #serial(chatId, fn) {
    const before = this.#tails.get(chatId) ?? Promise.resolve()
    const mine = before.then(fn)
    const tail = mine.catch(() => {})
    this.#tails.set(chatId, tail)
    try {
      return await mine
    } finally {
      if (this.#tails.get(chatId) === tail) this.#tails.delete(chatId)
    }
  }

  /**
   * Runs `fn` on the chat, after the chat's previous operation, with its session open and its
   * state brought up to date with the store (records other processes or handles appended);
   * `fn(null)` for a chat never saved unless `create`.
   * A write makes this process the session's owner until the session is closed, and another
   * server instance must be able to save the chat next: so the session is closed after each
   * operation, except within a run (`hold`: a step's save), where the next step's save follows
   * soon; a held session is closed by the run's end (`onEnd`), by any other operation, or after
   * HOLD_MS without one (the run died without ending).
   * @template T
   * @param {string} chatId
   * @param {boolean} create
   * @param {boolean} hold
   * @param {(chat: { session: any, state: ChatState } | null) => Promise<T>} fn
   * @returns {Promise<T>}
   */
  #use(chatId, create, hold, fn) {
    return this.#serial(chatId, async () => {
      const held = this.#held.get(chatId)
      let session = held?.session
      if (held) {
        clearTimeout(held.timer)
        this.#held.delete(chatId)
      } else {
        try {
          session = await this.#store.openSession(chatId)
        } catch (err) {
          if (/** @type {any} */ (err)?.code !== 'NOT_FOUND') throw err
          if (!create) return fn(null)
          try {
            session = await this.#store.createSession({ id: chatId })
          } catch (err2) {
            // Another process created it meanwhile (else the id itself was refused: say that).
            if (/** @type {any} */ (err2)?.code !== 'INVALID_INPUT') throw err2
            session = await this.#store.openSession(chatId).catch(() => { throw err2 })
          }
        }
      }
      let keep = false
      try {
        const state = this.#states.get(chatId)
        if (state) this.#states.delete(chatId) // re-inserted below: the most recent last
        const chat = { session, state: state ?? emptyState() }
        await this.#catchUp(chat)
        const out = await fn(chat)
        this.#keep(chatId, chat.state)
        keep = hold
        return out
      } finally {
        if (keep) {
          const timer = setTimeout(() => {
            if (this.#held.get(chatId)?.session !== session) return
            this.#held.delete(chatId)
            // Through the queue: an operation under way keeps using it meanwhile.
            this.#serial(chatId, async () => { await closeQuietly(session) }).catch(() => {})
          }, HOLD_MS)
          timer.unref?.()
          this.#held.set(chatId, { session, timer })
        } else {
          await closeQuietly(session)
        }
      }
    })
  }

  /**
   * Keeps a chat's state for its next operation; the least recently used beyond STATES are
   * dropped (read again from the store when needed).
   * @param {string} chatId
   * @param {ChatState} state
   */
  #keep(chatId, state) {
    this.#states.set(chatId, state)
    for (const id of this.#states.keys()) {
      if (this.#states.size <= STATES) break
      this.#states.delete(id)
    }
  }

  /**
   * Folds the records appended since the state was last brought up to date.
   * @param {{ session: any, state: ChatState }} chat
   */
  async #catchUp(chat) {
    await this.#advance(chat, await chat.session.envelopes({ fromSeq: chat.state.seenSeq + 1 }))
  }

  /**
   * Folds records read or appended; one that does not continue the branch folded so far (a
   * rewind) means reading the whole branch again.
   * @param {{ session: any, state: ChatState }} chat
   * @param {any[]} envs
   */
  async #advance(chat, envs) {
    for (const e of envs) {
      if ((e.parentUuid ?? null) !== chat.state.lastUuid) {
        const all = await chat.session.envelopes()
        const state = emptyState()
        for (const b of currentBranch(all)) fold(state, b)
        state.seenSeq = all.length > 0 ? all[all.length - 1].seq : -1
        chat.state = state
        return
      }
      fold(chat.state, e)
      chat.state.seenSeq = e.seq
    }
  }

  /**
   * The chat's messages, in order; [] for a chat never saved.
   * @param {string} chatId
   * @returns {Promise<UIMessage[]>}
   */
  async load(chatId) {
    const id = checkChatId('load', chatId)
    return this.#use(id, false, false, async (chat) => {
      if (!chat) return []
      // Copies: what the caller does with them must not change what a save compares against.
      return storedMessages(chat.state).map((s) => settled(JSON.parse(/** @type {string} */ (s.json))))
    })
  }

  /**
   * Stores the chat as the client holds it now, writing only what changed: new messages, new
   * parts of the last message (a step, a tool's output). A message the client changed or
   * dropped (edit, regenerate) rewinds the session to before it, then what follows is appended.
   * @param {string} chatId
   * @param {UIMessage[]} messages
   * @returns {Promise<void>}
   */
  async save(chatId, messages) {
    const id = checkChatId('save', chatId)
    return this.#save(id, messages, false)
  }

  /**
   * @param {string} chatId
   * @param {unknown} messages
   * @param {boolean} hold keep the session open for the run's next step
   */
  #save(chatId, messages, hold) {
    const list = checkMessages('save', messages)
    // As JSON now: the caller may go on changing its objects while this waits its turn.
    const texts = list.map((m) => JSON.stringify(m))
    return this.#use(chatId, true, hold, (chat) => this.#saveNow(/** @type {any} */ (chat), texts))
  }

  /**
   * @param {{ session: any, state: ChatState }} chat
   * @param {string[]} texts the messages as JSON
   */
  async #saveNow(chat, texts) {
    const stored = storedMessages(chat.state)
    // The first message that is not stored as it is now.
    let i = 0
    while (i < texts.length && i < stored.length && stored[i]?.json === texts[i]) i++
    if (i === texts.length && i === stored.length) return
    /** @type {UIMessage[]} the messages from i on (those before are stored as they are) */
    const changed = texts.slice(i).map((t) => JSON.parse(t))
    // One transaction for the whole save: a crash leaves the chat as it was or as saved.
    /** @type {any[]} */
    const batch = []
    let next = 0
    const was = stored[i]
    const now = changed[0]
    if (was?.message && now && i === stored.length - 1 && was.id === now.id) {
      // The last stored message grew (a step ended, a tool answered): append what it gained if
      // its stored records are the start of what it mirrors now.
      const want = mirror(now)
      const have = was.records
      if (have.length <= want.length && have.every((r, k) => r.content === JSON.stringify(want[k]?.content))) {
        const from = commonParts(was.message.parts, now.parts)
        for (const rec of want.slice(have.length)) batch.push(mirrorRecord(now.id, rec))
        batch.push(messageEvent(from, { ...now, parts: now.parts.slice(from) }))
        next = 1
      }
    }
    if (next === 0 && was) {
      // Messages from i on changed or went: continue from the record before the first of them.
      await chat.session.rewind(was.before)
      await this.#catchUp(chat)
    }
    // The chat's first record: what a rewind to before the first message goes back to.
    if (chat.state.seenSeq < 0) batch.unshift({ type: 'event', name: CHAT_EVENT, data: { version: 1 } })
    for (const m of changed.slice(next)) {
      for (const rec of mirror(m)) batch.push(mirrorRecord(m.id, rec))
      batch.push(messageEvent(0, m))
    }
    if (batch.length > 0) await this.#advance(chat, await chat.session.appendMany(batch))
  }

  /**
   * A callback for the UI message stream's `onStepEnd` (toUIMessageStream /
   * toUIMessageStreamResponse options of streamText's result): each step is stored as it ends
   * (the stream waits for the save), so a run killed mid-way keeps its finished steps.
   * @param {string} chatId
   * @returns {(event: { messages: UIMessage[] }) => Promise<void>}
   */
  onStepEnd(chatId) {
    const id = checkChatId('onStepEnd', chatId)
    return (event) => {
      if (event === null || typeof event !== 'object' || !Array.isArray(event.messages)) {
        return Promise.reject(fail('INVALID_INPUT', 'onStepEnd: event.messages: expected the UI message stream\'s onStepEnd event ({ messages, responseMessage })'))
      }
      return this.#save(id, event.messages, true)
    }
  }

  /**
   * A callback for the UI message stream's `onEnd` (or `onFinish`): stores the whole chat.
   * @param {string} chatId
   * @returns {(event: { messages: UIMessage[] }) => Promise<void>}
   */
  onEnd(chatId) {
    const id = checkChatId('onEnd', chatId)
    return (event) => {
      if (event === null || typeof event !== 'object' || !Array.isArray(event.messages)) {
        return Promise.reject(fail('INVALID_INPUT', 'onEnd: event.messages: expected the UI message stream\'s onEnd event ({ messages, responseMessage, ... })'))
      }
      return this.save(id, event.messages)
    }
  }

  /**
   * One run's hooks that make each step durable before the next step's model request is sent:
   * `prepareStep` for streamText (which awaits it before each step's model call) and `onStepEnd`
   * / `onEnd` for its UI message stream. `onStepEnd` alone saves a step when the UI message
   * stream reaches the step's end, while streamText may already be calling the model for the
   * next one; this `prepareStep` waits, before step N+1, until step N's save has finished (and
   * fails the run if it failed). `onEnd` saves the chat and releases a `prepareStep` still
   * waiting (a UI stream cancelled by its consumer passes no more step ends).
   * @param {string} chatId
   * @param {{ prepareStep?: ((options: any) => any) | undefined }} [options] the run's own
   *   `prepareStep`, called once the previous step is saved; what it returns is returned
   * @returns {{ prepareStep: (options: { stepNumber: number }) => Promise<any>, onStepEnd: (event: { messages: UIMessage[] }) => Promise<void>, onEnd: (event: { messages: UIMessage[] }) => Promise<void> }}
   */
  stepHooks(chatId, options = {}) {
    const id = checkChatId('stepHooks', chatId)
    if (options === null || typeof options !== 'object') throw fail('INVALID_INPUT', 'stepHooks: options: expected an object')
    for (const name of Object.keys(options)) {
      if (name !== 'prepareStep') throw fail('INVALID_INPUT', `stepHooks: options.${name}: unknown option`)
    }
    const inner = options.prepareStep
    if (inner !== undefined && typeof inner !== 'function') {
      throw fail('INVALID_INPUT', 'stepHooks: options.prepareStep: expected a function')
    }
    const saveStep = this.onStepEnd(id)
    const saveEnd = this.onEnd(id)
    /** Steps whose save has finished. */
    let saved = 0
    let ended = false
    /** @type {unknown} */
    let failure
    /** @type {Array<() => void>} */
    let waiting = []
    const wake = () => {
      const now = waiting
      waiting = []
      for (const w of now) w()
    }
    return {
      prepareStep: async (stepOptions) => {
        const n = stepOptions?.stepNumber
        if (!Number.isInteger(n) || n < 0) {
          throw fail('INVALID_INPUT', 'stepHooks: prepareStep: stepNumber: expected the step options streamText passes ({ stepNumber, steps, ... })')
        }
        // Step n starts after steps 0..n-1 ended: wait for their saves.
        while (saved < n && failure === undefined && !ended) {
          await new Promise((/** @type {(v?: unknown) => void} */ resolve) => waiting.push(resolve))
        }
        // Sending the next request without the step saved would break what these hooks promise.
        if (failure !== undefined) throw failure
        return inner === undefined ? undefined : inner(stepOptions)
      },
      onStepEnd: async (event) => {
        try {
          await saveStep(event)
          saved++
        } catch (err) {
          failure ??= err
          throw err
        } finally {
          wake()
        }
      },
      onEnd: async (event) => {
        try {
          await saveEnd(event)
        } finally {
          ended = true
          wake()
        }
      },
    }
  }

  /**
   * The chat as the AI SDK's ModelMessage[], cut to `maxTokens` as `buildContext` cuts it: whole
   * turns, oldest first, the latest prompt always kept.
   * @param {string} chatId
   * @param {{ maxTokens?: number | undefined }} [options]
   */
  async modelMessages(chatId, options = {}) {
    const id = checkChatId('modelMessages', chatId)
    if (options === null || typeof options !== 'object') throw fail('INVALID_INPUT', 'modelMessages: options: expected an object')
    for (const name of Object.keys(options)) {
      if (name !== 'maxTokens') throw fail('INVALID_INPUT', `modelMessages: options.${name}: unknown option`)
    }
    const max = options.maxTokens
    if (max !== undefined && (!Number.isInteger(max) || max <= 0)) {
      throw fail('INVALID_INPUT', `modelMessages: options.maxTokens: expected a positive integer, got ${String(max)}`)
    }
    const { convertToModelMessages } = await theAi()
    const kept = await this.#use(id, false, false, async (chat) => {
      if (!chat) return []
      const stored = storedMessages(chat.state)
      /** @param {Stored} s */
      const copy = (s) => settled(JSON.parse(/** @type {string} */ (s.json)))
      if (max === undefined) return stored.map(copy)
      const ctx = await chat.session.buildContext({ target: 'anthropic', maxTokens: max, reasoning: 'keep' })
      const { startSeq, dropped } = ctx.stats
      /** @param {number} seq */
      const gone = (seq) => seq < startSeq || dropped.some((/** @type {any} */ d) => seq >= d.fromSeq && seq <= d.toSeq)
      // buildContext drops whole turns from the oldest: keep from the first message it kept.
      let first = stored.findIndex((s) => !(s.records.length > 0 ? s.records : s.seqs.map((seq) => ({ seq }))).some((r) => gone(r.seq)))
      if (first < 0) first = stored.length
      return stored.slice(first).map(copy)
    })
    return convertToModelMessages(kept)
  }
}

module.exports = { ThreadlineChatStore, INTERRUPTED }
