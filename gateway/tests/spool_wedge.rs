//! What spool replay relies on when it replaces a wedged producer
//! (`gateway/src/sink/spool/wedge.rs`), against a real broker: a fresh
//! client's probe tells a reachable cluster from an unreachable one; a
//! replaced producer delivers; and the read-back finds, by `event-id`,
//! exactly the records Kafka stored since a time (what was stored is found,
//! what was never sent is not), so replay skips the first and sends only
//! the rest: no record stored twice.
//! Needs a broker: `KAFKA_BROKERS` (default 127.0.0.1:9092).

mod common;

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use gateway::sink::spool::{cluster_reachable, stored_event_ids};
use gateway::sink::{KafkaSink, OutRecord, Sink, Text};

fn now_ms() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis()).expect("ms")
}

fn records(topic: &str, ids: &[String]) -> Vec<OutRecord> {
    ids.iter()
        .map(|id| OutRecord {
            topic: Text::copied(topic),
            key: format!("user-{}", id.len()),
            payload: format!("{{\"messageId\":\"{id}\"}}").into_bytes().into(),
            headers: vec![("event-id", Text::copied(id))],
        })
        .collect()
}

async fn read_back(kafka: &KafkaSink, topic: &str, since: i64) -> std::collections::HashSet<String> {
    let config = kafka.client_config().clone();
    let topics = BTreeSet::from([topic.to_owned()]);
    actix_web::rt::task::spawn_blocking(move || stored_event_ids(&config, &topics, since))
        .await
        .expect("read-back task")
        .expect("read-back")
}

#[actix_web::test]
async fn read_back_finds_exactly_what_kafka_stored_across_a_producer_replacement() {
    if common::without_kafka() {
        return;
    }
    let brokers = common::brokers();
    let config = common::config(&brokers);
    let catalog = eventgw_schemas::loader::load_catalog(&config.catalog.dir).expect("catalog");
    gateway::topics::ensure(&catalog, &config.kafka).await.expect("cannot reach Kafka; run scripts/kafka start");
    let topic = gateway::topics::wanted(&catalog, &config.kafka).into_iter().next().expect("a topic").0;
    let kafka = KafkaSink::new(&config.kafka).expect("producer");
    let probe_config = kafka.client_config().clone();
    let reachable = actix_web::rt::task::spawn_blocking(move || cluster_reachable(&probe_config)).await.expect("probe");
    assert!(reachable.is_ok(), "the broker answers a fresh client: {reachable:?}");

    let run = common::unique("wedge");
    let ids = |what: &str| (0..10).map(|i| format!("{run}-{what}-{i}")).collect::<Vec<_>>();
    let since = now_ms() - 1000;
    let before = kafka.send_all(records(&topic, &ids("before"))).await;
    assert!(before.iter().all(Result::is_ok), "{before:?}");
    kafka.replace_wedged().expect("replaced");
    assert_eq!(kafka.producers_replaced(), 1);
    let after = kafka.send_all(records(&topic, &ids("after"))).await;
    assert!(after.iter().all(Result::is_ok), "the replacement producer delivers: {after:?}");

    let found = read_back(&kafka, &topic, since).await;
    for id in ids("before").iter().chain(&ids("after")) {
        assert!(found.contains(id), "{id} was stored and must be found");
    }
    assert!(ids("never").iter().all(|id| !found.contains(id)), "ids never sent are not found");
    let later = read_back(&kafka, &topic, now_ms() + 60_000).await;
    assert!(later.iter().all(|id| !id.starts_with(&run)), "nothing of the run is stored after a later time");
}

#[actix_web::test]
async fn an_unreachable_cluster_is_not_reachable() {
    let mut config = common::config("127.0.0.1:1");
    config.kafka.brokers = "127.0.0.1:1".into();
    let kafka = KafkaSink::new(&config.kafka).expect("producer");
    let probe_config = kafka.client_config().clone();
    let reachable = actix_web::rt::task::spawn_blocking(move || cluster_reachable(&probe_config)).await.expect("probe");
    assert!(reachable.is_err(), "nothing listens on port 1: {reachable:?}");
}
