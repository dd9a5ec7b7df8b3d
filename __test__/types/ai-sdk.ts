// threadline/ai-sdk against the AI SDK's own types (it defines no storage interface): the
// callbacks are the UI message stream's, the id generator its IdGenerator, what load gives goes
// to convertToModelMessages and what modelMessages gives to streamText, over either API's Store.
// tsconfig.ai-sdk.json sets skipLibCheck: ai 7's own declarations do not compile under
// exactOptionalPropertyTypes (errors in @ai-sdk/provider-utils) and need @types/json-schema;
// with skipLibCheck false, this file and adapters/ai-sdk/index.d.ts give no error of their own.
import type {
  IdGenerator,
  InferUITools,
  ModelMessage,
  UIMessage,
  UIMessageStreamOnEndCallback,
  UIMessageStreamOnStepEndCallback,
} from 'ai' with { 'resolution-mode': 'import' }
import { Store } from 'threadline'
import { Store as PromiseStore } from 'threadline/promise'
import { ThreadlineChatStore, INTERRUPTED } from 'threadline/ai-sdk'

type Tools = InferUITools<{}>
type MyMessage = UIMessage<{ createdAt: number }, { weather: { city: string } }, Tools>

export async function check(
  ai: typeof import('ai', { with: { 'resolution-mode': 'import' } }),
  model: import('ai', { with: { 'resolution-mode': 'import' } }).LanguageModel,
): Promise<void> {
  const chats = new ThreadlineChatStore(Store.open(':memory:'))
  const fromPromise = new ThreadlineChatStore(await PromiseStore.open(':memory:'))
  const generateMessageId: IdGenerator = chats.generateMessageId
  const onStepEnd: UIMessageStreamOnStepEndCallback<UIMessage> = chats.onStepEnd('chat')
  const onEnd: UIMessageStreamOnEndCallback<UIMessage> = fromPromise.onEnd('chat')
  // A typed UIMessage works the same.
  const typedStep: UIMessageStreamOnStepEndCallback<MyMessage> = chats.onStepEnd('chat')
  const typedEnd: UIMessageStreamOnEndCallback<MyMessage> = chats.onEnd('chat')
  const messages = await chats.load<MyMessage>('chat')
  const meta: number | undefined = messages[0]?.metadata?.createdAt
  await chats.save('chat', messages)

  const result = ai.streamText({ model, messages: await ai.convertToModelMessages(messages) })
  result.toUIMessageStream({ originalMessages: messages, generateMessageId, onStepEnd: typedStep, onEnd: typedEnd })
  result.toUIMessageStreamResponse({ originalMessages: await chats.load('chat'), onStepEnd, onEnd })
  const context: ModelMessage[] = await chats.modelMessages('chat', { maxTokens: 100_000 })
  ai.streamText({ model, messages: context })
  // stepHooks: prepareStep for streamText, the step and end callbacks for its UI message stream.
  const hooks = chats.stepHooks('chat')
  const run = ai.streamText({ model, messages: context, prepareStep: hooks.prepareStep })
  run.toUIMessageStream({ originalMessages: messages, onStepEnd: hooks.onStepEnd, onEnd: hooks.onEnd })
  // With the run's own prepareStep, typed by streamText's options.
  const own = fromPromise.stepHooks('chat', {
    prepareStep: ({ stepNumber }: { stepNumber: number }) => (stepNumber > 2 ? { toolChoice: 'none' as const } : undefined),
  })
  ai.streamText({ model, messages: context, prepareStep: own.prepareStep })
  const text: string = INTERRUPTED
  void meta
  void text

  // @ts-expect-error a store is required
  new ThreadlineChatStore()
  // @ts-expect-error maxTokens is a number
  await chats.modelMessages('chat', { maxTokens: '100' })
  // @ts-expect-error save takes UIMessages, not model messages
  await chats.save('chat', context)
  // @ts-expect-error the chat id is a string
  chats.onEnd(1)
  // @ts-expect-error the run's prepareStep is a function
  chats.stepHooks('chat', { prepareStep: 1 })
  // @ts-expect-error onStepEnd is the UI message stream's callback (it gets UIMessages), not streamText's own
  ai.streamText({ model, messages: context, onStepEnd: chats.onStepEnd('chat') })
}
