//! Geo from the full client IP, then the IP handled by the source's policy,
//! end to end against a real Kafka broker: records are read back and the
//! raw address is looked for in every one of them, dead letters included.

mod common;
#[path = "support/edge.rs"]
mod edge;
#[path = "support/mmdb.rs"]
mod mmdb;

use common::{TestGateway, brokers, find, unique};
use gateway::privacy::IpPolicy;
use serde_json::{Value, json};

const BERLIN_IP: &str = "203.0.113.9";
const LYON_IP: &str = "198.51.100.23";

async fn post(gw: &TestGateway, key: &str, forwarded_for: &str, body: &Value) -> (u16, Value) {
    let response = common::client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth(key, Some(""))
        .header("x-forwarded-for", forwarded_for)
        .header("user-agent", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
        .json(body)
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

fn page(id: &str, context: Value) -> Value {
    json!({"type": "page", "messageId": id, "anonymousId": unique("anon"), "context": context,
           "properties": {"url": "https://shop.example/", "path": "/"}})
}

/// Every record of this test, on the domain topic and the dead-letter topic,
/// as text: headers and value.
fn everything(ids: &[&str]) -> Vec<String> {
    let mut texts = Vec::new();
    for topic in ["web.tracking", "eventgw.dead-letter"] {
        for id in ids {
            for record in find(&brokers(), topic, id) {
                texts.push(format!("{:?} {}", record.headers, record.value));
            }
        }
    }
    texts
}

#[actix_web::test]
async fn geo_lands_and_the_raw_ip_appears_nowhere_in_kafka() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let mut config = edge::config(&brokers(), &files);
    config.sources[0].privacy.ip = IpPolicy::Hash;
    let mut truncating = edge::extra_source(&config, "truncating", "truncating-write-key");
    truncating.privacy.ip = IpPolicy::Truncate;
    let mut keeping = edge::extra_source(&config, "keeping", "keeping-write-key");
    keeping.privacy.ip = IpPolicy::Keep;
    config.sources.extend([truncating, keeping]);
    let gw = TestGateway::start(config).await;

    // The request comes from Berlin through the trusted proxy (127.0.0.1);
    // the second event was forwarded by a server SDK for a user in Lyon;
    // the third breaks its contract (no form_id) and carries the IP itself.
    let (from_proxy, reported, invalid) = (unique("geo"), unique("geo"), unique("geo"));
    let broken = json!({"type": "track", "event": "Form Submitted", "messageId": invalid, "userId": "u-geo",
                        "context": {"ip": BERLIN_IP}, "properties": {"form_name": "contact"}});
    let batch = json!({"batch": [page(&from_proxy, json!({})), page(&reported, json!({"ip": LYON_IP})), broken]});
    let (status, answer) = post(&gw, "demo-write-key", BERLIN_IP, &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!((answer["accepted"].as_u64(), answer["invalid"].as_u64()), (Some(2), Some(1)), "{answer}");

    let berlin = &find(&brokers(), "web.tracking", &from_proxy)[0].value["context"];
    assert_eq!(
        berlin["geo"],
        json!({"country": "DE", "region": "BE", "city": "Berlin", "timeZone": "Europe/Berlin",
               "asn": 64_500, "asOrganization": "Example Carrier"})
    );
    assert!(berlin.get("ip").is_none(), "{berlin}");
    let berlin_hash = berlin["ipHash"].as_str().expect("hashed IP");
    assert_eq!(berlin_hash.len(), 32);
    let lyon = &find(&brokers(), "web.tracking", &reported)[0].value["context"];
    assert_eq!(lyon["geo"]["city"], "Lyon", "a reported IP gets its own geo: {lyon}");
    assert_ne!(lyon["ipHash"], berlin["ipHash"]);
    let dead = &find(&brokers(), "eventgw.dead-letter", &invalid)[0];
    assert_eq!(dead.headers["dead-letter-reason"], "schema_violation");
    assert_eq!(dead.value["event"]["context"]["ipHash"].as_str(), Some(berlin_hash), "same address, same hash");
    for text in everything(&[&from_proxy, &reported, &invalid]) {
        assert!(!text.contains(BERLIN_IP) && !text.contains(LYON_IP), "raw IP in Kafka: {text}");
    }

    // Truncation keeps the network, and geo still came from the full address.
    let truncated = unique("geo");
    let (status, _) =
        post(&gw, "truncating-write-key", BERLIN_IP, &json!({"batch": [page(&truncated, json!({}))]})).await;
    assert_eq!(status, 200);
    let context = &find(&brokers(), "web.tracking", &truncated)[0].value["context"];
    assert_eq!((context["ip"].as_str(), context["geo"]["city"].as_str()), (Some("203.0.113.0"), Some("Berlin")));

    // Control: with `keep` the same scan finds the address, so it could fail.
    let kept = unique("geo");
    let (status, _) = post(&gw, "keeping-write-key", BERLIN_IP, &json!({"batch": [page(&kept, json!({}))]})).await;
    assert_eq!(status, 200);
    assert!(everything(&[&kept]).iter().any(|t| t.contains(BERLIN_IP)), "the scan sees a kept IP");
    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("eventgw_geo_lookups_total{result=\"found\"}"), "{metrics}");
    gw.stop().await;
}

#[actix_web::test]
async fn a_replaced_geo_database_is_used_without_a_restart() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let gw = TestGateway::start(edge::config(&brokers(), &files)).await;
    let before = unique("geo");
    let (status, _) = post(&gw, "demo-write-key", "192.0.2.1", &json!({"batch": [page(&before, json!({}))]})).await;
    assert_eq!(status, 200);
    assert!(find(&brokers(), "web.tracking", &before)[0].value["context"].get("geo").is_none(), "not in the database");

    let mut writer = mmdb::Writer::new("GeoIP2-City");
    writer.insert(
        "192.0.2.0".parse().expect("ip"),
        24,
        &mmdb::city_record("NL", "NH", "Amsterdam", "Europe/Amsterdam", 1, "X"),
    );
    let staged = files.dir.join("geo.mmdb.new");
    std::fs::write(&staged, writer.to_bytes()).expect("write");
    std::fs::rename(&staged, files.dir.join("geo.mmdb")).expect("replace atomically");
    gw.state.edge.reload_changed();

    let after = unique("geo");
    let (status, _) = post(&gw, "demo-write-key", "192.0.2.1", &json!({"batch": [page(&after, json!({}))]})).await;
    assert_eq!(status, 200);
    assert_eq!(find(&brokers(), "web.tracking", &after)[0].value["context"]["geo"]["city"], "Amsterdam");
    gw.stop().await;
}
