//! The shared store: a Redis or Valkey server every gateway talks to, so an
//! id stored through one gateway is a duplicate on all of them.
//!
//! Keys are `eventgw:dedupe:<len(source)>:<source>:<messageId>` (the length
//! makes the split exact whatever the source id holds); the value is
//! `p:<fingerprint>:<token>:<lease>:<reserved at>:<topic>` while reserved
//! (the lease runs for `dedupe.lease_secs` and is extended while the
//! produce is in flight; once it ran out, the gateway holding it died or
//! could not reach Redis for most of a lease, and the id is *in doubt*:
//! see `RESERVE`) and `c:<fingerprint>` once confirmed;
//! both expire after the window.
//! Reserving and releasing are Lua scripts (atomic per batch, one round
//! trip); confirming is a pipeline of plain `SET … PX`, which overwrites
//! whatever is there: the record *is* stored. The scripts touch keys of one
//! request together, so Redis Cluster is not supported (one server, or a
//! primary with replicas behind Sentinel).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Claim, Reservation, Store, StoreError};

// Pending values carry a lease: `p:<crc>:<token>:<lease until ms>:<reserved
// at ms>:<topic>`, kept for the window. A reservation whose lease ran out
// (its gateway died mid-request: nobody extends it) is *in doubt*: its
// record may be in Kafka. Once the lease has been out for `settle` more
// (ARGV[3]: long enough for a record its gateway sent just before it died
// to be below the high watermark, where a look-up can see it; see
// `sink::watermark`), the next request for the id takes it over (its own
// token, a fresh lease, the first reservation's time and topic kept) and
// hears `d:<crc>:<reserved at ms>`, to look the id up in Kafka; before
// that it hears the pending value, and waits.
// Times are Redis's clock (TIME), the same for every gateway.
const RESERVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease, window, settle = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local out = {}
for i, key in ipairs(KEYS) do
  local mine, topic = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local value = 'p:' .. mine .. ':' .. string.format('%d', now + lease) .. ':' .. string.format('%d', now) .. ':' .. topic
  if redis.call('SET', key, value, 'NX', 'PX', window) then
    out[i] = 'n'
  else
    local old = redis.call('GET', key) or 'n'
    local crc, till, since, was = string.match(old, '^p:(%d+):%d+:(%d+):(%d+):(.*)$')
    if till and tonumber(till) + settle < now then
      local taken = 'p:' .. mine .. ':' .. string.format('%d', now + lease) .. ':' .. since .. ':' .. was
      redis.call('SET', key, taken, 'PX', window)
      out[i] = 'd:' .. crc .. ':' .. since
    else
      out[i] = old
    end
  end
end
return out
";

const RELEASE: &str = r"
for i, key in ipairs(KEYS) do
  local old = redis.call('GET', key)
  if old and string.sub(old, 1, #ARGV[i]) == ARGV[i] then
    redis.call('DEL', key)
  end
end
return 0
";

// Extends the leases still this request's (even one that lapsed, if no
// retry took it over meanwhile) and answers how many are not: taken over,
// confirmed by another request, or gone.
const EXTEND: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lost = 0
for i, key in ipairs(KEYS) do
  local old = redis.call('GET', key)
  local rest = old and string.sub(old, 1, #ARGV[i + 2]) == ARGV[i + 2] and string.match(old, '^p:%d+:%d+:%d+:(.*)$')
  if rest then
    redis.call('SET', key, ARGV[i + 2] .. string.format('%d', now + tonumber(ARGV[1])) .. ':' .. rest, 'PX', ARGV[2])
  else
    lost = lost + 1
  end
end
return lost
";

/// The connections run on their own small runtime, alive for the process:
/// no actix worker's runtime (which stops with its worker) owns them.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("dedupe-redis")
            .enable_all()
            .build()
            .expect("a tokio runtime can be built at start-up")
    })
}

/// A Redis or Valkey server holding the ids of every gateway.
pub struct RedisStore {
    connection: ConnectionManager,
    reserve: redis::Script,
    release: redis::Script,
    extend: redis::Script,
    window_ms: u64,
    pending_ms: u64,
    /// How long past its lease an id waits before a retry may look it up
    /// (see `RESERVE`): `sink::watermark::SETTLE_MS` unless the topics
    /// are known not to be replicated ([`RedisStore::settle`]).
    settle_ms: Arc<AtomicU64>,
    timeout: Duration,
}

impl RedisStore {
    /// Connects lazily (the gateway starts with the store down, and
    /// `on_store_error` decides what requests do meanwhile).
    pub fn new(url: &str, window: Duration, pending_ttl: Duration, timeout: Duration) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(|e| StoreError(format!("redis_url `{url}`: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let _entered = runtime().enter();
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| StoreError(format!("Redis client: {e}")))?;
        Ok(Self {
            connection,
            reserve: redis::Script::new(RESERVE),
            release: redis::Script::new(RELEASE),
            extend: redis::Script::new(EXTEND),
            window_ms: millis(window),
            pending_ms: millis(pending_ttl),
            settle_ms: Arc::new(AtomicU64::new(crate::sink::watermark::SETTLE_MS)),
            timeout,
        })
    }

    /// The wait past a lapsed lease before its id is looked up, shared
    /// with whoever knows whether the topics are replicated (0 when no
    /// partition has a follower: nothing can wait above the watermark).
    pub fn settle(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.settle_ms)
    }

    /// Runs `work` on the store's runtime, within the store timeout.
    fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = redis::RedisResult<T>> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, StoreError>> {
        let timeout = self.timeout;
        let task = runtime().spawn(tokio::time::timeout(timeout, work));
        async move {
            match task.await {
                Ok(Ok(Ok(value))) => Ok(value),
                Ok(Ok(Err(e))) => Err(StoreError(format!("Redis: {e}"))),
                Ok(Err(_)) => Err(StoreError(format!("Redis did not answer within {} ms", timeout.as_millis()))),
                Err(e) => Err(StoreError(format!("Redis task failed: {e}"))),
            }
        }
        .boxed()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The key of an id.
fn key(r: &Reservation) -> String {
    format!("eventgw:dedupe:{}:{}:{}", r.id.source.len(), r.id.source, r.id.message_id)
}

/// `<crc>:<token>`: what makes a pending value this request's.
fn holder(r: &Reservation) -> String {
    format!("{}:{}", r.fingerprint, r.token)
}

/// The start of this request's pending value (release and extend match it).
fn pending_prefix(r: &Reservation) -> String {
    format!("p:{}:", holder(r))
}

/// Reads a value found at reservation.
fn claim(value: &str) -> Claim {
    let mut parts = value.split(':');
    match (parts.next(), parts.next().and_then(|f| f.parse().ok())) {
        (Some("c"), Some(fingerprint)) => Claim::Stored(fingerprint),
        (Some("d"), Some(fingerprint)) => {
            Claim::InDoubt(fingerprint, parts.next().and_then(|t| t.parse().ok()).unwrap_or(0))
        }
        (Some("p"), _) => Claim::Pending,
        (Some("n"), _) => Claim::New,
        // Not ours (another writer's value): treat as stored, unconfirmable
        // fingerprint, rather than produce a possible duplicate.
        _ => Claim::Stored(0),
    }
}

impl Store for RedisStore {
    fn reserve(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<Vec<Claim>, StoreError>> {
        let script = self.reserve.clone();
        let (pending_ms, window_ms) = (self.pending_ms, self.window_ms);
        let settle_ms = self.settle_ms.load(Ordering::Relaxed);
        let mut connection = self.connection.clone();
        let answer = self.run(async move {
            let mut invocation = script.prepare_invoke();
            invocation.arg(pending_ms).arg(window_ms).arg(settle_ms);
            for r in &ids {
                invocation.key(key(r)).arg(holder(r)).arg(&r.topic);
            }
            invocation.invoke_async::<Vec<String>>(&mut connection).await
        });
        async move { Ok(answer.await?.iter().map(|v| claim(v)).collect()) }.boxed()
    }

    fn confirm(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
        let mut pipe = redis::pipe();
        for r in &ids {
            pipe.cmd("SET").arg(key(r)).arg(format!("c:{}", r.fingerprint)).arg("PX").arg(self.window_ms).ignore();
        }
        let mut connection = self.connection.clone();
        self.run(async move { pipe.query_async::<()>(&mut connection).await })
    }

    fn release(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
        let script = self.release.clone();
        let mut connection = self.connection.clone();
        self.run(async move {
            let mut invocation = script.prepare_invoke();
            for r in &ids {
                invocation.key(key(r)).arg(pending_prefix(r));
            }
            invocation.invoke_async::<i64>(&mut connection).await.map(drop)
        })
    }

    fn extend(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<usize, StoreError>> {
        let script = self.extend.clone();
        let (pending_ms, window_ms) = (self.pending_ms, self.window_ms);
        let mut connection = self.connection.clone();
        self.run(async move {
            let mut invocation = script.prepare_invoke();
            invocation.arg(pending_ms).arg(window_ms);
            for r in &ids {
                invocation.key(key(r)).arg(pending_prefix(r));
            }
            invocation.invoke_async::<usize>(&mut connection).await
        })
    }

    fn pending_ttl(&self) -> Duration {
        Duration::from_millis(self.pending_ms)
    }

    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        let mut connection = self.connection.clone();
        self.run(async move { redis::cmd("PING").query_async::<String>(&mut connection).await.map(drop) })
    }
}
