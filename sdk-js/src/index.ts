// The package's entry for bundlers, Node and server-side rendering. Importing
// it touches no browser global; a client only looks for them when used.

export { Client, createClient, type CallOptions } from "./client";
export { LIBRARY } from "./context";
export type { ConsentState, Options } from "./options";
export type { CookieOptions } from "./storage";
export type { CheckResult, DebugOptions } from "./debug";
export { uuidv7 } from "./uuid";
