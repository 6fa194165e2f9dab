// The delivery loop in Node with a scripted fetch: batching by count, bytes
// and time; preflight-free requests; gzip; retries with the same messageIds;
// giving up on 4xx; drop reports; consent; privacy signals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import { createClient } from "../../dist/index.mjs";

/** A fetch that answers from `script` (status numbers, "network", or functions) and records every request. */
function fakeFetch(script = []) {
  const calls = [];
  const f = async (url, init) => {
    const raw = typeof init.body == "string" ? Buffer.from(init.body) : Buffer.from(await init.body.arrayBuffer());
    const gz = raw[0] == 0x1f && raw[1] == 0x8b;
    const body = JSON.parse((gz ? gunzipSync(raw) : raw).toString());
    calls.push({ url, init, body, gz, at: Date.now() });
    const step = script.length ? script.shift() : 200;
    if (step == "network") throw new TypeError("fetch failed");
    const [status, headers] = Array.isArray(step) ? step : [step, {}];
    const answer = status == 200 ? { accepted: body.batch.length, invalid: 0, rejected: 0, events: [] } : { code: "x", message: "x" };
    return new Response(JSON.stringify(answer), { status, headers });
  };
  f.calls = calls;
  return f;
}

const client = (fetch, o = {}) => createClient({ writeKey: "wk", host: "http://gw.test", flushInterval: 20, retryBase: 10, fetch, ...o });
const ids = (calls) => calls.flatMap((c) => c.body.batch.map((e) => e.messageId));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test("batches by count, and the request could not need a preflight", async () => {
  const f = fakeFetch();
  const c = client(f, { flushAt: 5, flushInterval: 60000 });
  for (let i = 0; i < 12; i++) c.track("E", { i });
  await sleep(50); // no flush() call and a 60 s interval: the count alone triggers sending
  assert.deepEqual(
    f.calls.map((x) => x.body.batch.length),
    [5, 5, 2],
  );
  const { url, init, body } = f.calls[0];
  assert.equal(url, "http://gw.test/v1/batch");
  assert.equal(init.method, "POST");
  assert.equal(init.headers, undefined, "no header of our own: nothing that would trigger a preflight");
  assert.equal(body.writeKey, "wk");
  assert.ok(Date.parse(body.sentAt));
});

test("batches by bytes", async () => {
  const f = fakeFetch();
  const c = client(f, { maxBatchBytes: 1000, flushInterval: 60000, compressAt: 1e9 });
  for (let i = 0; i < 6; i++) c.track("E", { pad: "x".repeat(300) });
  await c.flush();
  assert.ok(f.calls.length >= 3, `${f.calls.length} requests`);
  for (const x of f.calls) assert.ok(JSON.stringify(x.body.batch).length <= 1000);
  assert.equal(ids(f.calls).length, 6);
});

test("batches by time", async () => {
  const f = fakeFetch();
  const c = client(f, { flushInterval: 50 });
  c.track("A");
  c.track("B");
  assert.equal(f.calls.length, 0);
  await sleep(150);
  assert.equal(f.calls.length, 1);
  assert.deepEqual(
    f.calls[0].body.batch.map((e) => e.event),
    ["A", "B"],
  );
});

test("large bodies go gzipped as text/plain", async () => {
  const f = fakeFetch();
  const c = client(f, { compressAt: 1024 });
  for (let i = 0; i < 10; i++) c.track("E", { pad: "z".repeat(200) });
  await c.flush();
  assert.equal(f.calls[0].gz, true);
  assert.equal(f.calls[0].init.body.type, "text/plain");
  assert.equal(f.calls[0].body.batch.length, 10);
});

test("a 503 with Retry-After is retried after it, with the same messageIds; a caller's messageId is kept", async () => {
  const f = fakeFetch([[503, { "retry-after": "0.3" }], "network", 200]);
  const c = client(f);
  c.track("E", {}, { messageId: "my-own-id" });
  c.track("E");
  await c.flush();
  await sleep(1200);
  assert.equal(f.calls.length, 3);
  assert.deepEqual(ids([f.calls[1]]), ids([f.calls[0]]));
  assert.deepEqual(ids([f.calls[2]]), ids([f.calls[0]]));
  assert.equal(ids(f.calls)[0], "my-own-id");
  assert.ok(f.calls[1].at - f.calls[0].at >= 290, "waited for Retry-After");
});

test("408, 429 and 5xx are retried; other 4xx are given up and reported in the next event", async () => {
  const f = fakeFetch([408, 429, 500, 200, 400, 200]);
  const c = client(f);
  c.track("Kept");
  await c.flush();
  await sleep(500);
  assert.equal(f.calls.length, 4);
  c.track("Refused");
  await c.flush();
  c.track("Next");
  await c.flush();
  assert.equal(f.calls.length, 6, "the 400 was not retried");
  assert.deepEqual(f.calls[5].body.batch[0].context.dropped, { rejected: 1 });
});

test("the queue bound drops the oldest and the next delivered event says so, once", async () => {
  const f = fakeFetch(["network", "network"]);
  const c = client(f, { maxQueueEvents: 10, retryBase: 5, retryCap: 20, flushInterval: 60000 });
  for (let i = 0; i < 25; i++) c.track("E", { i });
  c.track("Last");
  await c.flush(); // fails, then retries on its own
  await sleep(300);
  assert.equal(f.calls.length, 3);
  const sent = f.calls[2].body.batch;
  assert.equal(sent.length, 10);
  assert.equal(sent[0].properties.i, 16);
  assert.deepEqual(sent[0].context.dropped, { queue_count: 16 });
  assert.equal(sent[1].context.dropped, undefined);
  c.track("After");
  await c.flush();
  assert.equal(f.calls.length, 4);
  assert.equal(f.calls[3].body.batch[0].context.dropped, undefined, "reported once");
});

test("events larger than maxEventBytes are dropped as too_large", async () => {
  const f = fakeFetch();
  const c = client(f, { maxEventBytes: 2000 });
  c.track("Huge", { pad: "h".repeat(5000) });
  c.track("Small");
  await c.flush();
  assert.deepEqual(
    f.calls[0].body.batch.map((e) => [e.event, e.context.dropped]),
    [["Small", { too_large: 1 }]],
  );
});

test("consent pending holds events until granted; denial discards them", async () => {
  const f = fakeFetch();
  const c = client(f, { consent: "pending" });
  c.track("Held");
  await sleep(60);
  assert.equal(f.calls.length, 0, "nothing sent while pending");
  c.consent("granted");
  await c.flush();
  assert.deepEqual(
    f.calls[0].body.batch.map((e) => e.event),
    ["Held"],
  );

  const g = fakeFetch();
  const d = client(g, { consent: "pending" });
  d.track("Discarded");
  d.consent("denied");
  d.track("Never");
  d.consent("granted");
  d.track("After");
  await d.flush();
  assert.deepEqual(
    ids(g.calls).length && g.calls[0].body.batch.map((e) => e.event),
    ["After"],
  );
});

test("with honorPrivacySignals, Global Privacy Control stops everything, whatever consent() says", async () => {
  globalThis.navigator = { globalPrivacyControl: true };
  try {
    const f = fakeFetch();
    const c = client(f, { honorPrivacySignals: true });
    c.track("E");
    c.consent("granted");
    c.track("E");
    await c.flush();
    assert.equal(f.calls.length, 0);
    const g = fakeFetch();
    const d = client(g); // the option is off: signals are not consulted
    d.track("E");
    await d.flush();
    assert.equal(g.calls.length, 1);
  } finally {
    delete globalThis.navigator;
  }
});

test("identify, alias and reset carry the identity on later events", async () => {
  const f = fakeFetch();
  const c = client(f);
  const anon = c.anonymousId;
  c.identify("u1", { plan: "pro" });
  c.track("A");
  c.alias("u2");
  c.group("g1", { name: "Acme" });
  c.reset();
  c.page({ url: "https://x.test/a", path: "/a" });
  await c.flush();
  const b = f.calls.flatMap((x) => x.body.batch);
  assert.deepEqual(
    b.map((e) => [e.type, e.userId, e.anonymousId == anon]),
    [
      ["identify", "u1", true],
      ["track", "u1", true],
      ["alias", "u2", true],
      ["group", "u2", true],
      ["page", undefined, false],
    ],
  );
  assert.equal(b[2].previousId, "u1");
  assert.deepEqual(b[0].traits, { plan: "pro" });
});
