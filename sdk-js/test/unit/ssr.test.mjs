// Importing the package must not touch a browser global, so it loads in
// Node and during server-side rendering. Each global is a trap that throws
// when read; the import, and a client made in Node, must not trip them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const touched = [];
for (const name of ["window", "document", "localStorage", "location", "screen", "addEventListener"]) {
  Object.defineProperty(globalThis, name, {
    configurable: true,
    get() {
      touched.push(name);
      throw new ReferenceError(`${name} is not defined`);
    },
  });
}

test("the ESM and CommonJS builds import without touching browser globals", async () => {
  const esm = await import("../../dist/index.mjs");
  const cjs = createRequire(import.meta.url)("../../dist/index.cjs");
  assert.equal(typeof esm.createClient, "function");
  assert.equal(typeof cjs.createClient, "function");
  assert.deepEqual(touched, []);
});

test("a client works in Node: ids, events and memory storage, no page context", async () => {
  for (const name of ["window", "document", "localStorage", "location", "screen", "addEventListener"]) delete globalThis[name];
  const { createClient } = await import("../../dist/index.mjs");
  const sent = [];
  const c = createClient({
    writeKey: "k",
    host: "http://gw.test",
    fetch: async (url, init) => (sent.push(JSON.parse(init.body)), new Response('{"accepted":1,"rejected":0}')),
  });
  const id = c.track("Server Event", { ok: true });
  await c.flush();
  assert.equal(sent[0].batch[0].messageId, id);
  assert.equal(sent[0].batch[0].context.page, undefined);
  assert.equal(sent[0].batch[0].context.library.name, "eventgw-js");
});
