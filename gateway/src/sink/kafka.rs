//! The one idempotent Kafka producer: `enable.idempotence`, `acks=all`,
//! compression and batching from configuration, and a bounded queue whose
//! overflow becomes back-pressure (503) instead of memory growth.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, join_all};
use rdkafka::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use super::{Delivered, OutRecord, Sink, SinkError};
use crate::config::KafkaConfig;

/// Routes librdkafka's own log lines and errors into `tracing`.
#[derive(Debug, Default)]
pub struct LoggingContext;

impl ClientContext for LoggingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                tracing::error!(facility = fac, "Kafka client: {log_message}")
            }
            RDKafkaLogLevel::Warning => tracing::warn!(facility = fac, "Kafka client: {log_message}"),
            _ => tracing::debug!(facility = fac, "Kafka client: {log_message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(%error, "Kafka client error: {reason}");
    }
}

/// The producer shared by every request.
#[derive(Clone)]
pub struct KafkaSink {
    producer: Arc<FutureProducer<LoggingContext>>,
}

impl KafkaSink {
    /// Creates the producer; it connects lazily, so this succeeds with Kafka down.
    pub fn new(config: &KafkaConfig) -> Result<Self, KafkaError> {
        let producer = producer_config(config).create_with_context(LoggingContext)?;
        Ok(Self { producer: Arc::new(producer) })
    }
}

/// The producer's settings: the fixed safety ones first, tunables from
/// configuration, then `kafka.extra` which may override tunables but not
/// idempotence or acks.
pub fn producer_config(config: &KafkaConfig) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &config.brokers)
        .set("client.id", "eventgw")
        .set("compression.type", &config.compression)
        .set("linger.ms", config.linger_ms.to_string())
        .set("batch.size", config.batch_size.to_string())
        .set("message.timeout.ms", config.delivery_timeout_ms.to_string())
        .set("queue.buffering.max.messages", config.queue_max_messages.to_string())
        .set("queue.buffering.max.kbytes", config.queue_max_kbytes.to_string());
    for (key, value) in &config.extra {
        cc.set(key, value);
    }
    cc.set("enable.idempotence", "true").set("acks", "all");
    cc
}

fn classify(error: &KafkaError) -> SinkError {
    match error.rdkafka_error_code() {
        Some(RDKafkaErrorCode::QueueFull) => SinkError::QueueFull,
        Some(RDKafkaErrorCode::MessageSizeTooLarge) => SinkError::TooLarge,
        _ => SinkError::Unavailable(error.to_string()),
    }
}

impl Sink for KafkaSink {
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        // Enqueue everything now; librdkafka batches them. Only then wait.
        let pending: Vec<_> = records
            .iter()
            .map(|record| {
                let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
                for (key, value) in &record.headers {
                    headers = headers.insert(Header { key, value: Some(value.as_bytes()) });
                }
                let out = FutureRecord::to(&record.topic).key(&record.key).payload(&record.payload).headers(headers);
                self.producer.send_result(out).map_err(|(error, _)| classify(&error))
            })
            .collect();
        async move {
            let waits = pending.into_iter().map(|p| async move {
                match p {
                    Err(e) => Err(e),
                    Ok(delivery) => match delivery.await {
                        Ok(Ok(d)) => Ok(Delivered { partition: d.partition, offset: d.offset }),
                        Ok(Err((error, _))) => Err(classify(&error)),
                        Err(_) => Err(SinkError::Unavailable("the producer was shut down".into())),
                    },
                }
            });
            join_all(waits).await
        }
        .boxed()
    }

    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        let producer = Arc::clone(&self.producer);
        async move {
            let probe = actix_web::rt::task::spawn_blocking(move || {
                producer.client().fetch_metadata(None, Duration::from_secs(2)).map(|m| m.brokers().len())
            });
            match probe.await {
                Ok(Ok(brokers)) if brokers > 0 => Ok(()),
                Ok(Ok(_)) => Err("Kafka reported no brokers".into()),
                Ok(Err(e)) => Err(format!("Kafka is unreachable: {e}")),
                Err(e) => Err(format!("readiness probe failed: {e}")),
            }
        }
        .boxed()
    }

    fn queue_depth(&self) -> i64 {
        i64::from(self.producer.in_flight_count())
    }

    fn flush(&self, timeout: Duration) -> Result<(), String> {
        self.producer.flush(timeout).map_err(|e| e.to_string())
    }
}
