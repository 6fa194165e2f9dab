//! End-to-end latency: a consumer reads the records back from Kafka while
//! the generator runs and compares each record's arrival with the intended
//! send time the event carries.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

use crate::generator::histogram;
use crate::workload::INTENDED_FIELD;

/// A consumer positioned at the current end of `topics`.
pub fn consumer_at_end(brokers: &str, topics: &[String]) -> anyhow::Result<BaseConsumer> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "eventgw-loadtest-e2e")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "5")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
            let (_, high) = consumer.fetch_watermarks(topic, partition.id(), Duration::from_secs(10))?;
            assignment.add_partition_offset(topic, partition.id(), Offset::Offset(high))?;
        }
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

/// Reads until `expected` records carrying an intended time arrived or
/// `deadline` passed; latency is arrival minus intended time, both measured
/// from `start`.
pub fn measure(consumer: &BaseConsumer, start: Instant, expected: u64, deadline: Instant) -> (Histogram<u64>, u64) {
    let mut latencies = histogram();
    let mut seen = 0;
    while seen < expected && Instant::now() < deadline {
        let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) else { continue };
        let arrived = start.elapsed().as_nanos() as u64;
        let intended = message
            .payload()
            .and_then(|p| serde_json::from_slice::<Value>(p).ok())
            .and_then(|v| v.pointer(&format!("/properties/{INTENDED_FIELD}")).and_then(Value::as_u64));
        if let Some(intended) = intended {
            seen += 1;
            let _ = latencies.record((arrived.saturating_sub(intended) / 1000).max(1));
        }
    }
    (latencies, seen)
}
