// UUID v7 (RFC 9562): time-ordered ids, so downstream consumers can both
// deduplicate retried events and sort them roughly by creation time.

let lastMs = 0;
let seq = 0;

/** Sixteen random bytes; Math.random only where no Web Crypto exists (very old runtimes). */
export function randomBytes(n: number): Uint8Array {
  const b = new Uint8Array(n);
  const c = typeof crypto !== "undefined" ? crypto : undefined;
  if (c && c.getRandomValues) c.getRandomValues(b);
  else for (let i = 0; i < n; i++) b[i] = (Math.random() * 256) | 0;
  return b;
}

/**
 * A new UUID v7. Ids made in the same millisecond carry an increasing 12-bit
 * counter (RFC 9562 method 1), so a burst of calls keeps its call order even
 * when a consumer sorts by id.
 */
export function uuidv7(now: number = Date.now()): string {
  const b = randomBytes(16);
  if (now > lastMs) {
    lastMs = now;
    seq = b[6] & 0x7ff; // random start, leaving room to count up
  } else if (++seq > 0xfff) {
    lastMs++;
    seq = 0;
  }
  const ms = lastMs;
  const hi = Math.floor(ms / 0x100000000);
  const lo = ms >>> 0;
  b[0] = hi >>> 8;
  b[1] = hi;
  b[2] = lo >>> 24;
  b[3] = lo >>> 16;
  b[4] = lo >>> 8;
  b[5] = lo;
  b[6] = 0x70 | (seq >>> 8);
  b[7] = seq;
  b[8] = 0x80 | (b[8] & 0x3f);
  let h = "";
  for (let i = 0; i < 16; i++) {
    h += (b[i] + 0x100).toString(16).slice(1);
    if (i == 3 || i == 5 || i == 7 || i == 9) h += "-";
  }
  return h;
}
