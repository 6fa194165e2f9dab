//! The compatibility checker on pairs of schemas: each kind of breaking
//! change is caught in the direction it breaks, with a plain explanation,
//! and each non-breaking change passes.

use eventgw_schemas::Compatibility::{Backward, Forward, Full, None as NoCheck};
use eventgw_schemas::compat::{ChangeKind, Direction, Incompatibility, check};
use serde_json::{Value, json};

/// A realistic event schema, to change one thing at a time.
fn base() -> Value {
    json!({
        "type": "object",
        "required": ["type", "properties"],
        "properties": {
            "type": {"enum": ["track"]},
            "properties": {
                "type": "object",
                "required": ["order_id", "amount"],
                "properties": {
                    "order_id": {"type": "string", "minLength": 1, "maxLength": 64},
                    "amount": {"type": "number", "minimum": 0},
                    "coupon": {"type": "string"},
                    "method": {"enum": ["card", "wallet"]},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}}
                }
            }
        }
    })
}

/// `base()` with `change` applied to its `properties.properties` object.
fn changed(change: impl FnOnce(&mut Value)) -> Value {
    let mut schema = base();
    change(&mut schema["properties"]["properties"]);
    schema
}

fn kinds(found: &[Incompatibility]) -> Vec<(Direction, ChangeKind)> {
    found.iter().map(|i| (i.direction, i.kind)).collect()
}

/// Breaks exactly `expected` under full compatibility.
fn assert_breaks(new: &Value, expected: &[(Direction, ChangeKind)]) -> Vec<Incompatibility> {
    let found = check(&base(), new, Full);
    assert_eq!(kinds(&found), expected, "{found:#?}");
    found
}

#[test]
fn identical_and_cosmetic_changes_are_compatible() {
    assert!(check(&base(), &base(), Full).is_empty());
    let new = changed(|p| p["properties"]["coupon"]["description"] = json!("A voucher code; new words."));
    assert!(check(&base(), &new, Full).is_empty());
}

#[test]
fn adding_or_removing_an_optional_field_keeps_full_compatibility() {
    let added = changed(|p| p["properties"]["note"] = json!({"type": "string"}));
    assert!(check(&base(), &added, Full).is_empty(), "optional field added");
    let removed = changed(|p| {
        p["properties"].as_object_mut().expect("object").remove("coupon");
    });
    assert!(check(&base(), &removed, Full).is_empty(), "optional field removed");
}

#[test]
fn new_required_field_breaks_backward_only() {
    let new = changed(|p| {
        p["properties"]["note"] = json!({"type": "string"});
        p["required"] = json!(["order_id", "amount", "note"]);
    });
    let found = assert_breaks(&new, &[(Direction::Backward, ChangeKind::NewRequiredField)]);
    assert_eq!(found[0].path, "properties");
    assert!(found[0].message.contains("new required field `note`"), "{}", found[0].message);
    assert!(found[0].message.contains("refused by consumers on the new one"), "{}", found[0].message);
    assert!(check(&base(), &new, Forward).is_empty());
}

#[test]
fn removing_a_required_field_breaks_forward_only() {
    let new = changed(|p| {
        p["properties"].as_object_mut().expect("object").remove("amount");
        p["required"] = json!(["order_id"]);
    });
    let found = assert_breaks(&new, &[(Direction::Forward, ChangeKind::FieldRemoved)]);
    assert!(found[0].message.contains("required field `amount` removed"), "{}", found[0].message);
    assert!(check(&base(), &new, Backward).is_empty(), "new consumers do not need it");
}

#[test]
fn making_a_field_optional_breaks_forward() {
    let new = changed(|p| p["required"] = json!(["order_id"]));
    assert_breaks(&new, &[(Direction::Forward, ChangeKind::FieldMadeOptional)]);
}

#[test]
fn narrowing_a_type_breaks_backward_and_widening_breaks_forward() {
    let narrowed = changed(|p| p["properties"]["amount"]["type"] = json!("integer"));
    let found = assert_breaks(&narrowed, &[(Direction::Backward, ChangeKind::TypeNarrowed)]);
    assert_eq!(found[0].path, "properties.amount");
    assert!(found[0].message.contains("type narrowed from number to integer"), "{}", found[0].message);
    let widened = changed(|p| p["properties"]["coupon"]["type"] = json!(["string", "null"]));
    let found = assert_breaks(&widened, &[(Direction::Forward, ChangeKind::TypeWidened)]);
    assert!(found[0].message.contains("(null values)"), "{}", found[0].message);
}

#[test]
fn changing_a_type_breaks_both_ways() {
    let new = changed(|p| p["properties"]["order_id"] = json!({"type": "integer"}));
    let found = check(&base(), &new, Full);
    assert!(kinds(&found).contains(&(Direction::Backward, ChangeKind::TypeNarrowed)), "{found:#?}");
    assert!(kinds(&found).contains(&(Direction::Forward, ChangeKind::TypeWidened)), "{found:#?}");
}

#[test]
fn removing_an_enum_value_breaks_backward_and_adding_one_breaks_forward() {
    let removed = changed(|p| p["properties"]["method"]["enum"] = json!(["card"]));
    let found = assert_breaks(&removed, &[(Direction::Backward, ChangeKind::EnumValueRemoved)]);
    assert!(found[0].message.contains("enum value \"wallet\" removed"), "{}", found[0].message);
    let added = changed(|p| p["properties"]["method"]["enum"] = json!(["card", "wallet", "invoice"]));
    assert_breaks(&added, &[(Direction::Forward, ChangeKind::EnumValueAdded)]);
}

#[test]
fn restricting_a_free_value_to_a_list_breaks_backward() {
    let new = changed(|p| p["properties"]["coupon"]["enum"] = json!(["SPRING", "SUMMER"]));
    assert_breaks(&new, &[(Direction::Backward, ChangeKind::ValuesRestricted)]);
    assert!(check(&new, &base(), Backward).is_empty(), "lifting the list is backward compatible");
    assert_eq!(kinds(&check(&new, &base(), Forward)), [(Direction::Forward, ChangeKind::ValuesUnrestricted)]);
}

#[test]
fn closing_an_object_and_removing_from_a_closed_object_break_backward() {
    let closed = changed(|p| p["additionalProperties"] = json!(false));
    let found = assert_breaks(&closed, &[(Direction::Backward, ChangeKind::ExtraFieldsForbidden)]);
    assert!(found[0].message.contains("unknown fields are now forbidden"), "{}", found[0].message);
    let old = closed.clone();
    let mut removed = closed;
    removed["properties"]["properties"]["properties"].as_object_mut().expect("object").remove("coupon");
    let found = check(&old, &removed, Full);
    assert_eq!(kinds(&found), [(Direction::Backward, ChangeKind::FieldRemoved)], "{found:#?}");
    assert!(found[0].message.contains("field `coupon` removed while unknown fields are forbidden"));
    // Adding to a closed object: consumers on the old version refuse the new field.
    let found = check(&removed, &old, Full);
    assert_eq!(kinds(&found), [(Direction::Forward, ChangeKind::FieldAdded)], "{found:#?}");
}

#[test]
fn tightening_a_bound_breaks_backward_and_loosening_breaks_forward() {
    let tighter = changed(|p| p["properties"]["order_id"]["maxLength"] = json!(32));
    let found = assert_breaks(&tighter, &[(Direction::Backward, ChangeKind::ConstraintTightened)]);
    assert!(found[0].message.contains("`maxLength` tightened from 64 to 32"), "{}", found[0].message);
    let raised = changed(|p| p["properties"]["amount"]["minimum"] = json!(1));
    assert_breaks(&raised, &[(Direction::Backward, ChangeKind::ConstraintTightened)]);
    let looser = changed(|p| {
        p["properties"]["amount"].as_object_mut().expect("object").remove("minimum");
    });
    let found = assert_breaks(&looser, &[(Direction::Forward, ChangeKind::ConstraintLoosened)]);
    assert!(found[0].message.contains("`minimum` loosened from 0 to none"), "{}", found[0].message);
}

#[test]
fn a_changed_pattern_or_combinator_cannot_be_proven_safe() {
    let pattern = changed(|p| p["properties"]["coupon"]["pattern"] = json!("^[A-Z]+$"));
    assert_breaks(&pattern, &[(Direction::Backward, ChangeKind::ConstraintChanged)]);
    let mut any_of = base();
    any_of["anyOf"] = json!([{"required": ["userId"]}, {"required": ["anonymousId"]}]);
    assert!(check(&any_of, &any_of, Full).is_empty(), "unchanged combinators are fine");
    let found = check(&base(), &any_of, Backward);
    assert_eq!(kinds(&found), [(Direction::Backward, ChangeKind::Unverifiable)], "{found:#?}");
    assert!(found[0].message.contains("`anyOf` changed"), "{}", found[0].message);
}

#[test]
fn nested_array_items_are_checked_with_their_path() {
    let new = changed(|p| p["properties"]["items"]["items"]["properties"]["sku"]["type"] = json!("integer"));
    let found = check(&base(), &new, Backward);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].path, "properties.items[].sku");
}

#[test]
fn each_mode_checks_its_own_directions() {
    let new = changed(|p| {
        p["properties"]["amount"]["type"] = json!("integer");
        p["properties"]["method"]["enum"] = json!(["card", "wallet", "invoice"]);
    });
    let dirs = |mode| check(&base(), &new, mode).iter().map(|i| i.direction).collect::<Vec<_>>();
    assert_eq!(dirs(Backward), [Direction::Backward]);
    assert_eq!(dirs(Forward), [Direction::Forward]);
    assert_eq!(dirs(Full), [Direction::Backward, Direction::Forward]);
    assert!(dirs(NoCheck).is_empty());
}
