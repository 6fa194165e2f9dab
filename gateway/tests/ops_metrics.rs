//! The dashboard and the alert rules name only metrics the gateway exports:
//! a real gateway (real Kafka) gets traffic that touches every metric family
//! (an accepted event, a dead-lettered one, a refused request), then its
//! `/metrics` is scraped and every `eventgw_*` name in every dashboard query
//! and every alert expression must be there, with every label the queries
//! group or filter by.
#![allow(missing_docs)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// `eventgw_*` names in a PromQL expression, with the label names used
/// beside them in `{...}` and `by (...)`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("eventgw_") {
        let start = i + at;
        let end =
            expr[start..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(expr.len(), |n| start + n);
        let preceded = start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if !preceded {
            names.insert(expr[start..end].to_owned());
        }
        i = end;
    }
    names
}

/// Label names a query selects on (`{label=...}`) or groups by (`by (...)`).
fn label_names(expr: &str) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    for (open, close) in [('{', '}'), ('(', ')')] {
        for part in expr.split(open).skip(1) {
            let inner = part.split(close).next().unwrap_or_default();
            if open == '(' && !part.is_empty() && !expr.contains(&format!("by ({inner})")) {
                continue;
            }
            for item in inner.split(',') {
                let name = item.split(['=', '!']).next().unwrap_or_default().trim();
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    labels.insert(name.to_owned());
                }
            }
        }
    }
    labels
}

/// Every expression of the dashboard and the alert rules, with where it is.
fn expressions() -> Vec<(String, String)> {
    let ops = common::repo_root().join("gateway/ops");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(ops.join("dashboard.json")).expect("dashboard"))
            .expect("dashboard is JSON");
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            out.push((format!("panel `{}`", panel["title"]), target["expr"].as_str().expect("expr").to_owned()));
        }
    }
    // The rules file is YAML; its `expr: |` blocks are read line by line.
    let rules = std::fs::read_to_string(ops.join("alerts.yml")).expect("alerts.yml");
    let mut current: Option<(String, String)> = None;
    let mut alert = String::new();
    for line in rules.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("- alert: ") {
            alert = name.to_owned();
        }
        if let Some((_, expr)) = current.as_mut() {
            if line.starts_with("          ") && !trimmed.starts_with('#') {
                expr.push_str(trimmed);
                expr.push(' ');
                continue;
            }
            out.extend(current.take());
        }
        if trimmed == "expr: |" {
            current = Some((format!("alert {alert}"), String::new()));
        }
    }
    assert!(out.iter().filter(|(w, _)| w.starts_with("alert")).count() >= 6, "every alert's expression is read");
    out
}

/// Metric family → label names, from the Prometheus text format.
fn exported(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..name_end].to_owned()).or_default();
        if let Some(inner) = line[name_end..].strip_prefix('{').and_then(|r| r.split('}').next()) {
            labels.extend(inner.split(',').filter_map(|kv| kv.split('=').next()).map(|k| k.trim().to_owned()));
        }
    }
    out
}

#[actix_web::test]
async fn every_metric_in_the_dashboard_and_the_alerts_is_exported() {
    if common::without_kafka() {
        return;
    }
    // Dedupe on (the memory store): its metrics are only there when it is.
    let mut config = common::config(&common::brokers());
    config.dedupe.enabled = true;
    let gateway = common::TestGateway::start(config).await;
    let valid = json!({"type": "track", "event": "Order Completed", "userId": "u1",
        "properties": {"order_id": "o-ops-1", "total": 1.5, "currency": "EUR"}});
    let invalid = json!({"type": "track", "event": "Order Completed", "userId": "u1",
        "properties": {"order_id": "o-ops-2", "total": "not a number", "currency": "EUR"}});
    let (status, answer) = gateway.post("/v1/batch", &json!({"batch": [valid, invalid]})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["invalid"], 1, "one event is dead-lettered: {answer}");
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/batch", gateway.url))
        .basic_auth("no-such-key", Some(""))
        .json(&json!({"batch": [{"type": "track", "event": "x"}]}))
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status().as_u16(), 401);
    let text = reqwest::get(format!("{}/metrics", gateway.url)).await.expect("scrape").text().await.expect("text");
    gateway.stop().await;

    let families = exported(&text);
    let mut problems = Vec::new();
    for (place, expr) in expressions() {
        let names = metric_names(&expr);
        assert!(!names.is_empty() || expr.contains("up{"), "{place} names no gateway metric: {expr}");
        let mut labels_seen = BTreeSet::from(["le".to_owned(), "instance".to_owned(), "job".to_owned()]);
        for name in &names {
            match families.get(name) {
                Some(labels) => labels_seen.extend(labels.iter().cloned()),
                None => problems.push(format!("{place}: `{name}` is not exported")),
            }
        }
        for label in label_names(&expr) {
            if !labels_seen.contains(&label) && !label.starts_with("__") {
                problems.push(format!("{place}: label `{label}` is not on {names:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}\n--- /metrics ---\n{text}", problems.join("\n"));
    assert_eq!(
        families.get("eventgw_ready").map(|_| text.contains("eventgw_ready 1")),
        Some(true),
        "ready with Kafka up"
    );
}

#[test]
fn names_and_labels_are_read_from_promql() {
    let expr = r#"sum by (endpoint, status) (rate(eventgw_http_requests_total{instance=~"$i",status=~"5.."}[5m])) / max(eventgw_ready)"#;
    assert_eq!(metric_names(expr), BTreeSet::from(["eventgw_http_requests_total".into(), "eventgw_ready".into()]));
    let labels = label_names(expr);
    assert!(["endpoint", "status", "instance"].iter().all(|l| labels.contains(*l)), "{labels:?}");
}
