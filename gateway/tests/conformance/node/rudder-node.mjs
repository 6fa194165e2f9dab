// Runs RudderStack's Node SDK (@rudderstack/rudder-sdk-node), unchanged from
// npm, against the gateway. Same environment and output as segment-node.mjs.
import Analytics from '@rudderstack/rudder-sdk-node';
import { createRequire } from 'node:module';

const { version } = createRequire(import.meta.url)('@rudderstack/rudder-sdk-node/package.json');
const { GATEWAY_URL, WRITE_KEY, USER_ID, EVENTS } = process.env;
const errors = [];
const client = new Analytics(WRITE_KEY, {
  dataPlaneUrl: GATEWAY_URL,
  flushAt: 20,
  flushInterval: 500,
  retryCount: 3,
  logLevel: 'error',
  errorHandler: (e) => errors.push(String(e?.message ?? e)),
});

const calls = [];
const call = (method, params) =>
  calls.push(new Promise((resolve) => client[method](params, (err) => {
    if (err) errors.push(String(err?.message ?? err));
    resolve();
  })));
call('track', { userId: USER_ID, event: 'Link Clicked', properties: { href: 'https://example.com/pricing', text: 'Pricing' } });
call('page', { userId: USER_ID, name: 'Pricing', properties: { url: 'https://example.com/pricing', path: '/pricing' } });
call('identify', { userId: USER_ID, traits: { plan: 'pro' } });
if (EVENTS === 'invalid') {
  // Link Clicked requires properties.href: the gateway dead-letters this one.
  call('track', { userId: USER_ID, event: 'Link Clicked', properties: { text: 'no href' } });
}
client.flush();
// Every call's callback fires once its batch was answered (or finally failed).
const settled = await Promise.race([
  Promise.all(calls).then(() => true),
  new Promise((resolve) => setTimeout(() => resolve(false), 30000)),
]);
const ok = settled && errors.length === 0;
console.log(JSON.stringify({ sdk: 'rudder-node', version, ok, settled, errors }));
process.exit(ok ? 0 : 1);
