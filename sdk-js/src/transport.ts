// Getting bytes to the gateway without ever needing a CORS preflight: the
// body is text/plain (a CORS-safelisted type), the write key travels in the
// body, and no other header is set. Gzip is signalled by nothing but the
// gzip magic bytes, which the gateway detects, because Content-Encoding is
// not safelisted and a beacon cannot set it anyway.

import { byteLength, type Item } from "./queue";

export type Fetch = typeof fetch;

/** What the delivery loop needs from an answer. */
export interface Answer {
  status: number;
  /** Milliseconds the gateway asked us to wait (Retry-After), if it did. */
  retryAfter?: number;
  /** Events the gateway refused for good in a 200 answer. */
  rejected?: number;
}

/** Browsers refuse keepalive (and beacon) bodies past 64 KiB in flight in total. */
export const KEEPALIVE_LIMIT = 65536;

/** Retry-After as seconds or an HTTP date, in milliseconds. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  const s = Number(v);
  if (!isNaN(s)) return Math.max(0, s * 1000);
  const t = Date.parse(v);
  return isNaN(t) ? undefined : Math.max(0, t - now);
}

/** The gzip bytes of `text` when this runtime can make them, else undefined. */
export async function gzip(text: string): Promise<Blob | undefined> {
  if (typeof CompressionStream == "undefined") return undefined;
  try {
    const s = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
    return await new Response(s).blob();
  } catch (e) {
    return undefined;
  }
}

/**
 * POSTs a batch body. Large bodies go gzipped where possible; bodies that fit
 * the keepalive quota use it, so a request already in flight when the page
 * goes away still arrives. Throws only on network failure.
 */
export async function post(f: Fetch, url: string, body: string, compressAt: number): Promise<Answer> {
  let data: Blob | string = body;
  if (body.length >= compressAt) {
    const z = await gzip(body);
    // The Blob's type becomes the Content-Type: still text/plain, still no preflight.
    if (z) data = new Blob([z], { type: "text/plain" });
  }
  const size = typeof data == "string" ? byteLength(body) : data.size;
  const r = await f(url, {
    method: "POST",
    body: data,
    credentials: "omit",
    // Half the quota at most, so a beacon fired at page hide still finds room.
    keepalive: size < KEEPALIVE_LIMIT / 2,
  });
  const a: Answer = { status: r.status, retryAfter: parseRetryAfter(r.headers.get("retry-after")) };
  if (r.ok) {
    try {
      a.rejected = (await r.json()).rejected;
    } catch (e) {
      /* an answer we cannot read (opaque, or not JSON) still means delivered */
    }
  }
  return a;
}

/**
 * Hands a body to the browser to send after the page is gone: sendBeacon,
 * else a keepalive fetch. True when the browser took it.
 */
export function beacon(f: Fetch | undefined, url: string, body: string): boolean {
  try {
    if (typeof navigator != "undefined" && navigator.sendBeacon && navigator.sendBeacon(url, body)) return true;
  } catch (e) {
    /* sendBeacon throws on some invalid URLs and in some embedded webviews */
  }
  if (!f) return false;
  try {
    f(url, { method: "POST", body, credentials: "omit", keepalive: true }).catch(() => {});
  } catch (e) {
    return false;
  }
  // We cannot know whether it arrives; the caller keeps the events stored, so
  // the next page load resends them if not (same messageIds: deduplicated).
  return false;
}

/**
 * A batch body. The first event carries the drop report, if there is one;
 * the stored event itself is left as it was, so a later request reports
 * afresh.
 */
export function batchBody(writeKey: string, batch: Item[], dropped: Record<string, number>): string {
  const head = JSON.stringify({ writeKey, sentAt: new Date().toISOString() });
  const events = batch.map((i) => i.s);
  if (events.length && Object.keys(dropped).length) {
    const e = batch[0].e;
    events[0] = JSON.stringify({ ...e, context: { ...(e.context as object), dropped } });
  }
  return `${head.slice(0, -1)},"batch":[${events.join(",")}]}`;
}
