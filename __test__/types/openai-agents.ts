// threadline/openai-agents against the SDK's own types: the adapter is a Session (with history
// transactions), over either API's Store, usable as `run(agent, input, { session })`.
import {
  Agent,
  run,
  type AgentInputItem,
  type RunContextAwareSession,
  type Session,
  type SessionHistoryTransactionAwareSession,
} from '@openai/agents'
import { Store } from 'threadline'
import { Store as PromiseStore } from 'threadline/promise'
import { ThreadlineSession, type ThreadlineSessionOptions } from 'threadline/openai-agents'

export async function check(): Promise<void> {
  const session: Session = new ThreadlineSession({ store: Store.open(':memory:') })
  const transactional: SessionHistoryTransactionAwareSession = new ThreadlineSession({
    store: await PromiseStore.open(':memory:'),
    sessionId: 'chat-1',
  })
  const aware: RunContextAwareSession<{ userId: string }> = new ThreadlineSession({ store: Store.open(':memory:') })
  void aware
  const agent = new Agent({ name: 'helper', instructions: 'Be brief.' })
  const result = await run(agent, 'hello', { session })
  const items: AgentInputItem[] = await transactional.getItems(10)
  const last: AgentInputItem | undefined = await session.popItem()
  await transactional.applyHistoryTransaction({ operationId: 'op', transaction: { type: 'append_items', items } })
  const options: ThreadlineSessionOptions = { store: Store.open(':memory:'), sessionId: undefined }
  void result
  void last
  void options
  // @ts-expect-error a store is required
  new ThreadlineSession({ sessionId: 'x' })
  // @ts-expect-error the options are an object
  new ThreadlineSession(Store.open(':memory:'))
  // @ts-expect-error sessionId is a string
  new ThreadlineSession({ store: Store.open(':memory:'), sessionId: 1 })
  // @ts-expect-error limit is a number
  await session.getItems('10')
}
