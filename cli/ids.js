'use strict'
// Session ids as people type them. An import makes a Claude Code subagent a session of its own,
// `<parent>/agent-<id>` (or `<parent>/sidechain-<n>`), so a parent's id is the start of its
// subagents' ids: short ids are made unique among top-level sessions, and a start of an id that
// names a session and its subagents names the session. A subagent is reached through its parent
// (`PARENT/agent-a2898e3`, PARENT itself short) or by its own part (`agent-a2898e3`, or a unique
// start of it).

const { UsageError } = require('./output.js')

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function notFound(message) {
  const e = new Error(message)
  e.code = 'NOT_FOUND'
  return e
}

function common(a, b) {
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  return i
}

class Ids {
  /** @param {Array<{ id: string, metadata?: Record<string, unknown> }>} sessions every session of the store */
  constructor(sessions) {
    this.byId = new Map(sessions.map((s) => [s.id, s]))
    this.parent = new Map()
    this.kids = new Map()
    for (const s of sessions) {
      // the importer's link (metadata.parentSessionId); a subagent whose parent is not in the
      // store (imported alone) is a top-level session
      const p = s.metadata?.parentSessionId
      if (typeof p === 'string' && p !== s.id && this.byId.has(p)) {
        this.parent.set(s.id, p)
        if (!this.kids.has(p)) this.kids.set(p, [])
        this.kids.get(p).push(s.id)
      }
    }
    this.shorts = null
  }

  parentOf(id) {
    return this.parent.get(id) ?? null
  }

  children(id) {
    return this.kids.get(id) ?? []
  }

  /** Every subagent under `id`, at any depth, the deepest first. */
  descendants(id) {
    const out = []
    for (const k of this.children(id)) out.push(...this.descendants(k), k)
    return out
  }

  /** Whether `a` is `b` or one of `b`'s ancestors. */
  isAncestor(a, b) {
    for (let x = this.parentOf(b); x !== null; x = this.parentOf(x)) if (x === a) return true
    return false
  }

  /** A subagent's own part: its id after its parent's (`agent-a2898e3`). */
  tail(id) {
    const p = this.parentOf(id)
    if (p === null) return id
    return id.startsWith(`${p}/`) ? id.slice(p.length + 1) : id.slice(id.lastIndexOf('/') + 1)
  }

  /** Top-level UUIDs by their shortest start (8 characters at least) no other top-level id shares, as git abbreviates hashes. */
  topShorts() {
    if (this.shorts) return this.shorts
    const tops = [...this.byId.keys()].filter((id) => !this.parent.has(id)).sort()
    this.shorts = new Map()
    tops.forEach((id, i) => {
      const n = Math.max(8, common(id, tops[i - 1] ?? '') + 1, common(id, tops[i + 1] ?? '') + 1)
      this.shorts.set(id, UUID.test(id) ? id.slice(0, n) : id)
    })
    return this.shorts
  }

  /**
   * The shortest form of `id` that names it: a top-level UUID's short start (other ids whole); a
   * subagent's own part when that names it alone, else its parent's short form, `/`, its part.
   * `viaParent` always gives the second form.
   */
  short(id, { viaParent = false } = {}) {
    const p = this.parentOf(id)
    if (p === null) return this.topShorts().get(id) ?? id
    const own = this.tail(id)
    if (!viaParent && this.find(own).join() === id) return own
    return `${this.short(p, { viaParent: true })}/${own}`
  }

  /** The sessions `text` may name, those under another one of them left out. */
  find(text) {
    if (this.byId.has(text)) return [text]
    const found = new Set()
    for (const id of this.byId.keys()) {
      if (id.startsWith(text) || (this.parent.has(id) && this.tail(id).startsWith(text))) found.add(id)
    }
    const slash = text.indexOf('/')
    if (slash > 0) {
      // PARENT/rest: PARENT as it is named alone, then rest under it
      const head = this.find(text.slice(0, slash))
      if (head.length === 1) {
        const start = `${head[0]}/${text.slice(slash + 1)}`
        for (const id of this.byId.keys()) if (id.startsWith(start) && this.isAncestor(head[0], id)) found.add(id)
      }
    }
    return [...found].filter((id) => ![...found].some((other) => other !== id && this.isAncestor(other, id)))
  }

  /**
   * The session `text` names: { id, exact } (exact: `text` is its whole id). None is NOT_FOUND;
   * several a usage error naming them.
   */
  resolve(text) {
    if (this.byId.has(text)) return { id: text, exact: true }
    const found = this.find(text)
    if (found.length === 1) return { id: found[0], exact: false }
    if (found.length > 1) {
      const named = found.slice(0, 3).map((id) => this.short(id, { viaParent: true }))
      throw new UsageError(`'${text}' is the start of ${found.length} session ids (${named.join(', ')}${found.length > 3 ? ', ...' : ''}): give more of it`)
    }
    throw notFound(`no session '${text}' (threadline ls lists the sessions and their ids)`)
  }
}

module.exports = { Ids, UUID }
