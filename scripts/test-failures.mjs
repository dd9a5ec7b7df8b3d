// A node:test reporter that prints nothing while the suite runs and, at its end, each failed
// test with its file, line and error. `npm test` runs it beside the TAP reporter: TAP puts a
// failure where its test ran, deep inside a long log, and a CI log that is shown by its head and
// tail would otherwise say which test failed but not why.

const MAX_LINES = 40

function describe(error) {
  const e = error && error.cause ? error.cause : error
  const lines = String(e instanceof Error ? e.message || e.stack : e).split('\n')
  const shown = lines.slice(0, MAX_LINES)
  if (lines.length > MAX_LINES) shown.push(`… (${lines.length - MAX_LINES} more lines)`)
  return shown.map((l) => `#     ${l}`).join('\n')
}

export default async function* failures(source) {
  const failed = []
  for await (const event of source) {
    if (event.type !== 'test:fail') continue
    const d = event.data
    // A suite or a test whose subtests failed repeats their failure: shown once, by the subtest.
    if (d.details?.error?.failureType === 'subtestsFailed') continue
    failed.push(d)
  }
  if (!failed.length) return
  yield `\n# ${failed.length} failed:\n`
  for (const d of failed) {
    yield `# ✖ ${d.name}${d.file ? ` (${d.file}${d.line ? `:${d.line}` : ''})` : ''}\n${describe(d.details?.error)}\n`
  }
}
