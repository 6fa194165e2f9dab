//! [`EventSplice`] against the maps it stands for: any sequence of
//! inserts and removals on any client event and context writes the same
//! bytes as the same operations on `serde_json` maps, and answers
//! `contains` and `text` alike along the way.

use proptest::prelude::*;
use serde_json::json;

use super::*;

const KEYS: [&str; 7] = ["ip", "userAgent", "agent", "bot", "geo", "ipHash", "locale"];

#[derive(Debug, Clone)]
enum Op {
    Set(usize, u8),
    Remove(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![(0..KEYS.len(), any::<u8>()).prop_map(|(k, v)| Op::Set(k, v)), (0..KEYS.len()).prop_map(Op::Remove)]
}

/// A client context: some of the keys (and others) in any order.
fn context() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec((0..KEYS.len() + 2, any::<u8>()), 0..8).prop_map(|entries| {
        let mut map = Map::new();
        for (key, value) in entries {
            let key = KEYS.get(key).map_or_else(|| format!("other{key}"), |k| (*k).to_owned());
            map.insert(key, json!(value));
        }
        map
    })
}

proptest! {
    // Each operation on the event's own entries or on its `context`'s, as
    // the pipeline does both (`receivedAt` and the timestamps at the top).
    #[test]
    fn a_splice_writes_what_the_map_would(
        client_top in context(),
        client in context(),
        ops in proptest::collection::vec((op(), any::<bool>()), 0..14),
    ) {
        let (mut map, mut spliced) = (client.clone(), client);
        let mut top = client_top;
        top.insert("context".into(), Value::Null);
        top.insert("after".into(), json!(1));
        let (mut map_top, mut spliced_top) = (top.clone(), top);
        let mut splice = EventSplice::default();
        for (op, at_top) in ops {
            // The pipeline stays within the splice's room (six keys, three
            // of them replaceable); random sequences may not.
            let room = if at_top { &splice.top } else { &splice.context };
            if room.added.len == MAX_ADDED || room.replaced.len == MAX_REPLACED {
                continue;
            }
            match (op, at_top) {
                (Op::Set(key, value), false) => {
                    map.insert(KEYS[key].to_owned(), Value::String(value.to_string()));
                    splice.context.set(&spliced, KEYS[key], Fragment::Text(Cow::Owned(value.to_string())));
                }
                (Op::Remove(key), false) => {
                    map.remove(KEYS[key]);
                    splice.context.remove(&mut spliced, KEYS[key]);
                }
                (Op::Set(key, value), true) => {
                    map_top.insert(KEYS[key].to_owned(), json!(format!("top {value}")));
                    splice.top.set(&spliced_top, KEYS[key], Fragment::Text(Cow::Owned(format!("top {value}"))));
                }
                (Op::Remove(key), true) => {
                    map_top.remove(KEYS[key]);
                    splice.top.remove(&mut spliced_top, KEYS[key]);
                }
            }
            for key in KEYS {
                prop_assert_eq!(splice.context.contains(&spliced, key), map.contains_key(key), "contains {}", key);
                prop_assert_eq!(splice.context.text(&spliced, key), map.get(key).and_then(Value::as_str), "text {}", key);
                prop_assert_eq!(splice.top.contains(&spliced_top, key), map_top.contains_key(key), "top {}", key);
            }
        }
        let with_context = |mut top: Map<String, Value>, context: Map<String, Value>| {
            if let Some(slot) = top.get_mut("context") {
                *slot = Value::Object(context);
            }
            top
        };
        let expected = Value::Object(with_context(map_top.clone(), map.clone())).to_string();
        let written = splice.write(&with_context(spliced_top.clone(), spliced.clone()), 0);
        prop_assert_eq!(String::from_utf8_lossy(&written), expected.as_str());
        splice.context.materialize(&mut spliced);
        prop_assert!(splice.context.is_empty());
        prop_assert_eq!(Value::Object(spliced).to_string(), Value::Object(map).to_string());
        splice.top.materialize(&mut spliced_top);
        prop_assert!(splice.top.is_empty());
        prop_assert_eq!(Value::Object(spliced_top).to_string(), Value::Object(map_top).to_string());
    }
}

#[test]
fn fragments_are_written_as_their_json() {
    let shared = shared_json(&json!({"city": "Lyon", "asn": 64501}));
    let mut context = Map::new();
    context.insert("ip".into(), json!("203.0.113.9"));
    let mut splice = EventSplice::default();
    splice.context.set(&context, "geo", Fragment::Shared(shared));
    splice.context.set(&context, "userAgent", Fragment::Text(Cow::Borrowed("a \"quoted\" agent")));
    splice.context.remove(&mut context, "ip");
    let mut event = Map::new();
    event.insert("context".into(), Value::Object(context));
    let written = splice.write(&event, 0);
    assert_eq!(
        String::from_utf8_lossy(&written),
        r#"{"context":{"userAgent":"a \"quoted\" agent","geo":{"city":"Lyon","asn":64501}}}"#
    );
}
