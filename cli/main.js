'use strict'
// The command line's commands and options (commander), and how errors become one line (a JSON
// document under --json) and an exit code: 0 done, 1 the store refused (its code in the line),
// 2 bad usage, 3 doctor found problems.

const { Command, Option, InvalidArgumentError, CommanderError } = require('commander')
const { errorLine, errorJson, field, print, UsageError, EXIT } = require('./output.js')
const { ls } = require('./commands/ls.js')
const { show } = require('./commands/show.js')
const { search } = require('./commands/search.js')
const { importFiles, exportSession } = require('./commands/transfer.js')
const { usage } = require('./commands/usage.js')
const { doctor } = require('./commands/doctor.js')
const { rm } = require('./commands/rm.js')
const { recover, close, backup } = require('./commands/maintain.js')

function count(value) {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1.')
  return n
}

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/

/**
 * An ISO 8601 time as UTC ISO text. A bare date is a local day, as `ls`, `show` and `usage`
 * print times: from its first moment (`--since`) or through its last (`--until`), so
 * `--since 2026-01-31 --until 2026-01-31` is that whole day.
 */
function date(end) {
  return (value) => {
    const day = DAY.exec(value)
    const d = day ? new Date(Number(day[1]), Number(day[2]) - 1, Number(day[3]) + (end ? 1 : 0), 0, 0, 0, end ? -1 : 0) : new Date(value)
    if (Number.isNaN(d.getTime()) || (day && d.getDate() !== Number(day[3]))) {
      throw new InvalidArgumentError('expected an ISO 8601 date, e.g. 2026-01-31 or 2026-01-31T12:00:00Z.')
    }
    return d.toISOString()
  }
}
const since = date(false)
const until = date(true)

function list(value, previous) {
  return [...(previous ?? []), value]
}

function program() {
  const p = new Command('threadline')
    .description('Look inside a Threadline store: list, read, search, import, export and check sessions.')
    .version(require('../package.json').version)
    .option('--store <path|url>', 'the store: a file path or a postgres:// URL (default: THREADLINE_HOME or the per-user data dir)')
    .option('--json', 'print JSON for scripts')
    .configureOutput({ outputError: (str, write) => (errorsAsJson ? undefined : write(`threadline: USAGE: ${field(usageMessage(str))}\n`)) })
    .exitOverride()
  p.command('ls')
    .description('list sessions, most recently updated first')
    .option('--project <name>', 'only this project: its path, last component or a unique start of either')
    .addOption(new Option('--status <status>', 'only this status').choices(['active', 'completed', 'failed', 'interrupted']))
    .option('--since <date>', 'updated at or after', since)
    .option('--until <date>', 'updated at or before', until)
    .option('--limit <n>', 'at most this many (top-level sessions, each with its subagents)', count, 50)
    .option('--flat', 'one row per session, subagents too, not indented under their parent')
    .option('-f, --follow', 'then print a line per change (created, messages added, status, deleted) until Ctrl-C (--json: one change per line)')
    .action(run((o) => ls(o)))
  p.command('show <id>')
    .description('print a session (an id or an unambiguous start of one); tool calls and thinking folded')
    .option('--full', 'everything unfolded, events too')
    .option('-f, --follow', 'then print each record as any process commits it, until Ctrl-C (--json: one record per line)')
    .action(run((o, id) => show(id, o)))
  p.command('search <query>')
    .description('search every session: words, "phrases", prefix*, a OR b, -excluded')
    .option('--project <name>', 'only this project: its path, last component or a unique start of either')
    .option('--session <id>', 'only this session (an id or a start of one)')
    .addOption(new Option('--role <role>', 'only this role (repeatable)').choices(['user', 'assistant']).argParser(list))
    .addOption(new Option('--field <field>', 'search these fields (repeatable; default text, tool_input)').choices(['text', 'thinking', 'tool_input', 'tool_output']).argParser(list))
    .option('--since <date>', 'at or after', since)
    .option('--until <date>', 'at or before', until)
    .option('--limit <n>', 'at most this many hits', count, 20)
    .option('--cursor <cursor>', 'the next page: the nextCursor of the previous page (same query and options)')
    .action(run((o, q) => search(q, o)))
  p.command('import <format> <path>')
    .description("bring in another agent's sessions: format claude-code (a file, a project folder or ~/.claude/projects), codex (~/.codex/sessions), pi (~/.pi/agent/sessions) or fspec (a codelet data directory, ~/.fspec)")
    .option('--project <name>', 'the project of every imported session')
    .option('--include-deleted', 'import again the sessions deleted from this store (skipped otherwise)')
    .action(run((o, format, from) => importFiles(format, from, o)))
  p.command('export <id>')
    .description('write a session out')
    .addOption(new Option('--format <format>', 'the format').choices(['claude-code', 'markdown', 'html', 'snapshot']).makeOptionMandatory())
    .option('-o, --output <file>', 'write to a file instead of standard output')
    .option('--events', 'markdown: write events too (progress, hooks, snapshots), one line each')
    .action(run((o, id) => exportSession(id, o)))
  p.command('usage')
    .description('tokens and cost per day, project, session or model')
    .addOption(new Option('--by <key>', 'group by').choices(['day', 'project', 'session', 'model']).default('day'))
    .option('--project <name>', 'only this project: its path, last component or a unique start of either')
    .option('--since <date>', 'responses at or after', since)
    .option('--until <date>', 'responses at or before', until)
    .option('--prices <file>', 'a JSON price table that overrides the built-in one (USD per million tokens)')
    .action(run((o) => usage(o)))
  p.command('doctor')
    .description('pending repairs, sessions ended without close(), the integrity check and the store\'s size; exit 3 when something needs repair')
    .option('--quick', 'the quicker integrity check of the file')
    .option('--vacuum', 'give the free pages back (VACUUM) and report the size before and after')
    .action(run((o) => doctor(o)))
  p.command('recover <id>')
    .description('repair a session: session.recover() with the default policy (docs/recovery.md)')
    .action(run((o, id) => recover(id, o)))
  p.command('close <id>')
    .description('mark a session left active as completed (its last turn ended) or interrupted (it did not)')
    .addOption(new Option('--as <status>', 'this status instead').choices(['completed', 'interrupted']))
    .action(run((o, id) => close(id, o)))
  p.command('backup <file>')
    .description('copy every session into a new SQLite file (never over an existing one)')
    .action(run((o, file) => backup(file, o)))
  p.command('rm <id>')
    .description('delete a session and its subagent sessions (a whole id, or a start of one with --yes)')
    .option('--yes', 'delete what a start of an id names')
    .action(run((o, id) => rm(id, o)))
  return p
}

let exitCode = EXIT.ok
// --json anywhere before `--`: errors too are JSON, on standard output (docs/cli.md)
let errorsAsJson = false

// A search query may start with `-` (an excluded word), which reads as an option.
let searching = false

/** Commander's message for bad usage, saying where to look. */
function usageMessage(str) {
  const message = str.trim().replace(/^error: /, '')
  if (searching && /^unknown option '-/.test(message)) return `${message}: a query that starts with - goes after --, e.g. threadline search -- '-draft report'`
  return `${message} (see --help)`
}

/** An action: its options merged with the global ones, its exit code kept. */
function run(fn) {
  return async (...args) => {
    const cmd = args.at(-1)
    const positional = args.slice(0, cmd.registeredArguments.length)
    exitCode = await fn(cmd.optsWithGlobals(), ...positional)
  }
}

async function main(argv) {
  exitCode = EXIT.ok
  const args = argv.slice(2)
  const options = args.slice(0, args.includes('--') ? args.indexOf('--') : args.length)
  errorsAsJson = options.includes('--json')
  searching = options.includes('search')
  try {
    await program().parseAsync(argv)
    return exitCode
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return EXIT.ok
      if (errorsAsJson) print(errorJson(new UsageError(usageMessage(e.message))))
      return EXIT.usage
    }
    if (errorsAsJson) print(errorJson(e))
    else print(`${errorLine(e)}\n`, { stream: process.stderr })
    if (e instanceof UsageError) return EXIT.usage
    return EXIT.error
  }
}

module.exports = { main, program }
