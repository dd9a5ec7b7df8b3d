'use strict'
// Run as a child process by recovery-crash.test.js. Records an agent conversation (a coding agent
// with Claude Code's tools: Bash, Read, Edit, Grep) into a store file up to the point named by the
// case, then writes one line `READY <json>` to stdout with everything that was acknowledged, and
// waits there for the parent to SIGKILL it. Only the `clean-exit` case ends on its own, after
// closing its session and store.
//
//   argv: storePath caseName [sessionId]
//
// What READY reports (JSON):
//   sessionId    the session being written (killed mid-way)
//   doneId       a session finished and closed before (must never show as interrupted)
//   records      [{ uuid, seq, input, extra }]: every acknowledged append, in order (`input` is
//                what was given to append, `extra` its envelope fields)
//   journal      [{ op: 'started' | 'outcome', id, result? }]: acknowledged journal writes
//   pushed       chunks pushed into the open ResponseWriter (all of them persisted: the last push
//                came more than FLUSH_INTERVAL after the one before)
//   streamId, requestId, model: the open stream's
//
// The `try-append` case opens an existing session, tries one append, writes `RESULT ok <uuid>` or
// `RESULT <code> <message json>`, and exits.
//
// The `append-many` case reports per batch instead, and does not wait: it appends batches of 50
// records forever, writing `TRY <n> <uuids json>` before each appendMany and `ACK <n>` after it
// returns, so the parent can kill it at a random moment.
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { Store } = require(path.join(__dirname, '..', '..'))

const RAW = require(path.join(__dirname, '..', 'fixtures', 'anthropic-stream-events.json'))
const SIMPLE = require(path.join(__dirname, '..', 'fixtures', 'simple-stream-chunks.json'))

const { writeLine: out } = require('./seeded')
const [storePath, caseName, givenSessionId] = process.argv.slice(2)


function busyWait(ms) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    // the flush interval of a ResponseWriter is measured in wall time
  }
}

const MODEL = 'claude-sonnet-4-5-20250929'
const REPO = '/home/dev/acme'
let msgCounter = 0

function usage(input, output) {
  return { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 4096 + input, output_tokens: output, service_tier: 'standard' }
}

// An assistant response as the Anthropic SDK returns it.
function response(content, stopReason = 'tool_use') {
  msgCounter++
  return {
    id: `msg_01Threadline${String(msgCounter).padStart(4, '0')}Crash`,
    type: 'message',
    role: 'assistant',
    model: MODEL,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: usage(1200 + msgCounter * 150, 90 + msgCounter * 7),
  }
}

const toolUse = (id, name, input) => ({ type: 'tool_use', id, name, input })
const result = (id, content, isError) => (isError ? { type: 'tool_result', tool_use_id: id, content, is_error: true } : { type: 'tool_result', tool_use_id: id, content })

// The calls of the conversation, by role in it.
const IDS = {
  test: 'toolu_01BashRunTests7Hq2kXv',
  read: 'toolu_01ReadLexer3mNcY8pQ',
  edit: 'toolu_01EditLexerFix9zRtW',
  rerun: 'toolu_01BashRerun5sLdK2f',
  readTest: 'toolu_01ReadRawTest4vBn6M',
  gitLog: 'toolu_01BashGitLog8wQe1Z',
  fmt: 'toolu_01BashFmtAll2pXr7J',
  readToken: 'toolu_01ReadToken6tGh3Wc',
}

const TEST_OUTPUT = [
  'running 42 tests',
  'test lexer::tests::idents ... ok',
  'test lexer::tests::raw_strings ... FAILED',
  '',
  'failures:',
  '',
  '---- lexer::tests::raw_strings stdout ----',
  "thread 'lexer::tests::raw_strings' panicked at crates/parser/src/lexer.rs:231:9:",
  'assertion `left == right` failed',
  '  left: Err(UnterminatedString { at: 14 })',
  ' right: Ok([RawStr("a\\"#b")])',
  '',
  'test result: FAILED. 41 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.03s',
].join('\n')

const LEXER_SNIPPET = [
  '   210\t    fn lex_raw_string(&mut self, start: usize) -> Result<Token, LexError> {',
  '   211\t        let hashes = self.count_while(|c| c == \'#\');',
  '   212\t        self.expect(\'"\')?;',
  '   213\t        loop {',
  '   214\t            match self.bump() {',
  '   215\t                Some(\'"\') if self.count_while(|c| c == \'#\') > hashes => break,',
  '   216\t                Some(_) => continue,',
  '   217\t                None => return Err(LexError::UnterminatedString { at: start }),',
  '   218\t            }',
  '   219\t        }',
].join('\n')

const EDIT_INPUT = {
  file_path: `${REPO}/crates/parser/src/lexer.rs`,
  old_string: "Some('\"') if self.count_while(|c| c == '#') > hashes => break,",
  new_string: "Some('\"') if self.count_while(|c| c == '#') >= hashes => break,",
}

// Everything acknowledged so far, reported at READY.
const report = { records: [], journal: [], pushed: [] }

let session

function append(input, extra) {
  const env = extra === undefined ? session.append(input) : session.append(input, extra)
  report.records.push({ uuid: env.uuid, seq: env.seq, input, extra: extra ?? null })
  return env
}

function started(id) {
  session.toolCallStarted(id)
  report.journal.push({ op: 'started', id })
}

function outcome(id, res) {
  session.recordToolOutcome(id, res)
  report.journal.push({ op: 'outcome', id, result: res })
}

// A tool call run to the end: started, outcome recorded, tool_result appended.
function runTool(id, content, toolUseResult, isError) {
  started(id)
  const res = isError ? { content, is_error: true, toolUseResult } : { content, toolUseResult }
  outcome(id, res)
  append({ role: 'user', content: [result(id, content, isError)] }, { toolUseResult })
}

// A finished session of an earlier task, closed properly: never interrupted.
function earlierSession(store) {
  const done = store.createSession({ project: 'acme', title: 'Rename the config loader', model: MODEL })
  done.append('Rename `load_cfg` to `load_config` everywhere.')
  done.append(response([{ type: 'text', text: 'Done: renamed in 3 files, and the tests pass.' }], 'end_turn'))
  done.setStatus('completed')
  done.close()
  return done.id
}

// The start every case shares: a prompt, the tests run (Bash), the lexer read (Read).
function prelude() {
  append('The CI job `cargo test -p parser` fails since this morning. Find out why and fix it.')
  append(response([
    { type: 'thinking', thinking: 'Start by reproducing the failure locally, then read the code the failing test covers.', signature: 'EqMBCkYIBxgCKkCrashMatrixSignatureOne0123456789abcdefABCDEF==' },
    { type: 'text', text: "I'll run the parser tests first to see what fails." },
    toolUse(IDS.test, 'Bash', { command: 'cargo test -p parser 2>&1 | tail -n 20', description: 'Run the parser tests' }),
  ]), { requestId: 'req_011CrashMatrix0001' })
  runTool(IDS.test, TEST_OUTPUT, { stdout: TEST_OUTPUT, stderr: '', interrupted: false, isImage: false })
  append(response([
    { type: 'text', text: '`lexer::tests::raw_strings` fails: a raw string with a `"#` inside is cut short. Let me read the lexer.' },
    toolUse(IDS.read, 'Read', { file_path: `${REPO}/crates/parser/src/lexer.rs`, offset: 210, limit: 10 }),
  ]), { requestId: 'req_011CrashMatrix0002' })
  runTool(IDS.read, LEXER_SNIPPET, { type: 'text', file: { filePath: `${REPO}/crates/parser/src/lexer.rs`, numLines: 10, startLine: 210, totalLines: 412 } })
}

function ready(extra) {
  out(`READY ${JSON.stringify({ ...report, ...extra })}`)
  setInterval(() => {}, 1000)
}

// Pushes `before` (ending inside a block), waits past the writer's flush interval (200 ms), and
// pushes `last` into the same block: that push persists everything buffered, so all chunks pushed
// are on disk when READY is written.
function streamUntil(writer, before, last) {
  for (const chunk of before) {
    writer.push(chunk)
    report.pushed.push(chunk)
  }
  busyWait(260)
  writer.push(last)
  report.pushed.push(last)
}

const CASES = {
  // The response with two calls is stored; neither call started.
  'after-assistant'() {
    prelude()
    append(response([
      { type: 'text', text: 'Found it: the closing delimiter check needs `>=`, not `>`. Fixing it and re-running the test.' },
      toolUse(IDS.edit, 'Edit', EDIT_INPUT),
      toolUse(IDS.rerun, 'Bash', { command: 'cargo test -p parser lexer::tests::raw_strings', description: 'Re-run the failing test' }),
    ]), { requestId: 'req_011CrashMatrix0003' })
    ready()
  },

  // The Edit started (its side effect may have happened); no outcome.
  'after-started'() {
    prelude()
    append(response([
      { type: 'text', text: 'Found it: the closing delimiter check needs `>=`, not `>`.' },
      toolUse(IDS.edit, 'Edit', EDIT_INPUT),
    ]), { requestId: 'req_011CrashMatrix0003' })
    started(IDS.edit)
    ready()
  },

  // The test run finished and its outcome is in the journal; its tool_result message is not.
  'after-outcome'() {
    prelude()
    append(response([
      { type: 'text', text: 'Re-running the parser tests after the fix.' },
      toolUse(IDS.rerun, 'Bash', { command: 'cargo test -p parser 2>&1 | tail -n 3', description: 'Re-run the parser tests' }),
    ]), { requestId: 'req_011CrashMatrix0003' })
    started(IDS.rerun)
    const stdout = 'test lexer::tests::raw_strings ... ok\n\ntest result: ok. 42 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.03s'
    outcome(IDS.rerun, { content: stdout, toolUseResult: { stdout, stderr: '   Compiling parser v0.4.1 (/home/dev/acme/crates/parser)', interrupted: false, isImage: false } })
    ready()
  },

  // Five parallel calls: two finished (one with an error), two started, one never started.
  'parallel-half'() {
    prelude()
    append(response([
      { type: 'text', text: "I'll look at the test, the history of the file and format the tree, then apply the fix." },
      toolUse(IDS.readTest, 'Read', { file_path: `${REPO}/crates/parser/tests/raw_strings.rs` }),
      toolUse(IDS.gitLog, 'Bash', { command: 'git log --oneline -5 -- crates/parser/src/lexer.rs', description: 'Recent changes to the lexer' }),
      toolUse(IDS.readToken, 'Read', { file_path: `${REPO}/crates/parser/src/token.rs`, limit: 40 }),
      toolUse(IDS.fmt, 'Bash', { command: 'cargo fmt --all', description: 'Format the workspace' }),
      toolUse(IDS.edit, 'Edit', EDIT_INPUT),
    ]), { requestId: 'req_011CrashMatrix0003' })
    // run concurrently: four start, two finish, then the kill
    started(IDS.readTest)
    started(IDS.gitLog)
    started(IDS.readToken)
    started(IDS.fmt)
    outcome(IDS.readTest, {
      content: '     1\t#[test]\n     2\tfn raw_strings() {\n     3\t    assert_eq!(lex(r##"r#"a"#b"#"##), Ok(vec![RawStr("a\\"#b")]));\n     4\t}',
      toolUseResult: { type: 'text', file: { filePath: `${REPO}/crates/parser/tests/raw_strings.rs`, numLines: 4, startLine: 1, totalLines: 4 } },
    })
    outcome(IDS.gitLog, {
      content: 'fatal: not a git repository (or any of the parent directories): .git',
      is_error: true,
      toolUseResult: { stdout: '', stderr: 'fatal: not a git repository (or any of the parent directories): .git', interrupted: false, isImage: false },
    })
    ready()
  },

  // Raw Anthropic events, cut in the middle of the text block (the signed thinking before it is
  // complete).
  'mid-text'() {
    prelude()
    const events = RAW.cases[0].events
    const writer = session.beginResponse({ requestId: 'req_011CrashMatrixStream1' })
    // events[9] is the first text_delta of block 1; [10] the second, [11] the third
    streamUntil(writer, events.slice(0, 10), events[10])
    ready({ streamId: writer.id, requestId: 'req_011CrashMatrixStream1' })
  },

  // Simple chunks: a reasoning block completed with its signature, then a second one cut half-way.
  'mid-thinking'() {
    prelude()
    const chunks = SIMPLE.cases[0].chunks
    const writer = session.beginResponse({ requestId: 'req_011CrashMatrixStream2', model: MODEL })
    // chunks[0..3): reasoning + its signature; chunks[3]: 'Second thought.' opens the next one
    streamUntil(writer, chunks.slice(0, 4), { type: 'reasoning', text: ' Then call the weather tool for Paris.' })
    ready({ streamId: writer.id, requestId: 'req_011CrashMatrixStream2', model: MODEL })
  },

  // Raw Anthropic events, cut inside the very first block, a thinking block: nothing is whole.
  'mid-thinking-raw'() {
    prelude()
    const events = RAW.cases[0].events
    const writer = session.beginResponse({ requestId: 'req_011CrashMatrixStream3' })
    // events[3..5] are the thinking_deltas of block 0, [6] its signature
    streamUntil(writer, events.slice(0, 4), events[4])
    ready({ streamId: writer.id, requestId: 'req_011CrashMatrixStream3' })
  },

  // Raw Anthropic events, cut in the middle of the tool_use input (thinking and text complete).
  'mid-tool-input'() {
    prelude()
    const events = RAW.cases[0].events
    const writer = session.beginResponse({ requestId: 'req_011CrashMatrixStream4' })
    // events[14] starts the tool_use block, [15..23] are its input_json_deltas
    streamUntil(writer, events.slice(0, 17), events[17])
    ready({ streamId: writer.id, requestId: 'req_011CrashMatrixStream4' })
  },

  // Simple chunks: one tool call whose input is complete, a second one cut half-way.
  'mid-tool-input-simple'() {
    prelude()
    const chunks = SIMPLE.cases[0].chunks
    const writer = session.beginResponse({ requestId: 'req_011CrashMatrixStream5', model: MODEL })
    // chunks[6..9]: call_1 whole; chunks[10] opens call_2 (and persists what came before), then
    // call_2's input arrives in two halves
    streamUntil(writer, [...chunks.slice(0, 11), { type: 'tool_call_delta', id: 'call_2', delta: '{"region": "Ile-' }],
      { type: 'tool_call_delta', id: 'call_2', delta: 'de-France", "sever' })
    ready({ streamId: writer.id, requestId: 'req_011CrashMatrixStream5', model: MODEL })
  },

  // Holds the session (appended, still alive) until killed.
  hold() {
    prelude()
    ready()
  },

  // Finishes a turn and closes everything, then exits on its own.
  'clean-exit'() {
    prelude()
    append(response([{ type: 'text', text: 'The raw-string lexer stopped one `#` short; fixed with `>=` and all 42 tests pass.' }], 'end_turn'), { requestId: 'req_011CrashMatrix0003' })
    const store = sessionStore
    session.close()
    store.close()
    out(`READY ${JSON.stringify(report)}`)
  },
}

let sessionStore

function appendMany() {
  // batch of 50: 25 x (assistant with a Bash/Read call, its tool_result), explicit uuids
  for (let n = 0; ; n++) {
    const batch = `${process.pid}-${n}`
    const records = []
    for (let i = 0; i < 25; i++) {
      const id = `toolu_01Batch${process.pid}x${n}x${i}`
      const read = i % 2 === 1
      const input = read
        ? { file_path: `${REPO}/crates/parser/src/rules/r${n}_${i}.rs`, limit: 200 }
        : { command: `rg -n "fn rule_${n}_${i}" crates/parser/src`, description: `Find rule ${n}/${i}` }
      const output = read
        ? Array.from({ length: 12 }, (_, k) => `${String(k + 1).padStart(6)}\tpub fn rule_${n}_${i}_${k}(input: &str) -> Option<Node> { parse(input, ${k}) }`).join('\n')
        : `crates/parser/src/rules/r${n}_${i}.rs:12:pub fn rule_${n}_${i}(input: &str) -> Option<Node> {`
      records.push({
        uuid: crypto.randomUUID(),
        type: 'assistant',
        message: response([{ type: 'text', text: `Checking rule ${n}/${i}.` }, toolUse(id, read ? 'Read' : 'Bash', input)]),
        metadata: { batch, i: 2 * i },
      })
      records.push({
        uuid: crypto.randomUUID(),
        type: 'tool_result',
        message: { role: 'user', content: [result(id, output)] },
        toolUseResult: read ? { type: 'text', file: { filePath: input.file_path, numLines: 12, startLine: 1, totalLines: 12 } } : { stdout: output, stderr: '', interrupted: false, isImage: false },
        metadata: { batch, i: 2 * i + 1 },
      })
    }
    out(`TRY ${batch} ${JSON.stringify(records.map((r) => r.uuid))}`)
    session.appendMany(records)
    out(`ACK ${batch}`)
  }
}

function main() {
  const store = Store.open(storePath)
  sessionStore = store
  if (caseName === 'try-append') {
    // a second writer: tries to append to a session another process may hold, reports the outcome
    session = store.openSession(givenSessionId)
    try {
      const env = session.append('Second writer: is this session free?')
      out(`RESULT ok ${env.uuid}`)
    } catch (e) {
      out(`RESULT ${e.code} ${JSON.stringify(e.message)}`)
    }
    store.close()
    return
  }
  if (caseName === 'append-many') {
    if (givenSessionId) {
      session = store.openSession(givenSessionId)
    } else {
      session = store.createSession({ project: 'acme', title: 'Audit the parser rules', model: MODEL })
      append('Go through every parser rule and check it has a test.')
    }
    out(`READY ${JSON.stringify({ sessionId: session.id, records: report.records })}`)
    appendMany()
    return
  }
  const run = CASES[caseName]
  if (!run) throw new Error(`unknown case ${caseName}`)
  report.doneId = earlierSession(store)
  session = store.createSession({ project: 'acme', title: 'Fix the failing parser test', model: MODEL, contextWindow: 200000 })
  report.sessionId = session.id
  run()
}

main()
