"""Runs Snowplow's Python tracker (`snowplow-tracker`), unchanged from PyPI, against the gateway.

Reads GATEWAY_URL, SNOWPLOW_APP_ID (the app id a source lists in
`snowplow_app_ids`) and USER_ID; sends a link click (a self-describing event),
a page view and a structured event through a POST emitter, flushes, and prints
one JSON line saying what the tracker reported (its `on_success` and
`on_failure` callbacks); exits non-zero on a failure.
"""
import json
import os
import sys

from snowplow_tracker import (
    Emitter,
    PageView,
    SelfDescribing,
    SelfDescribingJson,
    StructuredEvent,
    Subject,
    Tracker,
    __version__,
)

url, app_id, user = os.environ["GATEWAY_URL"], os.environ["SNOWPLOW_APP_ID"], os.environ["USER_ID"]
TRACKED = 3
sent = []
failed = []
emitter = Emitter(
    url,
    batch_size=10,
    on_success=lambda events: sent.extend(events),
    on_failure=lambda succeeded, events: failed.append(len(events)),
)
tracker = Tracker(namespace="conformance", emitters=emitter, subject=Subject().set_user_id(user), app_id=app_id)

link = SelfDescribingJson(
    "iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1",
    {"targetUrl": "https://example.com/pricing", "elementContent": "Pricing"},
)
tracker.track(SelfDescribing(link))
tracker.track(PageView(page_url="https://example.com/pricing", page_title="Pricing"))
tracker.track(StructuredEvent(category="form", action="submit", label="newsletter"))
tracker.flush()

ok = not failed and len(sent) == TRACKED
print(json.dumps({"sdk": "snowplow-python", "version": __version__, "ok": ok, "sent": len(sent), "failed": failed}))
sys.exit(0 if ok else 1)
