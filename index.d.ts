// Type declarations for Threadline: a lossless, crash-safe session store for LLM agents.
//
// Message payloads use the Anthropic Messages API wire shape (snake_case: `tool_use_id`,
// `is_error`, `media_type`, `stop_reason`, `input_tokens`); the envelope around each message uses
// camelCase (`uuid`, `parentUuid`, `requestId`, `toolUseResult`), like Claude Code's session files.
//
// Two families of types:
// - What Threadline returns (`Message`, `ContentBlock`, `Envelope`, ...): precise, so that
//   `switch (block.type)` narrows to the exact block (see `UnmodelledBlockType` for how a block
//   of a type Threadline does not model stays out of the way).
// - What Threadline accepts (`MessageParamLike`, `ContentBlockParam`, `EnvelopeParam`, ...): open
//   enough that an `@anthropic-ai/sdk` response or `MessageParam` (interfaces with extra fields and
//   nullable ones) is accepted as it is, while a malformed block of a type Threadline models (a
//   `tool_result` without `tool_use_id`, a `tool_use` without `input`, ...) is a compile error.
//
// Every failure is a JS `Error` with a stable `code` (see `ErrorCode`) and a message that names
// the offending path, e.g. `append: content[2].tool_use_id: expected a string`. An operation that
// fails writes nothing.

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/**
 * The `code` of every error Threadline throws or rejects with.
 *
 * - `INVALID_INPUT`: a value of the wrong shape; the message names the path
 *   (`append: content[2].tool_use_id: expected a string, got a number`).
 * - `NOT_FOUND`: no such session or record.
 * - `SESSION_NOT_EMPTY`: `restoreMessages` on a store-backed session that already has messages.
 * - `SESSION_LOCKED`: another live process owns this session (it wrote to it first and has not
 *   closed it); readers are never blocked.
 * - `CLOSED`: use of a closed store or session.
 * - `STORE_CORRUPT`: the file is not a Threadline store, or is damaged: a record whose checksum
 *   does not match (the message names the session id and the record's `seq`), a missing record,
 *   a damaged blob or session row, or a page SQLite itself finds damaged. Reads never return
 *   damaged data; `verify()` lists every damaged record.
 * - `STORE_VERSION`: the store was written by a newer schema.
 * - `STORE_BUSY`: the database stayed locked longer than `busyTimeoutMs`.
 * - `STORE_IO`: the disk refused (full, read-only, permission), or a write to a store opened
 *   with `readonly: true`.
 * - `SNAPSHOT_INVALID`: `importSnapshot` of a truncated, altered or foreign document.
 * - `PROMPT_MISMATCH`: `openSession(id, { promptKey })` with a key that differs from the one the
 *   session was created with.
 */
export type ErrorCode =
  | 'INVALID_INPUT'
  | 'NOT_FOUND'
  | 'SESSION_NOT_EMPTY'
  | 'SESSION_LOCKED'
  | 'CLOSED'
  | 'STORE_CORRUPT'
  | 'STORE_VERSION'
  | 'STORE_BUSY'
  | 'STORE_IO'
  | 'SNAPSHOT_INVALID'
  | 'PROMPT_MISMATCH'

/**
 * What Threadline throws (and what its promises reject with): a plain `Error` carrying a stable
 * `code`. Narrow a caught value with `err instanceof Error && 'code' in err`, or compare
 * `(err as ThreadlineError).code` against `ErrorCode` values.
 *
 * @example
 * try { store.openSession(id) } catch (err) {
 *   if ((err as ThreadlineError).code === 'NOT_FOUND') { ... } else throw err
 * }
 */
export interface ThreadlineError extends Error {
  /** Stable machine-readable code; the message is for people and may change. */
  code: ErrorCode
}

/** Every `ErrorCode`, in the order of the table in the documentation. */
export declare const ERROR_CODES: readonly ErrorCode[]

// ---------------------------------------------------------------------------------------------
// Content blocks (what Threadline returns)
// ---------------------------------------------------------------------------------------------

/** A prompt-cache breakpoint as the Messages API writes it (`{ type: 'ephemeral', ttl? }`). */
export interface CacheControl {
  /** `'ephemeral'` today. */
  type: string
  /** Cache lifetime, e.g. `'5m'` or `'1h'`. */
  ttl?: string
}

/** Base64-encoded bytes, e.g. an image or a PDF. */
export interface Base64Source {
  /** Discriminant. */
  type: 'base64'
  /** MIME type, e.g. `'image/png'` or `'application/pdf'`. */
  media_type: string
  /** The bytes, base64-encoded. */
  data: string
}

/** A file the provider fetches from a URL. */
export interface UrlSource {
  /** Discriminant. */
  type: 'url'
  /** Where the provider fetches the file. */
  url: string
}

/** A file uploaded with the provider's Files API. */
export interface FileSource {
  /** Discriminant. */
  type: 'file'
  /** The id the Files API gave the upload. */
  file_id: string
}

/** Plain text given inline as a document. */
export interface PlainTextSource {
  /** Discriminant. */
  type: 'text'
  /** `'text/plain'`. */
  media_type: string
  /** The text itself (not encoded). */
  data: string
}

/** A document made of content blocks (custom content document). */
export interface ContentSource {
  /** Discriminant. */
  type: 'content'
  /** A string, or text and image blocks. */
  content: string | ContentBlock[]
}

/** Text written by the model or the user. */
export interface TextBlock {
  /** Discriminant. */
  type: 'text'
  /** The text. */
  text: string
  /** Citations supporting the text (assistant text that cites documents); `null` when none. */
  citations?: unknown[] | null
  /** Prompt-cache breakpoint on this block, if the caller set one. */
  cache_control?: CacheControl | null
}

/**
 * The model's visible reasoning (extended thinking), with its signature, as the provider returns
 * it (the SDK's `ThinkingBlock`). Assistant messages only. Pass it back unchanged, with its
 * `signature`, when continuing a conversation that uses tools.
 *
 * A `thinking` block read from a session is this or an `UnsignedThinkingBlock`: `append` accepts
 * thinking without a signature and stores it as given (the provider would reject it, so
 * `buildContext` leaves it out and `validateMessages` reports `unsigned_thinking`). Narrow with
 * `block.signature !== undefined` to get this type.
 *
 * @example
 * if (b.type === 'thinking' && b.signature !== undefined) resend.push(b)   // b: ThinkingBlock
 */
export interface ThinkingBlock {
  /** Discriminant. */
  type: 'thinking'
  /** The reasoning text. */
  thinking: string
  /**
   * Opaque value the provider uses to verify the block; kept byte-for-byte. (Reasoning streamed
   * as simple chunks with no signature comes out of `ResponseWriter.finish()` with `''`.)
   */
  signature: string
}

/**
 * A `thinking` block stored without a signature (given that way to `append`, e.g. reasoning
 * from elsewhere): kept and returned as given, never sent to a provider (see `ThinkingBlock`).
 */
export interface UnsignedThinkingBlock {
  /** Discriminant. */
  type: 'thinking'
  /** The reasoning text. */
  thinking: string
  /** Absent. */
  signature?: undefined
}

/** Reasoning the provider encrypted; opaque, kept byte-for-byte. Assistant messages only. */
export interface RedactedThinkingBlock {
  /** Discriminant. */
  type: 'redacted_thinking'
  /** The encrypted reasoning. */
  data: string
}

/** A call of one of the caller's tools, made by the model. Assistant messages only. */
export interface ToolUseBlock {
  /** Discriminant. */
  type: 'tool_use'
  /** Non-empty id; the matching `tool_result` block carries it as `tool_use_id`. */
  id: string
  /** The tool's name. */
  name: string
  /** The arguments: a JSON object whose shape is the tool's input schema. */
  input: unknown
  /** Who made the call (direct, or code execution), as the Messages API reports it. */
  caller?: unknown
  /** Prompt-cache breakpoint on this block, if the caller set one. */
  cache_control?: CacheControl | null
}

/** The result of a tool call, sent back by the user side. User messages only. */
export interface ToolResultBlock {
  /** Discriminant. */
  type: 'tool_result'
  /** The `id` of the `tool_use` block this answers. */
  tool_use_id: string
  /** The tool's output: a string, or blocks (text, image, document, ...). */
  content?: string | ContentBlock[]
  /** `true` when the tool failed; the content then says why. */
  is_error?: boolean
  /** Prompt-cache breakpoint on this block, if the caller set one. */
  cache_control?: CacheControl | null
}

/** An image given to the model. */
export interface ImageBlock {
  /** Discriminant. */
  type: 'image'
  /** The image bytes (base64), a URL, or an uploaded file. */
  source: Base64Source | UrlSource | FileSource
  /** Prompt-cache breakpoint on this block, if the caller set one. */
  cache_control?: CacheControl | null
}

/** A document (PDF, plain text, or content blocks) given to the model. */
export interface DocumentBlock {
  /** Discriminant. */
  type: 'document'
  /** A PDF (base64 or URL), plain text, content blocks, or an uploaded file. */
  source: Base64Source | UrlSource | PlainTextSource | ContentSource | FileSource
  /** A title the model may use when citing the document. */
  title?: string | null
  /** Context about the document that the model sees but does not cite. */
  context?: string | null
  /** Citation settings, e.g. `{ enabled: true }`. */
  citations?: {
    /** Whether the model may cite this document. */
    enabled?: boolean
  } | null
  /** Prompt-cache breakpoint on this block, if the caller set one. */
  cache_control?: CacheControl | null
}

/**
 * Block types of the Messages API that Threadline stores as given but does not model (server
 * tools, MCP, code execution, search results, ...). Listed so that `case 'server_tool_use':`
 * compiles and narrows to `UnknownContentBlock`.
 */
export type OtherContentBlockType =
  | 'server_tool_use'
  | 'web_search_tool_result'
  | 'web_fetch_tool_result'
  | 'code_execution_tool_result'
  | 'bash_code_execution_tool_result'
  | 'text_editor_code_execution_tool_result'
  | 'tool_search_tool_result'
  | 'mcp_tool_use'
  | 'mcp_tool_result'
  | 'container_upload'
  | 'search_result'
  | 'tool_reference'
  | 'openai_reasoning'   // a Responses reasoning item (from fromOpenAIResponses)
  | 'openai_item'        // another Responses item with no neutral equivalent: { type, item }
  | 'openai_part'        // an OpenAI content part with no neutral equivalent: { type, part }

/**
 * Stands for the name of any other block type (one of your own, or one newer than these
 * declarations). At run time it is an ordinary string; it is typed as a string that no
 * ordinary literal matches, so that comparing `type` with a modelled type (`'tool_use'`)
 * narrows a `ContentBlock` to exactly that block. To compare it with a name of your own, widen
 * it first: `const t: string = block.type; if (t === 'my_block') ...`.
 */
export type UnmodelledBlockType = `\u0000${string}`

/**
 * A block of a type Threadline does not model (`server_tool_use`, `web_search_tool_result`,
 * `container_upload`, a block of your own, ...): stored and returned exactly as given, every
 * field included. Its fields are `unknown`: check them before use.
 *
 * @example
 * if (b.type === 'server_tool_use') console.log(b.name, b.input)   // both unknown
 */
export interface UnknownContentBlock {
  /** The block's type, as given (a string at run time; see `UnmodelledBlockType`). */
  type: OtherContentBlockType | UnmodelledBlockType
  /** Every other field of the block, as given. */
  [field: string]: unknown
}

/** The block types Threadline models; each has a precise type. */
export type KnownContentBlock =
  | TextBlock
  | ThinkingBlock
  | UnsignedThinkingBlock
  | RedactedThinkingBlock
  | ToolUseBlock
  | ToolResultBlock
  | ImageBlock
  | DocumentBlock

/** The `type` of a block Threadline models. */
export type KnownContentBlockType = KnownContentBlock['type']

/**
 * One block of a message's `content`, as Threadline returns it: a discriminated union on
 * `type`. Checking `type` narrows the block itself (`if (b.type === 'tool_use') uses.push(b)`
 * with `uses: ToolUseBlock[]`). Blocks of other types are returned as given
 * (`UnknownContentBlock`), so a `switch` over the modelled types is never exhaustive: keep a
 * `default`.
 *
 * @example
 * for (const b of message.content) {
 *   switch (b.type) {
 *     case 'text': console.log(b.text); break
 *     case 'thinking': console.log(b.thinking, b.signature); break
 *     case 'tool_use': run(b.id, b.name, b.input); break
 *     case 'tool_result': console.log(b.tool_use_id, b.is_error); break
 *   }
 * }
 */
export type ContentBlock = KnownContentBlock | UnknownContentBlock

// ---------------------------------------------------------------------------------------------
// Messages (what Threadline returns)
// ---------------------------------------------------------------------------------------------

/**
 * Token usage of one model response, as the Messages API reports it. Other fields
 * (`service_tier`, `server_tool_use`, `cache_creation`, ...) are kept as given.
 */
export interface Usage {
  /** Input tokens not read from or written to the prompt cache. */
  input_tokens: number
  /** Output tokens, thinking included. */
  output_tokens: number
  /** Input tokens read from the prompt cache (`null` when the provider sent `null`). */
  cache_read_input_tokens?: number | null
  /** Input tokens written to the prompt cache (`null` when the provider sent `null`). */
  cache_creation_input_tokens?: number | null
  /** Any other field, kept as given. */
  [field: string]: unknown
}

/**
 * A message as Threadline returns it: the Anthropic wire shape, with every field given kept in
 * its original key order. The only normalisation: a string `content` comes back as
 * `[{ type: 'text', text }]`.
 *
 * The messages can be sent back to the provider as they are; for the `@anthropic-ai/sdk` types,
 * whose block unions are closed where Threadline's are open, cast:
 * `client.messages.create({ ..., messages: session.messages as MessageParam[] })`.
 */
export interface Message {
  /**
   * `'user'` (prompts and tool results), `'assistant'` (model output) or `'system'` (a system
   * message inside the conversation, text blocks only: never a prompt, it starts no turn).
   */
  role: 'user' | 'assistant' | 'system'
  /** The blocks, in order. */
  content: ContentBlock[]
  /** The provider's message id (e.g. `msg_...`); responses recorded twice are counted once by it. */
  id?: string
  /** The exact model id that produced the message. */
  model?: string
  /** Why the model stopped: `'end_turn'`, `'tool_use'`, `'max_tokens'`, ... */
  stop_reason?: string | null
  /** The custom stop sequence that was generated, if any. */
  stop_sequence?: string | null
  /** Token usage of this response (assistant messages). */
  usage?: Usage
  /** Any other field (`type: 'message'`, `container`, ...), kept as given. */
  [field: string]: unknown
}

/**
 * The record around each message (and each event) in a session's log, as Threadline returns it.
 * Fields given by the caller are kept in their order; the ones Threadline fills in follow.
 */
export interface Envelope {
  /** Given, else generated (time-ordered UUID v7). Unique within the session. */
  uuid: string
  /** Given, else the previous record's uuid (`null` for the first record). */
  parentUuid: string | null
  /** The session this record belongs to. */
  sessionId: string
  /** 0-based position in the session's log (always the record's real position). */
  seq: number
  /** ISO 8601 UTC; given, else the time of the append. */
  timestamp: string
  /**
   * `'user'`: a prompt. `'assistant'`: model output. `'tool_result'`: a user message made only
   * of `tool_result` blocks. `'event'`: an app record from `appendEvent`. Other values: records
   * given with their own type (e.g. Claude Code `progress` lines).
   */
  type: 'user' | 'assistant' | 'tool_result' | 'event' | (string & {})
  /** Which provider produced this record: `'anthropic'`, `'openai'`, `'gemini'`, ... */
  provider?: string
  /** The provider's request id; used to count a response once when it has no message id. */
  requestId?: string
  /** The message, for user / assistant / tool_result records. */
  message?: Message
  /**
   * Raw tool execution data (stdout, stderr, interrupted, isImage, ...), kept as given. Claude
   * Code writes a plain string here for failed tools; it comes back as that string.
   */
  toolUseResult?: Record<string, unknown> | string
  /** Default `true`. `false`: shown to people, never part of `messages` (never sent to a model). */
  includeInContext?: boolean
  /** The agent's mode when the record was written (e.g. `'plan'`). */
  mode?: string
  /** Identifies one run of the agent. */
  runId?: string
  /** Identifies the agent (or sub-agent) that wrote the record. */
  agentId?: string
  /** Free-form application data. */
  metadata?: Record<string, unknown>
  /** Any other field, kept as given. */
  [field: string]: unknown
}

/** The envelope `appendEvent` returns: an app record that is not a message. */
export interface EventEnvelope extends Envelope {
  /** Always `'event'`. */
  type: 'event'
  /** The event's name, as given. */
  name: string
  /** The event's data, as given (absent when none was given). */
  data?: unknown
}

// ---------------------------------------------------------------------------------------------
// What Threadline accepts
// ---------------------------------------------------------------------------------------------

/** Token usage as accepted on input: the SDK's `Usage` (nullable cache counts) fits. */
export interface UsageParam {
  /** Whole number >= 0. */
  input_tokens: number
  /** Whole number >= 0. */
  output_tokens: number
  /** Whole number >= 0, or `null`. */
  cache_read_input_tokens?: number | null | undefined
  /** Whole number >= 0, or `null`. */
  cache_creation_input_tokens?: number | null | undefined
}

/** A `tool_result` block as accepted on input; its `content` blocks may be of any type. */
export interface ToolResultBlockParam {
  /** Discriminant. */
  type: 'tool_result'
  /** Non-empty: the `id` of the `tool_use` block this answers. */
  tool_use_id: string
  /** The tool's output: a string, or blocks. */
  content?: string | ReadonlyArray<ContentBlockParam>
  /** `true` when the tool failed. */
  is_error?: boolean
  /** Prompt-cache breakpoint on this block. */
  cache_control?: CacheControl | null
}

/** A content-block document source as accepted on input. */
export interface ContentSourceParam {
  /** Discriminant. */
  type: 'content'
  /** A string, or text and image blocks. */
  content: string | ReadonlyArray<ContentBlockParam>
}

/** A `document` block as accepted on input. */
export interface DocumentBlockParam {
  /** Discriminant. */
  type: 'document'
  /** A PDF (base64 or URL), plain text, content blocks, or an uploaded file. */
  source: Base64Source | UrlSource | PlainTextSource | ContentSourceParam | FileSource
  /** A title the model may use when citing the document. */
  title?: string | null
  /** Context about the document that the model sees but does not cite. */
  context?: string | null
  /** Citation settings, e.g. `{ enabled: true }`. */
  citations?: {
    /** Whether the model may cite this document. */
    enabled?: boolean
  } | null
  /** Prompt-cache breakpoint on this block. */
  cache_control?: CacheControl | null
}

/**
 * A `thinking` block as accepted on input: with its signature (what the provider returned), or
 * without one (stored as given, but never sent back to a provider; see `ThinkingBlock`).
 */
export interface ThinkingBlockParam {
  /** Discriminant. */
  type: 'thinking'
  /** The reasoning text. */
  thinking: string
  /** The provider's signature, kept byte-for-byte. */
  signature?: string | undefined
}

/** A block of a type Threadline models, as accepted on input. */
export type KnownContentBlockParam =
  | TextBlock
  | ThinkingBlockParam
  | RedactedThinkingBlock
  | ToolUseBlock
  | ToolResultBlockParam
  | ImageBlock
  | DocumentBlockParam

/**
 * A content block as accepted on input: a block of a modelled type must have that type's shape;
 * a block of any other type is kept as given, every field included. The blocks of a message
 * given to `append`/`appendMany` are checked at compile time (see `Checked`); every block,
 * nested ones included, is checked at run time.
 */
export type ContentBlockParam =
  | KnownContentBlockParam
  | {
      /** Any other block type; the block is kept as given. */
      readonly type: string
    }

/**
 * A message as accepted on input: what the Anthropic SDK's `MessageParam` looks like (`role` and
 * `content` as a string or blocks), and what its response `Message` looks like (plus `id`,
 * `model`, `stop_reason`, `usage`, ...). Extra fields are kept as given. Threadline's own
 * `Message` fits too.
 *
 * Role `'system'` is a system message inside the conversation, as the Anthropic API takes it in
 * `messages` (the SDK's `SystemMessageParam`): text only, stored in place (envelope type
 * `'system'`), never a prompt. The system prompt of a request is still given per request.
 * OpenAI Chat messages (role `'tool'`, `tool_calls`) are refused: convert them with
 * `fromOpenAIChat` first.
 */
export interface MessageParamLike {
  /** `'user'`, `'assistant'` or `'system'`. */
  role: 'user' | 'assistant' | 'system'
  /**
   * A string (stored as one text block) or blocks. A user or system message needs at least one
   * block; a system message takes text blocks only.
   */
  content: string | ReadonlyArray<ContentBlockParam>
  /** The provider's message id: a response recorded twice under one id is counted once. */
  id?: string | undefined
  /** The exact model id. */
  model?: string | undefined
  /** Why the model stopped. */
  stop_reason?: string | null | undefined
  /** The custom stop sequence that was generated, if any. */
  stop_sequence?: string | null | undefined
  /** Token usage of the response, counted in `turns` and `tokenTracker`. */
  usage?: UsageParam | undefined
}

/** Envelope fields the caller may give; each is kept as given (extra fields too). */
export interface EnvelopeFieldsParam {
  /** Non-empty and unique in the session; default: a new UUID v7. */
  uuid?: string | undefined
  /** Default: the previous record's uuid. */
  parentUuid?: string | null | undefined
  /** ISO 8601; default: now. */
  timestamp?: string | undefined
  /** `'anthropic'`, `'openai'`, `'gemini'`, ... */
  provider?: string | undefined
  /** The provider's request id; counts a response once when it has no message id. */
  requestId?: string | undefined
  /** Any JSON, kept as given (an object like `{ stdout, stderr, interrupted }`, or a string). */
  toolUseResult?: unknown
  /** Default `true`; `false` keeps the record out of `messages`. */
  includeInContext?: boolean | undefined
  /** The agent's mode, e.g. `'plan'`. */
  mode?: string | undefined
  /** Identifies one run of the agent. */
  runId?: string | undefined
  /** Identifies the agent (or sub-agent). */
  agentId?: string | undefined
  /** Free-form application data (an object). */
  metadata?: Record<string, unknown> | undefined
}

/**
 * The envelope fields given beside a message, in `append(message, envelope)` and
 * `appendEvent(name, data, envelope)`: those of `EnvelopeFieldsParam`, and any other field (kept
 * as given). A property set to `undefined` is not stored (values are stored as `JSON.stringify`
 * sees them), so `{ requestId: response._request_id ?? undefined }` is fine; the envelope `append`
 * returns may still carry that key, with the value `undefined`.
 */
export interface EnvelopeOptions extends EnvelopeFieldsParam {
  /** Any other field, kept as given. */
  [field: string]: unknown
}

/**
 * A whole record as accepted on input: either an envelope with a `message`, or a record with
 * its own `type` and no message (e.g. a Claude Code `progress` line).
 */
export type EnvelopeParam =
  | (EnvelopeFieldsParam & {
      /** The message; its envelope type (`user`, `assistant`, `tool_result`) is derived if absent. */
      message: MessageParamLike
      /** Derived from the message when absent. */
      type?: string | undefined
    })
  | (EnvelopeFieldsParam & {
      /** Required for a record without a message. */
      type: string
      /** Absent, for a record that is not a message. */
      message?: MessageParamLike | undefined
      /** A record without `message` must not have `role` (it would be read as a message). */
      role?: undefined
    })

/**
 * What `append` accepts: a message (an SDK `MessageParam` or response `Message`, or a
 * Threadline `Message`), a whole envelope, or a string (a user prompt).
 */
export type AppendRecord = string | MessageParamLike | EnvelopeParam

// Compile-time check of the blocks in a record: a block whose `type` is a modelled type must
// have that type's shape. (A plain union cannot express this: an open `{ type: string }` member
// would accept a `tool_result` without `tool_use_id`.) `CheckedRecord<R>` is `R` itself when R
// is fine, else R with each bad block replaced by the shape it should have, so the compiler
// reports the missing or mistyped field of that block.
type ShapeOf<T> = Extract<KnownContentBlockParam, { type: T }>
type CheckBlock<B> = B extends { readonly type: infer T }
  ? T extends KnownContentBlockType
    ? B extends ShapeOf<T> ? B : ShapeOf<T>
    : B
  : B
type CheckContent<C> = C extends readonly unknown[] ? { [K in keyof C]: CheckBlock<C[K]> } : C
type CheckMessage<M> = M extends { readonly content: infer C }
  ? Omit<M, 'content'> & { content: CheckContent<C> }
  : M
/** `R`, or when a block in it has the wrong shape for its `type`, `R` with that block corrected. */
export type CheckedRecord<R> = R extends string
  ? R
  : R extends { readonly message: infer M }
    ? Omit<R, 'message'> & { message: CheckMessage<M> }
    : CheckMessage<R>
/** Accepts `R` if its blocks are well-formed (see `CheckedRecord`). */
export type Checked<R> = R extends CheckedRecord<R> ? R : CheckedRecord<R>

/**
 * A record `restoreMessages` accepts: JSON text (e.g. a JSONL line), an envelope, a bare
 * message, or a legacy `{ role, content: string }` message. Invalid ones are skipped, not thrown.
 */
export type RestoreRecord =
  | string
  | MessageParamLike
  | EnvelopeParam
  | Envelope
  | {
      /** Records with a role that is not a message role (e.g. `'tool'`) are skipped. */
      role: string
      /** A string or blocks. */
      content: string | ReadonlyArray<ContentBlockParam>
    }

/** What `restoreMessages` did. */
export interface RestoreResult {
  /** Messages now in the session. */
  messageCount: number
  /** Turns now in the session. */
  turnCount: number
  /** Records left out, by index in the input, with the reason (e.g. role `'tool'`). */
  skipped: Array<{
    /** Index of the record in the input array. */
    index: number
    /** Why it was skipped, e.g. `role: 'tool' is an OpenAI Chat message; ...`. */
    reason: string
  }>
}

// ---------------------------------------------------------------------------------------------
// Session state
// ---------------------------------------------------------------------------------------------

/**
 * One turn: a prompt and what followed it up to the next prompt (assistant messages, tool
 * results, parallel tool calls, and user messages that are not prompts: interruption notices,
 * local commands, reminders, `isMeta` records; see `Session.turns`).
 */
export interface Turn {
  /** 0-based. */
  index: number
  /** Index into `session.allMessages` (every message of the branch, across compactions) of the turn's first message (inclusive). */
  startIndex: number
  /** Index into `session.allMessages` of the turn's last message (inclusive). */
  endIndex: number
  /** uuid of the record of the first message. */
  startUuid: string
  /** uuid of the record of the last message. */
  endUuid: string
  /** Messages in the turn. */
  messageCount: number
  /** `tool_use`, `server_tool_use` and `mcp_tool_use` blocks in the turn. */
  toolUseCount: number
  /** Sum over the distinct responses in the turn (a response recorded twice counts once). */
  usage: {
    /** Sum of `input_tokens`. */
    input_tokens: number
    /** Sum of `output_tokens`. */
    output_tokens: number
    /** Sum of `cache_read_input_tokens`. */
    cache_read_input_tokens: number
    /** Sum of `cache_creation_input_tokens`. */
    cache_creation_input_tokens: number
  }
  /**
   * `'awaiting_tool_results'`: some `tool_use` of the turn has no `tool_result` yet.
   * `'complete'`: the last message is the assistant's. `'awaiting_response'`: otherwise (the
   * model has yet to answer the prompt or the tool results).
   */
  status: 'complete' | 'awaiting_tool_results' | 'awaiting_response'
}

/** Token state of a session. */
export interface TokenTracker {
  /** `input_tokens` of the latest response. */
  inputTokens: number
  /** `output_tokens` of the latest response. */
  outputTokens: number
  /** `cache_read_input_tokens` of the latest response. */
  cacheReadInputTokens: number
  /** `cache_creation_input_tokens` of the latest response. */
  cacheCreationInputTokens: number
  /**
   * What the next request carries: latest input + cache read + cache creation + output, plus an
   * estimate (bytes / 4) for the messages appended after that response.
   */
  contextTokens: number
  /** Sum of `input_tokens` over distinct responses (de-duplicated by message id, else requestId). */
  cumulativeInputTokens: number
  /** Sum of `output_tokens` over distinct responses. */
  cumulativeOutputTokens: number
  /** Sum of `cache_read_input_tokens` over distinct responses. */
  cumulativeCacheReadTokens: number
  /** Sum of `cache_creation_input_tokens` over distinct responses. */
  cumulativeCacheCreationTokens: number
}

/** How full the model's context window is. */
export interface ContextFill {
  /** `tokenTracker.contextTokens`. */
  usedTokens: number
  /**
   * The session's `contextWindow`; without one, the window of its `model` (or of its latest
   * assistant message's `model`) when that is a known Anthropic or OpenAI model (docs/context.md);
   * else `null`.
   */
  contextWindow: number | null
  /** `usedTokens / contextWindow`, or `null` without a context window. */
  fraction: number | null
}

/** Lifecycle of a session, set by the application with `setStatus`. */
export type SessionStatus = 'active' | 'completed' | 'failed' | 'interrupted'

/** A session's metadata. */
export interface SessionInfo {
  /** The session id. */
  id: string
  /** The project the session belongs to (e.g. a repository), for `listSessions({ project })`. */
  project?: string
  /** A title for people. */
  title?: string
  /** The provider the session talks to. */
  provider?: string
  /** The model the session uses. */
  model?: string
  /** `'active'` when created. */
  status: SessionStatus
  /** ISO 8601 UTC. */
  createdAt: string
  /** ISO 8601 UTC; moves on every append. */
  updatedAt: string
  /** Messages in the session (events and other non-message records not counted). */
  messageCount: number
  /** The model's context window in tokens, for `contextFill`. */
  contextWindow?: number
  /** Set on a session forked from another one. */
  forkedFrom?: {
    /** The session forked from. */
    sessionId: string
    /** The record the fork starts after. */
    uuid: string
  }
  /** Free-form application data, as given at creation. */
  metadata?: Record<string, unknown>
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

/** Options of `Store.open` / `Store.openAsync`. Unknown keys: `INVALID_INPUT`. */
export interface StoreOptions {
  /**
   * `'process'` (default): an acknowledged write survives the process being killed (SIGKILL,
   * crash); an OS crash or power loss may lose what was acknowledged since the file system last
   * wrote it out (seconds, up to about half a minute). `'power'`: it also survives power loss or
   * an OS crash (every commit is fsynced).
   */
  durability?: 'process' | 'power' | undefined
  /** Strings longer than this many bytes are stored once, by hash. Default 10240. */
  blobThresholdBytes?: number | undefined
  /**
   * Open for reading only: any write throws `STORE_IO`. Works on read-only media and in a
   * directory the process cannot write: with no log file there, the file is read as immutable
   * (changes another writer makes afterwards are not seen until the store is opened again).
   */
  readonly?: boolean | undefined
  /** How long to wait for a lock held by another connection before `STORE_BUSY`. */
  busyTimeoutMs?: number | undefined
  /**
   * Telemetry: an operation taking at least this many milliseconds is reported as a
   * `slow_operation` event (only while a listener is registered or THREADLINE_TELEMETRY=console).
   * Default 100.
   */
  slowOperationMs?: number | undefined
}

/** Options of `store.createSession` and `new Session`. Unknown keys: `INVALID_INPUT`. */
export interface SessionOptions {
  /** The session id; default a new UUID v7. An id already in the store: `INVALID_INPUT`. */
  id?: string | undefined
  /** The project (e.g. a repository), for `listSessions({ project })`. */
  project?: string | undefined
  /** A title for people. */
  title?: string | undefined
  /** The provider the session talks to, e.g. `'anthropic'`. */
  provider?: string | undefined
  /** The model the session uses. */
  model?: string | undefined
  /** The model's context window in tokens (whole number), for `contextFill`. */
  contextWindow?: number | undefined
  /** Identity of the system prompt / tools the session was made for; see `openSession`. */
  promptKey?: string | undefined
  /** Free-form application data (an object), returned in `info`. */
  metadata?: Record<string, unknown> | undefined
}

/** Options of `store.openSession` / `store.openSessionAsync`. */
export interface OpenSessionOptions {
  /** If given and different from the session's: `PROMPT_MISMATCH`. */
  promptKey?: string | undefined
}

/** Filter of `store.listSessions`. Unknown keys: `INVALID_INPUT`. */
export interface ListSessionsFilter {
  /** Only sessions of this project. */
  project?: string | undefined
  /** Only sessions with this status. */
  status?: SessionStatus | undefined
  /** Only sessions updated at or after this instant (ISO 8601, or a `Date`). */
  since?: string | Date | undefined
  /** Only sessions updated at or before this instant (ISO 8601, or a `Date`). */
  until?: string | Date | undefined
  /** At most this many sessions. */
  limit?: number | undefined
}

/** A range of records by position. */
/** Options of `store.verify()`. */
export interface VerifyOptions {
  /**
   * `PRAGMA quick_check` instead of `integrity_check`: skips checking that every index matches
   * its table (faster on a large store). Record checksums are checked either way.
   */
  quick?: boolean | undefined
}

/** One damaged thing found by `verify()`. */
export interface Damage {
  /** the session it belongs to; null for damage of the file itself or of a blob no record uses */
  sessionId: string | null
  /** the record's seq; null for the session's row or the file */
  seq: number | null
  /** what is wrong, for people (`checksum mismatch (...)`, `the record is missing`, ...) */
  reason: string
}

/** What `session.verify()` and `store.verify()` found. */
/** What `store.import` reads. */
export interface ImportSource {
  format: 'claude-code' | 'codex' | 'pi' | 'fspec'
  /** a file, or a folder searched to any depth */
  path: string
}

export interface ImportOptions {
  /** the project of every imported session (else the one the files name, e.g. Claude Code's cwd) */
  project?: string | undefined
  /**
   * import again sessions that were deleted from this store (`deleteSession`); without it such a
   * session is skipped (`skipped`: "session 'ID' was deleted on DATE; ...") so that an import on
   * a schedule does not undo a delete. Default false.
   */
  includeDeleted?: boolean | undefined
  /** called after each file */
  onProgress?: ((progress: ImportProgress) => void) | undefined
}

export interface ImportProgress {
  files: number
  totalFiles: number
  /** records read so far */
  records: number
  bytes: number
  totalBytes: number
}

export interface ImportReport {
  /** sessions found in the source */
  sessions: number
  /** of them, sessions the store did not have */
  newSessions: number
  /** records found (lines not skipped) */
  records: number
  /** of them, records the store did not have */
  newRecords: number
  /**
   * lines not imported, with the reason (a line that is not JSON, a record of the wrong shape);
   * without `line`, a file not read: a FIFO, socket or device, a link that dangles, loops, leads
   * out of the folder or to a folder, a file over 4 GiB, one with no JSON object line, an empty
   * file, a file of another format found in a folder, a session deleted from this store
   * (docs/import.md)
   */
  skipped: Array<{ file: string; line?: number; reason: string }>
  /** records kept as events rather than messages, counted by type (unknown types too) */
  events: Record<string, number>
}

export type ExportFormat = 'claude-code' | 'markdown' | 'html' | 'snapshot'

export interface ExportOptions {
  /**
   * Markdown: write events too (progress, hooks, file snapshots, ...), one line each. Without it
   * the transcript is the conversation and its compaction summaries. Default false.
   */
  events?: boolean | undefined
}

export interface VerifyReport {
  /** true when nothing damaged was found */
  ok: boolean
  /** sessions checked */
  sessions: number
  /** records read and checked */
  records: number
  /** distinct blobs checked (checksum and SHA-256 of their content) */
  blobs: number
  /** damaged records, session rows, blobs and file pages, in store order (at most 1,000) */
  damaged: Damage[]
  /** damaged entries beyond the 1,000 listed */
  moreDamaged: number
}

// ---------------------------------------------------------------------------------------------
// Recall: search and the recall tools
// ---------------------------------------------------------------------------------------------

/** Where a search looks in a message. */
/**
 * What `session.update` changes. A field left out is kept; `null` clears it. `metadata` replaces
 * the whole object (it is not merged).
 */
export interface SessionUpdate {
  title?: string | null | undefined
  metadata?: Record<string, unknown> | null | undefined
  /** A positive integer (tokens); `null`: none, `contextFill` then uses the model's, if known. */
  contextWindow?: number | null | undefined
  model?: string | null | undefined
}

/** `store.stats()`: the store's size and what `vacuum()` could give back. */
export interface StoreStats {
  engine: 'sqlite' | 'postgres'
  /** SQLite: the file's pages; PostgreSQL: threadline's tables with their indexes and TOAST. */
  bytes: number
  /** SQLite: the free pages' bytes; PostgreSQL: 0 (plain VACUUM keeps freed space for reuse). */
  freeBytes: number
  /** SQLite only. */
  pageSize?: number
  /** SQLite only: pages on the free list. */
  freePages?: number
}

/** `store.vacuum()`: the store's size (`StoreStats.bytes`) before and after. */
export interface VacuumReport {
  bytesBefore: number
  bytesAfter: number
}

/** `store.backup(path)`: the copy written. */
export interface BackupReport {
  /** The path given. */
  path: string
  /** Sessions in the copy. */
  sessions: number
  /** Records in the copy, over all its sessions. */
  records: number
  /** The copy's size in bytes. */
  bytes: number
}

export type SearchField = 'text' | 'thinking' | 'tool_input' | 'tool_output'

export interface SearchOptions {
  /** Only sessions of this project. */
  project?: string | undefined
  /** Only this session. */
  sessionId?: string | undefined
  /** Leave this session out (the one the agent is in). */
  excludeSessionId?: string | undefined
  /** Only records at or after this ISO 8601 date-time. */
  since?: string | undefined
  /** Only records at or before this ISO 8601 date-time. */
  until?: string | undefined
  /** Only messages of these roles (default both). */
  roles?: Array<'user' | 'assistant'> | undefined
  /** Where to look; default `['text', 'tool_input']` (thinking and tool outputs are opt-in). */
  fields?: SearchField[] | undefined
  /** Hits per page, 1 to 200; default 20. */
  limit?: number | undefined
  /**
   * `nextCursor` of the previous page of the same query and options, from this store (signed: one
   * altered, of another search or of another store is INVALID_INPUT).
   */
  cursor?: string | undefined
}

/** One message that matches a search. */
export interface SearchHit {
  sessionId: string
  uuid: string
  seq: number
  timestamp: string
  role: 'user' | 'assistant'
  /** The first field searched where the query matched. */
  field: SearchField
  /** About 200 characters around the first match, on one line, each match between `**`. */
  snippet: string
  /** Higher is better (BM25); ties go to the record stored later. */
  score: number
  session: { title?: string; project?: string }
}

export interface SearchPage {
  hits: SearchHit[]
  /** Pass it back as `cursor` for the next page; null when this is the last. */
  nextCursor: string | null
  /**
   * Records committed but not indexed yet, so not searched: 0 unless the store had a large
   * backlog (a search indexes for at most about 1.5 s before it answers; the next searches go
   * on where it stopped).
   */
  unindexed: number
}

export interface RecallToolsOptions {
  /** The session the model is in: left out of every result. */
  excludeSessionId?: string | undefined
  /** Only sessions of this project. */
  project?: string | undefined
  /**
   * Each result stays within this many tokens as estimated by script (a CJK character 1.5, an
   * emoji 3, four ASCII characters 1: docs/recall.md), 200 to 200,000; default 4,000.
   */
  maxResultTokens?: number | undefined
}

/** A JSON schema of a tool's input (an object). */
export interface ToolInputSchema {
  type: 'object'
  properties: Record<string, unknown>
  required?: string[]
  additionalProperties?: boolean
  [key: string]: unknown
}

/** A tool definition for Anthropic's `messages.create({ tools })`. */
export interface AnthropicTool {
  name: string
  description: string
  input_schema: ToolInputSchema
}

/** A tool definition for OpenAI Chat Completions' `tools`. */
export interface ChatCompletionTool {
  type: 'function'
  function: { name: string; description: string; parameters: ToolInputSchema }
}

/** A tool definition for OpenAI Responses' `tools`. */
export interface ResponsesFunctionTool {
  type: 'function'
  name: string
  description: string
  parameters: ToolInputSchema
  strict: boolean
}

/** A model's call of a recall tool, in any of the providers' shapes. */
export type RecallToolCall =
  | { name: string; input: unknown; id?: string | undefined }
  | ToolUseBlock
  | { id: string; type: 'function'; function: { name: string; arguments: string } }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  /**
   * OpenAI's custom tool call (a `ChatCompletionMessageToolCall` may be one): answered when its
   * `input` is a JSON object's text, else with an `is_error` result saying so.
   */
  | { id: string; type: 'custom'; custom: { name: string; input: string } }

/** `session_list`, `session_search` and `session_read`, ready to give a model. */
export interface RecallTools {
  anthropic: AnthropicTool[]
  openaiChat: ChatCompletionTool[]
  openaiResponses: ResponsesFunctionTool[]
  names: Array<'session_list' | 'session_search' | 'session_read'>
  /**
   * Answers a call with a `tool_result` block (its `tool_use_id` is the call's `call_id` for a
   * Responses item, else its `id`, or `''` without one). Bad arguments from a model are an
   * `is_error` result that says what was wrong, never a throw; a closed or damaged store rejects
   * with its error code, and so does (INVALID_INPUT) a call whose id is not a string or that JSON
   * cannot hold (a getter that throws, a cycle, nesting too deep).
   */
  handle(call: RecallToolCall): Promise<RecallToolResult>
}

/** The answer to a recall tool call: a `tool_result` block with text content. */
export interface RecallToolResult {
  type: 'tool_result'
  tool_use_id: string
  content: string
  /** present (true) when the call was wrong; the content says how */
  is_error?: true
}

/** `session.watch` options (docs/live.md). */
export interface WatchOptions {
  /** The first seq to yield (records already committed from it on come first); default: the end. */
  fromSeq?: number
  /**
   * An `AbortSignal` (the runtime checks it is one): it ends the watch, the pending `next()`
   * rejects with an `AbortError`.
   */
  signal?: WatchSignal
}

/** `store.watch` options (docs/live.md). */
export interface StoreWatchOptions {
  /** Only the sessions of this project (the exact string sessions were made with). */
  project?: string
  /** Only this session (it may not exist yet: its creation is then the first change). */
  sessionId?: string
  /**
   * A change's `cursor`: the watch resumes right after that change, nothing missed, nothing
   * twice. Pass the same `project` and `sessionId` as the watch it came from. Default: the
   * changes committed after the watch's first look (at the first `next()` or `ready`).
   */
  since?: string
  /** As in `WatchOptions`: ends the watch, the pending `next()` rejects with an `AbortError`. */
  signal?: WatchSignal
}

/**
 * A change `store.watch` yields. `created` comes before the session's records, its records come
 * in `seq` order, each once; `status` says the session's status is no longer the one last given
 * (a watch that looks after several writes gives the latest status once, after the records it
 * found); `deleted` ends the session's changes. Changes of different sessions come in about the
 * order they were committed. `cursor` (an opaque string, made when first read) is what `since`
 * takes.
 */
export type StoreChange =
  | { type: 'created'; sessionId: string; session: SessionInfo; readonly cursor: string }
  | { type: 'record'; sessionId: string; record: Envelope; readonly cursor: string }
  | { type: 'status'; sessionId: string; session: SessionInfo; readonly cursor: string }
  | { type: 'deleted'; sessionId: string; readonly cursor: string }

/** What `store.watch` returns: the changes, and when it has started. */
export interface StoreWatch extends AsyncIterableIterator<StoreChange> {
  /**
   * Resolves once the watch has made its first look (reading it starts the watch, as the first
   * `next()` does): every change committed after that is given. Read a listing after it to
   * start from, and nothing falls between the two (a change made in between may show in both).
   * Rejects as that first `next()` would: an `AbortError` if the watch was stopped before it,
   * `NOT_FOUND`, `CLOSED`.
   */
  readonly ready: Promise<void>
}

/** The part of `AbortSignal` watch uses (so these types need no DOM or Node types). */
export interface WatchSignal {
  readonly aborted: boolean
  readonly reason: unknown
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void
  removeEventListener(type: 'abort', listener: () => void): void
}

export interface EnvelopeRange {
  /** First `seq` to return (whole number >= 0); default 0. */
  fromSeq?: number | undefined
  /** At most this many records (whole number >= 0); default all. */
  limit?: number | undefined
}

// ---------------------------------------------------------------------------------------------
// Store and Session
// ---------------------------------------------------------------------------------------------

/**
 * A Threadline store: one SQLite file (or PostgreSQL schema) holding many sessions. Open it with `Store.open` or
 * `Store.openAsync` (the constructor is not public).
 */
export declare class Store {
  /** Not public: use `Store.open` or `Store.openAsync` (`new Store()` throws `INVALID_INPUT`). */
  private constructor()

  /**
   * Opens the store at `path`, creating the file (mode 0600) if missing. `':memory:'` opens a
   * store that lives in this process only. Default path: `defaultStorePath()`. A
   * `postgres://user:password@host:port/db?schema=name` URL opens a store on a PostgreSQL server
   * (tables in that schema, default `threadline`; docs/engines.md).
   *
   * @throws `STORE_CORRUPT` if the file is not a Threadline store, `STORE_VERSION` if a newer
   *   Threadline wrote it, `STORE_IO` if it cannot be created or read, `STORE_BUSY`,
   *   `INVALID_INPUT` for bad options.
   */
  static open(path?: string, options?: StoreOptions): Store

  /** `Store.open`, with the file opened and checked off the main thread. Rejects with the same codes. */
  static openAsync(path?: string, options?: StoreOptions): Promise<Store>

  /** The path the store was opened with (`':memory:'` for an in-memory store). */
  readonly path: string

  /**
   * Creates an empty session (status `'active'`).
   *
   * @throws `INVALID_INPUT` for bad options or an id that already exists, `STORE_IO` on a
   *   readonly store, `CLOSED` after `close()`.
   */
  createSession(options?: SessionOptions): Session

  /**
   * Opens an existing session. Cheap: no record is loaded until read.
   *
   * @throws `NOT_FOUND` if there is no such session, `PROMPT_MISMATCH` if `options.promptKey`
   *   differs from the session's, `CLOSED` after `close()`.
   */
  openSession(id: string, options?: OpenSessionOptions): Session

  /** `openSession` with the heavy work off the main thread. Rejects with the same codes. */
  openSessionAsync(id: string, options?: OpenSessionOptions): Promise<Session>

  /**
   * Sessions matching `filter`, most recently updated first.
   *
   * @throws `INVALID_INPUT` for a bad filter, `CLOSED` after `close()`.
   */
  listSessions(filter?: ListSessionsFilter): SessionInfo[]

  /**
   * Follows every session of the store live (docs/live.md), or a project's (`project`), or one
   * session (`sessionId`): each session created, each record, each status change and each
   * deletion, as any process commits it, once. Without `since`, the changes committed after the
   * watch's first look; with a change's `cursor`, every change after that one. Reads run off the
   * main thread, in both APIs; `break`, `return()` or the signal ends it as `session.watch` ends.
   * `await watch.ready` starts it and settles after its first look: a listing read after it,
   * with the changes the watch gives, misses nothing.
   *
   * @throws `INVALID_INPUT` at the call for a bad option (the path says which: a `since` that is
   *   not a cursor, or one of a watch of another project or session), or an in-memory store;
   *   `CLOSED`.
   */
  watch(options?: StoreWatchOptions): StoreWatch

  /**
   * Deletes a session and all its records, and the blobs no other session uses. What it removes
   * is overwritten with zeros in the file (SQLite `secure_delete`) and the log is reset, so the
   * content is not left readable on disk (while another process reads the store, the log is reset
   * at the next checkpoint instead).
   *
   * @throws `NOT_FOUND` if there is no such session, `STORE_IO` on a readonly store, `CLOSED`.
   */
  deleteSession(id: string): void

  /**
   * The store's size and what `vacuum()` could give back (SQLite: its free pages).
   *
   * @throws `CLOSED`.
   */
  stats(): StoreStats

  /**
   * Gives the free space back: SQLite rewrites the file without its free pages (this store's
   * calls wait meanwhile; it needs as much free disk as the file takes); PostgreSQL runs VACUUM
   * on threadline's tables.
   *
   * @throws `STORE_IO` on a readonly store, `STORE_BUSY`, `CLOSED`.
   */
  vacuum(): VacuumReport

  /**
   * Writes a copy of every session to a new SQLite file at `path`, which `Store.open` opens.
   * Safe while other processes write: every append acknowledged before the call is in the copy.
   * SQLite: one consistent snapshot of the file; PostgreSQL: each session as of when it is
   * copied. Written under a temporary name in the same directory and linked into place, so a
   * crash leaves no half-written file at `path`. The copy's sessions are held by no process.
   *
   * @throws `INVALID_INPUT` if `path` exists (a backup never replaces a file), `STORE_IO` if its
   * directory does not exist or the disk refuses, `CLOSED`.
   */
  backup(path: string): BackupReport

  /**
   * Checks the whole store: SQLite's own check of the file (`PRAGMA integrity_check`, or
   * `quick_check` with `{ quick: true }`), then every session as `session.verify()` checks it,
   * then the blobs no record uses. Damage is reported, not thrown: the report lists every
   * damaged record (up to 1,000; `moreDamaged` counts the rest). Reads the whole file, holding
   * this store's connection meanwhile (other calls on this `Store` wait; other processes do not).
   *
   * @example
   * const report = store.verify()
   * if (!report.ok) for (const d of report.damaged) console.error(d.sessionId, d.seq, d.reason)
   * @throws `CLOSED`, `INVALID_INPUT` for unknown options; damage is never thrown.
   */
  verify(options?: VerifyOptions): VerifyReport

  /**
   * Brings in the sessions another agent wrote: `'claude-code'` (a session file, a project folder
   * or the whole `~/.claude/projects` folder; subagent files become sessions of their own, linked
   * to their parent in `info.metadata`), `'codex'` (rollout files, or `~/.codex/sessions`), or
   * `'pi'` (`~/.pi/agent/sessions`). docs/import.md says what each record becomes.
   * Records keep their own ids, so importing again adds only what is new. A line that cannot be
   * read is reported in `skipped` with its file and line; the rest imports. One file at a time
   * runs on the thread pool; `onProgress` is called after each.
   *
   * @example
   * const report = await store.import({ format: 'claude-code', path: `${os.homedir()}/.claude/projects` },
   *   { onProgress: (p) => console.error(`${p.files}/${p.totalFiles} files`) })
   * console.log(report.newSessions, report.newRecords, report.skipped)
   * @throws `NOT_FOUND` if the path does not exist, `INVALID_INPUT` for a bad source or option,
   *   `CLOSED`; the store's codes (`STORE_BUSY`, `STORE_IO`, ...) from a write.
   */
  import(source: ImportSource, options?: ImportOptions): Promise<ImportReport>

  /**
   * Searches the messages of every session: words (all must match), `"exact phrases"`,
   * `prefix*`, `a OR b`, `-excluded`; case and accents ignored; identifiers (`parse_json`,
   * `fooBar`, paths) and CJK text are found by their parts. Ranked by BM25, the record stored
   * later first on ties.
   * Compaction summaries, events and repairs are not searched.
   * @throws `INVALID_INPUT` for a query the syntax refuses (an unclosed quote, a lone `OR`, no
   *   words) or a bad option, with the reason; `CLOSED`.
   */
  search(query: string, options?: SearchOptions): SearchPage

  /**
   * Tools a model calls to recall its earlier sessions: `session_list`, `session_search` and
   * `session_read`, defined for the three providers, and `handle` to answer a call.
   * @throws `INVALID_INPUT` for a bad option; `CLOSED`.
   */
  recallTools(options?: RecallToolsOptions): RecallTools

  /**
   * Closes the store. Every later use of it, or of a session opened from it, throws `CLOSED`
   * (a session's `id` stays readable). Sessions this process held for writing are released.
   * Stores of one process opened on the same file with the same `durability`, `readonly` and
   * `busyTimeoutMs` share its connections: opening it again costs no file handle, and the file
   * is closed with the last of them. Close a store you are done with: the last one dropped
   * without `close()` keeps its two file handles and its checkpoint thread until the garbage
   * collector finalizes it.
   */
  close(): void

  /**
   * Sessions left `active` by a process that is gone (killed, crashed, or exited without closing
   * them), most recently updated first. Open one, call `recover()`, and go on.
   * Emits an `interrupted_session` telemetry event for each.
   */
  interruptedSessions(): SessionInfo[]

  /**
   * A new session that starts as session `id`'s branch up to `atUuid` (default: its latest
   * record), with `info.forkedFrom` set. Long content is stored by hash, so it is shared with the
   * parent, not copied; token state is the parent's at that record (derived once, not added to).
   * @throws `NOT_FOUND` for an unknown session or record.
   */
  forkSession(id: string, options?: { atUuid?: string | undefined; title?: string | undefined }): Session

  /**
   * Brings a `session.snapshot()` back as a session of this store, with the same id and
   * byte-identical messages, in one transaction.
   *
   * @throws `SNAPSHOT_INVALID` if it is truncated, altered (its SHA-256 does not match) or not a
   *   snapshot: nothing is written. `INVALID_INPUT` if a session with its id exists here.
   */
  importSnapshot(json: string): Session

  /**
   * `Store.open(path, options).importSnapshot(json)`: imports into the store at `path` (the
   * default store when omitted), which stays open for the returned session.
   */
  static importSnapshot(json: string, path?: string, options?: StoreOptions): Session

  /**
   * Receives telemetry events (repairs, recoveries, interrupted sessions found, persistence
   * errors, slow operations) from this store and its sessions. Returns a function that removes the
   * listener. Off by default; with no listener (and THREADLINE_TELEMETRY unset) nothing is
   * measured. THREADLINE_TELEMETRY=console prints every event as a JSON line on stdout.
   * A listener that throws is ignored.
   */
  onEvent(listener: (event: TelemetryEvent) => void): () => void
}

/**
 * A session: an append-only log of records (messages, events) with its turns and token state.
 * Get one from a `Store` (persistent) or with `new Session()` (in memory only).
 *
 * A session object is a cheap handle: `messages`, `turns` and `tokenTracker` are served from the
 * store and kept up to date incrementally as records are appended.
 */
export declare class Session {
  /**
   * A session in memory only, with no store: nothing is persisted.
   *
   * @throws `INVALID_INPUT` for bad options.
   */
  constructor(options?: SessionOptions)

  /** The session id (readable even after `close()`). */
  readonly id: string

  /**
   * The session's metadata, read fresh on every access.
   *
   * @throws `CLOSED` after `close()`.
   */
  readonly info: SessionInfo

  /**
   * Appends one record and returns its envelope: the caller's fields, in their order, plus
   * `type`, `uuid`, `parentUuid`, `sessionId`, `seq` and `timestamp` where not given.
   *
   * `record` is a message (an Anthropic SDK `MessageParam` or response `Message` as it is, or a
   * Threadline `Message`), a whole envelope (`{ message, ... }`, or `{ type, ... }` without a
   * message), or a string (a user prompt: `{ role: 'user', content: [{ type: 'text', text }] }`).
   * `envelope` adds envelope fields to a message (e.g. `{ requestId, toolUseResult }`).
   *
   * Empty text: a string prompt with no text (`''`, or only whitespace) is refused
   * (`INVALID_INPUT`, `append: content[0].text: ...`): providers refuse empty text, so it could
   * never be sent. Empty text blocks inside a message object are accepted and stored as given
   * (an imported transcript stays lossless); `buildContext` never sends them, nor a message left
   * empty without them.
   *
   * The type parameter is inferred from `record`; it lets the compiler check each block of the
   * message against the shape of its `type` (a `tool_result` without `tool_use_id` is a compile
   * error), while extra fields and blocks of other types pass as they are.
   *
   * Everything given is stored losslessly: unknown fields and block types, key order and numbers
   * exactly as given (values as `JSON.stringify` sees them).
   *
   * Durability: on a store-backed session `append` returns only after the record is committed,
   * so an acknowledged record survives the process being killed right after (and power loss
   * with `durability: 'power'`).
   *
   * @throws `INVALID_INPUT` for a value of the wrong shape (role `'tool'`, a `tool_result`
   *   without `tool_use_id`, a duplicate `uuid`, a record over 32 MiB, an empty string prompt,
   *   ...; the message names the path), `STORE_IO` if the disk refuses or the store is readonly, `STORE_BUSY`, `CLOSED`.
   *   Nothing is written when it throws.
   */
  append<R extends AppendRecord>(record: Checked<R>, envelope?: EnvelopeOptions): Envelope

  /**
   * Appends several records in one transaction: all of them or, if one is invalid, none.
   * Returns their envelopes in order; returns after the commit (see `append`).
   *
   * @throws as `append`; the message starts with the index of the bad record
   *   (`appendMany: [3].content[0]...`).
   */
  appendMany<R extends readonly AppendRecord[]>(records: { readonly [K in keyof R]: Checked<R[K]> }): Envelope[]

  /**
   * Appends an app record that is not a message (`type: 'event'`, with `name` and `data`).
   * Events are in `envelopes()` but never in `messages`. Returns after the commit.
   *
   * @param name Non-empty.
   * @param data Any JSON value (`null` included); left out of the record when `undefined`.
   * @throws `INVALID_INPUT` for an empty name or data that is not JSON, `STORE_IO`, `CLOSED`.
   */
  appendEvent(name: string, data?: unknown, envelope?: EnvelopeOptions): EventEnvelope

  /**
   * Loads a history from elsewhere (objects or JSON strings; envelopes, bare messages, legacy
   * text-only messages; system messages too) and derives turns and token state. Invalid records
   * are skipped and reported, not thrown. On a store-backed session it is written in one
   * transaction.
   *
   * @throws `SESSION_NOT_EMPTY` on a store-backed session that already has messages,
   *   `INVALID_INPUT` if `records` is not an array, `STORE_IO`, `CLOSED`.
   */
  restoreMessages(records: ReadonlyArray<RestoreRecord>): RestoreResult

  /**
   * Sets token counters (e.g. carried over from another system); persisted as a record, so it
   * survives reopening. Fields not given are left as they are.
   *
   * @throws `INVALID_INPUT` for an unknown field or a value that is not a whole number >= 0,
   *   `STORE_IO`, `CLOSED`.
   */
  restoreTokenState(state: { [K in keyof TokenTracker]?: number | undefined }): void

  /**
   * The messages of the current context, in order: from the latest compaction on, along the
   * current branch (see {@link rewind}). After {@link compact}, the first message is the summary
   * as a user message (`This session continues from an earlier conversation, summarised here:`
   * and the summary), then the records it kept and everything after; after a Claude Code
   * `compact_boundary` (from {@link restoreMessages}) it is the messages after the boundary,
   * Claude Code's own summary message first. Without a compaction: every message. Records with
   * `includeInContext: false` and records without a message (events) are left out. A new array
   * on every access. For a request to a provider, use {@link buildContext}: it also merges,
   * budgets and validates.
   *
   * @throws `CLOSED`.
   */
  readonly messages: Message[]

  /**
   * Every message of the current branch from the start, across compactions (what
   * {@link messages} gives when nothing was compacted). A new array on every access.
   *
   * @throws `CLOSED`.
   */
  readonly allMessages: Message[]

  /**
   * Every record, events included, in order (`seq` ascending).
   *
   * @throws `INVALID_INPUT` for a bad range, `CLOSED`.
   */
  envelopes(range?: EnvelopeRange): Envelope[]

  /** `envelopes`, with the store read off the main thread. Rejects with the same codes. */
  envelopesAsync(range?: EnvelopeRange): Promise<Envelope[]>

  /**
   * Follows the session live (docs/live.md): each record as any process commits it, once, in
   * `seq` order, the same objects `envelopes()` gives. Without `fromSeq`, the records committed
   * after the watch's first read (at the first `next()`); with it, every record from that seq on
   * (as in `envelopes`: `fromSeq: last.seq + 1` resumes). Reads run off the main thread, in both
   * APIs. A `break`, `return()` (even while waiting) or the signal ends it and releases all it
   * holds; the signal makes the pending `next()` reject with an `AbortError` (name `AbortError`,
   * code `ABORT_ERR`), as Node's own async iterables do.
   *
   * @throws `INVALID_INPUT` at the call for a bad option (the path says which), or a session of
   *   an in-memory store (nothing else can write it); `NOT_FOUND` from `next()` once the
   *   session is deleted; `CLOSED`.
   */
  watch(options?: WatchOptions): AsyncIterableIterator<Envelope>

  /**
   * The turns, in order. A turn starts at a prompt and runs to the record before the next prompt.
   * A prompt is a user message with a block a person wrote or attached: not a `tool_result`, not
   * text the agent's harness inserts (an interruption notice, a local command and its output, a
   * `<system-reminder>`, ...), in a record not marked `isMeta` or `isCompactSummary` (the exact
   * rule: docs/api.md, "Turns and tokens"). A session's first message always starts a turn.
   *
   * @throws `CLOSED`.
   */
  readonly turns: Turn[]

  /**
   * Latest and cumulative token usage, and the estimated size of the next request.
   *
   * @throws `CLOSED`.
   */
  readonly tokenTracker: TokenTracker

  /**
   * How full the context window is (`contextWindow` from the session options, or the known
   * window of the session's model).
   *
   * @throws `CLOSED`.
   */
  readonly contextFill: ContextFill

  /**
   * Sets the session's status (shown by `info` and `listSessions`).
   *
   * @throws `INVALID_INPUT` for a status not in `SessionStatus`, `STORE_IO`, `CLOSED`.
   */
  setStatus(status: SessionStatus): void

  /**
   * Changes the session's title, metadata, context window or model after creation; returns the
   * new `info`. Other handles and processes see the change (`listSessions`, `info`).
   *
   * @example
   * session.update({ title: 'Fix the login bug', contextWindow: null })
   * @throws `INVALID_INPUT` naming the field (`update: contextWindow: expected a positive
   * integer, got 0`; nothing is changed), `NOT_FOUND` if the session was deleted,
   * `SESSION_LOCKED` if another live process writes it, `STORE_IO`, `CLOSED`.
   */
  update(changes: SessionUpdate): SessionInfo

  /** Closes this handle. Later use throws `CLOSED` (`id` stays readable); the store stays open. */
  close(): void

  // ----- recovery: the tool-call journal -----

  /**
   * Marks a tool call started: call it right before running the tool (before its side effect).
   * After a crash, a started call without an outcome is reported as "outcome unknown", never as
   * "never started". Calling it again is a no-op.
   *
   * @throws `NOT_FOUND` if no appended assistant message holds this call; `INVALID_INPUT` if the
   *   call already has an outcome (use `cachedToolResult`); `SESSION_LOCKED`, `STORE_IO`, `CLOSED`.
   */
  toolCallStarted(toolUseId: string): void

  /**
   * Records in the journal that a tool finished, with its result, even if the tool_result message
   * is never appended (e.g. the process dies first): `recover()` then backfills it. The same
   * outcome again is a no-op.
   *
   * @throws `NOT_FOUND` for an unknown call; `INVALID_INPUT` for a malformed result (with its
   *   path), another outcome already recorded, or a call already answered in the history.
   */
  recordToolOutcome(toolUseId: string, result: ToolResultInput | string): void

  /** Every tool call of the session with its lifecycle state, in the order they were made. */
  toolCalls(filter?: { state?: ToolCallState | undefined }): ToolCall[]

  /**
   * The result of a finished call (recorded with `recordToolOutcome`, or its tool_result in the
   * history), else `null`: a resumed agent checks it before running a tool again.
   */
  cachedToolResult(toolUseId: string): ToolResultBlock | null

  /** What `recover()` would do (with its default options). Writes nothing. */
  pendingRepairs(): Repair[]

  /**
   * Makes a session left half-done valid to send again. In one transaction: closes a response
   * cut off mid-stream (as `fail()` would), then answers every call of the latest response that
   * has no result: a recorded outcome is backfilled; a call that never started gets an is_error
   * result saying it never ran; a started call with no outcome is re-run once with `replay` if
   * `isSafe(call)` (its real result recorded), else gets an is_error result saying the outcome is
   * unknown and side effects may have happened (`unknownOutcome: 'leave'`: reported, not written).
   * Repairs are records (`repair` field, deterministic uuids); running it again changes nothing.
   */
  recover(options?: RecoverOptions): Promise<RecoveryReport>

  // ----- recovery: streaming and snapshots -----

  /**
   * Starts streaming an assistant response into the session. Chunks are persisted as `stream`
   * records (out of `messages`) at every block boundary and at least every 200 ms within a long
   * block, so a crash mid-stream keeps what had arrived; `recover()` closes such a stream.
   */
  beginResponse(options?: ResponseOptions): ResponseWriter

  /**
   * The session as one JSON document: its records (blob content inline), the tool-call journal,
   * status and prompt identity, sealed with a SHA-256. `store.importSnapshot` brings it back.
   */
  snapshot(): string

  /**
   * The session written out: `'claude-code'` (JSONL as Claude Code writes it: an imported record
   * comes back as it was, an assistant message one content block per line), `'markdown'`,
   * `'html'` (one self-contained page: no network, tool calls and thinking folded, images inline,
   * tokens per turn) or `'snapshot'` (as `snapshot()`). See docs/export.md.
   * @throws `INVALID_INPUT` for another format or option, `CLOSED`, `STORE_CORRUPT` on damage.
   */
  export(format: ExportFormat, options?: ExportOptions): string

  /**
   * Checks every record of this session: its checksum, that no seq is missing (the session's row
   * counts its records, so lost last records are found too), that its text is JSON, the blobs it
   * uses (checksum and SHA-256), its tool-call journal, and the session's row. A damaged record does not stop the check:
   * every one is listed. Reads (`messages`, `envelopes()`, `buildContext`, `snapshot()`, ...)
   * stop at the first damaged record they meet with `STORE_CORRUPT` naming the session and seq;
   * `envelopes({ fromSeq, limit })` still reads the records around it.
   *
   * @throws `CLOSED`; damage is never thrown.
   */
  verify(): VerifyReport

  // ----- context -----

  /**
   * The next request for a provider, from the latest compaction on: its summary first, then the
   * kept records; events, `includeInContext: false` records, orphan results and thinking without
   * a signature left out; a response split over several records merged into one message. Cut to
   * `maxTokens` / `maxMessages` by whole turns, oldest first (a tool call never apart from its
   * result, the latest prompt always kept: `stats.fits` is false when even that is over budget).
   * Tool results longer than `toolResultPreviewChars` go in as a preview and a line naming
   * `read_tool_output(tool_use_id)`. Then converted for `target` (see `toAnthropic`,
   * `toOpenAIChat`, `toOpenAIResponses`; what the target cannot express is in `stats.warnings`).
   * The output always passes `validateMessages(messages, { target })`.
   *
   * Token estimates (`stats.estimatedTokens`, the budget): characters of the content blocks as
   * JSON times `stats.tokensPerChar`, which is calibrated on the latest usage the provider
   * reported in this context (`calibrated: true`; the compaction's ratio right after one), else
   * 0.25.
   *
   * @throws `INVALID_INPUT` for bad options (with the path, e.g. `options.system`); `CLOSED`.
   */
  buildContext(options: ContextOptions & { target: 'anthropic'; system: string | TextBlock[] }): AnthropicContext & { system: string | AnthropicTextBlockParam[] }
  buildContext(options: ContextOptions & { target: 'anthropic' }): AnthropicContext
  buildContext(options: ContextOptions & { target: 'openai-chat' }): OpenAIChatContext
  buildContext(options: ContextOptions & { target: 'openai-responses' }): OpenAIResponsesContext
  buildContext(options: ContextOptions): BuiltContext

  /** The full output of a tool call (what a preview stands for). `NOT_FOUND` if there is none. */
  readToolOutput(toolUseId: string): string | ContentBlock[]

  /**
   * What to summarise so that the rest fits `targetTokens`: whole turns from the oldest, the
   * last `keepTurns` (default 2) always kept. Returns the records and a plain-text rendering to
   * hand to a summarising model. Writes nothing.
   */
  compactionPlan(options: { targetTokens: number; keepTurns?: number | undefined }): CompactionPlan

  /**
   * Appends a compaction record (summary, first kept record, tokens before and after, trigger)
   * in one transaction. From then on the context starts there and the token tracker is re-based
   * on it; the history stays. Without `firstKeptUuid` (absent or `null`, as `compactionPlan`
   * gives it when there is nothing to keep), keeps the last `keepTurns` (default 2).
   */
  compact(options: { summary: string; firstKeptUuid?: string | null | undefined; keepTurns?: number | undefined; trigger?: 'auto' | 'manual' | undefined }): Envelope

  /**
   * Continues the session from an earlier record: the next append's parent is `toUuid`, and
   * `messages`, `turns`, `tokenTracker` and `buildContext` follow the branch ending there. The
   * abandoned branch stays in the log (`envelopes()`) and is listed by `branches()`. A `rewind`
   * record marks the switch. `NOT_FOUND` if there is no such record.
   */
  rewind(toUuid: string): void

  /** The current branch first, then every branch a rewind left. */
  branches(): Branch[]
}

export interface Branch {
  /** the branch's last record */
  leafUuid: string
  leafSeq: number
  /** messages on the branch from the start of the session */
  messageCount: number
  current: boolean
  /** for an abandoned branch: the record the session was rewound to when it was left */
  forkedAtUuid?: string
}

export interface ContextOptions {
  target: 'anthropic' | 'openai-chat' | 'openai-responses'
  maxTokens?: number | undefined
  maxMessages?: number | undefined
  /** never stored; placed as the target wants */
  system?: string | TextBlock[] | undefined
  toolResultPreviewChars?: number | undefined
  /**
   * `'same-model'` (default): thinking goes back only to the provider and `model` that wrote it;
   * `'keep'`: every signed thinking block; `'drop'`: none. Unsigned thinking never goes back.
   */
  reasoning?: 'keep' | 'drop' | 'same-model' | undefined
  /** the model the request is for (for `'same-model'`) */
  model?: string | undefined
}

export interface ContextStats {
  /** the first record of the context: the first kept after the latest compaction, else 0 */
  startSeq: number
  compacted: boolean
  messages: number
  keptRecords: number
  droppedRecords: number
  dropped: Array<{ fromSeq: number; toSeq: number; messages: number }>
  keptTurns: number
  droppedTurns: number
  estimatedTokens: number
  fits: boolean
  tokensPerChar: number
  calibrated: boolean
  previewed: Array<{ toolUseId: string; chars: number; shownChars: number }>
  droppedThinking: number
  /**
   * tool_use / tool_result blocks left out of the request: a counterpart not in the context, a
   * second use of one id or a second result, or before the first user message
   */
  unpaired: Array<{ type: string; id: string }>
  /** what the target cannot express (thinking for OpenAI, ...), with paths into the stored messages */
  warnings: ConvertWarning[]
  /** tool-call ids the target does not accept, as sent -> as stored */
  idMap: IdMap
}

/**
 * A request for Anthropic: `messages.create({ system, messages })`. Messages are `{ role, content }`
 * only (response metadata such as `id`, `model` and `usage` is not part of a request).
 */
export interface AnthropicContext {
  /** the system prompt as given; absent when none was given */
  system?: string | AnthropicTextBlockParam[]
  messages: AnthropicMessageParam[]
  stats: ContextStats
}

/** A request for OpenAI Chat Completions: `chat.completions.create({ messages })`. */
export interface OpenAIChatContext {
  /** the system prompt first (`{ role: 'system' }`), then the conversation */
  messages: OpenAIChatMessage[]
  stats: ContextStats
}

/** A request for the OpenAI Responses API: `responses.create({ input: messages })`. */
export interface OpenAIResponsesContext {
  /** input items: the system prompt first, then messages, function calls, their outputs and reasoning items */
  messages: OpenAIResponsesItem[]
  stats: ContextStats
}

export type BuiltContext = AnthropicContext | OpenAIChatContext | OpenAIResponsesContext

export interface CompactionPlan {
  records: Array<{ uuid: string; seq: number; message: Message }>
  text: string
  firstKeptUuid: string | null
  tokensBefore: number
  tokensToSummarise: number
  tokensKept: number
  turnsSummarised: number
  turnsKept: number
  /**
   * records to summarise left out of `records` and `text`, the oldest: a plan hands over at most
   * 1,000,000 estimated tokens to summarise (0 but for a context larger than any model's window;
   * docs/context.md)
   */
  recordsOmitted: number
}

/** Lifecycle of a tool call in the journal. */
export type ToolCallState = 'requested' | 'started' | 'completed' | 'failed' | 'denied'

/** A tool call as the journal knows it. */
export interface ToolCall {
  /** the block's `id` (`tool_use_id` of its result) */
  id: string
  kind: 'tool_use' | 'server_tool_use' | 'mcp_tool_use' | (string & {})
  name: string
  /** the call's input, as the model gave it */
  input: unknown
  state: ToolCallState
  /** the record holding the call */
  callUuid: string
  callSeq: number
  requestedAt: string
  startedAt?: string
  endedAt?: string
  /** the record holding its result, once one is in the history */
  resultSeq?: number
}

/** What a tool produced, for `recordToolOutcome` and `replay`. */
export interface ToolResultInput {
  content: string | ContentBlockParam[]
  is_error?: boolean | undefined
  /** raw tool execution data, kept as given */
  toolUseResult?: Record<string, unknown> | undefined
  /** the user refused the call (state `denied` rather than `failed`) */
  denied?: boolean | undefined
}

export type RepairKind =
  | 'backfill'        // the journal holds the result: it goes into the history
  | 'replayed'        // safe call re-run once; its real result goes into the history
  | 'never_started'   // is_error result: the tool never ran
  | 'unknown_outcome' // is_error result: started, outcome unknown, side effects possible
  | 'left'            // started, outcome unknown, left unanswered (unknownOutcome: 'leave')
  | 'stranded'        // unanswered call of an earlier response with later messages: not written
  | 'close_stream'    // a response cut off mid-stream becomes an interrupted assistant record

export interface Repair {
  kind: RepairKind
  toolUseId?: string
  name?: string
  state?: ToolCallState
  /** why, in words, e.g. "interrupted: outcome unknown, side effects possible" */
  reason: string
  /** the record the repair writes; absent when it writes nothing */
  recordUuid?: string
}

export interface RecoveryReport {
  repairs: Repair[]
  recordsWritten: number
  /** nothing needed repairing */
  clean: boolean
}

export interface RecoverOptions {
  /** safe = idempotent: may be re-run. Requires `replay`. */
  isSafe?: ((call: ToolCall) => boolean) | undefined
  /** re-runs a safe call; a rejection is recorded as an is_error result */
  replay?: ((call: ToolCall) => Promise<ToolResultInput | string> | ToolResultInput | string) | undefined
  /** started, no outcome, not safe: `'mark'` (default) or `'leave'` */
  unknownOutcome?: 'mark' | 'leave' | undefined
}

export interface ResponseOptions {
  requestId?: string | undefined
  /** fills `model` of a message assembled from simple chunks */
  model?: string | undefined
  provider?: string | undefined
}

/** The simple chunk form of `ResponseWriter.push`. */
export type StreamChunk =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string; signature?: string | undefined }
  | { type: 'tool_call_delta'; id: string; name?: string | undefined; delta: string }

/**
 * An Anthropic raw stream event as `@anthropic-ai/sdk` yields it: iterating a `MessageStream`
 * (`client.messages.stream(...)`) or a `Stream<RawMessageStreamEvent>`
 * (`client.messages.create({ ..., stream: true })`) gives values of this type, so
 * `for await (const ev of stream) writer.push(ev)` type-checks without a cast. The shapes are
 * structural (no index signatures), so the SDK's interfaces fit as they are; fields not listed
 * are kept as given. Deltas and blocks of types not listed here are accepted (and ignored or
 * kept, as the SDK's own accumulator does).
 */
export type AnthropicStreamEvent =
  | {
      readonly type: 'message_start'
      /** The response's `Message`, with empty `content`. */
      readonly message: MessageParamLike
    }
  | {
      readonly type: 'content_block_start'
      readonly index: number
      /** The block as it starts (`text: ''`, `input: {}`, ...). */
      readonly content_block: ContentBlockParam
    }
  | {
      readonly type: 'content_block_delta'
      readonly index: number
      /**
       * `text_delta` (`text`), `input_json_delta` (`partial_json`), `thinking_delta`
       * (`thinking`), `signature_delta` (`signature`), `citations_delta` (`citation`).
       */
      readonly delta: { readonly type: string }
    }
  | { readonly type: 'content_block_stop'; readonly index: number }
  | {
      readonly type: 'message_delta'
      /** `stop_reason`, `stop_sequence`, ... */
      readonly delta: { readonly stop_reason?: string | null | undefined; readonly stop_sequence?: string | null | undefined }
      /** Cumulative usage (`output_tokens`, ...). */
      readonly usage?: {
        readonly input_tokens?: number | null | undefined
        readonly output_tokens?: number | null | undefined
        readonly cache_read_input_tokens?: number | null | undefined
        readonly cache_creation_input_tokens?: number | null | undefined
      } | undefined
    }
  | { readonly type: 'message_stop' }
  | { readonly type: 'ping' }
  | { readonly type: 'error'; readonly error: { readonly type?: string | undefined; readonly message?: string | undefined } }

export interface ResponseWriter {
  /** the stream's id: its `stream` records and its final record (`streamId`) carry it */
  readonly id: string
  /**
   * Takes one chunk as it arrives: `for await (const ev of stream) writer.push(ev)`, with
   * `stream` the SDK's `MessageStream` or `Stream<RawMessageStreamEvent>`; or a simple chunk
   * (`StreamChunk`). The type parameter is inferred from `chunk`: fields the types do not list
   * pass (the SDK's events carry more), while a chunk of an unknown type or missing a required
   * field is a compile error. One stream takes one form: the first chunk decides.
   * @throws `INVALID_INPUT` (with the path) for a malformed or out-of-order chunk, which changes
   *   nothing; `STORE_IO` if persisting failed (the chunk stays buffered for the next flush).
   */
  push<C extends StreamChunk | AnthropicStreamEvent>(chunk: C): void
  /** Stores the complete assistant message: `message` if given (e.g. the SDK's `finalMessage()`), else the assembled one. */
  finish(message?: MessageParamLike | Message): Envelope
  /**
   * Stores an `error` record with `error` and the partial output a model may see again (text,
   * thinking only if it completed with its signature, complete tool calls): in context, so
   * "continue" has an anchor. With nothing salvageable, the record stays out of `messages`.
   */
  fail(error: { message: string; code?: string | undefined }): Envelope
}

/** Telemetry events (`store.onEvent`, THREADLINE_TELEMETRY=console). */
export type TelemetryEvent =
  | { type: 'repair'; time: string; sessionId: string; repair: Repair }
  | { type: 'recovery'; time: string; sessionId: string; repairs: number; recordsWritten: number; durationMs: number }
  | { type: 'interrupted_session'; time: string; sessionId: string; session: SessionInfo }
  | { type: 'persist_error'; time: string; sessionId?: string; operation: string; code: 'STORE_IO' | 'STORE_BUSY'; message: string }
  | { type: 'slow_operation'; time: string; sessionId?: string; operation: string; durationMs: number; thresholdMs: number }
  /**
   * What a SQLite store found and handled on its own (docs/recovery.md, "What an acknowledged
   * append is promised"): a damaged append log (replayed up to the damage, kept as
   * `<log>.damaged`, listed by `verify()`), a log deleted under this process (replaced), or
   * records a readonly store could not replay because it cannot write the file.
   */
  | { type: 'log_damaged' | 'log_deleted' | 'log_unreplayed'; time: string; message: string }
  /**
   * A PostgreSQL store's connection was made anew (a failover) and the server lacks records of a
   * session this process had been acknowledged: the message names the session and the records'
   * seqs (docs/engines.md, "Failover"). The operation that found it failed with STORE_CORRUPT.
   */
  | { type: 'records_lost'; time: string; message: string }

/**
 * Where `Store.open()` puts the store when given no path: `$THREADLINE_HOME/threadline.db` if
 * `THREADLINE_HOME` is set, else the platform's per-user data directory +
 * `threadline/threadline.db` (e.g. `~/.local/share/threadline/threadline.db` on Linux).
 */
export declare function defaultStorePath(): string

/** What {@link validateMessages} can find wrong. */
export type MessageProblemCode =
  | 'not_a_message'              // not {role: 'user' | 'assistant' | 'system', content: string | blocks}
  | 'first_not_user'             // the first message is not a user message
  | 'roles_not_alternating'      // two messages in a row with the same role
  | 'empty_content'              // no blocks (only the final assistant message may have none)
  | 'empty_text'                 // an empty text block (a tool result's too), empty string content, or text of only whitespace with nothing else in its message
  | 'unsigned_thinking'          // a thinking block without its signature
  | 'tool_use_without_result'    // a tool_use not answered by a tool_result in the next message
  | 'tool_result_without_tool_use' // a tool_result whose tool_use is not in the message before
  | 'duplicate_tool_result'      // a second tool_result for the same tool_use
  | 'duplicate_tool_use_id'      // the same tool_use id twice in the conversation
  | 'tool_result_not_first'      // a tool_result after another kind of block in its message
  | 'invalid_tool_id'            // (OpenAI targets) a tool call id the provider does not accept

/** One thing the provider would reject a request for. */
export interface MessageProblem {
  /** Index of the message in the list. */
  index: number
  /** Path of the offending message or block, e.g. `[3].content[1]`. */
  path: string
  code: MessageProblemCode
  message: string
}

/**
 * Checks a message list (Anthropic Messages API shape) the way the provider does before a request:
 * every `tool_use` answered by exactly one `tool_result` in the next message, no result without its
 * call, roles alternating from a user message, no empty text, no unsigned thinking. Returns every
 * problem with its path, in order; an empty array when the list is valid. Writes nothing.
 *
 * With `target: 'openai-chat'`, checks Chat Completions messages instead (every assistant
 * `tool_calls` entry answered exactly once by a `role: 'tool'` message right after it, no orphan
 * tool messages, ids of at most 40 characters, no empty content); with `'openai-responses'`,
 * Responses input items (every `function_call` answered by one `function_call_output` after it,
 * no orphan outputs, `call_id` of at most 64 characters). `buildContext` output always passes the
 * check of its target.
 *
 * Note: Claude Code writes one streamed response as several assistant records; passed as they are,
 * they are reported as `roles_not_alternating`.
 *
 * @throws {ThreadlineError} `INVALID_INPUT` when `messages` is not an array or cannot be JSON, or
 *   for an unknown target.
 */
export declare function validateMessages(
  messages: ReadonlyArray<unknown>,
  options?: { target?: 'anthropic' | 'openai-chat' | 'openai-responses' | undefined },
): MessageProblem[]

// ---------------------------------------------------------------------------------------------
// Provider converters
// ---------------------------------------------------------------------------------------------
//
// Pure functions between the neutral model (Threadline's messages: the Anthropic wire shape) and
// the request / response shapes of the Anthropic Messages API, OpenAI Chat Completions and the
// OpenAI Responses API. Nothing is stored.
//
// - What both sides can express survives a round trip: `fromX(toX(m)).messages` deep-equals `m`
//   (its `role` and `content`; response metadata such as `id`, `model`, `usage` is not part of a
//   request and is left out).
// - What the target cannot express is reported in `warnings` (`ConvertWarningCode`), never dropped
//   silently.
// - Tool-call ids the target does not accept are mapped deterministically (`tl_` + 32 hex digits
//   of the id's SHA-256) on the call and its result alike; `idMap` (target id -> original id)
//   given to `fromX` maps them back. Anthropic accepts `^[a-zA-Z0-9_-]+$`, Chat Completions ids of
//   at most 40 characters, the Responses API `call_id`s of at most 64.
// - Provider data with no neutral equivalent is kept so that it goes back to the API that wrote
//   it, and only there: a field `openai` on a block or message (Responses item ids `msg_...` /
//   `fc_...`, `status`, output-text `annotations`, an image's `detail`, the exact `arguments` text
//   of a call, a chat message's `name`, `openai.refusal` on a refusal's text, ...), and the blocks
//   `{ type: 'openai_reasoning', ... }` (a Responses reasoning item, its fields as given),
//   `{ type: 'openai_item', item }` (any other Responses item: web search, MCP, ...) and
//   `{ type: 'openai_part', part }` (a content part like `input_audio` or a Files API id).
//   `toAnthropic` strips every `openai` field and leaves those blocks out (with a warning).
//
// Errors: `INVALID_INPUT` with the path, e.g.
// `fromOpenAIChat: messages[3].tool_calls[0].function.arguments: not valid JSON (...)`.

/** Why a conversion could not carry something over. */
export type ConvertWarningCode =
  | 'thinking_dropped'            // thinking / redacted_thinking to OpenAI (the signature is Anthropic's)
  | 'reasoning_dropped'           // an openai_reasoning block to Anthropic or Chat Completions
  | 'block_dropped'               // a block the target has no place for (server tools, MCP, search results, another API's items or parts)
  | 'unsupported_source'          // an image / document source the target cannot take (Files API ids; a document URL for Chat Completions)
  | 'document_as_text'            // a plain-text or content document sent as text parts
  | 'tool_result_content_moved'   // Chat Completions: images / PDFs of a tool result moved to a user message after the tool messages
  | 'is_error_dropped'            // OpenAI has no error flag on a tool result: the content is sent as it is
  | 'cache_control_dropped'       // OpenAI takes no cache_control (its prompt cache is automatic)
  | 'citations_dropped'           // citations on text, or a document's citation settings
  | 'field_dropped'               // another field the target cannot carry (a document's context, a non-direct caller, an unknown message field)
  | 'reordered'                   // Chat Completions: text after a tool call goes before the calls
  | 'message_dropped'             // a message left with nothing to send is left out
  | 'system_moved'                // no longer given: a system / developer message after the start stays in place
  | 'invalid_skipped'             // (Rust API only, unchecked input) a value that is not a neutral message or block

/** Something a conversion could not carry over. */
export interface ConvertWarning {
  /** Where in the input, e.g. `messages[3].content[1]`, `items[4]`, `system[0]`. */
  path: string
  code: ConvertWarningCode
  message: string
}

/** Target id -> original id, for every tool-call id a conversion had to change. */
export type IdMap = Record<string, string>

/** Options of `toAnthropic`, `toOpenAIChat`, `toOpenAIResponses`. */
export interface ToProviderOptions {
  /** The system prompt: Anthropic takes it beside the messages, OpenAI as the first message / item. */
  system?: string | ReadonlyArray<TextBlock> | null | undefined
}

/** Options of `fromOpenAIChat` and `fromOpenAIResponses`. */
export interface FromProviderOptions {
  /** The `idMap` the matching `toX` returned: restores the original tool-call ids. */
  idMap?: IdMap | undefined
}

/** Options of `fromAnthropic`. */
export interface FromAnthropicOptions extends FromProviderOptions {
  /** The request's `system`, returned as the result's `system`. */
  system?: string | ReadonlyArray<TextBlock> | null | undefined
}

/** What the `fromX` functions return: neutral messages, ready to `append` or `restoreMessages`. */
export interface FromProviderResult {
  /** The system prompt found (leading system / developer messages); absent when none. */
  system?: string | TextBlock[]
  messages: Message[]
  warnings: ConvertWarning[]
}

// ----- Anthropic request shapes (what `toAnthropic` returns; the SDK's `MessageParam` accepts them) -----

/** A prompt-cache breakpoint as a request takes it. */
export interface AnthropicCacheControlParam {
  type: 'ephemeral'
  ttl?: '5m' | '1h'
}

/** A citation on a text block, as a request takes it. */
export type AnthropicCitationParam =
  | { type: 'char_location'; cited_text: string; document_index: number; document_title: string | null; start_char_index: number; end_char_index: number }
  | { type: 'page_location'; cited_text: string; document_index: number; document_title: string | null; start_page_number: number; end_page_number: number }
  | { type: 'content_block_location'; cited_text: string; document_index: number; document_title: string | null; start_block_index: number; end_block_index: number }
  | { type: 'web_search_result_location'; cited_text: string; encrypted_index: string; title: string | null; url: string }
  | { type: 'search_result_location'; cited_text: string; search_result_index: number; source: string; title: string | null; start_block_index: number; end_block_index: number }

export interface AnthropicTextBlockParam {
  type: 'text'
  text: string
  cache_control?: AnthropicCacheControlParam | null
  citations?: AnthropicCitationParam[] | null
}

export interface AnthropicImageBlockParam {
  type: 'image'
  source:
    | { type: 'base64'; media_type: 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp'; data: string }
    | { type: 'url'; url: string }
    | { type: 'file'; file_id: string }
  cache_control?: AnthropicCacheControlParam | null
}

export interface AnthropicDocumentBlockParam {
  type: 'document'
  source:
    | { type: 'base64'; media_type: 'application/pdf'; data: string }
    | { type: 'text'; media_type: 'text/plain'; data: string }
    | { type: 'url'; url: string }
    | { type: 'file'; file_id: string }
    | { type: 'content'; content: string | Array<AnthropicTextBlockParam | AnthropicImageBlockParam> }
  title?: string | null
  context?: string | null
  citations?: { enabled?: boolean } | null
  cache_control?: AnthropicCacheControlParam | null
}

export interface AnthropicThinkingBlockParam {
  type: 'thinking'
  thinking: string
  signature: string
}

export interface AnthropicRedactedThinkingBlockParam {
  type: 'redacted_thinking'
  data: string
}

export interface AnthropicToolUseBlockParam {
  type: 'tool_use'
  id: string
  name: string
  input: unknown
  caller?: { type: 'direct' } | { type: 'code_execution_20250825'; tool_id: string } | { type: 'code_execution_20260120'; tool_id: string }
  cache_control?: AnthropicCacheControlParam | null
}

export interface AnthropicToolResultBlockParam {
  type: 'tool_result'
  tool_use_id: string
  content?: string | Array<AnthropicTextBlockParam | AnthropicImageBlockParam | AnthropicDocumentBlockParam>
  is_error?: boolean
  cache_control?: AnthropicCacheControlParam | null
}

/**
 * A block of an Anthropic request. Blocks of the other types the Messages API defines
 * (`server_tool_use`, `web_search_tool_result`, `mcp_tool_use`, `container_upload`, ...) are
 * passed through by `toAnthropic` as they were stored; they are not in this union.
 */
export type AnthropicContentBlockParam =
  | AnthropicTextBlockParam
  | AnthropicImageBlockParam
  | AnthropicDocumentBlockParam
  | AnthropicThinkingBlockParam
  | AnthropicRedactedThinkingBlockParam
  | AnthropicToolUseBlockParam
  | AnthropicToolResultBlockParam

/** A message of an Anthropic request: `role` and `content`, nothing else. */
export type AnthropicMessageParam =
  | { role: 'user'; content: string | AnthropicContentBlockParam[] }
  | { role: 'assistant'; content: string | AnthropicContentBlockParam[] }
  /** a system message inside the conversation, in place */
  | { role: 'system'; content: string | AnthropicTextBlockParam[] }

export interface ToAnthropicResult {
  /** The system prompt as given (`openai` fields stripped); absent when none was given. */
  system?: string | AnthropicTextBlockParam[]
  messages: AnthropicMessageParam[]
  warnings: ConvertWarning[]
  idMap: IdMap
}

// ----- OpenAI Chat Completions shapes -----

/** `{ mode: 'explicit' }`: a prompt-cache breakpoint on an OpenAI part (kept from OpenAI input). */
export interface OpenAIPromptCacheBreakpoint {
  mode: 'explicit'
}

export interface OpenAIChatTextPart {
  type: 'text'
  text: string
  prompt_cache_breakpoint?: OpenAIPromptCacheBreakpoint
}

export interface OpenAIChatImagePart {
  type: 'image_url'
  /** `url`: an `https:` URL, or base64 data as a `data:image/png;base64,...` URL. */
  image_url: { url: string; detail?: 'auto' | 'low' | 'high' }
  prompt_cache_breakpoint?: OpenAIPromptCacheBreakpoint
}

export interface OpenAIChatFilePart {
  type: 'file'
  /** A PDF: `file_data` a `data:application/pdf;base64,...` URL, `filename` the document's title (default `document.pdf`). */
  file: { file_data?: string; file_id?: string; filename?: string }
  prompt_cache_breakpoint?: OpenAIPromptCacheBreakpoint
}

export interface OpenAIChatAudioPart {
  type: 'input_audio'
  input_audio: { data: string; format: 'wav' | 'mp3' }
  prompt_cache_breakpoint?: OpenAIPromptCacheBreakpoint
}

export interface OpenAIChatRefusalPart {
  type: 'refusal'
  refusal: string
}

export type OpenAIChatToolCall =
  | { id: string; type: 'function'; function: { name: string; arguments: string } }
  | { id: string; type: 'custom'; custom: { name: string; input: string } }

export interface OpenAIChatSystemMessage {
  role: 'system'
  content: string | OpenAIChatTextPart[]
  name?: string
}

export interface OpenAIChatUserMessage {
  role: 'user'
  content: string | Array<OpenAIChatTextPart | OpenAIChatImagePart | OpenAIChatFilePart | OpenAIChatAudioPart>
  name?: string
}

export interface OpenAIChatAssistantMessage {
  role: 'assistant'
  /** One plain text block: a string; several, or text with extras: parts; no text: `null`. */
  content: string | Array<OpenAIChatTextPart | OpenAIChatRefusalPart> | null
  refusal?: string | null
  /** One per tool_use; `arguments` is the input as JSON text (the exact text it came with, when unchanged). */
  tool_calls?: OpenAIChatToolCall[]
  name?: string
  audio?: { id: string } | null
}

export interface OpenAIChatToolMessage {
  role: 'tool'
  tool_call_id: string
  /** A tool_result's string content stays a string; its blocks become text parts. */
  content: string | OpenAIChatTextPart[]
}

/** A message `toOpenAIChat` returns (assignable to the SDK's `ChatCompletionMessageParam`). */
export type OpenAIChatMessage =
  | OpenAIChatSystemMessage
  | OpenAIChatUserMessage
  | OpenAIChatAssistantMessage
  | OpenAIChatToolMessage

/**
 * A message `fromOpenAIChat` accepts: the SDK's `ChatCompletionMessageParam` and the
 * `ChatCompletionMessage` of a response (`choices[0].message`) fit.
 */
export type OpenAIChatMessageParam =
  | OpenAIChatSystemMessage
  | { role: 'developer'; content: string | ReadonlyArray<OpenAIChatTextPart>; name?: string }
  | { role: 'user'; content: string | ReadonlyArray<OpenAIChatTextPart | OpenAIChatImagePart | OpenAIChatFilePart | OpenAIChatAudioPart>; name?: string }
  | {
      role: 'assistant'
      content?: string | ReadonlyArray<OpenAIChatTextPart | OpenAIChatRefusalPart> | null
      refusal?: string | null
      tool_calls?: ReadonlyArray<OpenAIChatToolCall>
      name?: string
      /** kept under the message's `openai` (with `audio`, `function_call`) and restored by `toOpenAIChat` */
      annotations?: ReadonlyArray<unknown>
      audio?: { id: string } | null
      function_call?: { name: string; arguments: string } | null
    }
  | { role: 'tool'; tool_call_id: string; content: string | ReadonlyArray<OpenAIChatTextPart> }
  /** @deprecated function calling without ids: rejected at run time (`INVALID_INPUT`); use tool calls. */
  | { role: 'function'; name: string; content: string | null }

export interface ToOpenAIChatResult {
  /** The system prompt first (`{ role: 'system', content }`), then the conversation. */
  messages: OpenAIChatMessage[]
  warnings: ConvertWarning[]
  idMap: IdMap
}

// ----- OpenAI Responses API shapes -----

export interface OpenAIResponsesInputText {
  type: 'input_text'
  text: string
  prompt_cache_breakpoint?: OpenAIPromptCacheBreakpoint
}

export interface OpenAIResponsesInputImage {
  type: 'input_image'
  /** `'auto'` unless the image came from OpenAI with another detail. */
  detail: 'low' | 'high' | 'auto' | 'original'
  /** An `https:` URL, or base64 data as a `data:` URL. */
  image_url?: string | null
  file_id?: string | null
  prompt_cache_breakpoint?: OpenAIPromptCacheBreakpoint
}

export interface OpenAIResponsesInputFile {
  type: 'input_file'
  /** A PDF as a `data:application/pdf;base64,...` URL (with `filename`), or a `file_url`. */
  file_data?: string
  file_url?: string
  file_id?: string | null
  filename?: string
  detail?: 'auto' | 'low' | 'high'
  prompt_cache_breakpoint?: OpenAIPromptCacheBreakpoint
}

export type OpenAIResponsesInputContent = OpenAIResponsesInputText | OpenAIResponsesInputImage | OpenAIResponsesInputFile

export type OpenAIResponsesAnnotation =
  | { type: 'file_citation'; file_id: string; filename: string; index: number }
  | { type: 'url_citation'; url: string; title: string; start_index: number; end_index: number }
  | { type: 'container_file_citation'; container_id: string; file_id: string; filename: string; start_index: number; end_index: number }
  | { type: 'file_path'; file_id: string; index: number }

export interface OpenAIResponsesOutputText {
  type: 'output_text'
  text: string
  annotations: OpenAIResponsesAnnotation[]
  logprobs?: Array<{ token: string; bytes: number[]; logprob: number; top_logprobs: Array<{ token: string; bytes: number[]; logprob: number }> }>
}

export interface OpenAIResponsesRefusal {
  type: 'refusal'
  refusal: string
}

/** A message item: the system prompt, a user message, or assistant text (`content` a string). */
export interface OpenAIResponsesMessage {
  type: 'message'
  role: 'system' | 'user' | 'assistant'
  content: string | OpenAIResponsesInputContent[]
  phase?: 'commentary' | 'final_answer' | null
}

/** Assistant text that came from a Responses output message, going back as that message. */
export interface OpenAIResponsesOutputMessage {
  type: 'message'
  id: string
  role: 'assistant'
  status: 'in_progress' | 'completed' | 'incomplete'
  content: Array<OpenAIResponsesOutputText | OpenAIResponsesRefusal>
  phase?: 'commentary' | 'final_answer' | null
}

export interface OpenAIResponsesFunctionCall {
  type: 'function_call'
  /** The item id (`fc_...`) when the call came from the Responses API. */
  id?: string
  call_id: string
  name: string
  /** The input as JSON text (the exact text it came with, when unchanged). */
  arguments: string
  status?: 'in_progress' | 'completed' | 'incomplete'
}

export interface OpenAIResponsesFunctionCallOutput {
  type: 'function_call_output'
  id?: string | null
  call_id: string
  /** A tool_result's string content stays a string; its blocks become input parts. */
  output: string | OpenAIResponsesInputContent[]
  status?: 'in_progress' | 'completed' | 'incomplete' | null
}

export interface OpenAIResponsesCustomToolCall {
  type: 'custom_tool_call'
  id?: string
  call_id: string
  name: string
  input: string
}

export interface OpenAIResponsesCustomToolCallOutput {
  type: 'custom_tool_call_output'
  id?: string
  call_id: string
  output: string | OpenAIResponsesInputContent[]
}

/** A reasoning item, as a Responses output gave it (kept as an `openai_reasoning` block). */
export interface OpenAIResponsesReasoning {
  type: 'reasoning'
  id: string
  summary: Array<{ type: 'summary_text'; text: string }>
  content?: Array<{ type: 'reasoning_text'; text: string }>
  /** Present when requested with `include: ['reasoning.encrypted_content']` (needed with `store: false`). */
  encrypted_content?: string | null
  status?: 'in_progress' | 'completed' | 'incomplete'
}

/**
 * An input item `toOpenAIResponses` returns (assignable to the SDK's `ResponseInputItem`). Items
 * kept as `openai_item` blocks (web search calls, MCP items, ...) go back as they were given;
 * they are not in this union.
 */
export type OpenAIResponsesItem =
  | OpenAIResponsesMessage
  | OpenAIResponsesOutputMessage
  | OpenAIResponsesFunctionCall
  | OpenAIResponsesFunctionCallOutput
  | OpenAIResponsesCustomToolCall
  | OpenAIResponsesCustomToolCallOutput
  | OpenAIResponsesReasoning

/**
 * An item `fromOpenAIResponses` accepts: the SDK's `ResponseInputItem` and a response's
 * `output` items fit (any item with a `type`; a message may omit it). Items other than messages,
 * function / custom tool calls and their outputs, and reasoning are kept as `openai_item` blocks.
 */
export type OpenAIResponsesItemParam =
  | OpenAIResponsesItem
  | { readonly type: string }
  | { readonly type?: 'message'; readonly role: string; readonly content: unknown }
  | { readonly type?: 'item_reference' | null; readonly id: string }

export interface ToOpenAIResponsesResult {
  /** Input items: the system prompt first (`{ type: 'message', role: 'system', content }`). */
  messages: OpenAIResponsesItem[]
  warnings: ConvertWarning[]
  idMap: IdMap
}

/**
 * Neutral messages to an Anthropic request: `{ role, content }` per message (response metadata
 * left out), `system` beside them. Strips every `openai` field and leaves out `openai_*` blocks
 * (warning `reasoning_dropped` / `block_dropped`); a message left empty is left out and its
 * neighbours of one role merged. Ids not matching `^[a-zA-Z0-9_-]+$` are mapped (`idMap`).
 *
 * @example
 * const { system, messages } = toAnthropic(session.messages, { system: 'You are terse.' })
 * await anthropic.messages.create({ model, max_tokens: 1024, system, messages })
 * @throws {ThreadlineError} `INVALID_INPUT` (with the path) for a value that is not a neutral message.
 */
export declare function toAnthropic(messages: ReadonlyArray<MessageParamLike>, options?: ToProviderOptions): ToAnthropicResult

/**
 * Anthropic messages (`MessageParam`s, response `Message`s) to neutral messages: string content
 * becomes one text block, a `system` role message stays in place (a neutral system message),
 * ids are restored with `idMap`; everything else is kept as given.
 */
export declare function fromAnthropic(
  messages: ReadonlyArray<MessageParamLike | { role: 'system'; content: string | ReadonlyArray<TextBlock> }>,
  options?: FromAnthropicOptions,
): FromProviderResult

/**
 * Neutral messages to Chat Completions messages: the system prompt first; per assistant message
 * its text, refusal and tool calls (`arguments`: the input as JSON); per user message one `tool`
 * message per tool_result, in order, then a user message with the rest (images as `image_url`
 * parts, PDFs as `file` parts, base64 as `data:` URLs). Warns about thinking, OpenAI reasoning,
 * server tools, `is_error`, `cache_control`, citations, images in tool results (moved to the user
 * message after the tool messages), text after a tool call (moved before it). Ids longer than 40
 * characters are mapped (`idMap`).
 *
 * @example
 * const { messages, idMap } = toOpenAIChat(session.messages, { system: 'You are terse.' })
 * const completion = await openai.chat.completions.create({ model, messages })
 * session.append(fromOpenAIChat([completion.choices[0].message], { idMap }).messages[0])
 */
export declare function toOpenAIChat(messages: ReadonlyArray<MessageParamLike>, options?: ToProviderOptions): ToOpenAIChatResult

/**
 * Chat Completions messages (params, or a response's `choices[0].message`) to neutral messages:
 * leading system / developer messages become `system`, later ones system messages in place; tool
 * messages and the user message after them one user message (tool_results first); consecutive
 * messages of one role merged; ids restored with `idMap`. Fields with no neutral equivalent are kept under `openai` / as
 * `openai_part` blocks, restored by `toOpenAIChat`.
 *
 * @throws {ThreadlineError} `INVALID_INPUT` with the path, e.g. for `arguments` that are not a
 *   JSON object, or role `'function'`.
 */
export declare function fromOpenAIChat(messages: ReadonlyArray<OpenAIChatMessageParam>, options?: FromProviderOptions): FromProviderResult

/**
 * Neutral messages to Responses input items: the system prompt first; per user message a
 * `function_call_output` per tool_result (images and files included), then a `message` item
 * with the rest; per assistant message, in order, text as assistant `message` items, tool_use as
 * `function_call` items, `openai_reasoning` blocks as their `reasoning` items, `openai_item`
 * blocks as their items (Responses item ids and statuses restored). Warns about thinking,
 * `is_error`, `cache_control`, citations. `call_id`s longer than 64 characters are mapped
 * (`idMap`).
 *
 * @example
 * const { messages: input, idMap } = toOpenAIResponses(session.messages, { system: 'You are terse.' })
 * const response = await openai.responses.create({ model, input, store: false, include: ['reasoning.encrypted_content'] })
 * session.append(fromOpenAIResponses(response.output, { idMap }).messages[0])
 */
export declare function toOpenAIResponses(messages: ReadonlyArray<MessageParamLike>, options?: ToProviderOptions): ToOpenAIResponsesResult

/**
 * Responses items (input items, a response's `output`, or an `input` string) to neutral
 * messages: leading system / developer messages become `system`, later ones system messages in
 * place; consecutive items of one role one
 * message (a response's reasoning, message and function_call items: one assistant message);
 * ids restored with `idMap`. Reasoning items become `openai_reasoning` blocks, other items with
 * no neutral equivalent `openai_item` blocks; item ids, statuses, annotations go under `openai`.
 */
export declare function fromOpenAIResponses(items: ReadonlyArray<OpenAIResponsesItemParam> | string, options?: FromProviderOptions): FromProviderResult

// Only the declarations marked `export` above are public.
export {}
