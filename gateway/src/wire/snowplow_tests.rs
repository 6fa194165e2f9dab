//! The Snowplow decoder on the protocol's documented shapes (Snowplow's
//! "Snowplow Tracker Protocol" reference; the browser tracker's
//! `libraries/tracker-core/src/payload.ts` and `core.ts`, the Python
//! tracker's `snowplow_tracker/payload.py` and `emitters.py`, which
//! stringify every field of a POSTed event) and on bad ones.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use super::kinds::any_version;
use super::*;

fn mapping() -> TrackerMapping {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/mappings");
    crate::config::mapping::load_dir(&dir).expect("shipped mappings").of(PROTOCOL).clone()
}

fn post(events: Value) -> Result<Decoded, WireError> {
    let body = json!({"schema": "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4", "data": events});
    decode_post(body.to_string().as_bytes(), &LimitsConfig::default(), &mapping())
}

fn one(event: Value) -> Value {
    post(json!([event])).expect("decodes").batch.events.remove(0)
}

fn unstruct(schema: &str, data: Value) -> String {
    json!({"schema": "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0",
           "data": {"schema": schema, "data": data}})
    .to_string()
}

fn contexts() -> String {
    json!({"schema": "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0",
           "data": [{"schema": "iglu:com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0",
                     "data": {"id": "page-1"}}]})
    .to_string()
}

#[test]
fn a_page_view_is_a_page_call_with_its_context() {
    let event = one(json!({"e": "pv", "eid": "e-1", "aid": "demo-web", "tna": "sp", "p": "web", "tv": "js-4.1.0",
        "url": "https://shop.example/a/b?q=1", "page": "B", "refr": "https://r.example/", "duid": "d-1",
        "uid": "u-1", "dtm": "1700000000000", "stm": "1700000001000", "lang": "de-DE", "tz": "Europe/Berlin",
        "res": "1920x1080", "vp": "1200x800", "sid": "s-1", "vid": "3"}));
    assert_eq!(event["type"], "page");
    assert_eq!(event["messageId"], "e-1");
    assert_eq!((event["userId"].as_str(), event["anonymousId"].as_str()), (Some("u-1"), Some("d-1")));
    assert_eq!(event["name"], "B");
    assert_eq!(
        event["properties"],
        json!({"url": "https://shop.example/a/b?q=1", "title": "B", "referrer": "https://r.example/", "path": "/a/b"})
    );
    assert_eq!(event["timestamp"], "2023-11-14T22:13:20.000Z");
    assert_eq!(event["sentAt"], "2023-11-14T22:13:21.000Z", "stm for the clock-skew correction");
    let context = &event["context"];
    assert_eq!(context["page"]["path"], "/a/b");
    assert_eq!(context["locale"], "de-DE");
    assert_eq!(context["timezone"], "Europe/Berlin");
    assert_eq!(context["screen"], json!({"width": 1920, "height": 1080}));
    assert_eq!(context["library"], json!({"name": "snowplow-js", "version": "4.1.0"}));
    assert_eq!(
        context["snowplow"],
        json!({"e": "pv", "aid": "demo-web", "tna": "sp", "p": "web", "tv": "js-4.1.0", "duid": "d-1",
               "vp": "1200x800", "sid": "s-1", "vid": "3"}),
        "what has no canonical place is kept by its protocol name"
    );
}

#[test]
fn a_true_timestamp_wins_and_is_not_skew_corrected() {
    let event = one(json!({"e": "pv", "dtm": "1000", "ttm": "2000", "stm": "3000"}));
    assert_eq!(event["timestamp"], "1970-01-01T00:00:02.000Z");
    assert!(event.get("sentAt").is_none(), "no correction of a true timestamp");
    let event = one(json!({"e": "pv", "dtm": "soon"}));
    assert_eq!(event["timestamp"], "soon", "left for the pipeline's invalid_timestamp");
}

#[test]
fn structured_events_are_mapped_by_category_and_action_or_named_by_action() {
    let event = one(json!({"e": "se", "se_ca": "form", "se_ac": "submit", "se_la": "newsletter", "se_va": "2"}));
    assert_eq!((event["type"].as_str(), event["event"].as_str()), (Some("track"), Some("Form Submitted")));
    assert_eq!(
        event["properties"],
        json!({"category": "form", "action": "submit", "form_id": "newsletter", "value": 2})
    );
    let event = one(json!({"e": "se", "se_ca": "video", "se_ac": "play", "se_va": "1.5", "se_pr": "hd"}));
    assert_eq!(event["event"], "play", "unmapped: named by its action");
    assert_eq!(event["properties"]["value"], 1.5);
    assert!(event["context"]["snowplow"].get("se_ca").is_none(), "taken into the properties");
}

#[test]
fn self_describing_events_are_mapped_by_schema_with_contexts_plain_or_base64() {
    let data = json!({"targetUrl": "https://shop.example/x", "elementContent": "Buy", "elementId": "b"});
    let link = unstruct("iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1", data);
    let plain = one(json!({"e": "ue", "ue_pr": link, "co": contexts()}));
    let encoded = one(json!({"e": "ue", "ue_px": URL_SAFE_NO_PAD.encode(&link), "cx": STANDARD.encode(contexts())}));
    assert_eq!(plain, encoded, "ue_pr/ue_px and co/cx are the same event");
    assert_eq!(plain["event"], "Link Clicked", "any 1-x-x version of the model");
    assert_eq!(plain["properties"], json!({"href": "https://shop.example/x", "text": "Buy", "elementId": "b"}));
    assert_eq!(
        plain["context"]["snowplow"]["schema"],
        "iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1"
    );
    assert_eq!(plain["context"]["snowplow"]["contexts"][0]["data"]["id"], "page-1");
    let acme = one(
        json!({"e": "ue", "ue_pr": unstruct("iglu:com.acme/checkout_started/jsonschema/1-0-0", json!({"step": 1}))}),
    );
    assert_eq!(acme["event"], "iglu:com.acme/checkout_started/jsonschema/1-0-0", "unmapped: named by its URI");
    assert_eq!(acme["properties"], json!({"step": 1}));
    assert_eq!(any_version("iglu:com.acme/x/jsonschema/12-3-4").as_deref(), Some("iglu:com.acme/x/jsonschema/12-*-*"));
    assert_eq!(any_version("iglu:com.acme/x/jsonschema/x-1-0"), None);
}

#[test]
fn a_mobile_screen_view_is_a_screen_call_named_by_its_data() {
    let screen = unstruct(
        "iglu:com.snowplowanalytics.mobile/screen_view/jsonschema/1-0-0",
        json!({"name": "Cart", "id": "s-1"}),
    );
    let event = one(json!({"e": "ue", "p": "mob", "ue_pr": screen, "uid": "u"}));
    assert_eq!((event["type"].as_str(), event["name"].as_str()), (Some("screen"), Some("Cart")));
    assert!(event.get("event").is_none(), "a screen call names no track event");
}

#[test]
fn transactions_are_orders_with_numbers() {
    let event = one(json!({"e": "tr", "tr_id": "o-1", "tr_tt": "42.50", "tr_cu": "EUR", "tr_tx": "x", "uid": "u"}));
    assert_eq!(event["event"], "Order Completed");
    assert_eq!(event["properties"], json!({"order_id": "o-1", "total": 42.5, "currency": "EUR", "tax": "x"}));
    let item = one(json!({"e": "ti", "ti_id": "o-1", "ti_sk": "sku", "ti_qu": "2", "ti_pr": "1e2"}));
    assert_eq!(item["event"], "transaction_item");
    assert_eq!(item["properties"], json!({"order_id": "o-1", "sku": "sku", "quantity": 2, "price": 100.0}));
    let ping = one(json!({"e": "pp", "url": "https://shop.example/", "pp_mix": "0", "pp_max": "10"}));
    assert_eq!((ping["event"].as_str(), ping["properties"]["max_x"].as_i64()), (Some("page_ping"), Some(10)));
    let odd = one(json!({"e": "zz"}));
    assert_eq!(odd["event"], "zz");
    assert!(one(json!({"aid": "a"})).get("event").is_none(), "no type: no name (missing_event_name)");
}

#[test]
fn app_ids_are_listed_in_order_and_the_batch_carries_no_key() {
    let decoded = post(json!([{"e": "pv", "aid": "a"}, {"e": "pv"}, {"e": "pv", "aid": 5}])).expect("decodes");
    assert_eq!(decoded.app_ids, ["a", "", "5"]);
    assert_eq!((decoded.batch.write_key, decoded.batch.protocol), (None, "snowplow"));
}

#[test]
fn a_get_is_one_event_from_the_query() {
    let query = format!(
        "e=ue&aid=demo-web&eid=g-1&ue_px={}",
        URL_SAFE_NO_PAD.encode(unstruct("iglu:a/b/jsonschema/1-0-0", json!({})))
    );
    let decoded = decode_get(&query, &LimitsConfig::default(), &mapping()).expect("decodes");
    assert_eq!(decoded.app_ids, ["demo-web"]);
    assert_eq!(decoded.batch.events[0]["messageId"], "g-1");
    let limits = LimitsConfig { max_body_bytes: query.len(), ..LimitsConfig::default() };
    assert!(decode_get(&query, &limits, &mapping()).is_ok(), "at the limit");
    let limits = LimitsConfig { max_body_bytes: query.len() - 1, ..LimitsConfig::default() };
    assert_eq!(decode_get(&query, &limits, &mapping()).expect_err("past it").code(), "body_too_large");
    assert_eq!(decode_get("", &LimitsConfig::default(), &mapping()).expect_err("empty").code(), "invalid_body");
}

#[test]
fn the_event_limit_is_exact() {
    let limits = LimitsConfig { max_batch_events: 3, ..LimitsConfig::default() };
    let body = |n: usize| {
        json!({"schema": "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4", "data": vec![json!({"e": "pv"}); n]})
            .to_string()
    };
    assert_eq!(decode_post(body(3).as_bytes(), &limits, &mapping()).expect("at the limit").batch.events.len(), 3);
    assert_eq!(decode_post(body(4).as_bytes(), &limits, &mapping()).expect_err("past").code(), "batch_too_large");
}

#[test]
fn a_body_that_cannot_be_read_is_refused_with_its_code() {
    let raw = |text: &str| decode_post(text.as_bytes(), &LimitsConfig::default(), &mapping());
    assert_eq!(raw("{\"schema\": ").expect_err("truncated").code(), "malformed_json");
    assert_eq!(raw("[]").expect_err("array").code(), "invalid_body");
    let wrong_schema = json!({"schema": "iglu:com.acme/x/jsonschema/1-0-0", "data": [{}]}).to_string();
    assert!(raw(&wrong_schema).expect_err("schema").to_string().contains("payload_data"));
    let no_schema = json!({"data": [{}]}).to_string();
    assert_eq!(raw(&no_schema).expect_err("no schema").code(), "invalid_body");
    for (data, says) in [(json!({"a": 1}), "must be an array"), (json!([]), "empty")] {
        let error = post(data.clone()).expect_err("refused");
        assert_eq!(error.code(), "invalid_body", "{data}");
        assert!(error.to_string().contains(says), "{data}: {error}");
    }
}

#[test]
fn an_unreadable_event_is_kept_as_sent_with_its_reason_beside_the_others() {
    let contexts_not_array =
        "{\"schema\": \"iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0\", \"data\": {}}";
    let cases = [
        (json!(5), "`data[1]` must be an object"),
        (json!({"e": "pv", "url": {"x": 1}}), "`data[1].url` must be a string"),
        (json!({"e": "ue", "ue_px": "%%%"}), "`data[1].ue_px` is not base64"),
        (json!({"e": "ue", "ue_px": URL_SAFE_NO_PAD.encode("{\"schema\":")}), "`data[1].ue_px` is not JSON"),
        (json!({"e": "ue"}), "without `ue_pr`"),
        (json!({"e": "ue", "ue_pr": "{\"schema\": \"iglu:x/y/jsonschema/1-0-0\", \"data\": {}}"}), "unstruct_event"),
        (json!({"e": "ue", "ue_pr": "{\"schema\": "}), "`data[1].ue_pr` is not JSON"),
        (json!({"e": "ue", "ue_pr": unstruct("not-iglu", json!({}))}), "data.schema"),
        (json!({"e": "pv", "cx": "eyJ"}), "`data[1].cx` is not base64"),
        (json!({"e": "pv", "cx": "e!J"}), "`data[1].cx` is not base64"),
        (json!({"e": "pv", "cx": STANDARD.encode("{\"schema\":")}), "`data[1].cx` is not JSON"),
        (json!({"e": "pv", "co": "{"}), "`data[1].co` is not JSON"),
        (json!({"e": "pv", "co": contexts_not_array}), "`data[1].co/cx.data`"),
    ];
    for (bad, says) in cases {
        let decoded = post(json!([{"e": "pv", "eid": "a"}, bad.clone(), {"e": "pv", "eid": "c"}])).expect("taken");
        let batch = decoded.batch;
        assert_eq!(batch.undecodable.len(), 1, "{bad}");
        assert_eq!(batch.undecodable[0].index, 1, "{bad}");
        assert!(batch.undecodable[0].reason.contains(says), "{bad}: {}", batch.undecodable[0].reason);
        assert_eq!(batch.events[1], bad, "kept as sent");
        assert_eq!(
            (batch.events[0]["messageId"].as_str(), batch.events[2]["messageId"].as_str()),
            (Some("a"), Some("c"))
        );
    }
}

#[test]
fn an_unreadable_event_names_its_source_only_by_a_readable_app_id() {
    let decoded = post(json!([{"e": "pv", "aid": "a"}, {"aid": "b", "cx": "eyJ"}, 5, {"e": "ue"}])).expect("taken");
    assert_eq!(decoded.app_ids, ["a", "b"], "an unreadable event without an app id names none");
    let indexes: Vec<usize> = decoded.batch.undecodable.iter().map(|u| u.index).collect();
    assert_eq!(indexes, [1, 2, 3]);
}

#[test]
fn an_unreadable_get_is_kept_as_its_fields() {
    let query = "e=pv&aid=demo-web&cx=eyJ&e=se";
    let decoded = decode_get(query, &LimitsConfig::default(), &mapping()).expect("taken");
    assert_eq!(decoded.app_ids, ["demo-web"]);
    assert_eq!(
        decoded.batch.events,
        [json!({"e": "pv", "aid": "demo-web", "cx": "eyJ"})],
        "the first of a repeated field"
    );
    let reason = &decoded.batch.undecodable[0].reason;
    assert!(reason.contains("`data[0].cx` is not base64"), "{reason}");
}

#[test]
fn a_limit_broken_inside_a_field_still_refuses_the_request() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let error = post(json!([{"e": "pv"}, {"e": "pv", "co": deep}])).expect_err("refused");
    assert_eq!(error.code(), "json_too_deep");
}

mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_bytes_decode_or_refuse_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_post(&bytes, &LimitsConfig::default(), &mapping());
            let _ = decode_get(&String::from_utf8_lossy(&bytes), &LimitsConfig::default(), &mapping());
        }

        #[test]
        fn any_string_fields_decode_or_name_their_field(
            fields in prop::collection::btree_map("e|eid|aid|dtm|stm|ttm|ue_px|ue_pr|cx|co|se_va|tr_tt|res|url", ".{0,24}", 0..8),
            kind in "pv|pp|se|ue|tr|ti|zz",
        ) {
            let mut event: serde_json::Map<String, Value> = fields.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            event.insert("e".into(), Value::String(kind));
            match post(json!([event])) {
                Ok(decoded) => {
                    prop_assert_eq!(decoded.batch.events.len(), 1);
                    for unreadable in &decoded.batch.undecodable {
                        prop_assert!(unreadable.reason.contains("data[0]"), "{}", unreadable.reason);
                    }
                }
                Err(error) => prop_assert!(
                    error.to_string().contains("data[0]") || ["json_too_deep", "string_too_long"].contains(&error.code().as_str()),
                    "{}", error
                ),
            }
        }
    }
}
