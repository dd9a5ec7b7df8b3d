// threadline/openai-agents: a Threadline session as the OpenAI Agents SDK's `Session`.
import type {
  AgentInputItem,
  RunContext,
  RunContextAwareSession,
  SessionHistoryTransactionArgs,
  SessionHistoryTransactionAwareSession,
} from '@openai/agents'
import type { Store } from '../../index.js'
import type { Store as PromiseStore } from '../../promise.js'

export interface ThreadlineSessionOptions {
  /** The store (either API, either engine). */
  store: Store | PromiseStore
  /**
   * The Threadline session id: an existing session continues, a new one is created on first use.
   * Default: a new random id (see `getSessionId`).
   */
  sessionId?: string | undefined
}

/**
 * The Agents SDK's `Session` over a Threadline session:
 * `run(agent, input, { session: new ThreadlineSession({ store, sessionId }) })`.
 * Each item is kept as given (providerData included), in the order added, beside a neutral
 * message, so the session's messages, turns, search and export work on it.
 */
export declare class ThreadlineSession implements SessionHistoryTransactionAwareSession, RunContextAwareSession<any> {
  constructor(options: ThreadlineSessionOptions)
  /**
   * The SDK passes its run context to each call: the usage of each model request goes on the
   * stored response, so the session's turns and token counts include it.
   */
  readonly acceptsRunContext: true
  /** The Threadline session id (the session is created if it does not exist yet). */
  getSessionId(): Promise<string>
  /**
   * The latest `limit` items (all without it), oldest first, deep-equal to what was added. Never
   * an unanswered call or an output without its call: a call a killed run left is answered as
   * `recover()` answers it (recorded as a repair record); other orphans are left out (recorded
   * as an `openai-agents.dropped` event). A reasoning item comes only with the item it produced.
   */
  getItems(limit?: number, runContext?: RunContext<any>): Promise<AgentInputItem[]>
  /** One transaction; returns after the commit. */
  addItems(items: AgentInputItem[], runContext?: RunContext<any>): Promise<void>
  /** Removes the latest item, durably (a rewind); a reasoning item right before it goes too. */
  popItem(runContext?: RunContext<any>): Promise<AgentInputItem | undefined>
  /** Deletes the session's records; the id stays usable (an empty session). */
  clearSession(runContext?: RunContext<any>): Promise<void>
  /** Atomic and idempotent by `operationId` (the SDK's history-transaction capability). */
  applyHistoryTransaction(args: SessionHistoryTransactionArgs, runContext?: RunContext<any>): Promise<void>
}
