// threadline/ai-sdk: Vercel AI SDK (`ai` >= 7) chats kept in a Threadline store.
import type { IdGenerator, ModelMessage, UIMessage } from 'ai' with { 'resolution-mode': 'import' }
import type { Store } from '../../index.js'
import type { Store as PromiseStore } from '../../promise.js'

/** The `errorText` of a tool call that `load` found without an outcome (the run was cut off). */
export declare const INTERRUPTED: string

export interface ModelMessagesOptions {
  /** Budget of the context, cut by whole turns from the oldest as `buildContext` cuts it. */
  maxTokens?: number | undefined
}

/**
 * One run's hooks (`ThreadlineChatStore.stepHooks`): `prepareStep` for `streamText`, `onStepEnd`
 * and `onEnd` for its UI message stream. Each step is saved before the next step's model request.
 */
export interface StepHooks<O extends { stepNumber: number } = { stepNumber: number }, R = undefined> {
  /** For `streamText({ prepareStep })`: before step N+1, waits until step N is saved (rejects if that save failed). */
  prepareStep(options: O): Promise<R | undefined>
  /** For `toUIMessageStream({ onStepEnd })`: saves the step (as `onStepEnd(chatId)`). */
  onStepEnd(event: { messages: UIMessage[] }): Promise<void>
  /** For `toUIMessageStream({ onEnd })`: saves the chat (as `onEnd(chatId)`) and releases a waiting `prepareStep`. */
  onEnd(event: { messages: UIMessage[] }): Promise<void>
}

export interface StepHooksOptions<O, R> {
  /** The run's own `prepareStep`: called once the previous step is saved; its result is returned. */
  prepareStep?: ((options: O) => R | PromiseLike<R>) | undefined
}

/**
 * UIMessage persistence for the AI SDK over a Threadline store (either API, either engine). A
 * chat is a Threadline session whose id is the chatId; its messages are also ordinary
 * Threadline messages (text, thinking with signatures, tool calls and results).
 */
export declare class ThreadlineChatStore {
  constructor(store: Store | PromiseStore)
  /**
   * The chat's messages as saved (deep-equal, as JSON keeps them), in order; `[]` for a new chat.
   * A tool part saved without an outcome comes back as `output-error` with {@link INTERRUPTED},
   * so the list passes `validateUIMessages` and `convertToModelMessages` as it is.
   */
  load<M extends UIMessage = UIMessage>(chatId: string): Promise<M[]>
  /**
   * Stores the chat as the client holds it, writing only what changed. A message changed or
   * dropped (edit, regenerate) rewinds the session to before it (the old version stays in the
   * log, off the current branch).
   */
  save(chatId: string, messages: ReadonlyArray<UIMessage>): Promise<void>
  /** An IdGenerator for `toUIMessageStream({ generateMessageId })`. */
  readonly generateMessageId: IdGenerator
  /** For `toUIMessageStream({ onStepEnd })`: each step is stored as it ends (the stream waits for it). */
  onStepEnd(chatId: string): (event: { messages: UIMessage[] }) => Promise<void>
  /** For `toUIMessageStream({ onEnd })` (or `onFinish`): stores the chat at the end. */
  onEnd(chatId: string): (event: { messages: UIMessage[] }) => Promise<void>
  /**
   * Hooks for one run that close the window `onStepEnd` alone leaves (streamText may call the
   * model for the next step before the UI stream's step end is saved): pass `prepareStep` to
   * `streamText` and `onStepEnd`, `onEnd` to its UI message stream.
   */
  stepHooks<O extends { stepNumber: number } = { stepNumber: number }, R = undefined>(
    chatId: string,
    options?: StepHooksOptions<O, R>,
  ): StepHooks<O, R>
  /** The chat as `ModelMessage[]`, cut to `maxTokens` by `buildContext`'s rules. */
  modelMessages(chatId: string, options?: ModelMessagesOptions): Promise<ModelMessage[]>
}
