'use strict'
// threadline import FORMAT PATH and threadline export ID: other agents' files in, a session out.

const fs = require('node:fs')
const { colours, print, printJson, field, text, EXIT } = require('../output.js')
const { withStore, resolveId } = require('../store.js')

/** One line redrawn in place on a terminal: files, megabytes, records. */
function progressBar(stream) {
  const c = colours(stream)
  let drawn = false
  return {
    update(p) {
      const width = 30
      const done = p.totalBytes > 0 ? p.bytes / p.totalBytes : 1
      const fill = Math.round(done * width)
      const mb = (n) => (n / 1e6).toFixed(1)
      // numbers only: written as they are (the guard would show the \r)
      print(`\r${c.cyan('█'.repeat(fill))}${c.dim('░'.repeat(width - fill))} ${p.files}/${p.totalFiles} files  ${mb(p.bytes)}/${mb(p.totalBytes)} MB  ${p.records} records`, { stream, raw: true })
      drawn = true
    },
    end() {
      if (drawn) print('\n', { stream })
    },
  }
}

/** A path that does not exist: NOT_FOUND before the store is opened (an import creates it). */
function mustExist(from) {
  try {
    fs.statSync(from)
  } catch (e) {
    if (e.code !== 'ENOENT' && e.code !== 'ENOTDIR') throw e
    const err = new Error(`no file or folder '${from}' to import`)
    // @ts-ignore
    err.code = 'NOT_FOUND'
    throw err
  }
}

async function importFiles(format, from, opts) {
  mustExist(from)
  return withStore(opts, async (store) => {
    const bar = process.stderr.isTTY && !opts.json ? progressBar(process.stderr) : null
    const options = {}
    if (opts.project) options.project = opts.project
    if (opts.includeDeleted) options.includeDeleted = true
    if (bar) options.onProgress = (p) => bar.update(p)
    let report
    try {
      report = await store.import({ format, path: from }, options)
    } finally {
      if (bar) bar.end()
    }
    if (opts.json) {
      printJson(report)
      return EXIT.ok
    }
    const c = colours(process.stdout)
    const out = [
      report.sessions === 0
        ? c.yellow('Nothing imported: no session in what was read')
        : `${c.bold(String(report.newSessions))} new of ${report.sessions} sessions, ${c.bold(String(report.newRecords))} new of ${report.records} records`,
    ]
    const events = Object.entries(report.events)
    if (events.length > 0) out.push(c.dim(`kept as events: ${events.map(([k, n]) => `${field(k)} ${n}`).join(', ')}`))
    if (report.skipped.length > 0) {
      // an entry without a line is a whole file (a FIFO, a link out of the folder, a binary file)
      const what = report.skipped.every((s) => s.line) ? ' line(s)' : ''
      out.push(c.yellow(`${report.skipped.length}${what} skipped:`))
      for (const s of report.skipped.slice(0, 20)) out.push(`  ${field(s.file)}${s.line ? `:${s.line}` : ''}: ${field(s.reason)}`)
      if (report.skipped.length > 20) out.push(`  ... and ${report.skipped.length - 20} more (--json lists them all)`)
    }
    print(`${out.join('\n')}\n`)
    return EXIT.ok
  }, undefined, { create: true })
}

async function exportSession(id, opts) {
  return withStore(opts, (store) => {
    const s = store.openSession(resolveId(store, id))
    try {
      const doc = s.export(opts.format, opts.events ? { events: true } : undefined)
      if (opts.output) {
        fs.writeFileSync(opts.output, doc)
        print(`wrote ${field(opts.output)} (${doc.length} characters)\n`, { stream: process.stderr })
      } else {
        // a document for a file or a pipe, as it is; on a terminal its control characters as text
        print(process.stdout.isTTY ? text(doc) : doc, { raw: true })
      }
      return EXIT.ok
    } finally {
      s.close()
    }
  }, { readonly: true })
}

module.exports = { importFiles, exportSession }
