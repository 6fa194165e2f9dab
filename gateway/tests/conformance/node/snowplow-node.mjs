// Runs Snowplow's Node tracker (@snowplow/node-tracker), unchanged from npm,
// against the gateway's Snowplow collector path (POST
// /com.snowplowanalytics.snowplow/tp2). Reads GATEWAY_URL, SNOWPLOW_APP_ID
// (the app id a source lists in `snowplow_app_ids`) and USER_ID; sends a
// link click (a self-describing event), a page view and a structured event,
// then flushes. Prints one JSON line with the status of every request the
// tracker reported (its own `onRequestSuccess`/`onRequestFailure` hooks)
// and exits non-zero when one failed or none was made.
import { newTracker, buildLinkClick, buildPageView, buildStructEvent, version } from '@snowplow/node-tracker';

const { GATEWAY_URL, SNOWPLOW_APP_ID, USER_ID } = process.env;
const requests = [];
const errors = [];
const tracker = newTracker(
  { namespace: 'conformance', appId: SNOWPLOW_APP_ID },
  {
    endpoint: GATEWAY_URL,
    bufferSize: 10,
    onRequestSuccess: (batch, response) => requests.push({ status: response.status, events: batch.length }),
    onRequestFailure: (failure, response) =>
      errors.push({ status: response?.status ?? null, willRetry: failure.willRetry, message: failure.message ?? null }),
  },
);
tracker.setUserId(USER_ID);
tracker.track(buildLinkClick({ targetUrl: 'https://example.com/pricing', elementContent: 'Pricing' }));
tracker.track(buildPageView({ pageUrl: 'https://example.com/pricing', pageTitle: 'Pricing' }));
tracker.track(buildStructEvent({ category: 'form', action: 'submit', label: 'newsletter' }));
await tracker.flush();
// flush() resolves before its request's callbacks run (4.8.0): wait for
// them, until every event is reported sent or a request failed.
const TRACKED = 3;
const deadline = Date.now() + 15000;
while (requests.reduce((n, r) => n + r.events, 0) < TRACKED && errors.length === 0 && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
const sent = requests.reduce((n, r) => n + r.events, 0);
const ok = errors.length === 0 && sent === TRACKED && requests.every((r) => r.status >= 200 && r.status < 300);
console.log(JSON.stringify({ sdk: '@snowplow/node-tracker', version, ok, errors, requests }));
process.exit(ok ? 0 : 1);
