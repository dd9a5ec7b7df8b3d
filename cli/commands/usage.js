'use strict'
// threadline usage: tokens and cost per day, project, session or model, like ccusage. Usage is
// each provider response's, counted once: Claude Code stores one response as several records
// (a content block each, the same usage on each), so records are keyed by message id (else
// request id); and a response copied into another session (a fork, a resumed Claude Code
// session that carries its history over) is counted once, in the session with its earliest copy.
// Sessions whose messages carry no usage (Codex rollouts) count their token_state records
// instead.

const fs = require('node:fs')
const { colours, print, printJson, table, field, EXIT, UsageError } = require('../output.js')
const { withStore, resolveProject } = require('../store.js')
const { PRICES, PRICES_AS_OF, priceOf } = require('../prices.js')

const BY = ['day', 'project', 'session', 'model']

function localDay(iso) {
  const d = new Date(iso)
  const p = (x) => String(x).padStart(2, '0')
  return Number.isNaN(d.getTime()) ? 'unknown' : `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`
}

/**
 * Each response's usage in one session, by key: { timestamp, model, input, output, cacheRead,
 * cacheWrite }. Of a response's records the last wins: its usage is the final one.
 */
function responses(envelopes, info) {
  const byKey = new Map()
  for (const env of envelopes) {
    const m = env.message
    if (!m || m.role !== 'assistant' || !m.usage) continue
    const u = m.usage
    byKey.set(m.id ?? env.requestId ?? env.uuid, {
      timestamp: env.timestamp,
      model: m.model ?? info.model ?? 'unknown',
      input: u.input_tokens ?? 0,
      output: u.output_tokens ?? 0,
      cacheRead: u.cache_read_input_tokens ?? 0,
      cacheWrite: u.cache_creation_input_tokens ?? 0,
    })
  }
  if (byKey.size > 0) return byKey
  const states = envelopes.filter((e) => e.type === 'token_state' && e.data)
  const counted = states.map((e) => [`${info.id}/${e.uuid}`, {
    timestamp: e.timestamp,
    model: info.model ?? 'unknown',
    input: e.data.inputTokens ?? 0,
    output: e.data.outputTokens ?? 0,
    cacheRead: e.data.cacheReadInputTokens ?? 0,
    cacheWrite: e.data.cacheCreationInputTokens ?? 0,
  }])
  // A state that names no tokens of a response (only context or cumulative counts) is not one:
  // counted, it would add nothing but an unpriced model.
  return new Map(counted.filter(([, r]) => r.input + r.output + r.cacheRead + r.cacheWrite > 0))
}

/** Whether copy `r` of `info` came before `seen`: by its time, then (a fork keeps the times) by its session's creation. */
function earlier(r, info, seen) {
  const d = Date.parse(r.timestamp) - Date.parse(seen.timestamp)
  return d < 0 || (d === 0 && info.createdAt < seen.info.createdAt)
}

/** Every response of the store's sessions once, with the session it counts in: the earliest copy's. */
function allResponses(store, opts) {
  const filter = { limit: 1_000_000 }
  if (opts.project) filter.project = opts.project
  const all = new Map()
  for (const info of store.listSessions(filter)) {
    const s = store.openSession(info.id)
    let found
    try {
      found = responses(s.envelopes(), info)
    } finally {
      s.close()
    }
    for (const [key, r] of found) {
      const seen = all.get(key)
      if (!seen || earlier(r, info, seen)) all.set(key, { ...r, info })
    }
  }
  return all.values()
}

const KINDS = ['input', 'output', 'cacheRead', 'cacheWrite']

/** The built-in table with `file`'s entries over it; a malformed file is bad usage, said once. */
function loadPrices(file) {
  if (!file) return PRICES
  let given
  try {
    given = JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch (e) {
    throw new UsageError(`--prices ${file}: ${e.message}`)
  }
  if (!given || typeof given !== 'object' || Array.isArray(given)) throw new UsageError(`--prices ${file}: expected an object of model ids to prices`)
  for (const [model, p] of Object.entries(given)) {
    const bad = KINDS.find((k) => !(typeof p?.[k] === 'number' && Number.isFinite(p[k]) && p[k] >= 0))
    if (bad) throw new UsageError(`--prices ${file}: ${model}.${bad}: expected a number of USD per million tokens, at least 0`)
  }
  return { ...PRICES, ...given }
}

function tally(store, opts, prices) {
  const rows = new Map()
  const unpriced = new Set()
  // As times, not text: a record's timestamp may carry an offset rather than Z.
  const from = opts.since ? Date.parse(opts.since) : -Infinity
  const to = opts.until ? Date.parse(opts.until) : Infinity
  for (const r of allResponses(store, opts)) {
    const t = Date.parse(r.timestamp)
    if (t < from || t > to) continue
    const key = { day: localDay(r.timestamp), project: r.info.project ?? '(none)', session: r.info.id, model: r.model }[opts.by]
    const row = rows.get(key) ?? { key, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, totalTokens: 0, costUSD: 0 }
    row.inputTokens += r.input
    row.outputTokens += r.output
    row.cacheReadTokens += r.cacheRead
    row.cacheWriteTokens += r.cacheWrite
    row.totalTokens += r.input + r.output + r.cacheRead + r.cacheWrite
    const p = priceOf(prices, r.model)
    if (!p) unpriced.add(r.model)
    // A row with any unpriced response has no cost ('?'): a partial sum would read as the whole.
    if (p && row.costUSD !== null) row.costUSD += (r.input * p.input + r.output * p.output + r.cacheRead * p.cacheRead + r.cacheWrite * p.cacheWrite) / 1e6
    else row.costUSD = null
    rows.set(key, row)
  }
  return { rows: [...rows.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)), unpriced: [...unpriced].sort() }
}

function totalOf(rows) {
  const t = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, totalTokens: 0, costUSD: 0 }
  for (const r of rows) {
    for (const k of ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens', 'totalTokens']) t[k] += r[k]
    t.costUSD = t.costUSD === null || r.costUSD === null ? null : t.costUSD + r.costUSD
  }
  return t
}

async function usage(opts) {
  if (!BY.includes(opts.by)) throw new UsageError(`--by: expected one of ${BY.join(', ')}, got '${opts.by}'`)
  const prices = loadPrices(opts.prices)
  return withStore(opts, (store) => {
    if (opts.project !== undefined) opts = { ...opts, project: resolveProject(store, opts.project) }
    const { rows, unpriced } = tally(store, opts, prices)
    const totals = totalOf(rows)
    if (opts.json) {
      printJson({ by: opts.by, pricesAsOf: opts.prices ? `${PRICES_AS_OF} with ${opts.prices}` : PRICES_AS_OF, rows, totals, unpricedModels: unpriced })
      return EXIT.ok
    }
    const c = colours(process.stdout)
    const n = (x) => x.toLocaleString('en-US')
    const cost = (x) => (x === null ? '?' : `$${x.toFixed(2)}`)
    const line = (label, r) => [label, n(r.inputTokens), n(r.outputTokens), n(r.cacheReadTokens), n(r.cacheWriteTokens), n(r.totalTokens), cost(r.costUSD)]
    const body = rows.map((r) => line(field(r.key), r))
    body.push(line(c.bold('total'), totals))
    print(`${table([opts.by.toUpperCase(), 'INPUT', 'OUTPUT', 'CACHE READ', 'CACHE WRITE', 'TOTAL', 'COST'], body, c)}\n`)
    print(c.dim(`prices as of ${PRICES_AS_OF}${opts.prices ? ` with ${field(opts.prices)}` : ''}${unpriced.length ? `; no price for ${unpriced.map(field).join(', ')} (cost '?'; give one with --prices FILE.json)` : ''}\n`))
    return EXIT.ok
  }, { readonly: true })
}

module.exports = { usage, responses }
