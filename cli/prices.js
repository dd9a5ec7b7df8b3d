'use strict'
// USD per million tokens: input, output, cache read, cache write (5-minute writes: what Claude
// Code's cache_creation_input_tokens are by default). Sources, as they stood on PRICES_AS_OF:
//   Anthropic: https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing")
//   OpenAI:    https://developers.openai.com/api/docs/pricing (cached input as cacheRead; OpenAI
//              charges nothing extra to write its cache)
// Only models whose price those pages state for every token kind are here. A model priced in
// bands (by prompt length) or not listed is left out rather than guessed: `usage` shows its
// tokens with cost '?' and names it. Override or add with `threadline usage --prices FILE.json`
// (the same shape). A model matches its own id, or an id here followed by a date or '-latest'
// (claude-sonnet-4-5-20250929, gpt-4.1-2025-04-14).

const PRICES_AS_OF = '2026-11-25'

const PRICES = {
  // Anthropic
  'claude-opus-5': { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
  'claude-opus-4-8': { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
  'claude-opus-4-7': { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
  'claude-opus-4-6': { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
  'claude-opus-4-5': { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
  'claude-opus-4-1': { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  'claude-opus-4': { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  'claude-opus-4-0': { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  'claude-sonnet-4-6': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-sonnet-4-5': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-sonnet-4': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-sonnet-4-0': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-haiku-4-5': { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
  'claude-3-7-sonnet': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-3-5-sonnet': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-3-5-haiku': { input: 0.8, output: 4, cacheRead: 0.08, cacheWrite: 1 },
  'claude-3-opus': { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  'claude-3-haiku': { input: 0.25, output: 1.25, cacheRead: 0.03, cacheWrite: 0.3 },
  // OpenAI
  'gpt-5.1': { input: 1.25, output: 10, cacheRead: 0.125, cacheWrite: 0 },
  'gpt-5': { input: 1.25, output: 10, cacheRead: 0.125, cacheWrite: 0 },
  'gpt-5-codex': { input: 1.25, output: 10, cacheRead: 0.125, cacheWrite: 0 },
  'gpt-5-mini': { input: 0.25, output: 2, cacheRead: 0.025, cacheWrite: 0 },
  'gpt-5-nano': { input: 0.05, output: 0.4, cacheRead: 0.005, cacheWrite: 0 },
  'gpt-4.1': { input: 2, output: 8, cacheRead: 0.5, cacheWrite: 0 },
  'gpt-4.1-mini': { input: 0.4, output: 1.6, cacheRead: 0.1, cacheWrite: 0 },
  'gpt-4.1-nano': { input: 0.1, output: 0.4, cacheRead: 0.025, cacheWrite: 0 },
  'gpt-4o': { input: 2.5, output: 10, cacheRead: 1.25, cacheWrite: 0 },
  'gpt-4o-mini': { input: 0.15, output: 0.6, cacheRead: 0.075, cacheWrite: 0 },
  o1: { input: 15, output: 60, cacheRead: 7.5, cacheWrite: 0 },
  o3: { input: 2, output: 8, cacheRead: 0.5, cacheWrite: 0 },
  'o3-mini': { input: 1.1, output: 4.4, cacheRead: 0.55, cacheWrite: 0 },
  'o4-mini': { input: 1.1, output: 4.4, cacheRead: 0.275, cacheWrite: 0 },
}

const DATED = /^-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$/

/** The price of `model` in `table`, or null when the table does not name it. */
function priceOf(table, model) {
  if (Object.hasOwn(table, model)) return table[model]
  for (const key of Object.keys(table)) {
    if (model.startsWith(key) && DATED.test(model.slice(key.length))) return table[key]
  }
  return null
}

module.exports = { PRICES, PRICES_AS_OF, priceOf }
