// Options and their defaults, in one place so the README table and the code
// cannot drift apart silently.

import type { DebugOptions } from "./debug";
import type { CookieOptions } from "./storage";
import type { Fetch } from "./transport";

export type ConsentState = "granted" | "pending" | "denied";

export interface Options {
  /** The source's write key; it travels in the body, never in a header. */
  writeKey: string;
  /** Gateway base URL, e.g. "https://events.example.com". Default: the page's own origin. */
  host?: string;
  /** Send when this many events are waiting (default 20; the gateway takes at most 500). */
  flushAt?: number;
  /** Send at most this many ms after the first waiting event (default 1000). */
  flushInterval?: number;
  /** Largest uncompressed batch body in bytes (default 131072; the gateway takes 512 KiB). */
  maxBatchBytes?: number;
  /** Largest beacon body at page hide (default 60000: under the browser's 64 KiB in-flight limit). */
  beaconBytes?: number;
  /** Events larger than this are dropped as `too_large` (default 32768, the gateway's limit). */
  maxEventBytes?: number;
  /** Queue bound by count (default 500); the oldest go first. */
  maxQueueEvents?: number;
  /** Queue bound by bytes (default 524288); the oldest go first. */
  maxQueueBytes?: number;
  /** Gzip bodies of at least this many bytes where CompressionStream exists (default 1024). */
  compressAt?: number;
  /** Backoff: first retry within this many ms, doubling (default 1000). */
  retryBase?: number;
  /** Backoff ceiling in ms (default 60000). */
  retryCap?: number;
  /** Attempts per batch before its events are dropped as `retries` (default 30: about 15 minutes). */
  maxRetries?: number;
  /** "granted" (default) sends; "pending" holds events in memory only; "denied" sends and stores nothing. */
  consent?: ConsentState;
  /** When the browser sends Global Privacy Control or Do-Not-Track, behave as "denied", whatever consent() says. */
  honorPrivacySignals?: boolean;
  /** Write nothing to the device: no cookie, no localStorage; ids and queue live as long as the page. */
  cookieless?: boolean;
  /** Also keep the anonymous id in a first-party cookie (e.g. to share it across subdomains). */
  cookie?: boolean | CookieOptions;
  /** Context merged into every event. */
  context?: Record<string, unknown>;
  /** The fetch to send with (default: the global one; Node 18+ has it). */
  fetch?: Fetch;
  /** Check every event in the browser with the gateway's own checker, loaded lazily (see debug.ts). */
  debug?: boolean | DebugOptions;
}

export type Settings = Required<Omit<Options, "host" | "cookie" | "context" | "fetch" | "debug">> &
  Pick<Options, "host" | "cookie" | "context" | "fetch" | "debug">;

export function settings(o: Options): Settings {
  return {
    flushAt: 20,
    flushInterval: 1000,
    maxBatchBytes: 131072,
    beaconBytes: 60000,
    maxEventBytes: 32768,
    maxQueueEvents: 500,
    maxQueueBytes: 524288,
    compressAt: 1024,
    retryBase: 1000,
    retryCap: 60000,
    maxRetries: 30,
    consent: "granted",
    honorPrivacySignals: false,
    cookieless: false,
    ...o,
  };
}

/** Full jitter (random between 0 and the exponential step), so clients recovering together spread out. */
export function backoff(attempt: number, base: number, cap: number): number {
  return Math.random() * Math.min(cap, base * Math.pow(2, attempt - 1));
}

/** Whether a failed request is worth repeating: network errors (0), 408, 429 and 5xx. */
export function retryable(status: number): boolean {
  return !status || status == 408 || status == 429 || status >= 500;
}
