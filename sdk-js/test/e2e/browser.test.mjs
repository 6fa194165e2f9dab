// The snippet and SDK in headless Chromium against the real gateway and
// Kafka, with a recording proxy between them. Pages come from
// http://localhost:3000 and the gateway is another origin, so every request
// is cross-origin: a preflight, were one needed, would reach the proxy as
// an OPTIONS request.
import { after, afterEach, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { decode, DIST, startGateway, startProxy, startSite, waitForRecords, WRITE_KEY } from "../helpers/env.mjs";

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let gateway, proxy, site, browser, context;
const pageErrors = [];

before(async () => {
  gateway = await startGateway();
  proxy = await startProxy(gateway.url);
  site = await startSite();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
});

after(async () => {
  await browser?.close();
  await site?.stop();
  await proxy?.stop();
  await gateway?.stop();
});

afterEach(async () => {
  await context?.close();
  context = undefined;
  proxy.down = false;
  proxy.failures = 0;
  // Checked after every test, so each one also proves it needed no preflight.
  assert.deepEqual(proxy.log.filter((e) => e.method != "POST").map((e) => `${e.method} ${e.path}`), []);
  assert.deepEqual(pageErrors.splice(0), []);
});

/** A page with the snippet as a site would paste it, then `script`. */
function sitePage(path, options, script = "") {
  const snippet = readFileSync(join(DIST, "snippet.min.js"), "utf8");
  const opts = JSON.stringify({ host: proxy.url, ...options });
  site.pages.set(path, `<!doctype html><title>Test ${path}</title><script>${snippet}
eventgw.load(${JSON.stringify(WRITE_KEY)}, ${opts});${script}</script><body>${path}</body>`);
  return `${site.url}${path}`;
}

async function open(url, { init } = {}) {
  context = context || (await browser.newContext());
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  if (init) await page.addInitScript(init);
  await page.goto(url);
  await page.waitForFunction(() => window.eventgw && window.eventgw.client);
  return page;
}

const anonId = (page) => page.evaluate(() => eventgw.client.anonymousId);
const byAnon = (id) => (r) => r.value.anonymousId == id;
const stored = (page) => page.evaluate((k) => JSON.parse(localStorage.getItem(`eventgw.q.${k}`) || "{}"), WRITE_KEY);

test("calls made before the SDK loads land on Kafka with their context", async () => {
  const since = Date.now();
  const user = `browser-user-${since}`;
  const url = sitePage(
    "/landing",
    { flushInterval: 200 },
    `eventgw.page(); eventgw.track("Link Clicked", {href: "https://shop.example/signup"}); eventgw.identify(${JSON.stringify(user)}, {plan: "pro"});`,
  );
  const page = await open(`${url}?utm_source=newsletter&utm_campaign=spring%20sale`);
  const anon = await anonId(page);
  const web = await waitForRecords("web.tracking", since, byAnon(anon), 2);
  assert.deepEqual(web.map((r) => r.headers["event-name"]).sort(), ["Link Clicked", "Page Viewed"]);
  for (const r of web) assert.equal(r.headers["event-id"], r.value.messageId);
  const pv = web.find((r) => r.value.type == "page").value;
  assert.equal(pv.properties.path, "/landing");
  assert.equal(pv.properties.title, "Test /landing");
  assert.match(pv.properties.url, /^http:\/\/localhost:3000\/landing\?utm_source=newsletter/);
  assert.deepEqual(pv.context.campaign, { source: "newsletter", name: "spring sale" });
  assert.equal(pv.context.library.name, "eventgw-js");
  assert.ok(pv.context.locale && pv.context.timezone && pv.context.screen.width > 0);
  assert.match(pv.messageId, /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
  const crm = await waitForRecords("crm.identities", since, byAnon(anon), 1);
  assert.equal(crm.length, 1);
  assert.equal(crm[0].value.userId, user);
  for (const e of proxy.batches(anon)) assert.equal(e.status, 200);
});

test("the last events land when the page is closed (beacon)", async () => {
  const since = Date.now();
  const url = sitePage("/closing", { flushInterval: 600000, flushAt: 100 });
  const page = await open(url);
  const anon = await anonId(page);
  const ids = await page.evaluate(() =>
    [1, 2, 3, 4, 5].map((i) => eventgw.client.track("Form Submitted", { form_id: `closing-${i}` })),
  );
  await sleep(300);
  assert.equal(proxy.batches(anon).length, 0, "nothing sent before the page closed");
  await page.close({ runBeforeUnload: true });
  const got = await waitForRecords("web.tracking", since, byAnon(anon), 5);
  assert.deepEqual(got.map((r) => r.headers["event-id"]).sort(), [...ids].sort());
  const sent = proxy.batches(anon);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].headers["sec-fetch-mode"], "no-cors", "a beacon (no-cors), not a fetch (cors)");
  assert.match(sent[0].headers["content-type"], /^text\/plain/);
});

test("a beacon flush is split under the 64 KiB in-flight limit", async () => {
  const since = Date.now();
  const url = sitePage("/big-close", { flushInterval: 600000, flushAt: 500, beaconBytes: 30000 });
  const page = await open(url);
  const anon = await anonId(page);
  const ids = await page.evaluate(() =>
    Array.from({ length: 40 }, (_, i) => eventgw.client.track("Form Submitted", { form_id: `big-${i}`, form_name: "n".repeat(1000) })),
  );
  await page.evaluate(() => window.dispatchEvent(new Event("pagehide")));
  const got = await waitForRecords("web.tracking", since, byAnon(anon), ids.length);
  assert.equal(new Set(got.map((r) => r.headers["event-id"])).size, ids.length);
  const sent = proxy.batches(anon);
  assert.ok(sent.length >= 2, `${sent.length} beacons`);
  for (const e of sent) assert.ok(e.body.length <= 30000, `${e.body.length} bytes`);
});

test("no request needs a preflight, and large bodies go gzipped as text/plain", async () => {
  const since = Date.now();
  const page = await open(sitePage("/gzip", { flushAt: 100, flushInterval: 600000, compressAt: 1024 }));
  const anon = await anonId(page);
  const ids = await page.evaluate(async () => {
    const ids = Array.from({ length: 30 }, (_, i) => eventgw.client.track("Form Submitted", { form_id: `gz-${i}`, form_name: "g".repeat(200) }));
    await eventgw.flush();
    return ids;
  });
  const sent = proxy.batches(anon);
  assert.equal(sent.length, 1);
  assert.deepEqual([...sent[0].body.subarray(0, 2)], [0x1f, 0x8b]);
  assert.match(sent[0].headers["content-type"], /^text\/plain/);
  assert.equal(sent[0].headers["content-encoding"], undefined);
  assert.equal(sent[0].headers.authorization, undefined);
  assert.equal(sent[0].status, 200);
  const got = await waitForRecords("web.tracking", since, byAnon(anon), ids.length);
  assert.equal(got.length, ids.length);
  // The afterEach hook asserts the proxy saw no OPTIONS request.
});

test("after two 503s with Retry-After, each messageId lands exactly once", async () => {
  const since = Date.now();
  proxy.failNext(2);
  const page = await open(sitePage("/retry", { flushAt: 3, retryBase: 100 }));
  const anon = await anonId(page);
  const ids = await page.evaluate(() => [1, 2, 3].map((i) => eventgw.client.track("Form Submitted", { form_id: `retry-${i}` })));
  const got = await waitForRecords("web.tracking", since, byAnon(anon), 3, { settleMs: 3000 });
  assert.deepEqual(got.map((r) => r.headers["event-id"]).sort(), [...ids].sort());
  const sent = proxy.batches(anon);
  assert.deepEqual(sent.map((e) => e.status), [503, 503, 200]);
  for (const e of sent) assert.deepEqual(JSON.parse(decode(e.body)).batch.map((x) => x.messageId), ids);
  assert.ok(sent[1].at - sent[0].at >= 950, `retried after ${sent[1].at - sent[0].at} ms, Retry-After was 1 s`);
});

test("events the browser would not beacon stay stored and land after a reload, same messageIds", async () => {
  const since = Date.now();
  proxy.down = true;
  const url = sitePage("/reload", { flushAt: 2 });
  // sendBeacon refused (as when its quota is used up): the keepalive fetch
  // fallback meets the 503 too, so only storage can carry these events over.
  const page = await open(url, { init: () => (Navigator.prototype.sendBeacon = () => false) });
  const anon = await anonId(page);
  const ids = await page.evaluate(() => [1, 2].map((i) => eventgw.client.track("Form Submitted", { form_id: `reload-${i}` })));
  await sleep(500);
  const tries = proxy.batches(anon).map((e) => e.status);
  assert.ok(tries.length >= 1 && tries.every((s) => s == 503), `answers: ${tries}`);
  assert.deepEqual((await stored(page)).q.map((e) => e.messageId), ids);
  await page.reload();
  proxy.down = false;
  await page.waitForFunction(() => window.eventgw && window.eventgw.client);
  assert.equal(await anonId(page), anon, "the anonymous id survives too");
  const got = await waitForRecords("web.tracking", since, byAnon(anon), 2);
  assert.deepEqual(got.map((r) => r.headers["event-id"]).sort(), [...ids].sort());
});

test("the stored queue stays within its bounds, and the drop report lands", async () => {
  const since = Date.now();
  proxy.down = true;
  const url = sitePage("/bounded", { maxQueueEvents: 5, maxQueueBytes: 4000, flushInterval: 100, retryCap: 300 });
  const page = await open(url);
  const anon = await anonId(page);
  await page.evaluate(() => {
    for (let i = 0; i < 12; i++) eventgw.client.track("Form Submitted", { form_id: `bound-${i}` });
    for (let i = 0; i < 3; i++) eventgw.client.track("Form Submitted", { form_id: `wide-${i}`, form_name: "w".repeat(1200) });
  });
  await sleep(300);
  const s = await stored(page);
  const raw = await page.evaluate((k) => localStorage.getItem(`eventgw.q.${k}`), WRITE_KEY);
  assert.ok(s.q.length <= 5, `${s.q.length} events stored`);
  const bytes = s.q.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)), 0);
  assert.ok(bytes <= 4000, `${bytes} bytes of events stored (${raw.length} with the envelope)`);
  assert.equal(s.q.at(-1).properties.form_id, "wide-2", "the newest is kept");
  assert.equal((s.d.queue_count || 0) + (s.d.queue_bytes || 0), 15 - s.q.length);
  proxy.down = false;
  await page.reload();
  const got = await waitForRecords("web.tracking", since, byAnon(anon), s.q.length);
  assert.deepEqual(got.map((r) => r.value.messageId).sort(), s.q.map((e) => e.messageId).sort());
  const reports = got.map((r) => r.value.context.dropped).filter(Boolean);
  assert.deepEqual(reports, [s.d]);
});

test("storage that throws (private mode) or refuses writes (quota) does not stop delivery", async () => {
  const since = Date.now();
  const url = sitePage("/nostorage", { flushInterval: 100 }, `eventgw.track("Form Submitted", {form_id: "private"});`);
  const denied = await open(url, {
    init: () => Object.defineProperty(window, "localStorage", { get: () => { throw new DOMException("denied", "SecurityError"); } }),
  });
  const a1 = await anonId(denied);
  await context.close();
  context = undefined;
  const full = await open(url, {
    init: () => (Storage.prototype.setItem = () => { throw new DOMException("full", "QuotaExceededError"); }),
  });
  const a2 = await anonId(full);
  const got = await waitForRecords("web.tracking", since, (r) => [a1, a2].includes(r.value.anonymousId), 2);
  assert.equal(got.length, 2);
  // afterEach asserts no page error was thrown.
});

test("consent: pending holds without sending or storing; granted sends; denied discards", async () => {
  const since = Date.now();
  const page = await open(sitePage("/consent", { consent: "pending", flushInterval: 100 }, `eventgw.track("Form Submitted", {form_id: "held"});`));
  const anon = await anonId(page);
  await sleep(500);
  assert.equal(proxy.batches(anon).length, 0, "nothing sent while pending");
  assert.deepEqual(await page.evaluate(() => Object.keys(localStorage)), [], "nothing stored while pending");
  await page.evaluate(() => eventgw.consent("granted"));
  const got = await waitForRecords("web.tracking", since, byAnon(anon), 1);
  assert.equal(got[0].value.properties.form_id, "held");

  const other = await open(sitePage("/deny", { consent: "pending", flushInterval: 100 }, `eventgw.track("Form Submitted", {form_id: "denied"});`));
  const anon2 = await anonId(other);
  await other.evaluate(() => (eventgw.consent("denied"), eventgw.track("Form Submitted", { form_id: "after-denial" })));
  await sleep(800);
  assert.equal(proxy.batches(anon2).length, 0, "nothing sent after denial");
  assert.deepEqual(await other.evaluate(() => Object.keys(localStorage)), [], "and nothing of ours left stored");
});

test("Global Privacy Control is honoured when asked to", async () => {
  const init = () => Object.defineProperty(Navigator.prototype, "globalPrivacyControl", { get: () => true });
  const page = await open(sitePage("/gpc", { honorPrivacySignals: true, flushInterval: 100 }, `eventgw.page();`), { init });
  const anon = await anonId(page);
  await page.evaluate(() => (eventgw.consent("granted"), eventgw.track("Form Submitted", { form_id: "gpc" }), eventgw.flush()));
  await sleep(500);
  assert.equal(proxy.batches(anon).length, 0);
});

test("cookie-less mode writes nothing to the device; the cookie option writes a first-party cookie", async () => {
  const since = Date.now();
  const less = await open(sitePage("/cookieless", { cookieless: true, cookie: true, flushInterval: 100 }, `eventgw.page();`));
  const anon = await anonId(less);
  assert.deepEqual(await less.evaluate(() => [document.cookie, Object.keys(localStorage)]), ["", []]);
  assert.equal((await waitForRecords("web.tracking", since, byAnon(anon), 1)).length, 1);
  await context.close();
  context = undefined;
  const withCookie = await open(sitePage("/cookie", { cookie: true }));
  const anon2 = await anonId(withCookie);
  assert.equal(await withCookie.evaluate(() => document.cookie), `eventgw_aid=${anon2}`);
});
