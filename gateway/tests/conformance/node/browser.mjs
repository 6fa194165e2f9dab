// Runs a browser SDK, unchanged from npm, in headless Chromium (Debian's,
// driven by playwright-core) on a page of another origin than the gateway.
//
// Usage: node browser.mjs segment|rudder|posthog|snowplow. Reads GATEWAY_URL,
// WRITE_KEY (SNOWPLOW_APP_ID for snowplow), USER_ID and PAGE_PORT: the page is served from http://localhost:PAGE_PORT
// while the gateway is http://127.0.0.1:..., so every upload is cross-origin
// (CORS, and the preflights these SDKs' headers trigger). The SDK's npm
// package is bundled as it ships with esbuild, the way a site's build would.
// Prints one JSON line: what the SDK reported (its calls resolved, nothing
// left in its retry queue) and every request the page made to the gateway.
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';

const sdk = process.argv[2];
const { GATEWAY_URL, WRITE_KEY, USER_ID, PAGE_PORT } = process.env;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const SDKS = {
  segment: {
    pkg: '@segment/analytics-next',
    entry: `import { AnalyticsBrowser } from '@segment/analytics-next'; window.SdkUnderTest = AnalyticsBrowser;`,
    // As Segment documents self-hosting: settings from cdnURL, uploads to the
    // Segment.io integration's apiHost. The page reports each call's context.
    script: `
      const [analytics] = await SdkUnderTest.load(
        { writeKey: cfg.writeKey, cdnURL: cfg.gateway },
        { integrations: { 'Segment.io': { apiHost: cfg.gateway.replace(/^https?:\\/\\//, '') + '/v1', protocol: cfg.gateway.split(':')[0] } } });
      const calls = [
        await analytics.identify(cfg.user, { plan: 'pro' }),
        await analytics.track('Link Clicked', { href: 'https://example.com/pricing', text: 'Pricing' }),
        await analytics.page(),
      ];
      return calls.map((ctx) => ({ event: ctx.event.type, failed: ctx.failedDelivery() ? String(ctx.failedDelivery().reason) : null }));`,
    // analytics-next keeps undelivered events in a persisted retry queue.
    pending: `Object.keys(localStorage).filter((k) => k.startsWith('persisted-queue') && JSON.parse(localStorage.getItem(k) || '[]').length > 0)`,
  },
  rudder: {
    pkg: '@rudderstack/analytics-js',
    // The "bundled" build carries its plugins, as a site without the CDN needs.
    entry: `import { RudderAnalytics } from '@rudderstack/analytics-js/bundled'; window.SdkUnderTest = RudderAnalytics;`,
    script: `
      const analytics = new SdkUnderTest();
      await new Promise((resolve, reject) => {
        setTimeout(() => reject(new Error('onLoaded never called')), 15000);
        analytics.load(cfg.writeKey, cfg.gateway, {
          configUrl: cfg.gateway,
          logLevel: 'ERROR',
          onLoaded: () => resolve(),
        });
      });
      const call = (fn) => new Promise((resolve) => fn(resolve));
      const calls = [
        await call((cb) => analytics.identify(cfg.user, { plan: 'pro' }, cb)),
        await call((cb) => analytics.track('Link Clicked', { href: 'https://example.com/pricing', text: 'Pricing' }, cb)),
        await call((cb) => analytics.page('Pricing', undefined, cb)),
      ];
      return calls.map((m) => ({ event: m?.type ?? null, failed: null }));`,
    // Its XHR queue keeps undelivered events in localStorage (rudder_* keys).
    pending: `Object.keys(localStorage).filter((k) => /queue/i.test(k) && /"item"|"type"/.test(localStorage.getItem(k) || '') && !/^\\[\\]$|"queue":\\[\\]/.test(localStorage.getItem(k) || ''))`,
  },
  posthog: {
    pkg: 'posthog-js',
    entry: `import posthog from 'posthog-js'; window.SdkUnderTest = posthog;`,
    // api_host is all posthog-js needs; it asks the gateway for its remote
    // config (/array/{token}/config[.js]) and flags as it loads. Page views
    // are captured by hand after identify, so that every event is the user's.
    script: `
      const posthog = SdkUnderTest;
      await new Promise((resolve, reject) => {
        setTimeout(() => reject(new Error('loaded never called')), 15000);
        posthog.init(cfg.writeKey, {
          api_host: cfg.gateway,
          autocapture: false,
          capture_pageview: false,
          capture_pageleave: false,
          persistence: 'localStorage',
          request_queue_config: { flush_interval_ms: 250 },
          // Headless Chromium's user agent reads as a bot, whose events
          // posthog-js drops; its docs name this option for end-to-end tests.
          opt_out_useragent_filter: true,
          debug: ${Boolean(process.env.CONSOLE)},
          loaded: () => resolve(),
        });
      });
      posthog.identify(cfg.user, { plan: 'pro' });
      posthog.capture('link_clicked', { link: 'https://example.com/pricing', text: 'Pricing' });
      posthog.capture('$pageview');
      return [{ event: 'identify', failed: null }, { event: 'capture', failed: null }, { event: 'pageview', failed: null }];`,
    // posthog-js keeps its queue in memory: the wait below ends once no new
    // request arrived for a while, and any upload not 2xx fails the case.
    pending: `[]`,
    // posthog-js would otherwise hold its first events for a second or two.
    settle: 3000,
  },
  snowplow: {
    pkg: '@snowplow/browser-tracker',
    entry: `import * as snowplow from '@snowplow/browser-tracker'; window.SdkUnderTest = snowplow;`,
    // The gateway is the collector; the source is named by the app id. The
    // tracker sends cookies (withCredentials defaults to true), so every
    // POST needs a credentialed CORS grant. One event per request.
    script: `
      const sp = SdkUnderTest;
      sp.newTracker('sp', cfg.gateway, { appId: cfg.appId, eventMethod: 'post', bufferSize: 1 });
      sp.setUserId(cfg.user);
      sp.trackSelfDescribingEvent({ event: { schema: 'iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1',
        data: { targetUrl: 'https://example.com/pricing', elementContent: 'Pricing' } } });
      sp.trackPageView();
      sp.trackStructEvent({ category: 'form', action: 'submit', label: 'newsletter' });
      sp.flushBuffer();
      return [{ event: 'link_click', failed: null }, { event: 'pv', failed: null }, { event: 'se', failed: null }];`,
    // Its out queue is kept in localStorage (snowplowOutQueue_<tracker>_post2).
    pending: `Object.keys(localStorage).filter((k) => k.startsWith('snowplowOutQueue') && JSON.parse(localStorage.getItem(k) || '[]').length > 0)`,
  },
};

const chosen = SDKS[sdk];
if (!chosen) throw new Error(`unknown SDK ${sdk}`);
// Read from the installed package (its exports do not list package.json).
const version = JSON.parse(readFileSync(`node_modules/${chosen.pkg}/package.json`, 'utf8')).version;

const bundle = await build({
  stdin: { contents: chosen.entry, resolveDir: process.cwd(), loader: 'js' },
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2020',
  write: false,
  logLevel: 'error',
});
const cfg = { gateway: GATEWAY_URL, writeKey: WRITE_KEY, user: USER_ID, appId: process.env.SNOWPLOW_APP_ID };
const html = `<!doctype html><title>${sdk} conformance</title><script src="/sdk.js"></script><body>conformance</body>`;
const site = createServer((req, res) => {
  if (req.url.startsWith('/sdk.js')) {
    res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle.outputFiles[0].text);
  } else {
    res.writeHead(200, { 'content-type': 'text/html' }).end(html);
  }
});
await new Promise((resolve) => site.listen(Number(PAGE_PORT), 'localhost', resolve));

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
const requests = [];
const errors = [];
let report = { sdk: `${sdk}-browser`, version, ok: false };
try {
  const page = await browser.newPage();
  if (process.env.CONSOLE) page.on('console', (m) => errors.push(`console: ${m.text()}`.slice(0, 300)));
  page.on('pageerror', (e) => errors.push(`page error: ${e}`));
  page.on('requestfailed', (r) => {
    if (r.url().startsWith(GATEWAY_URL)) errors.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', async (r) => {
    const req = r.request();
    if (!req.url().startsWith(GATEWAY_URL)) return;
    requests.push({ method: req.method(), path: new URL(req.url()).pathname, status: r.status() });
  });
  await page.goto(`http://localhost:${PAGE_PORT}/pricing?ref=conformance`);
  const calls = await page.evaluate(`(async () => { const cfg = ${JSON.stringify(cfg)}; ${chosen.script} })()`);
  // Uploads may still be in flight after the calls resolved: wait until the
  // SDK's retry queue is empty and no new request arrived for a while.
  if (chosen.settle) await sleep(chosen.settle);
  let pending = [];
  let seen = -1;
  for (let i = 0; i < 40; i++) {
    await sleep(500);
    pending = await page.evaluate(chosen.pending);
    if (pending.length === 0 && requests.length === seen) break;
    seen = requests.length;
  }
  const uploads = requests.filter((r) => r.method === 'POST');
  const failed = calls.filter((c) => c.failed);
  const bad = requests.filter((r) => r.status >= 300);
  const ok = errors.length === 0 && failed.length === 0 && pending.length === 0 && uploads.length > 0 && bad.length === 0;
  report = { sdk: `${sdk}-browser`, version, ok, calls, pending, errors, requests };
} catch (e) {
  report = { ...report, errors: [...errors, String(e?.stack ?? e)], requests };
} finally {
  await browser.close();
  site.close();
}
console.log(JSON.stringify(report));
process.exit(report.ok ? 0 : 1);
