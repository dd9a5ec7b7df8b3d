'use strict'
// The HTML export opened in headless Chromium (Debian's package, driven by puppeteer-core), as a
// person opens the file: it renders with no console or page errors and loads nothing from the
// network, has one element per message in order, tool calls and thinking fold and open on a
// click, a script in a message never runs, and a screenshot is taken (THREADLINE_SCREENSHOT_DIR
// keeps it).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const puppeteer = require('puppeteer-core')

const { lib, readJsonl } = require('./helpers/util')

const { Store } = lib
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p))

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

/** Opens the page with every request watched; { page, errors, requests }. */
async function open(html, name) {
  const file = path.join(dir, `${name}.html`)
  fs.writeFileSync(file, html)
  const page = await browser.newPage()
  const errors = []
  const requests = []
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.setRequestInterception(true)
  page.on('request', (r) => {
    requests.push(r.url())
    if (r.url().startsWith('file:') || r.url().startsWith('data:')) r.continue()
    else r.abort()
  })
  await page.setViewport({ width: 1100, height: 900 })
  await page.goto(`file://${file}`, { waitUntil: 'load' })
  return { page, errors, requests, file }
}

for (const name of ['short.jsonl', 'tool_heavy.jsonl', 'compacted-session.jsonl']) {
  test(`${name}: renders, loads nothing, one element per message, calls and thinking fold`, async () => {
    const s = store.createSession({ id: name })
    s.restoreMessages(readJsonl(name))
    const records = s.envelopes()
    const withMessage = records.filter((r) => r.message)
    const { page, errors, requests } = await open(s.export('html'), name)
    try {
      assert.deepEqual(errors, [])
      assert.deepEqual(requests.filter((u) => !u.startsWith('file:') && !u.startsWith('data:')), [], 'no network')
      const messages = await page.$$eval('.message', (els) => els.map((e) => [e.dataset.role, e.dataset.uuid]))
      assert.deepEqual(messages, withMessage.map((r) => [r.message.role, r.uuid]))
      const calls = withMessage.flatMap((r) => r.message.content.filter((b) => b.type === 'tool_use'))
      assert.equal(await page.$$eval('details.tool-call', (els) => els.length), calls.length)
      assert.equal(await page.$$eval('details[open]', (els) => els.length), 0, 'folded at first')
      if (calls.length > 0) {
        const box = await page.$('details.tool-call')
        assert.equal(await box.$eval('.body', (b) => b.checkVisibility()), false, 'the call is folded')
        await (await box.$('summary')).click()
        assert.equal(await box.evaluate((d) => d.open), true)
        const shown = await box.$eval('.body', (b) => ({ visible: b.checkVisibility(), text: b.textContent }))
        assert.ok(shown.visible, 'a click on its summary shows the call')
        assert.ok(shown.text.includes(`"${Object.keys(calls[0].input)[0]}"`), shown.text)
      }
      const thinking = withMessage.flatMap((r) => r.message.content.filter((b) => b.type === 'thinking'))
      assert.equal(await page.$$eval('details.thinking', (els) => els.length), thinking.length)
      const turns = s.turns
      assert.deepEqual(
        await page.$$eval('h2.turn .tokens', (els) => els.map((e) => e.textContent)),
        turns.map((t) => `${t.usage.input_tokens} in · ${t.usage.output_tokens} out · ${t.usage.cache_read_input_tokens} cache read · ${t.usage.cache_creation_input_tokens} cache write`),
      )
      await page.click('#open-all')
      assert.equal(await page.$$eval('details:not([open])', (els) => els.length), 0, 'expand all')
      const shotDir = process.env.THREADLINE_SCREENSHOT_DIR || dir
      fs.mkdirSync(shotDir, { recursive: true })
      const shot = path.join(shotDir, `${name}.png`)
      await page.click('#close-all')
      await page.screenshot({ path: shot, fullPage: false })
      const png = fs.readFileSync(shot)
      assert.ok(png.length > 10_000 && png.subarray(1, 4).toString() === 'PNG', 'a screenshot')
    } finally {
      await page.close()
    }
  })
}

test('text from a session is shown, never run; an image is inline, a URL image is not loaded', async () => {
  const s = store.createSession({ id: 'hostile', title: '<img src=x onerror="window.pwned=1">' })
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='
  s.append({ role: 'user', content: [
    { type: 'text', text: '<script>window.pwned = 2</script><img src=x onerror="window.pwned=3">' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
    { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
  ] })
  s.append({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'x"><script>window.pwned=4</script>', input: { q: '</pre><script>window.pwned=5</script>' } }] })
  const { page, errors, requests } = await open(s.export('html'), 'hostile')
  try {
    assert.deepEqual(errors, [])
    assert.equal(await page.evaluate(() => window.pwned), undefined)
    assert.deepEqual(requests.filter((u) => u.startsWith('http')), [])
    assert.equal(await page.$eval('.message .text', (e) => e.textContent), '<script>window.pwned = 2</script><img src=x onerror="window.pwned=3">')
    assert.equal(await page.$$eval('img.image', (els) => els.map((e) => e.naturalWidth)).then((w) => w.join()), '1')
    assert.match(await page.$eval('.message', (e) => e.textContent), /https:\/\/example\.com\/cat\.png/)
    assert.equal(await page.title(), '<img src=x onerror="window.pwned=1">')
  } finally {
    await page.close()
  }
})
