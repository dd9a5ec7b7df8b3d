// threadline/anthropic: record what @anthropic-ai/sdk's tool runner or message stream sends and
// receives into a Threadline session, as it happens.
import type { Session } from '../../index.js'
import type { Session as PromiseSession } from '../../promise.js'

// The SDK's classes are matched by shape, not imported: the SDK ships one declaration of each
// for `require` and one for `import`, and a class with private fields from one is not assignable
// to the other. `record` gives back the very type it was given.

/** A `BetaToolRunner` (`client.beta.messages.toolRunner(params)`), streaming or not. */
export interface ToolRunnerLike {
  [Symbol.asyncIterator](): AsyncIterator<unknown>
  readonly params: { readonly messages: readonly unknown[] }
  setMessagesParams(params: never): void
  generateToolResponse(signal?: AbortSignal | null): Promise<unknown>
  done(): Promise<unknown>
}

/** A `MessageStream` (`client.messages.stream(params)`) or a `BetaMessageStream`. */
export interface MessageStreamLike {
  messages: unknown[]
  receivedMessages: unknown[]
  on(event: 'streamEvent', listener: (event: never, snapshot: never) => void): unknown
  finalMessage(): Promise<unknown>
}

/**
 * Records a tool runner (`client.beta.messages.toolRunner(params)`) into `session` as it runs
 * and gives back the same runner: the new messages of `params.messages` before the first
 * request (a resumed run starts from `session.buildContext({ target: 'anthropic' }).messages`),
 * each reply when it arrives (a streamed one through `session.beginResponse()`, so a kill
 * mid-stream keeps what arrived), each tool-results message once the tools ran and before the
 * next request, and what the caller adds with `pushMessages` / `setMessagesParams`. Iterating it,
 * `runUntilDone()`, `await runner` and `done()` resolve once what they return is stored.
 * @throws `INVALID_INPUT` (with the path) for something else than a Session, a runner already
 *   recorded; iterating throws `INVALID_INPUT` if `params.messages` does not continue the session.
 */
export declare function record<R extends ToolRunnerLike>(session: Session | PromiseSession, runner: R): R
/**
 * Records a message stream (`client.messages.stream(params)` or `client.beta.messages.stream(params)`)
 * and gives back the same stream: its request's new messages, then its reply event by event
 * through `session.beginResponse()`. `finalMessage()`, `finalText()` and `done()` resolve once
 * the reply is stored (and reject if storing it failed).
 */
export declare function record<S extends MessageStreamLike>(session: Session | PromiseSession, stream: S): S
