//! Rollout per event, end to end: under `observe` an event that breaks its
//! schema is accepted unchanged and counted; under `warn` it is accepted,
//! its record tagged with `contract-warning`, and counted; under `enforce`
//! it is dead-lettered and counted.

mod common;

use std::fs;
use std::path::Path;

use common::{TestGateway, brokers, client, config, find, unique};
use serde_json::json;

/// The shipped catalog with Form Submitted under `observe` and Link Clicked under `warn`.
fn catalog_with_rollouts() -> std::path::PathBuf {
    let from = common::repo_root().join("schemas");
    let to = std::env::temp_dir().join(format!("eventgw-rollout-{}", std::process::id()));
    let _ = fs::remove_dir_all(&to);
    for domain in ["web", "app", "marketing", "crm", "billing"] {
        copy(&from.join(domain), &to.join(domain));
    }
    let file = to.join("web/catalog.toml");
    let text = fs::read_to_string(&file)
        .expect("read")
        .replace("schema = \"link_clicked\"", "schema = \"link_clicked\"\nrollout = \"warn\"")
        .replace("schema = \"form_submitted\"", "schema = \"form_submitted\"\nrollout = \"observe\"");
    fs::write(file, text).expect("write");
    to
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() { copy(&path, &target) } else { fs::copy(&path, &target).map(|_| ()).expect("copy") }
    }
}

#[actix_web::test]
async fn observe_accepts_warn_tags_enforce_dead_letters_and_each_is_counted() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    cfg.catalog.dir = catalog_with_rollouts();
    let gw = TestGateway::start(cfg).await;
    let (observed, warned, enforced) = (unique("observe"), unique("warn"), unique("enforce"));
    let batch = json!({"batch": [
        {"type": "track", "event": "Form Submitted", "userId": "r", "messageId": observed, "properties": {"form_id": 42}},
        {"type": "track", "event": "Link Clicked", "userId": "r", "messageId": warned, "properties": {"href": 7}},
        {"type": "track", "event": "Order Completed", "userId": "r", "messageId": enforced,
         "properties": {"order_id": "o-r", "total": "free", "currency": "EUR"}}
    ]});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["events"][0]["status"], "accepted", "observe never rejects");
    assert_eq!(answer["events"][1]["status"], "accepted", "warn accepts");
    assert_eq!(answer["events"][2]["status"], "invalid", "enforce dead-letters");

    let observed_record = &find(&brokers(), "web.tracking", &observed)[0];
    assert_eq!(observed_record.value["properties"]["form_id"], 42, "accepted unchanged");
    assert!(!observed_record.headers.contains_key("contract-warning"), "observe does not tag");
    let warned_record = &find(&brokers(), "web.tracking", &warned)[0];
    let warning = &warned_record.headers["contract-warning"];
    assert!(warning.starts_with("/properties/href:"), "{warning}");
    assert_eq!(find(&brokers(), "eventgw.dead-letter", &enforced).len(), 1);

    let metrics = client().get(format!("{}/metrics", gw.url)).send().await.expect("sent").text().await.expect("text");
    for (schema, rollout) in
        [("web/form_submitted", "observe"), ("web/link_clicked", "warn"), ("billing/order_completed", "enforce")]
    {
        let line = format!("eventgw_contract_violations_total{{rollout=\"{rollout}\",schema=\"{schema}\"}} 1");
        assert!(metrics.contains(&line), "missing `{line}` in\n{metrics}");
    }
    gw.stop().await;
}
