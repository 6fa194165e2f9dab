// The size budgets from the issue, measured as served: gzip at level 9, as
// CDNs and static servers do. The snippet is measured as pasted, with its
// load() and first page() call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const SNIPPET_BUDGET = 600;
const SDK_BUDGET = 6 * 1024;
const gz = (s) => gzipSync(s, { level: 9 }).length;
const dist = (f) => readFileSync(new URL(`../dist/${f}`, import.meta.url), "utf8");

export const pastedSnippet = () =>
  `<script>${dist("snippet.min.js").trim()}\neventgw.load("YOUR_WRITE_KEY",{host:"https://events.example.com",src:"https://cdn.example.com/eventgw.min.js"});eventgw.page();</script>`;

test(`the snippet as pasted is at most ${SNIPPET_BUDGET} bytes gzipped`, () => {
  const n = gz(pastedSnippet());
  console.log(`snippet: ${Buffer.byteLength(pastedSnippet())} bytes, ${n} bytes gzipped`);
  assert.ok(n <= SNIPPET_BUDGET, `${n} > ${SNIPPET_BUDGET}`);
});

test(`the SDK script is at most ${SDK_BUDGET} bytes gzipped`, () => {
  const js = dist("eventgw.min.js");
  const n = gz(js);
  console.log(`sdk: ${Buffer.byteLength(js)} bytes minified, ${n} bytes gzipped`);
  assert.ok(n <= SDK_BUDGET, `${n} > ${SDK_BUDGET}`);
});
