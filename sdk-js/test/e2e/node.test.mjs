// The package in Node (where it sends with fetch) against the real gateway
// and Kafka: plain and gzipped batches land, each record keyed by its
// messageId in the event-id header.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../../dist/index.mjs";
import { startGateway, waitForRecords, WRITE_KEY } from "../helpers/env.mjs";

let gateway;
before(async () => (gateway = await startGateway()));
after(async () => gateway && (await gateway.stop()));

test("Node: track, page and identify land on their topics", async () => {
  const since = Date.now();
  const c = createClient({ writeKey: WRITE_KEY, host: gateway.url, compressAt: 1e9 });
  const ids = [
    c.track("Link Clicked", { href: "https://shop.example/a" }),
    c.page({ url: "https://shop.example/pricing", path: "/pricing" }),
  ];
  const idn = c.identify(`node-user-${since}`, { plan: "pro" });
  await c.flush();
  const web = await waitForRecords("web.tracking", since, (r) => ids.includes(r.headers["event-id"]), 2);
  assert.deepEqual(web.map((r) => r.headers["event-id"]).sort(), [...ids].sort());
  for (const r of web) assert.equal(r.value.messageId, r.headers["event-id"]);
  const crm = await waitForRecords("crm.identities", since, (r) => r.headers["event-id"] == idn, 1);
  assert.equal(crm.length, 1);
  assert.equal(crm[0].value.userId, `node-user-${since}`);
});

test("Node: a gzipped batch is accepted and every event lands once", async () => {
  const since = Date.now();
  let sentGzip = false;
  const spy = async (url, init) => {
    const bytes = new Uint8Array(await new Response(init.body).arrayBuffer());
    sentGzip = bytes[0] == 0x1f && bytes[1] == 0x8b;
    return fetch(url, init);
  };
  const c = createClient({ writeKey: WRITE_KEY, host: gateway.url, compressAt: 1024, fetch: spy });
  const ids = Array.from({ length: 15 }, (_, i) => c.track("Form Submitted", { form_id: `gz-${i}`, form_name: "x".repeat(100) }));
  await c.flush();
  assert.equal(sentGzip, true);
  const got = await waitForRecords("web.tracking", since, (r) => ids.includes(r.headers["event-id"]), ids.length);
  assert.equal(got.length, ids.length);
});
