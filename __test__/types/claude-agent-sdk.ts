// threadline/claude-agent-sdk against the SDK's own types: the adapter is a SessionStore, over
// either API's Store.
import type { Options, SessionStore } from '@anthropic-ai/claude-agent-sdk' with { 'resolution-mode': 'import' }
import { Store } from 'threadline'
import { Store as PromiseStore } from 'threadline/promise'
import { ThreadlineSessionStore } from 'threadline/claude-agent-sdk'

export async function check(): Promise<void> {
  const sessionStore: SessionStore = new ThreadlineSessionStore(Store.open(':memory:'))
  const options: Options = { sessionStore, sessionStoreFlush: 'eager' }
  const fromPromise: SessionStore = new ThreadlineSessionStore(await PromiseStore.open(':memory:'), { project: 'my-app' })
  const entries = await fromPromise.load({ projectKey: 'p', sessionId: 's' })
  if (entries !== null) for (const e of entries) e.type.toUpperCase()
  void options
  // @ts-expect-error a store is required
  new ThreadlineSessionStore()
  // @ts-expect-error project is a string
  new ThreadlineSessionStore(Store.open(':memory:'), { project: 1 })
}
