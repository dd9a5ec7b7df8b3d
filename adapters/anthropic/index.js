'use strict'
// threadline/anthropic: records what `@anthropic-ai/sdk` sends and receives into a Threadline
// session as it happens. The SDK's tool runner keeps its conversation in a private array and a
// `MessageStream` keeps its message in memory: a process killed mid-run loses both. `record()`
// taps them without changing what they do: it gives back the same runner (its iteration
// recorded) or the same stream (its events streamed through `session.beginResponse()`).
// Only Threadline's public Session API is used, so a session of `threadline` or
// `threadline/promise`, on either engine, works the same.

// The SDK is an optional peer: without it there is nothing to record, so say so at once.
try {
  require.resolve('@anthropic-ai/sdk')
} catch {
  const err = /** @type {Error & { code: string }} */ (new Error(
    'threadline/anthropic needs the Anthropic SDK: npm install @anthropic-ai/sdk',
  ))
  err.code = 'MODULE_NOT_FOUND'
  throw err
}

const { isDeepStrictEqual } = require('node:util')

/**
 * @typedef {{ role: string, content: unknown }} MessageLike
 * @typedef {{ id?: string, role: string, content: any[], stop_reason?: string | null }} Reply
 */

/** Marks what has been recorded already, so that recording it twice is refused. */
const RECORDED = Symbol.for('threadline.anthropic.recorded')

/**
 * @param {string} code
 * @param {string} message
 */
function fail(code, message) {
  const err = /** @type {Error & { code: string }} */ (new Error(message))
  err.code = code
  return err
}

/** @param {unknown} session */
function checkSession(session) {
  const s = /** @type {Record<string, unknown>} */ (session)
  if (
    s === null ||
    typeof s !== 'object' ||
    typeof s.append !== 'function' ||
    typeof s.beginResponse !== 'function' ||
    typeof s.buildContext !== 'function' ||
    typeof s.toolCallStarted !== 'function'
  ) {
    throw fail('INVALID_INPUT', 'record: session: expected a Session from threadline or threadline/promise')
  }
}

/** @param {any} x */
const isRunner = (x) =>
  typeof x[Symbol.asyncIterator] === 'function' &&
  typeof x.setMessagesParams === 'function' &&
  typeof x.generateToolResponse === 'function'

/** @param {any} x */
const isStream = (x) =>
  typeof x.on === 'function' && typeof x.finalMessage === 'function' && Array.isArray(x.receivedMessages)

/**
 * A message as the runner's history holds it: role and content, the rest (id, usage) left out.
 * @param {MessageLike} m
 */
const historyShape = (m) => ({ role: m.role, content: m.content })

/**
 * The messages of `messages` the session does not hold yet: those after the last one equal to
 * the session's last message in context (a resumed run starts from `session.buildContext()`),
 * or all of them for an empty session.
 * @param {any} session
 * @param {MessageLike[]} messages
 * @param {string} path
 */
async function newMessages(session, messages, path) {
  const context = (await session.buildContext({ target: 'anthropic' })).messages
  if (context.length === 0) return messages
  const last = /** @type {MessageLike} */ (context[context.length - 1])
  for (let i = messages.length - 1; i >= 0; i--) {
    if (isDeepStrictEqual(historyShape(/** @type {MessageLike} */ (messages[i])), historyShape(last))) return messages.slice(i + 1)
  }
  // Appending would put the run's history after an unrelated one: the next request would not
  // be what the session says was sent.
  throw fail(
    'INVALID_INPUT',
    `record: ${path}: does not continue the session (its messages hold none equal to the session's last ` +
      'message in context): start the run from session.buildContext({ target: "anthropic" }).messages',
  )
}

/** The field of a delta that later deltas of the same block and type extend. */
/** @type {Record<string, string>} */
const GROWING = { text_delta: 'text', thinking_delta: 'thinking', input_json_delta: 'partial_json' }

/** The writer's FLUSH_INTERVAL (crates/threadline/src/recovery/response.rs). */
const FLUSH_INTERVAL_MS = 200

/** Events at which what is held is pushed at once: a block's end (the writer persists there). */
const BOUNDARY = new Set(['content_block_stop'])

/**
 * The message's end: held until the stream ends, and pushed only if it failed. After the last
 * block's end the writer persists nothing more before `finish`, which stores the final message
 * and drops what the writer buffered: pushing these would change nothing stored.
 */
const MESSAGE_END = new Set(['message_delta', 'message_stop'])

/**
 * `events` with each run of text / thinking / tool-input deltas of one block as one delta: the
 * same message once assembled, in fewer pushes (each push of a `threadline/promise` writer is a
 * trip to the thread pool, and on a fast connection events come faster than that).
 * @param {any[]} events
 */
function coalesce(events) {
  /** @type {any[]} */
  const out = []
  for (const ev of events) {
    const prev = out[out.length - 1]
    const field = ev.type === 'content_block_delta' ? GROWING[ev.delta?.type] : undefined
    if (
      field !== undefined &&
      prev?.type === 'content_block_delta' &&
      prev.index === ev.index &&
      prev.delta?.type === ev.delta.type &&
      typeof prev.delta[field] === 'string' &&
      typeof ev.delta[field] === 'string'
    ) {
      out[out.length - 1] = { ...prev, delta: { ...prev.delta, [field]: prev.delta[field] + ev.delta[field] } }
    } else {
      out.push(ev)
    }
  }
  return out
}

/**
 * Streams one `MessageStream`'s events into a response writer as they arrive; the returned
 * promise settles once its final message (or its failure) is stored, with the stored envelope
 * (none for a request that failed before any event).
 * @param {any} session
 * @param {any} stream
 * @returns {Promise<{ uuid: string } | undefined>}
 */
function tapStream(session, stream) {
  /** @type {any} */
  let writer
  /** @type {{ uuid: string } | undefined} */
  let stored
  /** @type {unknown} */
  let storeError
  /** @type {Promise<unknown>} */
  let tail = Promise.resolve()
  /** @param {() => unknown} step */
  const then = (step) => {
    tail = tail.then(() => (storeError === undefined ? step() : undefined)).catch((err) => {
      storeError ??= err
    })
  }
  // Pushes are few and coalesced: each one is a native call (a trip to the thread pool for a
  // `threadline/promise` writer) and events arrive one per macrotask. The writer persists its
  // buffer at a block boundary, or at a push that comes FLUSH_INTERVAL (200 ms) or more after the
  // first chunk it buffered (crates/threadline/src/recovery/response.rs). So the first event
  // after the writer's buffer is (believed) empty is pushed at once, which starts the writer's
  // clock; the next ones are held here and pushed coalesced at a block boundary, or once 200 ms
  // have passed since that first push: a push that makes the writer persist them all. What is
  // durable is then never less than with one push per event.
  /** @type {any[]} */
  const held = []
  /** message_delta / message_stop (MESSAGE_END), pushed only for a stream that failed. */
  /** @type {any[]} */
  const ending = []
  /** @type {unknown} */
  let final
  /** @type {unknown} */
  let streamError
  /**
   * Where the writer's buffer stands: 'empty' (believed empty: the next event is pushed at
   * once), 'pushing' (that first push is queued) or the `performance.now()` taken after that
   * push returned (never before the writer's own clock started).
   * @type {'empty' | 'pushing' | number}
   */
  let buffered = 'empty'
  /** Counts the times the writer's buffer was taken as empty: a measure of an older push is dropped. */
  let generation = 0
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer
  const clearTimer = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
  }
  /** Pushes what is held, coalesced; the writer's buffer is then taken as empty. */
  const pushHeld = () => {
    clearTimer()
    buffered = 'empty'
    generation++
    if (held.length === 0) return
    const chunks = coalesce(held.splice(0))
    then(async () => {
      for (const chunk of chunks) await writer.push(chunk)
    })
  }
  /** @param {number} since */
  const arm = (since) => {
    clearTimer()
    timer = setTimeout(() => {
      timer = undefined
      if (buffered !== since) return
      const left = FLUSH_INTERVAL_MS - (performance.now() - since)
      // Node's timers may fire a little before the writer's own clock says 200 ms.
      if (left > 0) arm(since)
      else pushHeld()
    }, Math.max(1, Math.ceil(FLUSH_INTERVAL_MS - (performance.now() - since))))
    timer.unref?.()
  }
  stream.on('streamEvent', (/** @type {any} */ event) => {
    // The writer is begun at the first event: the request id is known by then, and a request
    // that fails before any event leaves nothing to store.
    if (writer === undefined) {
      writer = null
      const requestId = stream.request_id ?? undefined
      const options = requestId === undefined ? { provider: 'anthropic' } : { requestId, provider: 'anthropic' }
      then(async () => {
        writer = await session.beginResponse(options)
      })
    }
    // The SDK keeps message_start's message as its own message and changes it as later events
    // arrive (content, stop reason, usage), before a held event is pushed: that one is copied.
    // It builds its blocks out of copies of the other events' objects and never changes those.
    const ev = event.type === 'message_start' ? structuredClone(event) : event
    if (MESSAGE_END.has(ev.type)) {
      ending.push(ev)
      return
    }
    if (buffered === 'empty' && !BOUNDARY.has(ev.type)) {
      buffered = 'pushing'
      const mine = ++generation
      then(async () => {
        await writer.push(ev)
        // Unless a boundary pushed what was held meanwhile (the writer's buffer is empty again).
        if (generation !== mine) return
        const since = performance.now()
        buffered = since
        arm(since)
      })
      return
    }
    held.push(ev)
    // A block that opens while the writer holds chunks makes it persist them (a block boundary
    // too): pushed at once, so that the writer's buffer is empty again afterwards, as believed.
    const opens = ev.type === 'content_block_start'
    if (BOUNDARY.has(ev.type) || opens || (typeof buffered === 'number' && performance.now() - buffered >= FLUSH_INTERVAL_MS)) {
      pushHeld()
    }
  })
  stream.on('finalMessage', (/** @type {unknown} */ message) => {
    final = message
  })
  // A listener of its own for each, so that the stream's own rejections stay as they are.
  stream.on('error', (/** @type {unknown} */ err) => {
    streamError = err
  })
  stream.on('abort', (/** @type {unknown} */ err) => {
    streamError = err
  })
  return new Promise((resolve, reject) => {
    stream.on('end', () => {
      // No timer outlives the stream. A failed stream's error record is built from every event.
      if (final === undefined) held.push(...ending)
      pushHeld()
      if (writer !== undefined) {
        // The SDK's own final message is stored as it is (the writer assembles the same one);
        // a failed stream keeps what a model may see again (docs/recovery.md).
        if (final !== undefined) {
          then(async () => {
            stored = await writer.finish(final)
          })
        } else {
          const message = streamError instanceof Error ? streamError.message : 'the stream ended before its message was complete'
          then(async () => {
            stored = await writer.fail({ message })
          })
        }
      }
      tail.then(() => (storeError === undefined ? resolve(stored) : reject(storeError)))
    })
  })
}

/**
 * Records a plain stream: the request's new messages first, then the reply as it streams.
 * `finalMessage()`, `finalText()` and `done()` of the stream resolve once it is stored.
 * @param {any} session
 * @param {any} stream
 */
function recordStream(session, stream) {
  const sent = Array.isArray(stream.messages) ? [...stream.messages] : []
  // Started at once: the prompt is stored before the first event of the reply is pushed (the
  // session runs its calls in order).
  const prompt = newMessages(session, sent, 'stream.messages').then(async (messages) => {
    for (const m of messages) await session.append(m)
  })
  prompt.catch(() => {})
  const reply = tapStream(session, stream)
  const stored = prompt.then(() => reply)
  // Reported when the user awaits one of the stream's results.
  stored.catch(() => {})
  for (const name of ['finalMessage', 'finalText', 'done']) {
    const original = stream[name].bind(stream)
    Object.defineProperty(stream, name, {
      configurable: true,
      writable: true,
      value: async () => {
        let value
        try {
          value = await original()
        } catch (err) {
          // The stream's own error, once its error record is stored (or storing it failed).
          await stored.catch(() => {})
          throw err
        }
        await stored
        return value
      },
    })
  }
  return stream
}

/**
 * Records a tool runner's run: the first messages of its params before the first request, each
 * reply when it arrives (streamed ones through `beginResponse`), each tool-results message right
 * after the tools ran and before the next request, and what the caller changed in between.
 * @param {any} session
 * @param {any} runner
 */
function recordRunner(session, runner) {
  const iterate = runner[Symbol.asyncIterator].bind(runner)
  /**
   * The runner's history as the session holds it, with the uuid of each message recorded here
   * (messages the session held before the run have none).
   * @type {Array<{ message: MessageLike, uuid?: string | undefined }>}
   */
  let mirror = []
  /** @type {() => void} */
  let ended = () => {}
  const finished = new Promise((/** @type {(v?: unknown) => void} */ resolve) => {
    ended = resolve
  })

  /** @param {MessageLike} m */
  async function append(m) {
    const envelope = await session.append(m)
    mirror.push({ message: historyShape(m), uuid: envelope.uuid })
  }

  /** Brings the session to the runner's history as it is sent. */
  async function catchUp() {
    const history = runner.params.messages
    const n = mirror.length
    const same = n <= history.length && (n === 0 || isDeepStrictEqual(historyShape(history[n - 1]), mirror[n - 1]?.message))
    if (!same) {
      // The caller rewrote the history (e.g. setMessagesParams without the reply): the session
      // continues from the last message both still share, as the next request does.
      let p = 0
      while (p < n && p < history.length && isDeepStrictEqual(historyShape(history[p]), mirror[p]?.message)) p++
      const base = p > 0 ? mirror[p - 1]?.uuid : undefined
      if (base === undefined) {
        throw fail('INVALID_INPUT', 'record: runner.params.messages: the history was rewritten before the messages recorded by this run')
      }
      await session.rewind(base)
      mirror = mirror.slice(0, p)
    }
    for (const m of history.slice(mirror.length)) await append(m)
  }

  /** @param {Reply} reply */
  async function runTools(reply) {
    // The runner runs tools only for a reply that asks for them; for a history the caller
    // changed meanwhile it answers the caller's messages instead (recorded at the next request).
    if (reply.stop_reason !== 'tool_use') return
    const history = runner.params.messages
    if (history.length !== mirror.length - 1) return
    const calls = reply.content.filter((b) => b.type === 'tool_use')
    // Started before they run: a kill while a tool runs is then recovered as "outcome unknown",
    // never as "never ran".
    for (const call of calls) await session.toolCallStarted(call.id)
    // Cached by the runner: the loop sends these same results without running the tools again.
    const results = await runner.generateToolResponse()
    if (results) await append(results)
  }

  async function* recorded() {
    const start = runner.params.messages
    const first = await newMessages(session, start, 'runner.params.messages')
    mirror = start.slice(0, start.length - first.length).map((/** @type {MessageLike} */ m) => ({ message: historyShape(m) }))
    for (const m of first) await append(m)
    const inner = iterate()
    let done = false
    try {
      while (true) {
        const step = await inner.next()
        if (step.done) {
          done = true
          break
        }
        // The history as sent: what the caller or the runner added since the last reply.
        await catchUp()
        const item = step.value
        if (isStream(item)) {
          const stored = tapStream(session, item)
          stored.catch(() => {})
          yield item
          let reply
          try {
            reply = await item.finalMessage()
          } catch (err) {
            await stored.catch(() => {})
            throw err
          }
          const envelope = await stored
          mirror.push({ message: historyShape(reply), uuid: envelope?.uuid })
          await runTools(reply)
        } else {
          await append(item)
          yield item
          await runTools(item)
        }
      }
      await catchUp()
    } finally {
      // The caller left the loop: the runner stops too (as `for await` over it would do).
      if (!done) await inner.return?.()
      ended()
    }
  }

  const originalDone = runner.done.bind(runner)
  Object.defineProperty(runner, Symbol.asyncIterator, { configurable: true, writable: true, value: recorded })
  Object.defineProperty(runner, 'done', {
    configurable: true,
    writable: true,
    value: async () => {
      const message = await originalDone()
      await finished
      return message
    },
  })
  return runner
}

/**
 * Records a tool runner (`client.beta.messages.toolRunner(params)`) or a message stream
 * (`client.messages.stream(params)`, `client.beta.messages.stream(params)`) into `session` as it
 * runs, and gives back the same object.
 * @template T
 * @param {any} session a `Session` of `threadline` or `threadline/promise`
 * @param {T} runnerOrStream
 * @returns {T}
 */
function record(session, runnerOrStream) {
  checkSession(session)
  const x = /** @type {any} */ (runnerOrStream)
  if (x === null || typeof x !== 'object') {
    throw fail('INVALID_INPUT', 'record: runnerOrStream: expected a BetaToolRunner or a MessageStream')
  }
  if (x[RECORDED]) throw fail('INVALID_INPUT', 'record: runnerOrStream: already recorded')
  let out
  if (isRunner(x)) out = recordRunner(session, x)
  else if (isStream(x)) out = recordStream(session, x)
  else throw fail('INVALID_INPUT', 'record: runnerOrStream: expected a BetaToolRunner or a MessageStream')
  Object.defineProperty(x, RECORDED, { value: true })
  return out
}

module.exports = { record }
