'use strict'
// The HTML export opened in headless Chromium (Debian's package, driven by puppeteer-core), as a
// person opens the file: it renders with no console or page errors and requests nothing but the
// file itself, has one element per message in order, every tool call, result and thinking block
// folds and opens on a click (with the page's script off too), a script in a message never runs,
// and a full-page screenshot is taken of each (THREADLINE_SCREENSHOT_DIR keeps them).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { pathToFileURL } = require('node:url')
const puppeteer = require('puppeteer-core')

const { lib, readJsonl } = require('./helpers/util')

const { Store } = lib
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p))
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

let browser
let dir
let store
before(async () => {
  assert.ok(CHROMIUM, "headless Chromium is needed (Debian's chromium package; .ci/run installs it)")
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-html-'))
  store = Store.open(path.join(dir, 'html.db'))
})
after(async () => {
  if (browser) await browser.close()
  if (store) store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

function screenshotPath(name) {
  const shotDir = process.env.THREADLINE_SCREENSHOT_DIR || dir
  fs.mkdirSync(shotDir, { recursive: true })
  return path.join(shotDir, `${name}.png`)
}

function assertPng(file) {
  const png = fs.readFileSync(file)
  assert.ok(png.length > 1000, `${file}: ${png.length} bytes`)
  assert.deepEqual(png.subarray(0, 8), PNG_MAGIC, `${file} is a PNG`)
}

/**
 * Writes the page to a file and opens it with every request watched: anything but the file itself
 * and its data: images is aborted and recorded. { page, errors, requests, url }.
 */
async function open(html, name, { javaScript = true, colorScheme = 'light' } = {}) {
  const file = path.join(dir, `${name}.html`)
  fs.writeFileSync(file, html)
  const url = pathToFileURL(file).href
  const page = await browser.newPage()
  const errors = []
  const requests = []
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
  page.on('pageerror', (e) => errors.push(String(e)))
  page.on('requestfailed', (r) => { if (r.url() === url) errors.push(`the page failed: ${r.failure()?.errorText}`) })
  await page.setRequestInterception(true)
  page.on('request', (r) => {
    if (r.url().startsWith('data:')) return r.continue()
    requests.push(r.url())
    if (r.url() === url) r.continue()
    else r.abort()
  })
  await page.setJavaScriptEnabled(javaScript)
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: colorScheme }])
  await page.setViewport({ width: 1100, height: 900 })
  await page.goto(url, { waitUntil: 'load' })
  return { page, errors, requests, url }
}

/** Clicks the summary of each `details` the selector finds: each is closed first, then open with its body shown. */
async function clickOpenEach(page, selector) {
  const boxes = await page.$$(selector)
  for (const box of boxes) {
    const before = await box.evaluate((d) => ({ tag: d.tagName, open: d.open, shown: d.querySelector('.body').checkVisibility() }))
    assert.deepEqual(before, { tag: 'DETAILS', open: false, shown: false }, `${selector} is folded at first`)
    await (await box.$(':scope > summary')).click()
    const after = await box.evaluate((d) => {
      const body = d.querySelector('.body')
      return { open: d.open, shown: body.checkVisibility(), height: body.getBoundingClientRect().height }
    })
    assert.equal(after.open, true, `${selector} opens on a click`)
    assert.equal(after.shown, true, `${selector}: its content shows`)
    assert.ok(after.height > 0, `${selector}: its content takes room`)
  }
  return boxes.length
}

const FIXTURES = ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']

for (const name of FIXTURES) {
  test(`${name}: renders, loads nothing, one element per message, calls and thinking fold`, async () => {
    const s = store.createSession({ id: name })
    s.restoreMessages(readJsonl(name))
    const records = s.envelopes()
    const withMessage = records.filter((r) => r.message)
    const blocksOf = (type) => withMessage.flatMap((r) => (Array.isArray(r.message.content) ? r.message.content : []).filter((b) => b.type === type))
    const { page, errors, requests, url } = await open(s.export('html'), name)
    try {
      assert.deepEqual(errors, [])
      assert.deepEqual(requests, [url], 'no request but the file itself')

      // one element per message record, in order, with its role, uuid and seq
      const messages = await page.$$eval('.message', (els) => els.map((e) => [e.dataset.role, e.dataset.uuid, Number(e.dataset.seq)]))
      assert.equal(messages.length, withMessage.length)
      assert.deepEqual(messages, withMessage.map((r) => [r.message.role, r.uuid, r.seq]))
      // and a line for each event
      assert.equal(
        await page.$$eval('.event, details.compaction', (els) => els.length),
        records.length - withMessage.length,
      )
      // every tool call is a folded <details> that opens on a click and shows its input
      const calls = blocksOf('tool_use')
      assert.ok(name !== 'short.jsonl' || calls.length > 0)
      assert.deepEqual(await page.$$eval('details.tool-call', (els) => els.map((e) => e.id)), calls.map((c) => `call-${c.id}`))
      assert.equal(await page.$$eval('details[open]', (els) => els.length), 0, 'everything folded at first')
      assert.equal(await clickOpenEach(page, 'details.tool-call'), calls.length)
      if (calls.length > 0) {
        const text = await page.$eval('details.tool-call .body', (b) => b.textContent)
        assert.ok(text.includes(`"${Object.keys(calls[0].input)[0]}"`), text)
      }
      // each result follows its call by id, folded too
      const results = blocksOf('tool_result')
      assert.deepEqual(await page.$$eval('details.tool-result', (els) => els.map((e) => e.dataset.toolUseId)), results.map((r) => r.tool_use_id))
      assert.deepEqual(
        await page.$$eval('details.tool-result.error', (els) => els.map((e) => e.dataset.toolUseId)),
        results.filter((r) => r.is_error === true).map((r) => r.tool_use_id),
      )
      // thinking likewise
      const thinking = blocksOf('thinking')
      assert.equal(await clickOpenEach(page, 'details.thinking'), thinking.length)
      if (thinking.length > 0) {
        assert.equal(await page.$eval('details.thinking .body', (b) => b.textContent), thinking[0].thinking.trim())
      }

      // Claude Code's compaction summary (hundreds of lines) folded in its message
      const summaries = withMessage.filter((r) => r.isCompactSummary === true)
      assert.ok(name !== 'compacted-session.jsonl' || summaries.length > 0)
      assert.deepEqual(
        await page.$$eval('.message details.compact-summary', (els) => els.map((e) => e.closest('.message').dataset.uuid)),
        summaries.map((r) => r.uuid),
      )
      assert.equal(await clickOpenEach(page, 'details.compact-summary'), summaries.length)

      // a heading per turn with its tokens, with thousands separators
      const n = (/** @type {number} */ x) => x.toLocaleString('en-US')
      assert.deepEqual(
        await page.$$eval('h2.turn .tokens', (els) => els.map((e) => e.textContent)),
        s.turns.map((t) => `${n(t.usage.input_tokens)} in · ${n(t.usage.output_tokens)} out · ${n(t.usage.cache_read_input_tokens)} cache read · ${n(t.usage.cache_creation_input_tokens)} cache write`),
      )

      await page.click('#open-all')
      assert.equal(await page.$$eval('main details:not([open])', (els) => els.length), 0, 'expand all')
      await page.click('#close-all')
      assert.equal(await page.$$eval('main details[open]', (els) => els.length), 0, 'collapse all')

      const shot = screenshotPath(name)
      await page.screenshot({ path: shot, fullPage: true })
      assertPng(shot)
      assert.deepEqual(errors, [])
      assert.deepEqual(requests, [url], 'still no request but the file')
    } finally {
      await page.close()
    }
  })
}

test('dark mode: the page follows the reader\'s color scheme', async () => {
  const s = store.createSession({ id: 'dark' })
  s.restoreMessages(readJsonl('tool_heavy.jsonl'))
  const html = s.export('html')
  const colors = {}
  for (const scheme of ['light', 'dark']) {
    const { page, errors } = await open(html, `scheme-${scheme}`, { colorScheme: scheme })
    try {
      assert.deepEqual(errors, [])
      colors[scheme] = await page.evaluate(() => getComputedStyle(document.body).backgroundColor)
      if (scheme === 'dark') {
        await page.click('#open-all')
        const shot = screenshotPath('tool_heavy.dark')
        await page.screenshot({ path: shot })
        assertPng(shot)
      }
    } finally {
      await page.close()
    }
  }
  assert.notEqual(colors.light, colors.dark)
})

test('with JavaScript off the page still folds and unfolds', async () => {
  const s = store.createSession({ id: 'nojs' })
  s.restoreMessages(readJsonl('short.jsonl'))
  const { page, errors, requests, url } = await open(s.export('html'), 'nojs', { javaScript: false })
  try {
    assert.deepEqual(errors, [])
    assert.deepEqual(requests, [url])
    assert.equal(await page.$eval('#tools', (n) => n.checkVisibility()), false, 'the buttons that need the script are hidden')
    assert.ok(await clickOpenEach(page, 'details.tool-call') > 0)
    assert.ok(await clickOpenEach(page, 'details.thinking') > 0)
  } finally {
    await page.close()
  }
})

test('text from a session is shown, never run; an image is inline, a URL image is not loaded', async () => {
  const s = store.createSession({ id: 'hostile', title: '<img src=x onerror="window.pwned=1">', project: '</title><script>window.pwned=9</script>' })
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='
  const hostileText = '<script>window.pwned = 2</script><img src=x onerror="window.pwned=3">'
  s.append({ role: 'user', content: [
    { type: 'text', text: hostileText },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
    { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
  ] })
  s.append({ role: 'assistant', content: [
    { type: 'thinking', thinking: '<img src=x onerror="window.pwned=6">', signature: 'sig' },
    { type: 'tool_use', id: 'toolu_1', name: 'x"><script>window.pwned=4</script>', input: { q: '</pre><script>window.pwned=5</script>' } },
  ] })
  s.appendEvent('<svg onload="window.pwned=7">', { type: '<img src=x onerror="window.pwned=8">' })
  s.append({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '<iframe src="https://example.com"></iframe>', is_error: true }] })
  const { page, errors, requests, url } = await open(s.export('html'), 'hostile')
  try {
    assert.deepEqual(errors, [])
    await page.click('#open-all')
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(await page.evaluate(() => window.pwned), undefined, 'nothing from the session ran')
    assert.deepEqual(requests, [url], 'nothing was loaded: not the URL image, not an iframe')
    assert.equal(await page.$$eval('script', (els) => els.length), 1, 'the page\'s own script only')
    assert.equal(await page.$$eval('iframe, svg, object, embed', (els) => els.length), 0)
    assert.equal(await page.$eval('.message .text', (e) => e.textContent), hostileText)
    assert.deepEqual(await page.$$eval('img', (els) => els.map((e) => [e.className, e.naturalWidth, e.src.slice(0, 22)])), [['image', 1, 'data:image/png;base64,']])
    assert.match(await page.$eval('.message', (e) => e.textContent), /https:\/\/example\.com\/cat\.png/)
    assert.equal(await page.title(), '<img src=x onerror="window.pwned=1">')
    assert.match(await page.$eval('header', (e) => e.textContent), /<\/title><script>window\.pwned=9<\/script>/)
    assert.match(await page.$eval('details.tool-call summary', (e) => e.textContent), /x"><script>window\.pwned=4<\/script>/)
    assert.match(await page.$eval('details.tool-result', (e) => e.textContent), /<iframe src="https:\/\/example\.com"><\/iframe>/)
    const shot = screenshotPath('hostile')
    await page.screenshot({ path: shot, fullPage: true })
    assertPng(shot)
  } finally {
    await page.close()
  }
})
