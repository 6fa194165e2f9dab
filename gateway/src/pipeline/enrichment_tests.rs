//! Records written by splicing are byte for byte the records the map-based
//! enrichment wrote: every event of a varied set, through the whole
//! admission, under each IP policy, with geo + device + bots on, routed and
//! off, for clients with and without an address and a user agent, with and
//! without client hints and the anonymise setting. The reference is the old
//! code (`reference_payload` here and `EdgeRequest::finish_reference`),
//! switched on per thread.

#[path = "../../tests/support/mmdb.rs"]
mod mmdb;

use std::cell::Cell;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use super::super::clock::{EventTime, format_time};
use super::super::{Admission, Planned, Verdict};
use crate::config::Config;
use crate::enrichment::BotPolicy;
use crate::enrichment::client::Client;
use crate::enrichment::hints::ClientHints;
use crate::enrichment::request::Marks;
use crate::privacy::{IpPolicy, anonymize};
use crate::sink::MemorySink;
use crate::stages::Request;
use crate::state::AppState;

thread_local! {
    /// Whether this thread's admissions enrich the old way.
    pub(super) static REFERENCE: Cell<bool> = const { Cell::new(false) };
}

/// The enrich step as it was: values inserted into the map, which is then
/// serialised whole.
pub(super) fn reference_payload(
    admission: &Admission<'_>,
    name: &str,
    mut event: Map<String, Value>,
    time: &EventTime,
    consent_warning: Option<String>,
) -> (Vec<u8>, Marks) {
    event.insert("receivedAt".into(), Value::String(admission.received_at_text.to_string()));
    if let Some(device) = event.remove("timestamp")
        && !event.contains_key("originalTimestamp")
    {
        event.insert("originalTimestamp".into(), device);
    }
    event.insert("timestamp".into(), Value::String(format_time(time.timestamp)));
    let context = event.entry("context").or_insert_with(|| Value::Object(Map::new()));
    if let Some(context) = context.as_object_mut() {
        let reported = context.get("ip").and_then(Value::as_str).and_then(|s| s.parse::<IpAddr>().ok());
        match (reported, admission.client.ip) {
            (Some(ip), _) => {
                context.insert("ip".into(), Value::String(admission.clients.reported_ip(ip).to_string()));
            }
            (None, Some(ip)) => {
                context.insert("ip".into(), Value::String(ip.to_string()));
            }
            (None, None) => {}
        }
        if let (None, Some(agent)) = (context.get("userAgent"), &admission.client.user_agent) {
            context.insert("userAgent".into(), Value::String(agent.clone()));
        }
    }
    let marks = admission.edge.finish_reference(name, consent_warning, &mut event);
    (Value::Object(event).to_string().into_bytes(), marks)
}

const CHROME: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("parent").to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// The catalog with purposes and personal fields: `Form Submitted` serves
/// `marketing` (enforce) with hashed, redacted and encrypted properties;
/// `Link Clicked` serves `analytics` (warn) and declares fields inside
/// `context`, among them what enrichment writes there.
fn catalog(dir: &Path) -> PathBuf {
    let to = dir.join("catalog");
    for domain in std::fs::read_dir(repo_root().join("schemas")).expect("schemas").flatten() {
        if domain.path().join("catalog.toml").exists() {
            copy_dir(&domain.path(), &to.join(domain.file_name()));
        }
    }
    let file = to.join("web/catalog.toml");
    let mut table: toml::Table = std::fs::read_to_string(&file).expect("web catalog").parse().expect("toml");
    let events = table.get_mut("events").and_then(toml::Value::as_table_mut).expect("events");
    let mut declare = |event: &str, purpose: &str, rollout: Option<&str>, personal: &str| {
        let spec = events.get_mut(event).and_then(toml::Value::as_table_mut).expect("event");
        spec.insert("purpose".into(), purpose.into());
        if let Some(rollout) = rollout {
            spec.insert("rollout".into(), rollout.into());
        }
        spec.insert("personal".into(), toml::Value::Table(personal.parse().expect("personal")));
    };
    declare(
        "Form Submitted",
        "marketing",
        None,
        r#""properties.email" = "hash"
           "properties.phone" = "redact"
           "properties.full_name" = "encrypt"
           "email" = "redact""#,
    );
    declare(
        "Link Clicked",
        "analytics",
        Some("warn"),
        r#""context.geo.city" = "redact"
           "context.traits.email" = "hash""#,
    );
    std::fs::write(&file, toml::to_string(&table).expect("serialise")).expect("write catalog");
    to
}

/// A gateway whose sources cover each IP policy with geo + device + bots
/// labelled, routed, and all off.
fn state(dir: &Path, anonymize_ip: bool) -> AppState {
    let env = vec![("EVENTGW__KAFKA__BROKERS".to_owned(), "127.0.0.1:1".to_owned())];
    let mut config =
        Config::load_with_env(&repo_root().join("gateway/config/dev.toml"), env.into_iter()).expect("config");
    config.catalog.dir = catalog(dir);
    std::fs::write(dir.join("geo.mmdb"), mmdb::test_database()).expect("geo database");
    config.geo = Some(serde_json::from_value(json!({"database": dir.join("geo.mmdb")})).expect("geo"));
    config.privacy.hash_key = Some("test-hash-key-of-at-least-32-bytes!!".into());
    config.privacy.user_keys_dir = Some(dir.join("keys"));
    config.enrichment.anonymize_ip = anonymize_ip;
    let demo = config.sources.iter().find(|s| s.id == "demo").expect("demo").clone();
    config.sources.clear();
    for ip in [IpPolicy::Keep, IpPolicy::Truncate, IpPolicy::Hash, IpPolicy::Drop] {
        for bots in [BotPolicy::Label, BotPolicy::Route, BotPolicy::Off] {
            let mut source = demo.clone();
            source.id = format!("{ip:?}-{bots:?}").to_lowercase();
            source.write_key = Some(format!("key-{}", source.id));
            source.privacy.ip = ip;
            source.privacy.consent = true;
            let on = bots != BotPolicy::Off;
            (source.enrichment.geo, source.enrichment.device, source.enrichment.bots) = (on, on, bots);
            source.enrichment.bot_topic = Some("web.bots".into());
            config.sources.push(source);
        }
    }
    AppState::new(config, Arc::new(MemorySink::default())).expect("state")
}

/// Events as they come from clients: browsers, server SDKs forwarding
/// their users' address and agent, clients that already set what
/// enrichment writes, personal data and consent.
fn events() -> Vec<Value> {
    let page = |context: Value| {
        json!({"type": "page", "anonymousId": "a-1",
        "properties": {"url": "https://shop.example/", "path": "/"}, "context": context})
    };
    let mut events = vec![
        json!({"type": "page", "anonymousId": "a-1", "properties": {"url": "https://shop.example/", "path": "/"},
               "timestamp": "2024-11-14T22:13:19.512Z", "sentAt": "2024-11-14T22:13:20Z"}),
        page(json!({"library": {"name": "eventgw-sdk-js", "version": "0.1.0"}, "locale": "en-US"})),
        page(json!({})),
        page(json!({"ip": "198.51.100.7", "userAgent": GOOGLEBOT, "library": {"name": "analytics-python"}})),
        page(json!({"library": {"name": "x"}, "ip": "2001:db8::1", "userAgent": IPHONE, "locale": "ja-JP"})),
        page(json!({"ip": "garbage", "userAgent": 42, "page": {"path": "/"}})),
        page(json!({"ip": 7, "locale": "de"})),
        page(json!({"geo": {"country": "XX"}, "agent": {"browser": "mine"}, "bot": null, "ipHash": "client's"})),
        page(json!({"ipHash": "client's", "locale": "fr", "ip": "192.0.2.10"})),
        page(json!({"bot": false, "userAgent": "curl/8.5.0", "ip": "::ffff:203.0.113.9"})),
        page(json!({"userAgent": "Mozilla/5.0 \"quoted\" \u{e9}\u{1F600}\\ HeadlessChrome/131.0", "z": [1, 2]})),
        json!({"type": "page", "anonymousId": "a-1", "originalTimestamp": "2024-11-14T22:13:19Z",
               "properties": {"url": "https://shop.example/", "path": "/"}, "context": {"ip": "203.0.113.77"}}),
        json!({"type": "track", "event": "Form Submitted", "userId": "u-1",
               "properties": {"form_id": "f1", "email": "a@example.com", "phone": "+49", "full_name": "Ada L"},
               "context": {"consent": {"marketing": true}, "traits": {"email": "a@example.com"}}}),
        json!({"type": "track", "event": "Form Submitted", "anonymousId": "a-2",
               "properties": {"form_id": "f1", "email": "b@example.com"}, "context": {"consent": ["analytics"]}}),
        json!({"type": "track", "event": "Link Clicked", "userId": "u-2", "properties": {"href": "https://x.example/"},
               "context": {"traits": {"email": "c@example.com"}, "consent": {"analytics": true}}}),
        json!({"type": "track", "event": "Link Clicked", "userId": "u-3", "properties": {"href": "https://x.example/"},
               "context": {"ip": "198.51.100.7", "locale": "fr", "traits": {"email": "d@example.com"}}}),
        json!({"type": "track", "event": "Link Clicked", "userId": "u-3", "properties": {"href": "https://x.example/"}}),
        json!({"type": "track", "event": "Unknown Thing", "userId": "u-4", "properties": {}}),
        // What enrichment writes at the top: a client's own `receivedAt`,
        // the device's `timestamp` anywhere (last, below), with or without
        // an `originalTimestamp`, and with personal fields whose actions
        // work on the map as enrichment left it.
        json!({"type": "page", "receivedAt": "client's", "anonymousId": "a-1", "timestamp": "2024-11-14T22:13:19.512Z",
               "properties": {"url": "https://shop.example/", "path": "/"}, "context": {"locale": "en"}}),
        json!({"timestamp": "2024-11-14T22:13:19.512Z", "type": "page", "anonymousId": "a-1",
               "originalTimestamp": "2024-11-14T22:13:18Z", "properties": {"url": "https://shop.example/", "path": "/"},
               "context": {}, "sentAt": "2024-11-14T22:13:20Z"}),
        json!({"type": "track", "event": "Form Submitted", "userId": "u-5", "email": "e@example.com",
               "timestamp": "2024-11-14T22:13:19.512Z",
               "properties": {"form_id": "f2", "email": "e@example.com", "phone": "+33"},
               "context": {"consent": {"marketing": true}, "traits": {"email": "e@example.com"}, "ip": "198.51.100.8"}}),
        json!({"type": "page", "anonymousId": "a-3", "properties": {"url": "https://shop.example/", "path": "/"},
               "context": {"locale": "it"}, "receivedAt": "client's"}),
    ];
    for (i, event) in events.iter_mut().enumerate() {
        event["messageId"] = json!(format!("0193a0b4-6c1e-7cc2-9d0e-{i:012}"));
    }
    // The device's `timestamp` as the event's last entry.
    let last = json!({"type": "page", "anonymousId": "a-4", "context": {"locale": "pt"},
                      "properties": {"url": "https://shop.example/", "path": "/"},
                      "messageId": "0193a0b4-6c1e-7cc2-9d0e-ffffffffffff", "timestamp": "2024-11-14T22:13:19Z"});
    events.push(last);
    events
}

/// The clients of the requests: address and agent, client hints, and the
/// full address behind an anonymised one.
fn clients(anonymized: bool) -> Vec<Client> {
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static("sec-ch-ua"), HeaderValue::from_static(r#""HeadlessChrome";v="131""#));
    headers.insert(HeaderName::from_static("sec-ch-ua-platform"), HeaderValue::from_static(r#""Linux""#));
    let client = |address: Option<&str>, agent: Option<&str>, hints: Option<ClientHints>| {
        let full_ip = address.map(ip);
        let shown = if anonymized { full_ip.map(anonymize) } else { full_ip };
        Client { ip: shown, full_ip, user_agent: agent.map(str::to_owned), hints }
    };
    vec![
        client(Some("203.0.113.9"), Some(CHROME), None),
        client(Some("2001:db8::5"), Some(GOOGLEBOT), None),
        client(Some("192.0.2.1"), Some(IPHONE), None),
        client(Some("203.0.113.9"), Some(CHROME), Some(ClientHints::from_headers(&headers))),
        client(None, None, None),
        client(None, Some(CHROME), None),
    ]
}

/// One request's verdicts, enriched the new way or the reference way.
fn admit(state: &AppState, source: &str, client: &Client, reference: bool) -> Vec<Planned> {
    let principal = state.auth.load().by_write_key(&format!("key-{source}")).expect("source");
    let received_at = chrono::DateTime::from_timestamp(1_731_622_400, 123_000_000).expect("time");
    let request = Request::from_client(state, "batch", client.clone());
    let admission = crate::stages::admit::admission(&request, &principal, received_at, Some("2024-11-14T22:13:21Z"));
    REFERENCE.set(reference);
    let planned = admission.admit_all(events(), Vec::new());
    REFERENCE.set(false);
    planned
}

/// What a verdict stores, as text; an encrypted value (a fresh nonce each
/// time) masked, and checked to be one.
fn stored(planned: &Planned) -> (String, Vec<u8>) {
    match &planned.verdict {
        Verdict::Accept(record) | Verdict::DeadLetter { record, .. } => {
            let mut payload = record.payload.to_vec();
            let parsed: Value = serde_json::from_slice(&payload).expect("a record is JSON");
            let sealed = parsed.pointer("/properties/full_name").or(parsed.pointer("/event/properties/full_name"));
            if let Some(sealed) = sealed.and_then(Value::as_str).filter(|s| *s != "Ada L") {
                let at = payload.windows(sealed.len()).position(|w| w == sealed.as_bytes()).expect("sealed text");
                payload[at..at + sealed.len()].fill(b'*');
            }
            (format!("{:?} {} {} {:?}", planned.message_id, record.topic, record.key, record.headers), payload)
        }
        other => (format!("{:?} {other:?}", planned.message_id), Vec::new()),
    }
}

#[test]
fn spliced_records_are_byte_for_byte_the_map_built_ones() {
    let dir = std::env::temp_dir().join(format!("eventgw-splice-{}", uuid::Uuid::new_v4()));
    let mut compared = 0;
    let mut enriched = [0usize; 4];
    for anonymized in [false, true] {
        let run = dir.join(if anonymized { "anonymized" } else { "full" });
        std::fs::create_dir_all(&run).expect("dir");
        let state = state(&run, anonymized);
        for source in state.config.sources.iter().map(|s| s.id.clone()) {
            for client in clients(anonymized) {
                let new = admit(&state, &source, &client, false);
                let old = admit(&state, &source, &client, true);
                assert_eq!(new.len(), old.len());
                for (index, (new, old)) in new.iter().zip(&old).enumerate() {
                    let (new, old) = (stored(new), stored(old));
                    assert_eq!(new.0, old.0, "{source}, client {client:?}, event {index}: verdict");
                    assert_eq!(
                        String::from_utf8_lossy(&new.1),
                        String::from_utf8_lossy(&old.1),
                        "{source}, client {client:?}, event {index}: record"
                    );
                    let text = String::from_utf8_lossy(&new.1);
                    for (n, field) in ["\"geo\":", "\"agent\":", "\"bot\":{", "\"ipHash\":"].iter().enumerate() {
                        enriched[n] += usize::from(text.contains(field));
                    }
                    compared += 1;
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    // The comparison covered records with each kind of fragment.
    assert!(compared > 1000, "{compared} records compared");
    assert!(enriched.iter().all(|n| *n > 20), "records with geo, agent, bot, ipHash: {enriched:?}");
}

/// What admission notes for the live view ([`super::super::Shown`]) is what
/// each record holds: the event's fields as stored, or the dead-letter
/// envelope's event's; nothing when the view does not watch.
#[test]
fn what_the_live_view_is_shown_is_what_each_record_holds() {
    let dir = std::env::temp_dir().join(format!("eventgw-shown-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let state = state(&dir, false);
    let (mut accepted, mut dead) = (0, 0);
    for source in state.config.sources.iter().map(|s| s.id.clone()) {
        let principal = state.auth.load().by_write_key(&format!("key-{source}")).expect("source");
        let received_at = chrono::DateTime::from_timestamp(1_731_622_400, 0).expect("time");
        let request = Request::from_client(&state, "batch", clients(false).remove(0));
        let mut admission = crate::stages::admit::admission(&request, &principal, received_at, None);
        let unwatched = admission.admit_all(events(), Vec::new());
        assert!(unwatched.iter().all(|p| p.shown.is_none()), "{source}: nothing read unwatched");
        admission.shown = Some(super::super::ShownSlot::default());
        for planned in admission.admit_all(events(), Vec::new()) {
            let (record, event) = match &planned.verdict {
                Verdict::Accept(record) => (record, "".to_owned()),
                Verdict::DeadLetter { record, .. } => (record, "/event".to_owned()),
                _ => continue,
            };
            let stored: Value = serde_json::from_slice(&record.payload).expect("a record is JSON");
            let field = |name: &str| stored.pointer(&format!("{event}/{name}")).and_then(Value::as_str);
            let expected =
                super::super::Shown::new(field("type"), field("event"), field("userId"), field("anonymousId"));
            assert_eq!(planned.shown.as_ref(), Some(&expected), "{source}: {stored}");
            if event.is_empty() { accepted += 1 } else { dead += 1 }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(accepted > 10 && dead > 0, "accepted {accepted}, dead-lettered {dead}");
}

/// A `messageId` repeated within one request is produced once: each later
/// copy of an event that was produced is a duplicate of the first one, and
/// an id whose first event was refused is decided afresh. Enough events and
/// ids that the request's map of ids holds many and is probed often.
#[test]
fn an_id_repeated_in_one_request_is_produced_once() {
    let dir = std::env::temp_dir().join(format!("eventgw-repeats-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let state = state(&dir, false);
    let source = state.config.sources[0].id.clone();
    let principal = state.auth.load().by_write_key(&format!("key-{source}")).expect("source");
    let request = Request::from_client(&state, "batch", clients(false).remove(0));
    let admission = crate::stages::admit::admission(&request, &principal, chrono::Utc::now(), None);
    let kinds = events();
    let (count, ids) = (240, 61);
    let batch: Vec<Value> = (0..count)
        .map(|i| {
            let mut event = kinds[i % kinds.len()].clone();
            event["messageId"] = json!(format!("0193a0b4-6c1e-7cc2-9d0e-{:012}", (i * 7) % ids));
            event
        })
        .collect();
    let planned = admission.admit_all(batch.clone(), Vec::new());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(planned.len(), count);
    let mut first_produced: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let (mut duplicates, mut produced) = (0, 0);
    for (i, event) in batch.iter().enumerate() {
        let id = event["messageId"].as_str().expect("id");
        match (first_produced.get(id), &planned[i].verdict) {
            (Some(first), Verdict::Duplicate { first: said }) => {
                assert_eq!(said, first, "event {i}: the duplicate of the first produced");
                duplicates += 1;
            }
            (Some(first), other) => panic!("event {i}: a repeat of event {first} was {other:?}"),
            (None, Verdict::Duplicate { first }) => panic!("event {i}: no earlier event was produced, said {first}"),
            (None, verdict) => {
                if verdict.is_produced() {
                    first_produced.insert(id, i);
                    produced += 1;
                }
            }
        }
        assert_eq!(planned[i].message_id.as_deref(), Some(id), "event {i}: its id");
    }
    assert_eq!(produced, ids, "one event produced per id");
    assert_eq!(duplicates, count - ids, "every other event a duplicate");
}
