// @ts-check
'use strict'
// The scripted agent session the demo plays: what a coding agent and its model would exchange.
// Each step makes exactly one message, so `session.messages.length` says which step comes next:
// a resumed agent picks up from what the store holds, not from anything it remembered.
//
// Assistant steps are Anthropic Messages API responses as `@anthropic-ai/sdk` returns them
// (id, model, thinking with signature, text, tool_use, stop_reason, usage); tool steps carry the
// tool_result blocks for the model plus the raw execution data (stdout, stderr, ...) for people.

/** @typedef {import('..').Message} Message */
/** @typedef {import('..').ToolResultBlock} ToolResultBlock */
/** @typedef {{ stdout: string, stderr: string, interrupted: boolean, exitCode: number }} ToolRun */
/** @typedef {{ kind: 'prompt', text: string }} PromptStep */
/** @typedef {{ kind: 'response', requestId: string, message: Message }} ResponseStep */
/** @typedef {{ kind: 'tools', results: Array<{ block: ToolResultBlock, run: ToolRun }> }} ToolsStep */
/** @typedef {PromptStep | ResponseStep | ToolsStep} Step */

const MODEL = 'claude-sonnet-4-5'

let n = 0
/**
 * @param {Message['content']} content
 * @param {string} stopReason
 * @param {[number, number, number, number]} usage input, cache write, cache read, output
 * @returns {ResponseStep}
 */
function response(content, stopReason, usage) {
  n += 1
  const id = `msg_01Demo${String(n).padStart(2, '0')}`
  return {
    kind: 'response',
    requestId: `req_01Demo${String(n).padStart(2, '0')}`,
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model: MODEL,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: { input_tokens: usage[0], cache_creation_input_tokens: usage[1], cache_read_input_tokens: usage[2], output_tokens: usage[3], service_tier: 'standard' },
    },
  }
}

/** @param {string} text @returns {import('..').ThinkingBlock} */
const thinking = (text) => ({ type: 'thinking', thinking: text, signature: `EqMBCkYIBxgCKkD${Buffer.from(text).toString('base64').slice(0, 24)}` })
/** @param {string} t @returns {import('..').TextBlock} */
const text = (t) => ({ type: 'text', text: t })
/** @param {string} id @param {string} name @param {Record<string, string>} input @returns {import('..').ToolUseBlock} */
const toolUse = (id, name, input) => ({ type: 'tool_use', id, name, input })

/**
 * @param {...[toolUseId: string, output: string, run: Omit<ToolRun, 'interrupted'>]} results
 * @returns {ToolsStep}
 */
function tools(...results) {
  return {
    kind: 'tools',
    results: results.map(([toolUseId, output, run]) => ({
      block: { type: 'tool_result', tool_use_id: toolUseId, content: output, ...(run.exitCode ? { is_error: true } : {}) },
      run: { stdout: run.stdout, stderr: run.stderr, interrupted: false, exitCode: run.exitCode },
    })),
  }
}

const FAIL_OUT = 'FAIL test/date.test.js\n  addDays crosses month end\n    expected "2024-03-01", got "2024-02-30"\nTests: 1 failed, 11 passed'
const DATE_JS = 'export function addDays(date, days) {\n  const d = new Date(date)\n  d.setUTCDate(d.getUTCDate() + days)\n  return format(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)\n}'

/** @type {Step[]} */
const steps = [
  { kind: 'prompt', text: 'Why does `npm test` fail? Please fix it.' },
  response([
    thinking('The user wants the failing test fixed. First I need to see which test fails and how.'),
    text('Let me run the test suite first.'),
    toolUse('toolu_01Run', 'bash', { command: 'npm test' }),
  ], 'tool_use', [1840, 12400, 0, 96]),
  tools(['toolu_01Run', FAIL_OUT, { stdout: FAIL_OUT, stderr: 'npm ERR! Test failed.', exitCode: 1 }]),
  response([
    thinking('addDays yields Feb 30: the day is off by one. Read the function and find its callers in parallel.'),
    toolUse('toolu_02Read', 'read_file', { path: 'src/date.js' }),
    toolUse('toolu_03Grep', 'bash', { command: 'grep -rn "addDays(" src' }),
  ], 'tool_use', [310, 0, 14240, 142]),
  tools(
    ['toolu_02Read', DATE_JS, { stdout: DATE_JS, stderr: '', exitCode: 0 }],
    ['toolu_03Grep', 'src/date.js:1:export function addDays\nsrc/due.js:7:  return addDays(start, 30)', { stdout: 'src/date.js:1:export function addDays\nsrc/due.js:7:  return addDays(start, 30)', stderr: '', exitCode: 0 }],
  ),
  response([
    text('Found it: `format()` gets the day plus one on top of the month roll-over. Fixing it.'),
    toolUse('toolu_04Edit', 'edit_file', { path: 'src/date.js', old: 'd.getUTCDate() + 1', new: 'd.getUTCDate()' }),
  ], 'tool_use', [520, 0, 14690, 118]),
  tools(['toolu_04Edit', 'Applied 1 edit to src/date.js', { stdout: 'Applied 1 edit to src/date.js', stderr: '', exitCode: 0 }]),
  response([
    text('The edit is in. Let me re-run the tests to confirm.'),
    toolUse('toolu_05Run', 'bash', { command: 'npm test' }),
  ], 'tool_use', [240, 0, 15330, 64]),
  tools(['toolu_05Run', 'Tests: 12 passed', { stdout: 'PASS test/date.test.js\nTests: 12 passed', stderr: '', exitCode: 0 }]),
  response([
    text('All 12 tests pass. `addDays` added one day too many when formatting; it now returns 2024-03-01.'),
  ], 'end_turn', [180, 0, 15590, 58]),
  { kind: 'prompt', text: 'Thanks! Is anything else calling it with the same assumption?' },
  response([
    thinking('src/due.js calls addDays(start, 30) and expects the calendar date; the fix gives exactly that.'),
    text('Only `src/due.js` calls it (due dates 30 days out), and it expected the corrected result, so nothing else changes.'),
  ], 'end_turn', [60, 0, 15800, 71]),
]

// An earlier session in the same store (a week before): the resumed agent recalls its decision
// through the recall tools.
const earlier = {
  title: 'Due dates a day early in UTC-8',
  /** @type {Message[]} */
  messages: [
    { role: 'user', content: [text('Users in UTC-8 see due dates one day early. What should we do about dates?')] },
    response([
      thinking('Local-time getters shift the day for users west of UTC. The fix is to never use them.'),
      text('Decision: keep every date in UTC end to end. Compute with setUTCDate/getUTCDate only, and format with toISOString().slice(0, 10); never use the local-time getters.'),
    ], 'end_turn', [900, 0, 0, 64]).message,
    { role: 'user', content: [text('Agreed. Write that down.')] },
    response([text('Noted in docs/dates.md: UTC everywhere, toISOString().slice(0, 10) to format.')], 'end_turn', [40, 0, 960, 30]).message,
  ],
}

// The resumed agent's recall: a question about the earlier session, the model's two tool calls
// (search, then read around the hit; their results come from the real tools) and its answer.
const recall = {
  prompt: 'Last week we settled how dates must be handled. Does this fix follow that?',
  search: toolUse('toolu_06Recall', 'session_search', { query: 'dates UTC' }),
  /** @param {string} sessionId @param {string} uuid */
  read: (sessionId, uuid) => toolUse('toolu_07Recall', 'session_read', { session_id: sessionId, around_uuid: uuid }),
  respond: response,
  thinking,
  text,
}

module.exports = {
  MODEL,
  steps,
  earlier,
  recall,
  // The agent process kills itself while running the second tool of step 4 (the grep): the
  // read_file before it finished and was recorded in the journal, its tool_result message never
  // appended.
  crashAt: { step: 4, tool: 1 },
}
