// The catalog page in headless Chromium: it renders every domain and event
// from the shipped catalog, its WebAssembly checker loads, a valid example
// passes and an invalid event is flagged with the offending fields.
// Needs the site written by `eventgw-catalog schemas docs` (SITE_DIR,
// default target/catalog) with the wasm build in it; scripts/test-contracts
// prepares both.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { join, extname, normalize, resolve } from 'node:path';
import { chromium } from 'playwright-core';

const root = resolve(process.env.SITE_DIR ?? new URL('../../target/catalog', import.meta.url).pathname);
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.wasm': 'application/wasm' };
let server, browser, page, base;

before(async () => {
  await stat(join(root, 'index.html')).catch(() => assert.fail(`no site in ${root}: run eventgw-catalog schemas docs`));
  await stat(join(root, 'wasm/eventgw_schemas_wasm_bg.wasm')).catch(() => assert.fail(`no wasm build in ${root}: run scripts/build-wasm`));
  server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^\/+/, '') || 'index.html';
    try {
      const body = await readFile(join(root, path));
      res.writeHead(200, { 'content-type': types[extname(path)] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  base = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(`${base}/index.html`);
  await page.waitForSelector('body[data-checker]', { timeout: 60000 });
  const state = await page.getAttribute('body', 'data-checker');
  assert.equal(state, 'ready', `checker: ${await page.textContent('#check-status')} ${problems.join('; ')}`);
});

after(async () => {
  await browser?.close();
  server?.close();
});

test('renders every domain with its owner, topic and events', async () => {
  assert.equal(await page.textContent('h1'), 'Event catalog');
  const domains = await page.$$eval('section.domain h2', (hs) => hs.map((h) => h.textContent));
  assert.deepEqual(domains, ['app', 'billing', 'crm', 'marketing', 'web']);
  const billing = await page.textContent('#domain-billing');
  assert.match(billing, /Owner\s*payments/);
  assert.match(billing, /billing\.payments, 3 partitions/);
  assert.equal(await page.locator('article.event').count(), 10);
  const payment = page.locator('article[data-event="Payment Captured"]');
  assert.match(await payment.textContent(), /Partition key\s*properties\.order_id/);
  assert.match(await payment.textContent(), /Compatibility\s*full/);
});

test('shows each version with its fields, descriptions and an example', async () => {
  const pageViewed = page.locator('article[data-event="Page Viewed"]');
  assert.deepEqual(await pageViewed.locator('details.version').evaluateAll((ds) => ds.map((d) => d.dataset.version)), ['2', '1']);
  const v2 = pageViewed.locator('details[data-version="2"]');
  const row = v2.locator('tr', { hasText: 'properties.search' });
  assert.match(await row.textContent(), /string.*The query string of the URL/);
  assert.equal(await pageViewed.locator('details[data-version="1"] tr', { hasText: 'properties.search' }).count(), 0);
  assert.match(await v2.locator('.example pre').first().textContent(), /"search": "q=shoes"/);
});

test('an example passes the in-browser check', async () => {
  await page.locator('article[data-event="Page Viewed"] details[data-version="2"] button.try').click();
  await page.waitForSelector('#check-result[data-valid]');
  assert.equal(await page.getAttribute('#check-result', 'data-valid'), 'true');
  assert.match(await page.textContent('#check-result'), /Valid: Page Viewed v2, to topic web\.tracking with key user-1/);
});

test('an invalid event is flagged with each offending field', async () => {
  const bad = { type: 'track', event: 'Payment Captured', userId: 'u1',
    properties: { order_id: 'o-1', amount: -5, currency: 'euro' } };
  await page.fill('#event-input', JSON.stringify(bad, null, 2));
  await page.click('#check-button');
  await page.waitForSelector('#check-result[data-valid="false"]');
  const text = await page.textContent('#check-result');
  assert.match(text, /Invalid: Payment Captured v1 breaks its contract \(rollout: enforce\)/);
  const paths = await page.$$eval('#check-result li code', (cs) => cs.map((c) => c.textContent));
  assert.ok(paths.includes('/properties/amount'), paths.join());
  assert.ok(paths.includes('/properties/currency'), paths.join());
  assert.match(text, /payment_id/);
  // For people: what the flagged check looks like (target/catalog-check.png).
  await page.locator('#check').screenshot({ path: join(root, '..', 'catalog-check.png') });
});

test('unknown events, pinned versions and bad JSON are explained', async () => {
  const check = async (text) => {
    await page.fill('#event-input', text);
    await page.click('#check-button');
    return page.textContent('#check-result');
  };
  assert.match(await check('{"type":"track","event":"Nope","userId":"u1"}'), /`Nope` is not in the catalog/);
  assert.match(await check('{"type":"page","userId":"u1","context":{"schemaVersion":9},"properties":{"url":"https://a.example/","path":"/"}}'),
    /version 9 does not exist; the newest is 2/);
  assert.match(await check('{ nope'), /not valid JSON/);
});
