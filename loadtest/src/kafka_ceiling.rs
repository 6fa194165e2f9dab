//! The Kafka ceiling: the same events produced straight to the broker with
//! the gateway's producer settings, at the same open-loop rate, each to the
//! domain topic and with the partition key the gateway gives it, so Kafka
//! gets the same partitions (librdkafka sends one request per partition,
//! so fewer partitions would be fewer, fuller requests than the gateway's).
//! The gateway's batched throughput and latency are reported against it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::task::JoinSet;

use crate::generator::RunResult;
use crate::workload::Workload;

/// A producer configured like the gateway's (idempotent, acks=all, lz4,
/// linger 20 ms, 1 MB batches).
pub fn producer(brokers: &str) -> anyhow::Result<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", "lz4")
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("message.timeout.ms", "5000")
        .set("queue.buffering.max.messages", "1000000")
        .create()?)
}

/// Creates the ceiling's own topic if it is missing, partitioned like the
/// busiest domain topic.
pub async fn ensure_topic(brokers: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", brokers).create()?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for result in admin.create_topics(&[new], &AdminOptions::new()).await? {
        match result {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => anyhow::bail!("creating {name}: {code}"),
        }
    }
    Ok(())
}

/// Produces `rate` requests' worth of events per second for `duration`,
/// each event to its domain topic (`topic` for a workload without a
/// catalog); a "request" is acknowledged when all its events are.
pub async fn run(
    producer: &FutureProducer,
    topic: &str,
    rate: f64,
    duration: Duration,
    workload: Arc<Workload>,
) -> RunResult {
    let total = (rate * duration.as_secs_f64()).round() as u64;
    let mut result = RunResult::new(total, workload.batch);
    let mut tasks = JoinSet::new();
    let start = Instant::now();
    for seq in 0..total {
        let due = start + Duration::from_secs_f64(seq as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let events: Vec<(&str, String, Vec<u8>)> = (0..workload.batch as u64)
            .map(|i| {
                let n = seq * workload.batch as u64 + i;
                let event = workload.event(n, 0);
                let (to, key) = workload.destination(n, &event).unwrap_or_else(|| {
                    let user = event.get("userId").or(event.get("anonymousId")).and_then(|v| v.as_str());
                    (topic, user.unwrap_or("").to_owned())
                });
                (to, key, event.to_string().into_bytes())
            })
            .collect();
        let deliveries: Vec<_> = events
            .iter()
            .map(|(to, key, payload)| {
                producer.send_result(FutureRecord::to(to).key(key).payload(payload)).map_err(|_| ())
            })
            .collect();
        tasks.spawn(async move {
            let mut ok = true;
            for delivery in deliveries {
                ok &= match delivery {
                    Ok(future) => matches!(future.await, Ok(Ok(_))),
                    Err(_) => false,
                };
            }
            (ok, due.elapsed())
        });
        while let Some(joined) = tasks.try_join_next() {
            if let Ok(done) = joined {
                result.record(done.0, 0, done.1);
            }
        }
    }
    while let Some(joined) = tasks.join_next().await {
        if let Ok(done) = joined {
            result.record(done.0, 0, done.1);
        }
    }
    result.elapsed = start.elapsed();
    result
}
