// The persistent queue: bounds by count and bytes drop the oldest and count
// why; what storage holds survives a reload; a broken or full storage never
// throws and never loses what is in memory.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as lib from "../../dist/internal.mjs";

const { chunks, item, memoryStore, Queue } = lib;

const ev = (i, pad = "") => item({ messageId: `m${i}`, type: "track", event: "E", properties: { pad } });

test("the count bound drops the oldest and counts it until reported", () => {
  const q = new Queue(memoryStore(), "k", 10, 1e9);
  for (let i = 0; i < 25; i++) q.push(ev(i));
  assert.equal(q.items.length, 10);
  assert.equal(q.items[0].e.messageId, "m15");
  assert.deepEqual(q.dropped, { queue_count: 15 });
  q.push(ev(99));
  q.reported({ queue_count: 15 }); // a request reported 15; the one dropped since stays counted
  assert.deepEqual(q.dropped, { queue_count: 1 });
});

test("the byte bound holds at exactly the limit and drops one past it", () => {
  const one = ev(0, "x".repeat(100)).n;
  const q = new Queue(memoryStore(), "k", 1000, one * 3);
  for (let i = 0; i < 3; i++) q.push(ev(i, "x".repeat(100)));
  assert.equal(q.items.length, 3);
  assert.equal(q.bytes, one * 3);
  assert.deepEqual(q.dropped, {});
  q.push(ev(3, "x".repeat(100)));
  assert.equal(q.items.length, 3);
  assert.deepEqual(q.dropped, { queue_bytes: 1 });
});

test("a reload gets the stored events and drop counts back", async () => {
  const store = memoryStore();
  const q = new Queue(store, "k", 2, 1e9);
  for (let i = 0; i < 3; i++) q.push(ev(i));
  await Promise.resolve(); // saves are coalesced into a microtask
  const again = new Queue(store, "k", 2, 1e9);
  assert.deepEqual(
    again.items.map((i) => i.e.messageId),
    ["m1", "m2"],
  );
  assert.deepEqual(again.dropped, { queue_count: 1 });
});

test("corrupt stored data counts as an empty queue", () => {
  const store = memoryStore();
  store.set("k", "{not json");
  assert.equal(new Queue(store, "k", 10, 1e9).items.length, 0);
  store.set("k", "null");
  assert.equal(new Queue(store, "k", 10, 1e9).items.length, 0);
});

test("a full storage keeps the newest part stored and everything in memory", () => {
  const inner = memoryStore();
  // A quota that takes at most 300 characters.
  const store = { ...inner, set: (k, v) => v.length <= 300 && inner.set(k, v) };
  const q = new Queue(store, "k", 100, 1e9);
  for (let i = 0; i < 10; i++) q.push(ev(i, "y".repeat(40)));
  q.save();
  assert.equal(q.items.length, 10);
  const stored = JSON.parse(inner.get("k")).q.map((e) => e.messageId);
  assert.ok(stored.length > 0 && stored.length < 10, `stored ${stored.length}`);
  assert.equal(stored.at(-1), "m9");
});

test("localStorage that throws (private mode) or refuses writes (quota) is guarded", () => {
  const { localStore } = lib;
  Object.defineProperty(globalThis, "localStorage", {
    configurable: true,
    get() {
      throw new Error("SecurityError: access denied");
    },
  });
  assert.equal(localStore(), undefined);
  let full = false;
  const data = {};
  Object.defineProperty(globalThis, "localStorage", {
    configurable: true,
    value: {
      getItem: (k) => (full ? (() => { throw new Error("gone"); })() : data[k] ?? null),
      setItem: (k, v) => {
        if (full) throw new Error("QuotaExceededError");
        data[k] = v;
      },
      removeItem: (k) => delete data[k],
    },
  });
  const s = localStore();
  assert.ok(s);
  assert.equal(s.set("a", "1"), true);
  full = true;
  assert.equal(s.set("a", "2"), false);
  assert.equal(s.get("a"), null);
  delete globalThis.localStorage;
});

test("beacon chunks keep order and stay within their byte limit, one event past it starts a new chunk", () => {
  const items = Array.from({ length: 7 }, (_, i) => ev(i, "c".repeat(50)));
  const per = items[0].n + 1;
  const runs = chunks(items, per * 3);
  assert.deepEqual(
    runs.map((r) => r.length),
    [3, 3, 1],
  );
  assert.deepEqual(runs.flat().map((i) => i.e.messageId), items.map((i) => i.e.messageId));
  assert.deepEqual(chunks(items, per * 3 - 1).map((r) => r.length), [2, 2, 2, 1]);
  assert.deepEqual(chunks([], 100), []);
});
