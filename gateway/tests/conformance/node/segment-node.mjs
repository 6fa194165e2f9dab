// Runs Segment's Node SDK (@segment/analytics-node), unchanged from npm,
// against the gateway. Reads GATEWAY_URL, WRITE_KEY, USER_ID and EVENTS
// (track|invalid); prints one JSON line with what the SDK reported and exits
// non-zero when any callback carried an error.
import { Analytics } from '@segment/analytics-node';
import { createRequire } from 'node:module';

const { version } = createRequire(import.meta.url)('@segment/analytics-node/package.json');
const { GATEWAY_URL, WRITE_KEY, USER_ID, EVENTS } = process.env;
const analytics = new Analytics({ writeKey: WRITE_KEY, host: GATEWAY_URL, flushAt: 20, flushInterval: 500, maxRetries: Number(process.env.MAX_RETRIES ?? 3) });
const errors = [];
const requests = [];
analytics.on('error', (e) => errors.push(String(e?.reason ?? e?.code ?? e)));
analytics.on('http_request', (r) => requests.push(r.url));

const calls = [];
const done = (resolve) => (err) => {
  if (err) errors.push(String(err?.reason ?? err?.message ?? err));
  resolve();
};
const call = (method, params) => calls.push(new Promise((resolve) => analytics[method](params, done(resolve))));
call('track', { userId: USER_ID, event: 'Link Clicked', properties: { href: 'https://example.com/pricing', text: 'Pricing' } });
call('page', { userId: USER_ID, name: 'Pricing', properties: { url: 'https://example.com/pricing', path: '/pricing' } });
call('identify', { userId: USER_ID, traits: { plan: 'pro' } });
if (EVENTS === 'invalid') {
  // Link Clicked requires properties.href: the gateway dead-letters this one.
  call('track', { userId: USER_ID, event: 'Link Clicked', properties: { text: 'no href' } });
}
await analytics.closeAndFlush({ timeout: 20000 });
await Promise.all(calls);
const ok = errors.length === 0 && requests.length > 0;
console.log(JSON.stringify({ sdk: 'segment-node', version, ok, errors, requests }));
process.exit(ok ? 0 : 1);
