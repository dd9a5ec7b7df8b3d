// threadline/anthropic against @anthropic-ai/sdk's own types: record() gives back the runner or
// the stream with its type unchanged, for a session of either API.
import Anthropic from '@anthropic-ai/sdk'
import type { BetaToolRunner } from '@anthropic-ai/sdk/lib/tools/BetaToolRunner'
import type { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream'
import type { BetaMessageStream } from '@anthropic-ai/sdk/lib/BetaMessageStream'
import type { BetaToolRunner as EsmToolRunner } from '@anthropic-ai/sdk/lib/tools/BetaToolRunner' with { 'resolution-mode': 'import' }
import type { MessageStream as EsmMessageStream } from '@anthropic-ai/sdk/lib/MessageStream' with { 'resolution-mode': 'import' }
import type { Session, Store } from 'threadline'
import type { Session as PromiseSession } from 'threadline/promise'
import { record } from 'threadline/anthropic'

declare const session: Session
declare const promiseSession: PromiseSession
declare const store: Store
const client = new Anthropic()
// The SDK's declarations for `import` (an ESM program): the same types come back.
declare const esmRunner: EsmToolRunner<true>
declare const esmStream: EsmMessageStream

async function main(): Promise<void> {
  const runner = record(
    session,
    client.beta.messages.toolRunner({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      messages: [{ role: 'user', content: 'hi' }],
      tools: [],
    }),
  )
  const sameRunner: BetaToolRunner<false> = runner
  for await (const message of runner) {
    const text: string | undefined = message.content.find((b) => b.type === 'text')?.type
    void text
  }
  const last: Anthropic.Beta.BetaMessage = await sameRunner.done()
  void last

  const streaming = record(
    promiseSession,
    client.beta.messages.toolRunner({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [], tools: [], stream: true }),
  )
  for await (const stream of streaming) {
    const s: BetaMessageStream = stream
    await s.finalMessage()
  }

  const stream: MessageStream = record(
    session,
    client.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [{ role: 'user', content: 'hi' }] }),
  )
  const final: Anthropic.Message = await stream.finalMessage()
  void final
  const beta: BetaMessageStream = record(promiseSession, client.beta.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [] }))
  void beta

  const esm: EsmToolRunner<true> = record(promiseSession, esmRunner)
  const esmFinal = await record(session, esmStream).finalMessage()
  void esm
  void esmFinal.content

  // @ts-expect-error a Store is not a Session
  record(store, stream)
  // @ts-expect-error a plain request's promise is neither a runner nor a stream
  record(session, client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [] }))
  // @ts-expect-error the session comes first
  record(stream, session)
}
void main
