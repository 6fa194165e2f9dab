"""Runs PostHog's Python SDK (`posthog`), unchanged from PyPI, against the gateway.

Reads GATEWAY_URL, WRITE_KEY (the project token) and USER_ID; sends a custom
event, a page view and `set` (the SDK's identify: a `$set` event), flushes,
and prints one JSON line saying what the SDK reported (its `on_error`
callback and what is left queued); exits non-zero on a failure.
"""
import json
import os
import sys

from posthog import Posthog
from posthog.version import VERSION

url, key, user = os.environ["GATEWAY_URL"], os.environ["WRITE_KEY"], os.environ["USER_ID"]
errors = []
client = Posthog(key, host=url, on_error=lambda e, batch: errors.append(repr(e)), max_retries=3, gzip=True)

client.capture("link_clicked", distinct_id=user, properties={"link": "https://example.com/pricing", "text": "Pricing"})
client.capture("$pageview", distinct_id=user, properties={"$current_url": "https://example.com/pricing", "$pathname": "/pricing"})
client.set(distinct_id=user, properties={"plan": "pro"})
client.flush()
client.join()

left = client.queue.qsize()
ok = not errors and left == 0
print(json.dumps({"sdk": "posthog-python", "version": VERSION, "ok": ok, "errors": errors, "queued": left}))
sys.exit(0 if ok else 1)
