'use strict'
// threadline show ID: a session's transcript in the terminal, every record in the order written.
// Tool calls, their results and thinking are folded to one line each unless --full; a rewind (the
// lines after it continue an earlier record) and a compaction always get a line; other events
// are shown with --full only.

const { colours, print, printJson, jsonText, field, text, oneLine, when, EXIT } = require('../output.js')
const { withStore, resolveId } = require('../store.js')

const FOLD = 100

function blockLines(b, c, full, width) {
  const cut = (s) => (full ? s : oneLine(s, width))
  switch (b.type) {
    case 'text':
      return [text(b.text)]
    case 'thinking':
      return full ? [c.dim(c.italic(`✻ thinking\n${text(b.thinking)}`))] : [c.dim(`✻ thinking (${b.thinking.length} chars)`)]
    case 'redacted_thinking':
      return [c.dim('✻ thinking (redacted)')]
    case 'tool_use':
    case 'server_tool_use': {
      const input = jsonText(b.input ?? {}, full ? 2 : 0)
      return [`${c.yellow('▸')} ${c.bold(field(b.name))} ${c.dim(cut(input))}`]
    }
    case 'tool_result': {
      const result = resultText(b.content)
      const lines = result.split('\n').length
      const mark = b.is_error ? c.red('◂ error') : c.green('◂ result')
      return full ? [`${mark}\n${text(result)}`] : [`${mark} ${c.dim(`(${lines} line${lines === 1 ? '' : 's'})`)} ${cut(result)}`]
    }
    case 'image':
    case 'document':
      return [c.magenta(`[${b.type}: ${field(b.source?.media_type ?? b.source?.type ?? '?')}]`)]
    default:
      return [c.dim(`[${field(b.type)}]`)]
  }
}

function resultText(content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((b) => (b.type === 'text' ? b.text : `[${b.type}]`)).join('\n')
}

/** The line of a record that changes what the transcript means, whatever the options. */
function markLine(env, c) {
  if (env.type === 'rewind') {
    const to = env.rewind?.toUuid ?? env.parentUuid ?? '?'
    return c.yellow(`↩ rewound to ${field(to)}: what follows continues from there ${c.dim(when(env.timestamp))}`)
  }
  if (env.type === 'compaction' && env.compaction) {
    const summary = env.compaction.summary ?? ''
    return c.yellow(`✂ compacted: the context restarts from a summary (${summary.length} chars) ${c.dim(when(env.timestamp))}`)
  }
  return null
}

function eventLine(env, c) {
  const sub = env.subtype ?? env.data?.type
  return c.dim(`· ${field(env.type)}${sub ? ` (${field(sub)})` : ''} ${when(env.timestamp)}`)
}

async function show(id, opts) {
  return withStore(opts, (store) => {
    const sid = resolveId(store, id)
    const s = store.openSession(sid)
    try {
      const info = s.info
      const records = s.envelopes()
      if (opts.json) {
        printJson({ info, records })
        return EXIT.ok
      }
      const c = colours(process.stdout)
      const width = Math.max(40, (process.stdout.columns || 120) - 20)
      const head = [info.id, info.project ?? 'no project', info.model, `${info.messageCount} message${info.messageCount === 1 ? '' : 's'}`, info.status]
      const out = [c.bold(oneLine(info.title ?? `Session ${info.id}`)), c.dim(head.filter(Boolean).map(field).join(' · ')), '']
      let previous = null
      for (const env of records) {
        const m = env.message
        if (!m) {
          const mark = markLine(env, c)
          if (mark) {
            if (previous) out.push('')
            out.push(mark)
            previous = null
          } else if (opts.full) out.push(eventLine(env, c))
          continue
        }
        // Claude Code writes one response as a record per block: one heading for them all.
        const same = previous && previous.role === m.role && m.id !== undefined && previous.id === m.id
        if (!same) {
          if (previous) out.push('')
          const who = m.role === 'assistant' ? c.blue(c.bold('Assistant')) : c.green(c.bold('User'))
          out.push(`${who} ${c.dim(when(env.timestamp))}`)
        }
        previous = m
        for (const b of m.content ?? []) {
          if (b.type === 'text' && b.text.trim() === '' && !opts.full) continue
          out.push(...blockLines(b, c, opts.full, Math.min(width, FOLD)))
        }
      }
      print(`${out.join('\n')}\n`)
      return EXIT.ok
    } finally {
      s.close()
    }
  })
}

module.exports = { show }
