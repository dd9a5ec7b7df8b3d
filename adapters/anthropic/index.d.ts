// threadline/anthropic: record what @anthropic-ai/sdk's tool runner or message stream sends and
// receives into a Threadline session, as it happens.
import type { BetaToolRunner } from '@anthropic-ai/sdk/lib/tools/BetaToolRunner'
import type { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream'
import type { BetaMessageStream } from '@anthropic-ai/sdk/lib/BetaMessageStream'
import type { Session } from '../../index.js'
import type { Session as PromiseSession } from '../../promise.js'

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
export declare function record<R extends BetaToolRunner<boolean>>(session: Session | PromiseSession, runner: R): R
/**
 * Records a message stream (`client.messages.stream(params)` or `client.beta.messages.stream(params)`)
 * and gives back the same stream: its request's new messages, then its reply event by event
 * through `session.beginResponse()`. `finalMessage()`, `finalText()` and `done()` resolve once
 * the reply is stored (and reject if storing it failed).
 */
export declare function record<S extends MessageStream<any> | BetaMessageStream<any>>(session: Session | PromiseSession, stream: S): S
