// messageIds are UUID v7: the gateway and downstream dedupe on them, and
// consumers sort by them, so format, time and order are pinned here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { uuidv7 } from "../../dist/internal.mjs";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test("uuidv7 has the v7 version and RFC variant bits and encodes the time", () => {
  const t = Date.UTC(2030, 0, 2, 3, 4, 5, 678);
  const id = uuidv7(t);
  assert.match(id, V7);
  assert.equal(parseInt(id.replace(/-/g, "").slice(0, 12), 16), t);
});

test("uuidv7 ids made in one millisecond are unique and strictly increasing", () => {
  const t = Date.now() + 60000; // ahead of any id made so far
  const ids = Array.from({ length: 5000 }, () => uuidv7(t));
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${ids[i]} after ${ids[i - 1]}`);
  assert.equal(new Set(ids).size, ids.length);
  ids.forEach((id) => assert.match(id, V7));
});
