// A newcomer's `scripts/dev`, then /catalog/ in headless Chromium: the page
// the running gateway serves has the WebAssembly checker built (no "run
// scripts/build-wasm" notice), it accepts a valid event and flags an
// invalid one. CATALOG_URL is the gateway's /catalog/ (scripts/test-dev-catalog
// starts scripts/dev and sets it). Named *.e2e.mjs so the plain `node --test`
// of this directory (the static site test) does not pick it up.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const url = process.env.CATALOG_URL;
let browser, page;

before(async () => {
  assert.ok(url, 'CATALOG_URL must name the running gateway\'s /catalog/');
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(url);
  await page.waitForSelector('body[data-checker]', { timeout: 60000 });
  const state = await page.getAttribute('body', 'data-checker');
  assert.equal(state, 'ready', `checker: ${await page.textContent('#check-status')} ${problems.join('; ')}`);
});

after(async () => {
  await browser?.close();
});

test('the gateway serves the page with its checker ready', async () => {
  assert.equal(await page.textContent('h1'), 'Event catalog');
  assert.doesNotMatch(await page.textContent('body'), /scripts\/build-wasm/);
});

test('a valid event is accepted', async () => {
  const good = { type: 'track', event: 'Order Completed', userId: 'u1',
    properties: { order_id: 'o-1', total: 42.5, currency: 'EUR' } };
  await page.fill('#event-input', JSON.stringify(good));
  await page.click('#check-button');
  await page.waitForSelector('#check-result[data-valid]');
  assert.equal(await page.getAttribute('#check-result', 'data-valid'), 'true', await page.textContent('#check-result'));
  assert.match(await page.textContent('#check-result'), /Valid: Order Completed v\d+, to topic billing\.payments with key o-1/);
});

test('an invalid event is flagged with the offending field', async () => {
  const bad = { type: 'track', event: 'Order Completed', userId: 'u1',
    properties: { order_id: 'o-1', total: 'lots', currency: 'EUR' } };
  await page.fill('#event-input', JSON.stringify(bad));
  await page.click('#check-button');
  await page.waitForSelector('#check-result[data-valid="false"]');
  const paths = await page.$$eval('#check-result li code', (cs) => cs.map((c) => c.textContent));
  assert.ok(paths.includes('/properties/total'), paths.join());
});

test('the tracker mappings are shown: a section per protocol and each event\'s tracker events', async () => {
  const protocols = await page.$$eval('#mappings article.mapping', (as) => as.map((a) => a.dataset.protocol));
  assert.deepEqual([...protocols].sort(), ['ga4', 'posthog', 'snowplow'], protocols.join());
  assert.ok(await page.isVisible('#mappings'), 'the section is laid out, not hidden');
  for (const protocol of protocols) {
    const rows = await page.$$eval(`#mapping-${protocol} tbody tr`, (rs) => rs.length);
    assert.ok(rows > 0, `${protocol}: its rules are listed`);
  }
  const mapped = await page.textContent('article.event[data-event="Order Completed"] dd.mapped');
  assert.match(mapped, /GA4 purchase/, mapped);
  const clicked = await page.textContent('article.event[data-event="Link Clicked"] dd.mapped');
  assert.match(clicked, /GA4 click/, clicked);
  assert.match(clicked, /Snowplow/, clicked);
});
