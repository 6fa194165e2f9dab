// Runs PostHog's Node SDK (posthog-node), unchanged from npm, against the
// gateway's PostHog capture routes. Reads GATEWAY_URL, WRITE_KEY (the
// project token) and USER_ID; sends a custom event, a page view and an
// identify, then shuts down (which flushes). Prints one JSON line with the
// status of every request the SDK made (through its `fetch` option, the
// SDK's own hook) and exits non-zero when one was not 2xx or the SDK
// reported an error.
import { PostHog } from 'posthog-node';
import { readFileSync } from 'node:fs';

// posthog-node's `exports` hide its package.json from require().
const { version } = JSON.parse(readFileSync(new URL('./node_modules/posthog-node/package.json', import.meta.url)));
const { GATEWAY_URL, WRITE_KEY, USER_ID } = process.env;
const errors = [];
const requests = [];
const client = new PostHog(WRITE_KEY, {
  host: GATEWAY_URL,
  flushAt: 20,
  flushInterval: 500,
  fetchRetryCount: 3,
  fetchRetryDelay: 200,
  fetch: async (url, options) => {
    const response = await fetch(url, options);
    requests.push({ url: String(url), status: response.status });
    return response;
  },
});
client.on('error', (e) => errors.push(String(e?.message ?? e)));

client.capture({ distinctId: USER_ID, event: 'link_clicked', properties: { link: 'https://example.com/pricing', text: 'Pricing' } });
client.capture({ distinctId: USER_ID, event: '$pageview', properties: { $current_url: 'https://example.com/pricing', $pathname: '/pricing', title: 'Pricing' } });
client.identify({ distinctId: USER_ID, properties: { plan: 'pro' } });
await client.shutdown(20000);
const ok = errors.length === 0 && requests.length > 0 && requests.every((r) => r.status >= 200 && r.status < 300);
console.log(JSON.stringify({ sdk: 'posthog-node', version, ok, errors, requests }));
process.exit(ok ? 0 : 1);
