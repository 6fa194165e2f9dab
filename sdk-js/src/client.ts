// The client: turns calls into events, queues them, and delivers them in
// batches with retries. Delivery is at least once: an event leaves the queue
// only when the gateway answered for it (or it was handed to a beacon), and a
// resend carries the same messageId, so downstream can drop duplicates.

import { debugChecker } from "./debug";
import { autoContext, pageInfo } from "./context";
import { backoff, retryable, settings, type ConsentState, type Options, type Settings } from "./options";
import { chunks, item, Queue, type Event, type Item } from "./queue";
import { cookieStore, localStore, memoryStore, type Store } from "./storage";
import { batchBody, beacon, post, type Fetch } from "./transport";
import { uuidv7 } from "./uuid";

type Dict = Record<string, unknown>;

/** Per-call overrides. */
export interface CallOptions {
  /** Set your own id (e.g. to make a server-side retry idempotent); a UUID v7 otherwise. */
  messageId?: string;
  timestamp?: Date | string | number;
  context?: Dict;
}

const ID_KEY = "eventgw.id";
const COOKIE = "eventgw_aid";

export class Client {
  readonly opts: Settings;
  anonymousId = "";
  userId?: string;
  private state: ConsentState;
  /** Set when privacy signals decided the state, so consent() cannot undo it. */
  private locked = false;
  private queue: Queue;
  private url: string;
  private fetch?: Fetch;
  private timer?: ReturnType<typeof setTimeout>;
  /** A retry is scheduled: new events wait for it instead of hammering a gateway that asked for a pause. */
  private backingOff = false;
  /** The batch in flight: a page-hide beacon must not send it a second time. */
  private inflight: Item[] = [];
  private flushing?: Promise<void>;
  private attempts = 0;
  /** The snippet's call time, while replaying its queued calls. */
  private replayAt?: number;
  /** Debug mode's in-browser check of each event (lazily loaded). */
  private check?: (e: Event) => void;

  constructor(o: Options) {
    this.opts = settings(o);
    const nav: any = typeof navigator != "undefined" ? navigator : {};
    const signal = nav.globalPrivacyControl === true || nav.doNotTrack == "1";
    this.locked = !!(this.opts.honorPrivacySignals && signal);
    this.state = this.locked ? "denied" : this.opts.consent;
    const origin = typeof location != "undefined" ? location.origin : "";
    this.url = (this.opts.host || origin).replace(/\/$/, "") + "/v1/batch";
    this.fetch = this.opts.fetch || (typeof fetch == "function" ? fetch.bind(globalThis) : undefined);
    this.queue = new Queue(this.store(), "eventgw.q." + this.opts.writeKey, this.opts.maxQueueEvents, this.opts.maxQueueBytes);
    this.loadIdentity();
    const d = this.opts.debug;
    if (d && typeof location != "undefined") this.check = debugChecker(d === true ? {} : d, this.opts.host || origin);
    if (typeof addEventListener == "function" && typeof document != "undefined") {
      // pagehide is the last reliable moment on desktop; visibilitychange to
      // hidden is the last one on mobile, where pages are often killed unseen.
      addEventListener("pagehide", () => this.sendAll());
      document.addEventListener("visibilitychange", () => document.visibilityState == "hidden" && this.sendAll());
    }
    this.schedule();
  }

  track(event: string, properties?: Dict, o?: CallOptions): string {
    return this.add("track", { event, properties: properties || {} }, o);
  }

  /** page(), page(name), page(properties) or page(name, properties): url, path, title and referrer are filled in. */
  page(name?: string | Dict, properties?: Dict, o?: CallOptions): string {
    if (typeof name == "object") (o = properties as CallOptions), (properties = name), (name = undefined);
    const fields: Dict = { properties: { ...pageInfo(), ...properties } };
    if (name) fields.name = name;
    return this.add("page", fields, o);
  }

  identify(userId?: string | Dict, traits?: Dict, o?: CallOptions): string {
    if (typeof userId == "object") (o = traits as CallOptions), (traits = userId), (userId = undefined);
    if (userId) this.userId = userId;
    this.saveIdentity();
    return this.add("identify", { traits: traits || {} }, o);
  }

  group(groupId: string, traits?: Dict, o?: CallOptions): string {
    return this.add("group", { groupId, traits: traits || {} }, o);
  }

  /** Links `userId` to the previous identity (the current user id, else the anonymous id). */
  alias(userId: string, previousId?: string, o?: CallOptions): string {
    const prev = previousId || this.userId || this.anonymousId;
    this.userId = userId;
    this.saveIdentity();
    return this.add("alias", { previousId: prev }, o);
  }

  /** Forgets the user (on sign-out): a new anonymous id, no user id. Queued events are still sent. */
  reset() {
    this.userId = undefined;
    this.anonymousId = uuidv7();
    this.saveIdentity();
  }

  /**
   * Grant or deny consent. Granting stores and sends what was held; denying
   * discards held and queued events and what this SDK stored on the device.
   */
  consent(state: ConsentState) {
    if (this.locked || state == this.state) return;
    const was = this.state;
    this.state = state;
    if (state == "granted") {
      const temp = this.anonymousId;
      this.queue.store = this.store();
      this.loadIdentity();
      // Events held before consent carry a temporary id; give them the stored one.
      if (temp != this.anonymousId) {
        for (const i of this.queue.items) if (i.e.anonymousId == temp) Object.assign(i, item({ ...i.e, anonymousId: this.anonymousId }));
      }
      this.queue.load();
      this.queue.save();
      this.saveIdentity();
      this.schedule();
    } else {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.backingOff = false;
      if (state == "denied" || was == "granted") this.forget();
    }
  }

  /** Sends everything queued now; resolves when the queue is empty or a send failed (it is then retried later). */
  flush(): Promise<void> {
    return (this.flushing =
      this.flushing ||
      this.drain().finally(() => {
        this.flushing = undefined;
        this.schedule(); // anything queued while the last send settled
      }));
  }

  /** Replays a call the snippet queued, with the time it was made. */
  replay(at: number, call: () => void) {
    this.replayAt = at;
    try {
      call();
    } finally {
      this.replayAt = undefined;
    }
  }

  private add(type: string, fields: Dict, o: CallOptions = {}): string {
    const now = this.replayAt || Date.now();
    const context: Dict = { ...autoContext(), ...this.opts.context, ...o.context };
    const e: Event = {
      type,
      ...fields,
      messageId: o.messageId || uuidv7(now),
      anonymousId: this.anonymousId,
      timestamp: new Date(o.timestamp || now).toISOString(),
      context,
    };
    if (this.userId) e.userId = this.userId;
    if (this.state == "denied") return e.messageId;
    if (this.check) this.check(e);
    const i = item(e);
    if (i.n > this.opts.maxEventBytes) this.queue.drop("too_large", 1);
    else this.queue.push(i);
    this.schedule();
    return e.messageId;
  }

  /** Sends now when a batch is full, else within flushInterval; never while backing off. */
  private schedule() {
    const q = this.queue;
    if (this.state != "granted" || this.flushing || this.backingOff || !q.items.length) return;
    if (q.items.length >= this.opts.flushAt || q.bytes >= this.opts.maxBatchBytes) this.flush();
    else if (!this.timer) this.wake(this.opts.flushInterval);
  }

  private wake(ms: number, backingOff = false) {
    this.backingOff = backingOff;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, ms);
    // In Node, a pending send must not keep the process alive; flush() before exit.
    (this.timer as any).unref?.();
  }

  private async drain() {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.backingOff = false;
    while (this.state == "granted" && this.queue.items.length && (await this.send()));
  }

  /** One batch. True when it is settled (delivered, or given up on); false when a retry is scheduled. */
  private async send(): Promise<boolean> {
    const o = this.opts;
    const batch = (this.inflight = this.queue.head(o.flushAt, o.maxBatchBytes));
    const report = { ...this.queue.dropped };
    let a;
    try {
      a = this.fetch ? await post(this.fetch, this.url, this.body(batch, report), o.compressAt) : undefined;
    } catch (e) {
      /* network failure or an unreadable CORS answer: retryable */
    }
    this.inflight = [];
    const status = a ? a.status : 0;
    if (status >= 200 && status < 300) this.queue.drop("rejected", (a && a.rejected) || 0);
    else if (!retryable(status)) this.queue.drop("rejected", batch.length);
    else if (++this.attempts > o.maxRetries) this.queue.drop("retries", batch.length);
    else {
      this.wake(Math.max((a && a.retryAfter) || 0, backoff(this.attempts, o.retryBase, o.retryCap)), true);
      return false;
    }
    this.attempts = 0;
    this.queue.reported(report);
    this.queue.remove(batch);
    return true;
  }

  private body(batch: Item[], dropped = {}): string {
    return batchBody(this.opts.writeKey, batch, dropped);
  }

  /**
   * The page is going away: hand what is queued to beacons, each under the
   * browser's in-flight limit. What the browser refuses stays stored for the
   * next page load.
   */
  private sendAll() {
    if (this.state != "granted") return;
    let report = { ...this.queue.dropped };
    const waiting = this.queue.items.filter((i) => this.inflight.indexOf(i) < 0);
    for (const chunk of chunks(waiting, this.opts.beaconBytes - this.body([]).length - 200)) {
      if (!beacon(this.fetch, this.url, this.body(chunk, report))) break;
      this.queue.reported(report);
      this.queue.remove(chunk);
      report = {};
    }
    this.queue.save();
  }

  /** Where ids and the queue live: memory unless consent is granted and storage is allowed and works. */
  private store(): Store {
    return (this.state == "granted" && !this.opts.cookieless && localStore()) || memoryStore();
  }

  private cookie(): Store | undefined {
    const c = this.opts.cookie;
    return c && this.state == "granted" && !this.opts.cookieless ? cookieStore(c === true ? {} : c) : undefined;
  }

  private loadIdentity() {
    let saved: { a?: string; u?: string } = {};
    try {
      saved = JSON.parse(this.queue.store.get(ID_KEY) || "{}") || {};
    } catch (e) {
      /* unreadable: a new visitor */
    }
    const c = this.cookie();
    this.anonymousId = (c && c.get(COOKIE)) || saved.a || this.anonymousId || uuidv7();
    this.userId = this.userId || saved.u;
    this.saveIdentity();
  }

  private saveIdentity() {
    if (this.state != "granted") return;
    this.queue.store.set(ID_KEY, JSON.stringify({ a: this.anonymousId, u: this.userId }));
    const c = this.cookie();
    if (c) c.set(COOKIE, this.anonymousId);
  }

  /** Consent withdrawn: nothing held, nothing queued, nothing of ours left on the device. */
  private forget() {
    const c = this.opts.cookie ? cookieStore(this.opts.cookie === true ? {} : this.opts.cookie) : undefined;
    if (c) c.del(COOKIE);
    this.queue.clear();
    this.queue.store.del(ID_KEY);
    const ls = localStore();
    if (ls) ls.del(ID_KEY), ls.del("eventgw.q." + this.opts.writeKey);
    this.queue.store = memoryStore();
    this.userId = undefined;
    this.anonymousId = uuidv7();
  }
}

export function createClient(o: Options): Client {
  return new Client(o);
}
