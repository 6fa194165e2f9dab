// Internals exposed to the unit tests only (dist/internal.mjs is not in the
// package's exports map): the pieces whose exact rules are worth pinning.

export { autoContext, campaign } from "./context";
export { backoff, retryable, settings } from "./options";
export { chunks, item, Queue } from "./queue";
export { localStore, memoryStore } from "./storage";
export { parseRetryAfter } from "./transport";
export { uuidv7 } from "./uuid";
