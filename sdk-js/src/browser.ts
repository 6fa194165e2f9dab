// The script the snippet loads. It turns the snippet's stub into the real
// client: same global object (so references taken earlier keep working),
// queued calls replayed in order with the time they were made.

import { createClient, type Client } from "./client";

const METHODS = ["track", "page", "identify", "group", "alias", "reset", "consent", "flush"] as const;

type Call = [(typeof METHODS)[number], unknown[], number];

function install(w: any) {
  const stub = w && w.eventgw;
  // No stub or no load() call yet: nothing to configure. Already installed: a second copy of the script.
  if (!stub || !stub.k || stub.client) return;
  const c = createClient({ ...stub.o, writeKey: stub.k });
  const queued: Call[] = stub.q || [];
  stub.q = [];
  for (const [m, args, at] of queued) {
    try {
      c.replay(at, () => (c[m] as any)(...args));
    } catch (e) {
      /* one bad queued call must not stop the rest */
    }
  }
  for (const m of METHODS) stub[m] = (c[m] as any).bind(c);
  stub.client = c as Client;
}

install(typeof window != "undefined" ? window : undefined);
