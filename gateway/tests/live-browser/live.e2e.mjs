// The live events view in headless Chromium, against a gateway that
// produces to a real Kafka (scripts/test-live starts it and sets LIVE_URL,
// LIVE_TOKEN, LIVE_SCREENSHOT and PLAYWRIGHT, the path of playwright-core's
// module in schemas/site-test). Events are sent with curl, as an operator
// would while watching; each must appear within 2 s with its status, topic
// and Kafka offset, or its violations; the stored record shows the hashed
// address, never the clear one; page and stream refuse without the token.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

const { chromium } = await import(process.env.PLAYWRIGHT);
const url = process.env.LIVE_URL;
const token = process.env.LIVE_TOKEN;
const run = Date.now().toString(36);
const email = `ada-${run}@example.com`;
let browser, page;

function send(events) {
  const body = JSON.stringify({ batch: events });
  const out = execFileSync('curl', ['-sS', '-u', 'demo-write-key:', '-H', 'Content-Type: application/json',
    '--data-binary', body, `${url}/v1/batch`]);
  return JSON.parse(out.toString());
}

before(async () => {
  assert.ok(url && token, 'LIVE_URL and LIVE_TOKEN name the running gateway and its operator token');
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 640 } });
});

after(async () => {
  await browser?.close();
});

test('without the operator token the page and the stream answer 401', async () => {
  for (const path of ['/live/', '/live/stream', `/live/stream?token=wrong-${run}`]) {
    const answer = await fetch(url + path);
    assert.equal(answer.status, 401, path);
    const body = await answer.json();
    assert.equal(body.code, 'operator_unauthorized', path);
    assert.ok(!body.message.includes(token));
  }
});

// The opened row's stored record, once the page fetched it (`GET /live/events/{id}`).
async function storedRecord() {
  await page.waitForFunction(() => (document.querySelector('#stored')?.textContent || '').startsWith('{'), null,
    { timeout: 2000 });
  return page.textContent('#stored');
}

test('a valid and an invalid event appear within 2 s, as stored', async () => {
  await page.goto(`${url}/live/?token=${encodeURIComponent(token)}`);
  assert.ok(!page.url().includes('token='), 'the token leaves the address bar');
  await page.waitForFunction(() => document.getElementById('state').textContent.startsWith('live'), null, { timeout: 5000 });
  const good = { type: 'track', event: 'Form Submitted', messageId: `good-${run}`, userId: `u-${run}`,
    properties: { form_id: 'contact', form_name: 'Contact us', email } };
  const bad = { type: 'track', event: 'Form Submitted', messageId: `bad-${run}`, userId: `u-${run}`,
    properties: { field_count: -1 } };
  const sent = Date.now();
  const answer = send([good, bad]);
  assert.deepEqual(answer.events.map((e) => e.status), ['accepted', 'invalid']);
  const accepted = page.locator('tr.row[data-status="accepted"]').first();
  const invalid = page.locator('tr.row[data-status="invalid"]').first();
  await accepted.waitFor({ timeout: 2000 });
  await invalid.waitFor({ timeout: Math.max(1, 2000 - (Date.now() - sent)) });
  const cells = async (row) => (await row.locator('td').allTextContents());
  const a = await cells(accepted);
  assert.equal(a[2], 'accepted');
  assert.equal(a[5], 'web.tracking');
  assert.match(a[6], /^\d+@\d+$/, 'partition@offset once Kafka acknowledged');
  const i = await cells(invalid);
  assert.equal(i[5], 'eventgw.dead-letter');
  assert.equal(i[7], 'schema_violation');

  await accepted.click();
  const stored = await storedRecord();
  assert.ok(!stored.includes(email), 'the clear address is never shown');
  const record = JSON.parse(stored);
  assert.match(record.properties.email, /^[0-9a-f]{64}$/, 'hashed as stored');
});

test('filtered to invalid, one event opens with its violations', async () => {
  await page.selectOption('#status', 'invalid');
  const rows = await page.locator('tr.row').evaluateAll((trs) => trs.map((t) => t.dataset.status));
  assert.ok(rows.length >= 1 && rows.every((s) => s === 'invalid'), `only invalid rows: ${rows}`);
  await page.locator('tr.row').first().click();
  const violations = await page.locator('#detail .v').allTextContents();
  assert.ok(violations.length >= 1, 'the violations, in the answer\'s words');
  const envelope = JSON.parse(await storedRecord());
  assert.equal(envelope.reason, 'schema_violation', 'the dead-letter envelope as stored');
  await page.selectOption('#status', '');
  await page.locator('tr.row[data-status="accepted"]').first().click();
  await storedRecord();
  if (process.env.LIVE_SCREENSHOT) await page.screenshot({ path: process.env.LIVE_SCREENSHOT });
});
