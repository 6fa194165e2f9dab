// The small rules delivery depends on: backoff bounds, which statuses retry,
// Retry-After parsing, UTM parsing, and what context exists in Node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { autoContext, backoff, campaign, parseRetryAfter, retryable } from "../../dist/internal.mjs";

test("backoff is full jitter: between 0 and min(cap, base * 2^(n-1))", () => {
  for (let n = 1; n <= 12; n++) {
    const ceiling = Math.min(30000, 500 * 2 ** (n - 1));
    const samples = Array.from({ length: 200 }, () => backoff(n, 500, 30000));
    assert.ok(samples.every((d) => d >= 0 && d <= ceiling), `attempt ${n}`);
    assert.ok(Math.max(...samples) > ceiling / 2, `attempt ${n} spreads up to its ceiling`);
  }
});

test("only network errors, 408, 429 and 5xx are retried", () => {
  for (const s of [0, 408, 429, 500, 502, 503]) assert.equal(retryable(s), true, `${s}`);
  for (const s of [400, 401, 403, 404, 413, 415, 422]) assert.equal(retryable(s), false, `${s}`);
});

test("Retry-After is read as seconds or as an HTTP date", () => {
  assert.equal(parseRetryAfter("3"), 3000);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  const now = Date.UTC(2030, 0, 1);
  assert.equal(parseRetryAfter(new Date(now + 7000).toUTCString(), now), 7000);
});

test("utm parameters become the campaign context", () => {
  assert.deepEqual(campaign("?a=1&utm_source=news&utm_campaign=spring%20sale&utm_medium=email+x"), {
    source: "news",
    name: "spring sale",
    medium: "email x",
  });
  assert.equal(campaign("?a=1"), undefined);
});

test("autoContext in Node has the library, locale and timezone and no page", () => {
  const c = autoContext();
  assert.equal(c.library.name, "eventgw-js");
  assert.match(c.library.version, /^\d+\.\d+\.\d+/);
  assert.equal(typeof c.timezone, "string");
  assert.equal(typeof c.locale, "string");
  assert.equal(c.page, undefined);
});
