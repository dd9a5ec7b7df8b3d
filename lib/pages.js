// @ts-check
'use strict'
// Bulk reads come back as pages of JSON text (one JSON array of records per page), parsed here.

const { fail } = require('./errors.js')

/** @typedef {import('../native.js').NativePages} NativePages */

// Parses a page of stored records. The native side checked every record's checksum before it
// made the page, so the text is well-formed JSON; should it still not parse, that is a damaged
// store (STORE_CORRUPT), never a bare SyntaxError.
/**
 * @param {string} json
 * @param {string} operation
 * @returns {any[]}
 */
function parsePage(json, operation) {
  let items
  try {
    items = JSON.parse(json)
  } catch (e) {
    throw fail('STORE_CORRUPT', `${operation}: a page of stored records is not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (!Array.isArray(items)) throw fail('STORE_CORRUPT', `${operation}: a page of stored records is not an array`)
  return items
}

// Reads every page of a bulk read; the native side reads the next page on another thread while
// this one is parsed, and each page's text is dropped once parsed.
/**
 * @param {NativePages} pages
 * @param {string} operation
 * @returns {any[]}
 */
function readPages(pages, operation) {
  /** @type {any[]} */
  let out = []
  for (let json = pages.next(); json !== null; json = pages.next()) {
    const items = parsePage(json, operation)
    out = out.length === 0 ? items : out.concat(items)
  }
  return out
}

// Every page of a bulk read: the synchronous API's pages (read ahead on another thread), or the
// promise API's list of pages.
/**
 * @param {NativePages | Array<{ json: string }>} pages
 * @param {string} operation
 */
function allPages(pages, operation) {
  if (!Array.isArray(pages)) return readPages(pages, operation)
  /** @type {any[]} */
  let out = []
  for (const page of pages) out = out.concat(parsePage(page.json, operation))
  return out
}

module.exports = { parsePage, allPages }
