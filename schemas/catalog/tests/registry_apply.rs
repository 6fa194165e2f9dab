//! `eventgw-catalog registry plan|apply` against the real Schema Registry
//! (`scripts/registry start`, `REGISTRY_URL`): a scratch catalog is
//! registered, a second apply changes nothing and each subject gets the
//! catalog's compatibility; a catalog change the registry refuses is
//! reported, the change made before it is rolled back and the registry is
//! read back as it was; once the breaking version is withdrawn the rest
//! applies. `--config` finds the catalog and the registry in a gateway
//! configuration. Every subject is unique to the run.

#![allow(missing_docs)]

/// Whether the servers this test needs are there (the gateway's test helper, shared by path).
#[path = "../../../gateway/tests/common/servers.rs"]
mod servers;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

fn registry_url() -> String {
    std::env::var("REGISTRY_URL").unwrap_or_else(|_| "http://127.0.0.1:18481/apis/ccompat/v7".into())
}

const ALPHA_V1: &str = r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
  "required": ["type", "properties"],
  "properties": {"type": {"enum": ["track"]}, "userId": {"type": "string"},
    "properties": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}},
  "examples": [{"type": "track", "event": "Alpha Done", "userId": "u1", "properties": {"n": 1}}]}"#;

const BETA_V1: &str = r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
  "required": ["type"], "properties": {"type": {"enum": ["track"]}, "userId": {"type": "string"}},
  "examples": [{"type": "track", "event": "Beta Done", "userId": "u1"}]}"#;

/// Alpha v2: a new title only; the registry takes it under BACKWARD.
const ALPHA_V2: &str = r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Alpha Done", "type": "object",
  "required": ["type", "properties"],
  "properties": {"type": {"enum": ["track"]}, "userId": {"type": "string"},
    "properties": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}},
  "examples": [{"type": "track", "event": "Alpha Done", "userId": "u1", "properties": {"n": 1}}]}"#;

/// Beta v2: `userId` becomes required, which breaks BACKWARD.
const BETA_V2: &str = r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
  "required": ["type", "userId"], "properties": {"type": {"enum": ["track"]}, "userId": {"type": "string"}},
  "examples": [{"type": "track", "event": "Beta Done", "userId": "u1"}]}"#;

/// A catalog with one framed domain of two events, and a gateway
/// configuration naming it and the registry.
struct Scratch {
    dir: PathBuf,
    domain: String,
    topic: String,
}

impl Scratch {
    fn new() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string()[..10].to_owned();
        let dir = std::env::temp_dir().join(format!("eventgw-catalog-registry-{id}"));
        let (domain, topic) = (format!("r{id}"), format!("registry-test.{id}"));
        let root = dir.join("catalog").join(&domain);
        for (schema, text) in [("alpha_done", ALPHA_V1), ("beta_done", BETA_V1)] {
            std::fs::create_dir_all(root.join(schema)).expect("mkdir");
            std::fs::write(root.join(schema).join("1.json"), text).expect("schema");
        }
        let catalog = format!(
            "domain = \"{domain}\"\ntopic = \"{topic}\"\nowner = \"registry-test\"\npartitions = 1\n\
             wire_format = \"confluent\"\n\
             [events.\"Alpha Done\"]\nschema = \"alpha_done\"\nkey = [\"userId\"]\n\
             [events.\"Beta Done\"]\nschema = \"beta_done\"\nkey = [\"userId\"]\n"
        );
        std::fs::write(root.join("catalog.toml"), catalog).expect("catalog");
        let config = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[catalog]\ndir = \"catalog\"\n[kafka]\nbrokers = \"127.0.0.1:9\"\n\
             dead_letter_topic = \"d\"\nidentity_topic = \"i\"\nunclassified_topic = \"u\"\n\
             [[sources]]\nid = \"t\"\nwrite_key = \"demo-write-key\"\ndomains = [\"{domain}\"]\n\
             [registry]\nurl = \"{}\"\n",
            registry_url()
        );
        std::fs::write(dir.join("gateway.toml"), config).expect("config");
        Self { dir, domain, topic }
    }

    fn subject(&self, schema: &str) -> String {
        format!("{}-{}.{schema}", self.topic, self.domain)
    }

    /// Runs the tool with `args`: whether it succeeded, and what it printed.
    fn run(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_eventgw-catalog")).args(args).output().expect("the tool runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// `registry VERB DIR --registry URL`.
    fn registry(&self, verb: &str) -> (bool, String) {
        let dir = self.dir.join("catalog").display().to_string();
        self.run(&["registry", verb, &dir, "--registry", &registry_url()])
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn get(path: &str) -> Value {
    let response = reqwest::get(format!("{}{path}", registry_url())).await.expect("registry answers");
    response.json().await.unwrap_or(Value::Null)
}

#[tokio::test]
async fn registers_then_changes_nothing_and_rolls_a_refusal_back() {
    if servers::without_registry() {
        return;
    }
    let scratch = Scratch::new();
    let config = scratch.dir.join("gateway.toml").display().to_string();
    let (ok, plan) = scratch.run(&["registry", "plan", "--config", &config]);
    assert!(ok, "{plan}");
    assert!(plan.contains(&format!("Plan for {} (2 subjects declared)", registry_url())), "{plan}");
    assert!(plan.contains(&format!("+ register {} version 1", scratch.subject("beta_done"))), "{plan}");

    let (ok, text) = scratch.registry("apply");
    assert!(ok, "first apply fails:\n{text}");
    assert!(text.contains(&format!("register {} version 1", scratch.subject("alpha_done"))), "{text}");
    let (ok, text) = scratch.registry("apply");
    assert!(
        ok && text.contains("No changes.") && text.contains("Applied 0 change(s)."),
        "second apply changed:\n{text}"
    );
    let config = get(&format!("/config/{}", scratch.subject("beta_done"))).await;
    assert_eq!(config["compatibilityLevel"], "BACKWARD");

    // Alpha v2 is acceptable and comes first; Beta v2 breaks BACKWARD: the
    // apply is refused, Alpha v2 undone, and the registry is as before.
    let root = scratch.dir.join("catalog").join(&scratch.domain);
    std::fs::write(root.join("alpha_done/2.json"), ALPHA_V2).expect("schema");
    std::fs::write(root.join("beta_done/2.json"), BETA_V2).expect("schema");
    let (ok, plan) = scratch.registry("plan");
    assert!(ok, "{plan}");
    assert!(plan.contains(&format!("register {} version 2", scratch.subject("alpha_done"))), "{plan}");
    let (ok, text) = scratch.registry("apply");
    assert!(!ok, "a refused apply must fail:\n{text}");
    let refused = format!("refused by the registry: + register {} version 2", scratch.subject("beta_done"));
    assert!(text.contains(&refused), "{text}");
    assert!(text.contains("Rolled back 1 change(s); verified: the registry is as it was."), "{text}");
    for schema in ["alpha_done", "beta_done"] {
        let versions = get(&format!("/subjects/{}/versions", scratch.subject(schema))).await;
        assert_eq!(versions, json!([1]), "{schema} must hold only version 1 after the refusal");
    }

    // Once the breaking version is withdrawn, the rest applies.
    std::fs::remove_file(root.join("beta_done/2.json")).expect("rm");
    let (ok, text) = scratch.registry("apply");
    assert!(ok && text.contains("Applied 1 change(s)."), "{text}");
}
