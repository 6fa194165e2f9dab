//! The same client for programs without an async runtime: it owns a small
//! runtime (one worker thread) that runs the background worker, and each
//! call blocks only as long as the async call would wait, which is never for
//! the network.

use std::time::Duration;

use serde::Serialize;
use uuid::Uuid;

use crate::Client;
use crate::config::ClientBuilder;
use crate::error::{BuildError, EnqueueError};
use crate::event::{Identity, Message};
use crate::metrics::Metrics;
use crate::outcome::Report;
use crate::typed::TypedEvent;

/// A [`Client`] for synchronous code. Do not use it from inside an async
/// runtime (its calls block the thread); use [`Client`] there.
pub struct BlockingClient {
    /// The async client, running on `runtime`.
    client: Client,
    /// Owns the worker thread; `None` once shut down.
    runtime: Option<tokio::runtime::Runtime>,
    /// How long `Drop` waits for delivery when `shutdown` was not called.
    drop_deadline: Duration,
}

impl std::fmt::Debug for BlockingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingClient").field("client", &self.client).finish_non_exhaustive()
    }
}

impl BlockingClient {
    /// Starts a runtime with one worker thread and builds the client on it.
    pub fn new(builder: ClientBuilder) -> Result<Self, BuildError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("eventgw-sdk")
            .enable_all()
            .build()?;
        let drop_deadline = builder.drop_deadline;
        let client = {
            let _entered = runtime.enter();
            builder.build()?
        };
        Ok(Self { client, runtime: Some(runtime), drop_deadline })
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        match &self.runtime {
            Some(runtime) => runtime.block_on(future),
            // Only `shutdown(self)` takes the runtime, and it consumes self.
            None => futures::executor::block_on(future),
        }
    }

    /// See [`Client::track`].
    pub fn track<P: Serialize + ?Sized>(
        &self,
        who: &Identity,
        event: &str,
        properties: &P,
    ) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.track(who, event, properties))
    }

    /// See [`Client::page`].
    pub fn page<P: Serialize + ?Sized>(
        &self,
        who: &Identity,
        name: Option<&str>,
        properties: &P,
    ) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.page(who, name, properties))
    }

    /// See [`Client::screen`].
    pub fn screen<P: Serialize + ?Sized>(
        &self,
        who: &Identity,
        name: &str,
        properties: &P,
    ) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.screen(who, name, properties))
    }

    /// See [`Client::identify`].
    pub fn identify<T: Serialize + ?Sized>(&self, who: &Identity, traits: &T) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.identify(who, traits))
    }

    /// See [`Client::group`].
    pub fn group<T: Serialize + ?Sized>(
        &self,
        who: &Identity,
        group_id: &str,
        traits: &T,
    ) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.group(who, group_id, traits))
    }

    /// See [`Client::alias`].
    pub fn alias(&self, who: &Identity, previous_id: &str) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.alias(who, previous_id))
    }

    /// See [`Client::record`].
    pub fn record<E: TypedEvent>(&self, who: &Identity, event: &E) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.record(who, event))
    }

    /// See [`Client::send`].
    pub fn send(&self, message: &Message) -> Result<Uuid, EnqueueError> {
        self.block_on(self.client.send(message))
    }

    /// See [`Client::flush`].
    pub fn flush(&self) {
        self.block_on(self.client.flush());
    }

    /// See [`Client::shutdown`]; also stops the runtime.
    pub fn shutdown(mut self, deadline: Duration) -> Report {
        let report = self.block_on(self.client.shutdown(deadline));
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        report
    }

    /// See [`Client::metrics`].
    pub fn metrics(&self) -> Metrics {
        self.client.metrics()
    }

    /// The async client inside, e.g. for [`Client::outcomes`].
    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl Drop for BlockingClient {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            let report = runtime.block_on(self.client.shutdown(self.drop_deadline));
            if report.failed > 0 {
                tracing::warn!(failed = report.failed, "Tracking client dropped with undelivered events");
            }
            runtime.shutdown_background();
        }
    }
}
