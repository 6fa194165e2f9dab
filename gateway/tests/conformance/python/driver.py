"""Runs Segment's or RudderStack's Python SDK, unchanged from PyPI, against the gateway.

Usage: driver.py segment|rudder. Reads GATEWAY_URL, WRITE_KEY, USER_ID and
EVENTS (track|invalid) from the environment; prints one JSON line saying what
the SDK itself reported and exits non-zero when the SDK reported a failure.
"""
import json
import os
import sys

SDK = sys.argv[1]
if SDK == "segment":
    from segment.analytics import Client
    from segment.analytics.version import VERSION
elif SDK == "rudder":
    from rudderstack.analytics import Client
    from rudderstack.analytics.version import VERSION
else:
    sys.exit(f"unknown SDK {SDK}")

url, write_key, user = os.environ["GATEWAY_URL"], os.environ["WRITE_KEY"], os.environ["USER_ID"]
errors = []
client = Client(write_key=write_key, host=url, on_error=lambda e, batch: errors.append(repr(e)), max_retries=3)

results = []
results.append(client.track(user_id=user, event="Link Clicked", properties={"href": "https://example.com/pricing", "text": "Pricing"}))
results.append(client.page(user_id=user, name="Pricing", properties={"url": "https://example.com/pricing", "path": "/pricing"}))
results.append(client.identify(user_id=user, traits={"plan": "pro"}))
if os.environ.get("EVENTS") == "invalid":
    # Link Clicked requires properties.href: the gateway dead-letters this one.
    results.append(client.track(user_id=user, event="Link Clicked", properties={"text": "no href"}))
client.flush()
client.join()

enqueued = all(ok for ok, _ in results)
left = client.queue.qsize()
ok = enqueued and not errors and left == 0
print(json.dumps({"sdk": f"{SDK}-python", "version": VERSION, "ok": ok, "errors": errors, "queued": left}))
sys.exit(0 if ok else 1)
