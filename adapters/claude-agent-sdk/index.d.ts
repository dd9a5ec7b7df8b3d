// threadline/claude-agent-sdk: a Threadline store as the Claude Agent SDK's `SessionStore`.
import type {
  SessionKey,
  SessionStore,
  SessionStoreEntry,
  SessionSummaryEntry,
} from '@anthropic-ai/claude-agent-sdk' with { 'resolution-mode': 'import' }
import type { Store } from '../../index.js'
import type { Store as PromiseStore } from '../../promise.js'

export interface ThreadlineSessionStoreOptions {
  /**
   * The Threadline project new sessions are filed under. Default: the transcript's `cwd` (as
   * `threadline import claude-code` files them), else the SDK's projectKey.
   */
  project?: string | undefined
}

/**
 * The Claude Agent SDK's `SessionStore` over a Threadline store (either API, either engine):
 * `query({ prompt, options: { sessionStore: new ThreadlineSessionStore(store) } })`.
 */
export declare class ThreadlineSessionStore implements SessionStore {
  constructor(store: Store | PromiseStore, options?: ThreadlineSessionStoreOptions)
  /** One transaction per call; an entry whose `uuid` is stored already is left out. */
  append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void>
  /** The entries appended, deep-equal and in order; `null` for a key never written. */
  load(key: SessionKey): Promise<SessionStoreEntry[] | null>
  listSessions(projectKey: string): Promise<Array<{ sessionId: string; mtime: number }>>
  listSessionSummaries(projectKey: string): Promise<SessionSummaryEntry[]>
  /** The session and its subagents' transcripts, or with `subpath` that one transcript. */
  delete(key: SessionKey): Promise<void>
  listSubkeys(key: { projectKey: string; sessionId: string }): Promise<string[]>
}
