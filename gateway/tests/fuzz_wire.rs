//! Property tests (fuzzing with proptest, which runs on stable in CI) for
//! every parser a client's bytes reach: body decoding (gzip), JSON parsing
//! within limits, batch parsing, event validation and auth header parsing.
//! Properties: never a panic, limits always hold, and valid input round-trips.
//! A crash proptest finds is shrunk and must become a named regression test below.

mod common;

use std::io::Write as _;
use std::sync::Arc;

use actix_web::http::header::{AUTHORIZATION, HeaderValue};
use base64::Engine as _;
use gateway::AppState;
use gateway::auth::{Credentials, header_credentials};
use gateway::config::LimitsConfig;
use gateway::pipeline::{MAX_MESSAGE_ID_LEN, Verdict};
use gateway::sink::MemorySink;
use gateway::wire::{BodyBudget, BodyBuffer, FIRST_BUFFER_BYTES, JsonLimits, Refused, decode_batch, gunzip};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// JSON values without floats (which need not round-trip textually).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_]{1,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

const LIMITS: JsonLimits = JsonLimits { max_depth: 32, max_string_bytes: 16 * 1024 };

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn json_parse_never_panics_and_keeps_its_depth_limit(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let limits = JsonLimits { max_depth: 4, max_string_bytes: 64 };
        if let Ok(v) = gateway::wire::parse(&bytes, limits) {
            prop_assert!(depth(&v) <= 4, "depth {} past the limit", depth(&v));
        }
    }

    #[test]
    fn json_parse_round_trips_valid_documents(v in json_value()) {
        let text = serde_json::to_vec(&v).expect("serialises");
        prop_assert_eq!(gateway::wire::parse(&text, LIMITS).expect("valid JSON parses"), v);
    }

    #[test]
    fn gunzip_never_panics_on_garbage(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        let _ = gunzip(&bytes, 4096);
    }

    #[test]
    fn gunzip_round_trips_within_the_cap_and_refuses_past_it(data in prop::collection::vec(any::<u8>(), 0..4096), cap in 1usize..4096) {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&data).expect("gzip");
        let compressed = encoder.finish().expect("gzip");
        match gunzip(&compressed, cap) {
            Ok(out) => { prop_assert!(data.len() <= cap); prop_assert_eq!(&out[..], &data[..]); }
            Err(_) => prop_assert!(data.len() > cap, "{} bytes within a cap of {cap} refused", data.len()),
        }
    }

    #[test]
    fn batch_parsing_never_panics_and_keeps_the_batch_limit(v in json_value(), events in prop::collection::vec(json_value(), 0..8)) {
        let limits = LimitsConfig { max_batch_events: 4, ..LimitsConfig::default() };
        let _ = decode_batch(v, &limits);
        let n = events.len();
        let wrapped = serde_json::json!({"batch": events});
        if let Ok(request) = decode_batch(wrapped, &limits) {
            prop_assert!(request.events.len() <= 4 && request.events.len() == n);
        }
    }

    #[test]
    fn auth_header_parsing_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let req = actix_web::test::TestRequest::default().insert_header((AUTHORIZATION, value)).to_http_request();
            let _ = header_credentials(req.headers());
        }
    }

    #[test]
    fn basic_credentials_give_back_the_write_key(key in "[^:\\x00-\\x1f\\x7f]{1,40}", password in "[ -~]{0,10}") {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{key}:{password}"));
        let req = actix_web::test::TestRequest::default()
            .insert_header((AUTHORIZATION, format!("Basic {encoded}")))
            .to_http_request();
        // The key comes back only with the empty password every SDK sends;
        // any password is refused (issue 13, item 6).
        match (header_credentials(req.headers()), password.is_empty()) {
            (Ok(Some(Credentials::WriteKey(k))), true) => prop_assert_eq!(k, key),
            (Err(e), false) => prop_assert_eq!(gateway::error::ApiError::from(e).code(), "malformed_credentials"),
            (other, _) => prop_assert!(false, "{other:?}"),
        }
    }

    /// Issue 28, item 1: a body's buffer holds at most twice what arrived
    /// (or a first buffer), never more than the limit, the budget is never
    /// passed, what arrived comes back whole, and every charge is given back.
    #[test]
    fn a_body_buffer_grows_with_what_arrived_and_gives_its_charge_back(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3000), 0..40),
        declared in prop::option::of(0usize..70_000),
        limit in 1usize..70_000,
        budget in 0usize..200_000,
    ) {
        let budget = BodyBudget::new(budget);
        let mut body = BodyBuffer::new(&budget, declared.filter(|d| *d <= limit), limit);
        let mut arrived = Vec::new();
        for chunk in &chunks {
            match body.push(chunk) {
                Ok(()) => arrived.extend_from_slice(chunk),
                Err(Refused::TooLarge) => prop_assert!(arrived.len() + chunk.len() > limit),
                Err(Refused::BudgetFull) => prop_assert!(arrived.len() + chunk.len() > body.charged(), "it had room"),
            }
            prop_assert_eq!(budget.held(), body.charged());
            prop_assert!(budget.held() <= budget.limit() && body.charged() <= limit);
            prop_assert!(body.charged() <= (2 * arrived.len()).max(FIRST_BUFFER_BYTES), "{} for {}", body.charged(), arrived.len());
        }
        prop_assert_eq!(body.finish(), arrived);
        prop_assert_eq!(budget.held(), 0);
    }
}

fn event_strategy() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        Just("track"),
        Just("page"),
        Just("screen"),
        Just("identify"),
        Just("group"),
        Just("alias"),
        Just("bogus")
    ];
    let name = prop_oneof![
        Just("Form Submitted".to_owned()),
        Just("Link Clicked".to_owned()),
        Just("Order Completed".to_owned()),
        Just("Payment Captured".to_owned()),
        ".{0,12}"
    ];
    let id = prop_oneof![".{1,20}", Just("x".repeat(MAX_MESSAGE_ID_LEN + 1))];
    (kind, name, prop::option::of(id), json_value(), json_value(), prop::option::of(".{0,30}")).prop_map(
        |(kind, name, id, props, context, ts)| {
            let mut e = serde_json::json!({"type": kind, "event": name, "userId": "u1", "properties": props,
                "context": context});
            if let Some(id) = id {
                e["messageId"] = Value::String(id);
            }
            if let Some(ts) = ts {
                e["timestamp"] = Value::String(ts);
            }
            e
        },
    )
}

#[test]
fn event_validation_never_panics_and_ids_travel_as_headers() {
    let state = AppState::new(common::config("127.0.0.1:1"), Arc::new(MemorySink::default())).expect("state");
    let principal = state.auth.load().by_write_key("demo-write-key").expect("demo source");
    let request = gateway::stages::Request::from_client(&state, "batch", Default::default());
    let admission = gateway::stages::admit::admission(&request, &principal, chrono::Utc::now(), None);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 512, ..ProptestConfig::default() });
    runner
        .run(&prop_oneof![event_strategy(), json_value()], |event| {
            let given = event.get("messageId").and_then(Value::as_str).map(str::to_owned);
            let planned = admission.admit(event);
            if let Verdict::Accept(record) | Verdict::DeadLetter { record, .. } = &planned.verdict {
                let header = record.headers.iter().find(|(k, _)| *k == "event-id").map(|(_, v)| v.to_string());
                prop_assert_eq!(header.as_ref(), planned.message_id.as_ref());
                if let Some(given) = &given {
                    prop_assert_eq!(Some(given), header.as_ref(), "the client's messageId is kept");
                    prop_assert!(given.len() <= MAX_MESSAGE_ID_LEN);
                }
            }
            Ok(())
        })
        .expect("event validation holds its properties");
}
