// The outgoing queue, mirrored to storage so events survive reloads and
// crashes with their messageIds intact (a resend is then a duplicate that
// downstream drops, never a new event). It is bounded by count and bytes so
// it can never grow until the browser refuses the write: past a bound the
// oldest events go, and how many went and why is reported in the context of
// the next event sent (the first of the next request), until a request
// carrying the report has settled.

import type { Store } from "./storage";

export type Event = { messageId: string; [field: string]: unknown };

/** An event with its serialised form, kept so sizing and sending never re-stringify it. */
export interface Item {
  e: Event;
  s: string;
  n: number;
}

/** Why events were dropped; the keys of `context.dropped`. */
export type DropReason = "queue_count" | "queue_bytes" | "too_large" | "retries" | "rejected";

const enc = typeof TextEncoder !== "undefined" ? new TextEncoder() : undefined;
/** UTF-8 length: what the gateway's byte limits count. */
export const byteLength = (s: string) => (enc ? enc.encode(s).length : s.length * 3);

export const item = (e: Event): Item => {
  const s = JSON.stringify(e);
  return { e, s, n: byteLength(s) };
};

export class Queue {
  items: Item[] = [];
  bytes = 0;
  /** Counts per reason since the last report; persisted so a reload does not forget them. */
  dropped: Partial<Record<DropReason, number>> = {};
  private saving = false;

  constructor(
    public store: Store,
    private key: string,
    private maxEvents: number,
    private maxBytes: number,
  ) {
    this.load();
  }

  /** Merges what storage holds (anything unreadable counts as nothing), oldest first. */
  load() {
    let saved: { q?: Event[]; d?: Queue["dropped"] } = {};
    try {
      saved = JSON.parse(this.store.get(this.key) || "{}") || {};
    } catch (e) {
      /* corrupt or foreign value: start empty */
    }
    const have: Record<string, 1> = {};
    for (const i of this.items) have[i.e.messageId] = 1;
    const old = (Array.isArray(saved.q) ? saved.q : []).filter((e) => e && e.messageId && !have[e.messageId]);
    this.items = old.map(item).concat(this.items);
    this.bytes = this.items.reduce((t, i) => t + i.n, 0);
    for (const [r, n] of Object.entries(saved.d || {})) this.drop(r as DropReason, +n || 0);
    this.bound();
  }

  push(i: Item) {
    this.items.push(i);
    this.bytes += i.n;
    this.bound();
    this.saveSoon();
  }

  /** The oldest events that fit in one request of at most `count` events and `bytes` bytes. */
  head(count: number, bytes: number): Item[] {
    const out: Item[] = [];
    let total = 0;
    for (const i of this.items) {
      if (out.length >= count || (out.length && total + i.n + 1 > bytes)) break;
      out.push(i);
      total += i.n + 1;
    }
    return out;
  }

  remove(gone: Item[]) {
    this.items = this.items.filter((i) => gone.indexOf(i) < 0);
    this.bytes = this.items.reduce((t, i) => t + i.n, 0);
    this.saveSoon();
  }

  drop(reason: DropReason, n: number) {
    if (n > 0) this.dropped[reason] = (this.dropped[reason] || 0) + n;
  }

  /** Forgets counts once a request that reported them has settled; later drops stay counted. */
  reported(sent: Queue["dropped"]) {
    for (const [r, n] of Object.entries(sent) as [DropReason, number][]) {
      const left = (this.dropped[r] || 0) - n;
      if (left > 0) this.dropped[r] = left;
      else delete this.dropped[r];
    }
    this.saveSoon();
  }

  clear() {
    this.items = [];
    this.bytes = 0;
    this.dropped = {};
    this.store.del(this.key);
  }

  /** Writes once per burst of calls rather than once per call. */
  saveSoon() {
    if (this.saving) return;
    this.saving = true;
    Promise.resolve().then(() => this.save());
  }

  /**
   * Writes the queue; when the quota refuses it, keeps the newest half, then
   * nothing. The events stay in memory either way and are still sent.
   */
  save() {
    this.saving = false;
    const d = JSON.stringify(this.dropped);
    for (let keep = this.items.length; ; keep = keep >> 1) {
      const q = this.items.slice(this.items.length - keep).map((i) => i.s);
      if (this.store.set(this.key, `{"d":${d},"q":[${q.join(",")}]}`)) return;
      if (!keep) return this.store.del(this.key);
    }
  }

  private bound() {
    while (this.items.length > this.maxEvents) this.shift("queue_count");
    while (this.bytes > this.maxBytes) this.shift("queue_bytes");
  }

  private shift(reason: DropReason) {
    const i = this.items.shift();
    if (i) this.bytes -= i.n;
    this.drop(reason, 1);
  }
}

/** Splits items, in order, into runs whose serialised events (with commas) total at most `limit` bytes. */
export function chunks(items: Item[], limit: number): Item[][] {
  const out: Item[][] = [];
  let size = limit;
  for (const i of items) {
    if (size + i.n + 1 > limit) out.push([]), (size = 0);
    out[out.length - 1].push(i);
    size += i.n + 1;
  }
  return out;
}
