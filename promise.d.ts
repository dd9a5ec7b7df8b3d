// Type declarations of threadline/promise: the classes of `threadline` with every method
// returning a Promise (its store work runs on libuv's thread pool), and the property reads that
// touch the store (info, messages, allMessages, turns, tokenTracker, contextFill) as methods.
// Calls on one object run in the order they are made. The data types are those of `threadline`.

import type {
  BackupReport,
  SessionUpdate,
  StoreStats,
  VacuumReport,
  ExportFormat,
  ExportOptions,
  ImportOptions,
  ImportReport,
  ImportSource,
  AnthropicContext,
  AnthropicTextBlockParam,
  AnthropicStreamEvent,
  AppendRecord,
  Branch,
  BuiltContext,
  Checked,
  CompactionPlan,
  ContentBlock,
  ContextFill,
  ContextOptions,
  Envelope,
  EnvelopeOptions,
  EnvelopeRange,
  WatchOptions,
  StoreWatchOptions,
  StoreChange,
  StoreWatch,
  EventEnvelope,
  ListSessionsFilter,
  Message,
  MessageParamLike,
  OpenAIChatContext,
  OpenAIResponsesContext,
  OpenSessionOptions,
  RecallToolsOptions,
  RecallTools,
  RecoverOptions,
  RecoveryReport,
  Repair,
  ResponseOptions,
  RestoreRecord,
  RestoreResult,
  SearchOptions,
  SearchPage,
  SessionInfo,
  SessionOptions,
  SessionStatus,
  StoreOptions,
  StreamChunk,
  TelemetryEvent,
  TextBlock,
  TokenTracker,
  ToolCall,
  ToolCallState,
  ToolResultBlock,
  ToolResultInput,
  Turn,
  VerifyOptions,
  VerifyReport,
} from './index.js'

export * from './index.js'

/** A store, as `threadline`'s `Store`, with every method returning a Promise. */
export declare class Store {
  private constructor()

  /** Opens (or creates) the store at `path`, or the default store, off the main thread. */
  static open(path?: string, options?: StoreOptions): Promise<Store>

  /** The same as `open`. */
  static openAsync(path?: string, options?: StoreOptions): Promise<Store>

  /** Imports a snapshot into the store at `path` (the default store when omitted). */
  static importSnapshot(json: string, path?: string, options?: StoreOptions): Promise<Session>

  readonly path: string

  createSession(options?: SessionOptions): Promise<Session>

  openSession(id: string, options?: OpenSessionOptions): Promise<Session>

  /** The same as `openSession`. */
  openSessionAsync(id: string, options?: OpenSessionOptions): Promise<Session>

  listSessions(filter?: ListSessionsFilter): Promise<SessionInfo[]>
  /** As in `threadline`: every change to the store's sessions, live (docs/live.md). */
  watch(options?: StoreWatchOptions): StoreWatch

  deleteSession(id: string): Promise<void>

  stats(): Promise<StoreStats>

  vacuum(): Promise<VacuumReport>

  backup(path: string): Promise<BackupReport>

  verify(options?: VerifyOptions): Promise<VerifyReport>
  import(source: ImportSource, options?: ImportOptions): Promise<ImportReport>

  search(query: string, options?: SearchOptions): Promise<SearchPage>

  /** The tool definitions; their `handle` runs on the thread pool too. */
  recallTools(options?: RecallToolsOptions): Promise<RecallTools>

  /** Closes the store after the calls made on it before. */
  close(): Promise<void>

  interruptedSessions(): Promise<SessionInfo[]>

  forkSession(id: string, options?: { atUuid?: string | undefined; title?: string | undefined }): Promise<Session>

  importSnapshot(json: string): Promise<Session>

  /** Registers a telemetry listener at once (no store work); returns the function that removes it. */
  onEvent(listener: (event: TelemetryEvent) => void): () => void
}

/** A session, as `threadline`'s `Session`, from a promise `Store` only. */
export declare class Session {
  private constructor()

  readonly id: string
  info(): Promise<SessionInfo>
  append<R extends AppendRecord>(record: Checked<R>, envelope?: EnvelopeOptions): Promise<Envelope>
  appendMany<R extends readonly AppendRecord[]>(records: { readonly [K in keyof R]: Checked<R[K]> }): Promise<Envelope[]>
  appendEvent(name: string, data?: unknown, envelope?: EnvelopeOptions): Promise<EventEnvelope>
  restoreMessages(records: ReadonlyArray<RestoreRecord>): Promise<RestoreResult>
  restoreTokenState(state: { [K in keyof TokenTracker]?: number | undefined }): Promise<void>
  messages(): Promise<Message[]>
  allMessages(): Promise<Message[]>
  envelopes(range?: EnvelopeRange): Promise<Envelope[]>
  /** The same as `envelopes`. */
  envelopesAsync(range?: EnvelopeRange): Promise<Envelope[]>
  /** As in `threadline` (docs/live.md): each committed record once, in seq order, as it comes. */
  watch(options?: WatchOptions): AsyncIterableIterator<Envelope>
  turns(): Promise<Turn[]>
  tokenTracker(): Promise<TokenTracker>
  contextFill(): Promise<ContextFill>
  setStatus(status: SessionStatus): Promise<void>
  update(changes: SessionUpdate): Promise<SessionInfo>
  /** Closes the handle after the calls made on it before. */
  close(): Promise<void>
  toolCallStarted(toolUseId: string): Promise<void>
  recordToolOutcome(toolUseId: string, result: ToolResultInput | string): Promise<void>
  toolCalls(filter?: { state?: ToolCallState | undefined }): Promise<ToolCall[]>
  cachedToolResult(toolUseId: string): Promise<ToolResultBlock | null>
  pendingRepairs(): Promise<Repair[]>
  recover(options?: RecoverOptions): Promise<RecoveryReport>
  beginResponse(options?: ResponseOptions): Promise<ResponseWriter>
  snapshot(): Promise<string>
  export(format: ExportFormat, options?: ExportOptions): Promise<string>
  verify(): Promise<VerifyReport>
  buildContext(options: ContextOptions & { target: 'anthropic'; system: string | TextBlock[] }): Promise<AnthropicContext & { system: string | AnthropicTextBlockParam[] }>
  buildContext(options: ContextOptions & { target: 'anthropic' }): Promise<AnthropicContext>
  buildContext(options: ContextOptions & { target: 'openai-chat' }): Promise<OpenAIChatContext>
  buildContext(options: ContextOptions & { target: 'openai-responses' }): Promise<OpenAIResponsesContext>
  buildContext(options: ContextOptions): Promise<BuiltContext>
  readToolOutput(toolUseId: string): Promise<string | ContentBlock[]>
  compactionPlan(options: { targetTokens: number; keepTurns?: number | undefined }): Promise<CompactionPlan>
  compact(options: { summary: string; firstKeptUuid?: string | null | undefined; keepTurns?: number | undefined; trigger?: 'auto' | 'manual' | undefined }): Promise<Envelope>
  rewind(toUuid: string): Promise<void>
  branches(): Promise<Branch[]>
}

/** A response being streamed, as `threadline`'s `ResponseWriter`; pushes keep their order. */
export declare class ResponseWriter {
  private constructor()
  readonly id: string
  push<C extends StreamChunk | AnthropicStreamEvent>(chunk: C): Promise<void>
  finish(message?: MessageParamLike | Message): Promise<Envelope>
  fail(error: { message: string; code?: string | undefined }): Promise<Envelope>
}
