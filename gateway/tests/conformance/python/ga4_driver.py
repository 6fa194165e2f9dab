"""Runs the GA4 Measurement Protocol client `ga4mp`, unchanged from PyPI, against the gateway.

Reads GATEWAY_URL, WRITE_KEY (the source's key, which GA4 calls `api_secret`)
and USER_ID. `ga4mp` has no host option: its two endpoints are plain
attributes its constructor sets (`ga4mp.py`, `BaseGa4mp.__init__`), so they
are pointed at the gateway as docs/trackers.md tells users to. Sends a page
view, an outbound click and a form submission (which the GA4 mapping,
`schemas/mappings/ga4.toml`, turns into `Page Viewed`, `Link Clicked` and
`Form Submitted`) with the user id as a user property, first as a validation
hit to `/debug/mp/collect` (which must report no validation message), then for
real; prints one JSON line saying what it saw and exits non-zero on a failure.
"""
import json
import os
import sys
import urllib.request
from importlib.metadata import version

from ga4mp import GtagMP

url, key, user = os.environ["GATEWAY_URL"], os.environ["WRITE_KEY"], os.environ["USER_ID"]


def client():
    ga = GtagMP(api_secret=key, measurement_id="G-CONFORM01", client_id=f"{user}.1700000000")
    ga._base_domain = f"{url}/mp/collect"
    ga._validation_domain = f"{url}/debug/mp/collect"
    ga.store.set_user_property("user_id", user)
    return ga


def events():
    return [
        {"name": "page_view", "params": {"page_location": "https://example.com/pricing", "page_title": "Pricing"}},
        {
            "name": "click",
            "params": {"link_url": "https://example.com/pricing", "link_text": "Pricing",
                       "page_location": "https://example.com/"},
        },
        {"name": "form_submit", "params": {"form_id": "newsletter"}},
    ]


# `ga4mp` returns nothing from `send` and never reads an answer's body: the
# answers are observed by wrapping `urllib.request.urlopen`, which it calls
# through the module attribute (the library itself is unchanged).
answers = []
_urlopen = urllib.request.urlopen


def observed(request, data=None, *args, **kwargs):
    response = _urlopen(request, data, *args, **kwargs)
    body = response.read()
    answers.append({"url": request.full_url.split("?")[0], "status": response.status,
                    "body": json.loads(body) if body else None})
    return response


urllib.request.urlopen = observed
client().send(events(), validation_hit=True)
client().send(events())
validated, stored = answers
ok = (
    validated["url"].endswith("/debug/mp/collect")
    and validated["status"] == 200
    and validated["body"] == {"validationMessages": []}
    and stored["url"].endswith("/mp/collect")
    and stored["status"] == 204
)
print(json.dumps({"sdk": "ga4mp", "version": version("ga4mp"), "ok": ok, "answers": answers}))
sys.exit(0 if ok else 1)
