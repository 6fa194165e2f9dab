// Debug mode in headless Chromium: the SDK checks each event with the
// gateway's own WebAssembly checker, fetched from the real gateway's
// /catalog/ (served here from the page's origin, as a dev server would
// proxy it), reports a valid event as valid and flags an invalid one with
// its path; without `debug` nothing of the checker is fetched. Needs the
// wasm build in schemas/wasm/pkg (scripts/build-wasm; scripts/test runs
// scripts/test-contracts, which builds it, before these tests).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { DIST, REPO, startGateway, WRITE_KEY } from "../helpers/env.mjs";

let gateway, server, base, browser;
const fetched = [];

before(async () => {
  assert.ok(existsSync(join(REPO, "schemas/wasm/pkg/eventgw_schemas_wasm_bg.wasm")), "run scripts/build-wasm first");
  gateway = await startGateway();
  // One origin for the page, the SDK and the catalog (proxied to the gateway).
  server = http.createServer(async (req, res) => {
    fetched.push(req.url);
    if (req.url.startsWith("/catalog/")) {
      const answer = await fetch(gateway.url + req.url);
      res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") || "" });
      return res.end(Buffer.from(await answer.arrayBuffer()));
    }
    if (req.url == "/eventgw.min.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      return res.end(readFileSync(join(DIST, "eventgw.min.js")));
    }
    const debug = req.url == "/debug" ? "true" : "false";
    const snippet = readFileSync(join(DIST, "snippet.min.js"), "utf8");
    res.writeHead(200, { "content-type": "text/html" });
    res.end(`<!doctype html><script>window.results = [];${snippet}
eventgw.load(${JSON.stringify(WRITE_KEY)}, {host: ${JSON.stringify(gateway.url)}, src: "/eventgw.min.js", flushInterval: 600000,
  debug: ${debug} && {catalog: "/catalog/", onResult: (r) => window.results.push(r)}});</script>`);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
});

after(async () => {
  await browser?.close();
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r()));
  await gateway?.stop();
});

test("debug mode checks each event with the gateway's checker", async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${base}/debug`);
  await page.waitForFunction(() => window.eventgw && window.eventgw.client);
  await page.evaluate(() => {
    eventgw.track("Order Completed", { order_id: "o-1", total: 42.5, currency: "EUR" });
    eventgw.track("Order Completed", { order_id: "o-2", total: "lots", currency: "EUR" });
  });
  await page.waitForFunction(() => window.results.length == 2, null, { timeout: 30000 });
  const [good, bad] = await page.evaluate(() => window.results);
  assert.equal(good.valid, true, JSON.stringify(good));
  assert.equal(good.topic, "billing.payments");
  assert.equal(bad.valid, false);
  assert.ok(bad.errors.some((e) => e.path == "/properties/total"), JSON.stringify(bad.errors));
  assert.deepEqual(errors, []);
  await page.close();
});

test("without debug nothing of the checker is fetched", async () => {
  fetched.length = 0;
  const page = await browser.newPage();
  await page.goto(`${base}/plain`);
  await page.waitForFunction(() => window.eventgw && window.eventgw.client);
  await page.evaluate(() => eventgw.track("Order Completed", { order_id: "o-3", total: 1, currency: "EUR" }));
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(fetched.filter((u) => u.startsWith("/catalog/")), []);
  await page.close();
});
