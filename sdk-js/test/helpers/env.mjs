// The real things the end-to-end tests run against: the gateway binary on a
// free port (talking to the local Kafka), a proxy in front of it that can
// answer 503 and records every request it sees (a CORS preflight would show
// up there as an OPTIONS), a static site on http://localhost:3000 (an allowed
// origin in the dev config, so answers are readable), and kcat to read what
// landed on Kafka.
import { execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, openSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const REPO = fileURLToPath(new URL("../../../", import.meta.url));
export const DIST = fileURLToPath(new URL("../../dist/", import.meta.url));
export const WRITE_KEY = "demo-write-key";
export const SITE_PORT = 3000;
const BROKERS = process.env.KAFKA_BROKERS || "127.0.0.1:9092";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function freePort() {
  const s = net.createServer().listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** The gateway with the dev config on a free port; resolves once /readyz answers 200. */
export async function startGateway() {
  const bin = join(REPO, "target/debug/gateway");
  if (!existsSync(bin)) throw new Error(`${bin} is missing: build the workspace first (cargo build)`);
  const config = ["--config", "gateway/config/dev.toml"];
  execFileSync(bin, ["topics", ...config], { cwd: REPO, stdio: "pipe" });
  const port = await freePort();
  const logPath = join(tmpdir(), `eventgw-sdk-js-gateway-${port}.log`);
  const log = openSync(logPath, "w");
  const child = spawn(bin, ["serve", ...config], {
    cwd: REPO,
    env: { ...process.env, EVENTGW__SERVER__LISTEN: `127.0.0.1:${port}`, NO_COLOR: "1" },
    stdio: ["ignore", log, log],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`gateway exited: ${readFileSync(logPath, "utf8").slice(-2000)}`);
    const ok = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ok) break;
    if (i > 150) throw new Error(`gateway not ready after 30 s; log: ${logPath}`);
    await sleep(200);
  }
  return {
    url,
    logPath,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
      if (!process.env.KEEP_GATEWAY_LOG) rmSync(logPath, { force: true });
    },
  };
}

/**
 * A recording proxy in front of the gateway. `failNext(n)` answers the next
 * n requests 503 with Retry-After (and the CORS grant the real gateway
 * would add, so the page can read it); `down = true` answers every one so.
 */
export async function startProxy(target) {
  const proxy = { log: [], failures: 0, down: false, retryAfter: 1 };
  proxy.failNext = (n) => (proxy.failures = n);
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const entry = { method: req.method, path: req.url, headers: req.headers, body, at: Date.now(), status: 0 };
      proxy.log.push(entry);
      if (req.method == "POST" && (proxy.down || proxy.failures > 0)) {
        proxy.failures--;
        entry.status = 503;
        const cors = req.headers.origin
          ? { "access-control-allow-origin": req.headers.origin, "access-control-expose-headers": "Retry-After", vary: "Origin" }
          : {};
        res.writeHead(503, { "content-type": "application/json", "retry-after": String(proxy.retryAfter), ...cors });
        return res.end('{"code":"backpressure","message":"test proxy says wait"}');
      }
      const up = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
        entry.status = answer.statusCode;
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      });
      up.on("error", () => res.writeHead(502).end());
      up.end(body);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  proxy.stop = () => new Promise((r) => (server.closeAllConnections(), server.close(r)));
  /** Batch requests whose body names one of `anonIds` (bodies may be gzipped). */
  proxy.batches = (anonId) => proxy.log.filter((e) => e.method == "POST" && decode(e.body).includes(anonId));
  return proxy;
}

/** A batch body as text, gunzipped when it starts with the gzip magic bytes. */
export function decode(body) {
  if (body[0] == 0x1f && body[1] == 0x8b) return execFileSync("gzip", ["-dc"], { input: body }).toString();
  return body.toString();
}

/** The test site on localhost:3000: the built SDK at /eventgw.min.js, and whatever pages a test puts in `pages`. */
export async function startSite() {
  const pages = new Map();
  const server = http.createServer((req, res) => {
    const path = req.url.split("?")[0];
    if (path == "/eventgw.min.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      return res.end(readFileSync(join(DIST, "eventgw.min.js")));
    }
    const html = pages.get(path);
    res.writeHead(html ? 200 : 404, { "content-type": "text/html" });
    res.end(html || "not found");
  });
  await new Promise((resolve, reject) => {
    server.once("error", (e) => reject(new Error(`the test site needs port ${SITE_PORT} (an allowed origin): ${e.message}`)));
    server.listen(SITE_PORT, "127.0.0.1", resolve);
  });
  return {
    url: `http://localhost:${SITE_PORT}`,
    pages,
    stop: () => new Promise((r) => (server.closeAllConnections(), server.close(r))),
  };
}

/** Every record on `topic` produced since `sinceMs`: headers as an object, value parsed. */
export async function readTopic(topic, sinceMs) {
  const args = ["-b", BROKERS, "-C", "-t", topic, "-o", `s@${sinceMs - 5000}`, "-e", "-q", "-f", "%h\t%s\n"];
  const { stdout } = await promisify(execFile)("kcat", args, { maxBuffer: 512 * 1024 * 1024 });
  return stdout
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const tab = line.indexOf("\t");
      const headers = Object.fromEntries(
        line
          .slice(0, tab)
          .split(",")
          .map((h) => [h.slice(0, h.indexOf("=")), h.slice(h.indexOf("=") + 1)]),
      );
      return { headers, value: JSON.parse(line.slice(tab + 1)) };
    });
}

/**
 * Polls `topic` until `count` records match `pick`, then waits `settleMs`
 * more and reads again, so duplicates arriving late are seen too.
 */
export async function waitForRecords(topic, sinceMs, pick, count, { timeoutMs = 20000, settleMs = 1500 } = {}) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const found = (await readTopic(topic, sinceMs)).filter(pick);
    if (found.length >= count) {
      await sleep(settleMs);
      return (await readTopic(topic, sinceMs)).filter(pick);
    }
    if (Date.now() > end) return found;
    await sleep(300);
  }
}
