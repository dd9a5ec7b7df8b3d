// A live view of a Threadline store in the terminal (ink + React, no build step): the sessions on
// the left, updated as any process creates, writes, ends or deletes them (store.watch), and the
// selected session's transcript on the right, updated record by record (session.watch).
//
//   node examples/live-tui/tui.mjs STORE        (↑/↓ or j/k select, q quits)

import React, { useEffect, useState } from 'react'
import { render, Box, Text, useApp, useInput, useStdout } from 'ink'
import { Store } from 'threadline'

const h = React.createElement
const file = process.argv[2]
if (!file) {
  console.error('usage: node tui.mjs STORE')
  process.exit(2)
}
const store = Store.open(file)

const isAbort = (e) => e instanceof Error && e.name === 'AbortError'

// What the store holds is other programs' data: a control character in it is shown as text, so
// it cannot move the cursor, clear the screen or set the window title.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g
const safe = (s) => String(s ?? '').replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)

/**
 * A session the watch names before the list has it (made while the list was read): its info,
 * its messages counted up to the record `before` (the watch gives the rest); null when gone.
 */
function infoOf(id, before) {
  try {
    const s = store.openSession(id)
    const info = s.info
    const messages = s.envelopes({ limit: before }).filter((e) => e.message).length
    s.close()
    return { ...info, messageCount: messages }
  } catch {
    return null
  }
}

/** The sessions, most recently updated first, kept up to date by store.watch. */
function useSessions() {
  const [sessions, setSessions] = useState([])
  useEffect(() => {
    const stop = new AbortController()
    const watch = store.watch({ signal: stop.signal })
    ;(async () => {
      // The watch gives what is committed after its first look (`ready`): the listing read
      // after it misses nothing (a session made in between may come again as 'created').
      await watch.ready
      const known = new Set()
      const listed = store.listSessions({ limit: 200 })
      for (const s of listed) known.add(s.id)
      setSessions(listed)
      for (let r = await watch.next(); !r.done; r = await watch.next()) {
        const change = r.value
        if (change.type === 'record' && !known.has(change.sessionId)) {
          const info = infoOf(change.sessionId, change.record.seq)
          if (info) setSessions((list) => [info, ...list.filter((s) => s.id !== info.id)])
        }
        if (change.type === 'deleted') known.delete(change.sessionId)
        else known.add(change.sessionId)
        setSessions((list) => {
          const rest = list.filter((s) => s.id !== change.sessionId)
          const old = list.find((s) => s.id === change.sessionId)
          switch (change.type) {
            case 'created': // its records follow: they are counted as they come
              return [{ ...change.session, messageCount: 0 }, ...rest]
            case 'status': // what the list shows of it but the count
              return [{ ...old, ...change.session, messageCount: old?.messageCount ?? change.session.messageCount }, ...rest]
            case 'record': {
              if (!old) return list
              const counts = change.record.message ? 1 : 0
              return [{ ...old, messageCount: old.messageCount + counts, updatedAt: change.record.timestamp }, ...rest]
            }
            case 'deleted':
              return rest
            default:
              return list
          }
        })
      }
    })().catch((e) => {
      if (!isAbort(e)) throw e
    })
    return () => stop.abort()
  }, [])
  return sessions
}

/** A record as transcript lines: `who`, the text, a tool call or result on one line. */
function lines(env) {
  const m = env.message
  if (!m) return []
  const who = m.role === 'assistant' ? 'Assistant' : 'User'
  const out = []
  for (const b of m.content ?? []) {
    if (b.type === 'text') {
      for (const line of b.text.split(/\r?\n/)) if (line.trim() !== '') out.push({ who, text: safe(line) })
    } else if (b.type === 'tool_use') out.push({ who, tool: true, text: safe(`▸ ${b.name} ${JSON.stringify(b.input)}`) })
    else if (b.type === 'tool_result') {
      const text = typeof b.content === 'string' ? b.content : (b.content ?? []).map((c) => c.text ?? `[${c.type}]`).join(' ')
      out.push({ who, tool: true, text: safe(`◂ ${b.is_error ? 'error' : 'result'} ${text}`) })
    }
  }
  return out
}

/** The selected session's transcript, from its first record, followed by session.watch. */
function useTranscript(id) {
  const [state, setState] = useState({ id, lines: [], gone: false })
  useEffect(() => {
    setState({ id, lines: [], gone: false })
    if (!id) return undefined
    const stop = new AbortController()
    const session = store.openSession(id)
    ;(async () => {
      for await (const env of session.watch({ fromSeq: 0, signal: stop.signal })) {
        setState((s) => ({ ...s, lines: [...s.lines, ...lines(env)] }))
      }
    })()
      .catch((e) => {
        if (isAbort(e)) return
        if (e.code === 'NOT_FOUND') setState((s) => ({ ...s, gone: true }))
        else throw e
      })
      .finally(() => session.close())
    return () => stop.abort()
  }, [id])
  return state
}

function App() {
  const { exit } = useApp()
  const { stdout } = useStdout()
  const sessions = useSessions()
  const [selected, setSelected] = useState(null)
  // The selection follows its session as the list reorders; none yet: the first one.
  const index = Math.max(0, sessions.findIndex((s) => s.id === selected))
  const current = sessions[index]?.id ?? null
  const transcript = useTranscript(current)
  // Once there is a session, the selection is by id: a session created later, listed first,
  // does not take it.
  useEffect(() => {
    if (selected === null && current !== null) setSelected(current)
  }, [selected, current])
  useInput((input, key) => {
    if (input === 'q') exit()
    const move = key.upArrow || input === 'k' ? -1 : key.downArrow || input === 'j' ? 1 : 0
    if (move !== 0 && sessions.length > 0) setSelected(sessions[Math.min(sessions.length - 1, Math.max(0, index + move))].id)
  })
  const rows = Math.max(5, (stdout.rows || 24) - 3)
  // Lines inside a box: its height less the borders and its title line.
  const room = rows - 2
  const shown = transcript.lines.slice(-room)
  // the part of the list that fits, with the selection in it
  const top = Math.max(0, index - (room - 1))
  return h(
    Box,
    { flexDirection: 'column', height: rows + 2 },
    h(
      Box,
      { flexGrow: 1 },
      h(
        Box,
        { flexDirection: 'column', width: 42, borderStyle: 'round', paddingX: 1 },
        h(Text, { bold: true }, `Sessions (${sessions.length})`),
        sessions.length === 0 ? h(Text, { dimColor: true }, 'none yet: waiting…') : null,
        ...sessions.slice(top, top + room).map((s, i) =>
          h(
            Text,
            { key: s.id, wrap: 'truncate-end', inverse: top + i === index, color: s.status === 'active' ? 'green' : undefined },
            safe(`${s.title ?? s.id.slice(0, 8)}  ${s.messageCount} msgs  ${s.status}`),
          ),
        ),
      ),
      h(
        Box,
        { flexDirection: 'column', flexGrow: 1, borderStyle: 'round', paddingX: 1 },
        h(Text, { bold: true, wrap: 'truncate-end' }, current ? `Transcript ${safe(current)}` : 'Transcript'),
        transcript.gone ? h(Text, { color: 'red' }, 'this session was deleted') : null,
        ...shown.map((l, i) =>
          h(Text, { key: i, wrap: 'truncate-end', dimColor: l.tool }, h(Text, { color: l.who === 'User' ? 'green' : 'blue', bold: true }, `${l.who}: `), l.text),
        ),
      ),
    ),
    h(Text, { dimColor: true }, '↑/↓ or j/k select · q quit'),
  )
}

const app = render(h(App))
await app.waitUntilExit()
store.close()
