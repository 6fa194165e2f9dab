//! Configuration: environment overrides, and errors that name the file, the
//! key and the problem.

use std::path::{Path, PathBuf};

use gateway::config::Config;

fn dev() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml")
}

fn with_env(vars: &[(&str, &str)]) -> Result<Config, gateway::config::ConfigError> {
    let env: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Config::load_with_env(&dev(), env.into_iter())
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("eventgw-config-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, text).expect("write");
    path
}

#[test]
fn dev_config_loads_and_environment_overrides_any_key() {
    let config = with_env(&[]).expect("dev config");
    assert_eq!(config.kafka.brokers, "127.0.0.1:9092");
    assert!(config.catalog.dir.ends_with("schemas"), "relative to the config file");
    let config = with_env(&[
        ("EVENTGW__KAFKA__BROKERS", "10.0.0.1:9092,10.0.0.2:9092"),
        ("EVENTGW__KAFKA__LINGER_MS", "35"),
        ("EVENTGW__SOURCES__0__WRITE_KEY", "rotated-key-123"),
        ("EVENTGW__KAFKA__EXTRA__SOCKET.KEEPALIVE.ENABLE", "true"),
        ("UNRELATED", "ignored"),
    ])
    .expect("overridden");
    assert_eq!(config.kafka.brokers, "10.0.0.1:9092,10.0.0.2:9092");
    assert_eq!(config.kafka.linger_ms, 35);
    assert_eq!(config.sources[0].write_key.as_deref(), Some("rotated-key-123"));
    assert_eq!(config.kafka.extra.get("socket.keepalive.enable").map(String::as_str), Some("true"));
}

#[test]
fn a_wrong_type_names_the_key() {
    let err = with_env(&[("EVENTGW__KAFKA__LINGER_MS", "soon")]).expect_err("not a number").to_string();
    assert!(err.contains("dev.toml") && err.contains("kafka.linger_ms"), "{err}");
}

#[test]
fn delivery_timeout_must_be_below_the_request_timeout() {
    let err = with_env(&[("EVENTGW__KAFKA__DELIVERY_TIMEOUT_MS", "10000")]).expect_err("equal").to_string();
    assert!(err.contains("kafka.delivery_timeout_ms") && err.contains("server.request_timeout_ms"), "{err}");
    assert!(with_env(&[("EVENTGW__KAFKA__DELIVERY_TIMEOUT_MS", "9999")]).is_ok(), "one below is fine");
}

#[test]
fn unknown_keys_bad_values_and_syntax_errors_are_refused() {
    let text = std::fs::read_to_string(dev()).expect("read").replace("linger_ms", "linger_msec");
    let path = scratch("unknown", &text);
    let err = Config::load(&path).expect_err("unknown key").to_string();
    assert!(err.contains(&path.display().to_string()) && err.contains("linger_msec"), "{err}");
    let err = with_env(&[("EVENTGW__KAFKA__COMPRESSION", "brotli")]).expect_err("codec").to_string();
    assert!(err.contains("kafka.compression") && err.contains("brotli"), "{err}");
    let err = with_env(&[("EVENTGW__SOURCES__0__WRITE_KEY", "short")]).expect_err("short key").to_string();
    assert!(err.contains("sources.write_key"), "{err}");
    let path = scratch("syntax", "[server\nlisten = 1");
    let err = Config::load(&path).expect_err("syntax").to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    let err = Config::load(Path::new("/nonexistent/eventgw.toml")).expect_err("missing").to_string();
    assert!(err.contains("/nonexistent/eventgw.toml") && err.contains("cannot read"), "{err}");
}

#[test]
fn the_ipv6_quota_prefix_is_1_to_128_bits_and_64_by_default() {
    assert_eq!(with_env(&[]).expect("dev config").quotas.ipv6_prefix_len, 64);
    let at = |len: &str| with_env(&[("EVENTGW__QUOTAS__IPV6_PREFIX_LEN", len)]);
    assert_eq!(at("128").expect("the full address").quotas.ipv6_prefix_len, 128);
    assert_eq!(at("1").expect("the shortest prefix").quotas.ipv6_prefix_len, 1);
    for refused in ["129", "0"] {
        let err = at(refused).expect_err(refused).to_string();
        assert!(err.contains("quotas.ipv6_prefix_len") && err.contains("between 1 and 128"), "{refused}: {err}");
    }
}

#[test]
fn the_unfinished_body_budget_must_hold_one_body_of_the_limit() {
    let at = [("EVENTGW__LIMITS__MAX_BODY_BYTES", "65536"), ("EVENTGW__LIMITS__MAX_UNFINISHED_BODY_BYTES", "65536")];
    assert!(with_env(&at).is_ok(), "exactly one body of the limit");
    let under = [("EVENTGW__LIMITS__MAX_BODY_BYTES", "65536"), ("EVENTGW__LIMITS__MAX_UNFINISHED_BODY_BYTES", "65535")];
    let err = with_env(&under).expect_err("one byte short").to_string();
    assert!(err.contains("limits.max_unfinished_body_bytes") && err.contains("65536"), "{err}");
    let err = with_env(&[("EVENTGW__SERVER__MAX_STREAMS_PER_CONNECTION", "0")]).expect_err("no stream").to_string();
    assert!(err.contains("server.max_streams_per_connection"), "{err}");
    let config = with_env(&[]).expect("dev config");
    assert_eq!((config.server.max_streams_per_connection, config.limits.max_unfinished_body_bytes), (100, 64 << 20));
}

#[test]
fn a_snowplow_app_id_names_one_source_and_is_not_empty() {
    let dev_text = std::fs::read_to_string(dev()).expect("read");
    assert_eq!(with_env(&[]).expect("dev config").sources[0].snowplow_app_ids, ["demo-web"]);
    let shared = dev_text.replace("strict = true", "strict = true\nsnowplow_app_ids = [\"demo-web\"]");
    let err = Config::load(&scratch("app-id-twice", &shared)).expect_err("shared app id").to_string();
    assert!(err.contains("sources.snowplow_app_ids") && err.contains("demo-web"), "{err}");
    let empty = dev_text.replace("snowplow_app_ids = [\"demo-web\"]", "snowplow_app_ids = [\" \"]");
    let err = Config::load(&scratch("app-id-empty", &empty)).expect_err("empty app id").to_string();
    assert!(err.contains("sources.snowplow_app_ids") && err.contains("empty"), "{err}");
}
