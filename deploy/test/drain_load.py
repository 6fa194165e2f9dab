"""Load on a gateway while it is told to stop, as a load balancer sees it.

Workers send batches (each request on its own connection, so a request is
either refused before it is sent or sent and owed an answer). A watcher
polls /readyz like a load balancer's health check; once it answers 503 the
workers send nothing new. After --warmup seconds the --kill command sends
SIGTERM. Every request sent must be answered (no reset, no timeout), and no
request may be refused (the drain grace keeps the listener open past the
watcher's notice). The messageIds answered `accepted` go to --out, one a
line, for the caller to reconcile with what Kafka holds.
"""

import argparse
import base64
import http.client
import json
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse

BATCH = 10
WORKERS = 8
WATCH_INTERVAL = 0.1


def post(url, auth, body):
    """One request on a fresh connection: ('refused', None) if never sent."""
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.connect()
    except OSError:
        return "refused", None
    try:
        conn.request("POST", "/v1/batch", body, {"Content-Type": "application/json",
                                                  "Authorization": auth, "Connection": "close"})
        answer = conn.getresponse()
        return answer.status, answer.read()
    except OSError as error:
        return "unanswered", repr(error)
    finally:
        conn.close()


def ready(url):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=2)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def main():
    args = argparse.ArgumentParser()
    for flag in ("--url", "--key", "--run", "--out", "--kill"):
        args.add_argument(flag, required=True)
    args.add_argument("--warmup", type=float, default=2.0)
    opts = args.parse_args()
    url = urlparse(opts.url)
    auth = "Basic " + base64.b64encode(f"{opts.key}:".encode()).decode()
    stop = threading.Event()
    lock = threading.Lock()
    tally = {"sent": 0, "after_sigterm": 0, "statuses": {}, "failures": []}
    acked = []
    killed_at = [None]

    def worker(n):
        seq = 0
        while not stop.is_set():
            seq += 1
            ids = [f"{opts.run}-load-{n}-{seq}-{i}" for i in range(BATCH)]
            events = [{"type": "track", "event": "Link Clicked", "messageId": m, "anonymousId": f"anon-{n}",
                       "properties": {"href": "https://example.com/drain"}} for m in ids]
            status, body = post(url, auth, json.dumps({"batch": events}))
            with lock:
                tally["sent"] += status != "refused"
                tally["after_sigterm"] += killed_at[0] is not None and status != "refused"
                tally["statuses"][str(status)] = tally["statuses"].get(str(status), 0) + 1
                if status in ("refused", "unanswered"):
                    tally["failures"].append((status, body))
                elif status == 200:
                    answer = json.loads(body)
                    acked.extend(m for m, e in zip(ids, answer["events"]) if e["status"] == "accepted")

    def watcher():
        while not stop.is_set():
            if not ready(url) and killed_at[0] is not None:
                tally["red_after"] = round(time.monotonic() - killed_at[0], 2)
                stop.set()
            time.sleep(WATCH_INTERVAL)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
    threads.append(threading.Thread(target=watcher))
    for t in threads:
        t.start()
    time.sleep(opts.warmup)
    killed_at[0] = time.monotonic()
    subprocess.run(opts.kill, shell=True, check=True, stdout=subprocess.DEVNULL)
    for t in threads:
        t.join(timeout=60)
    with open(opts.out, "w") as out:
        out.writelines(m + "\n" for m in acked)
    print(f"requests sent {tally['sent']} (answered after SIGTERM {tally['after_sigterm']}), "
          f"answers {tally['statuses']}, /readyz red {tally.get('red_after')} s after SIGTERM, "
          f"events acknowledged {len(acked)}")
    if tally["failures"]:
        sys.exit(f"requests without an answer: {tally['failures'][:5]}")
    if any(t.is_alive() for t in threads):
        sys.exit("the load did not stop: /readyz never turned red")


if __name__ == "__main__":
    main()
