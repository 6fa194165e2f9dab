//! The `[spool]` section: off in the dev configuration, on in the
//! production profile, and each bound refused at exactly its limit.

mod common;

use gateway::config::Config;

fn load(file: &str, env: &[(&str, &str)]) -> Result<Config, gateway::config::ConfigError> {
    let path = common::repo_root().join("gateway/config").join(file);
    Config::load_with_env(&path, env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
}

#[test]
fn the_spool_is_off_in_dev_and_on_in_the_production_profile() {
    let dev = load("dev.toml", &[]).expect("dev config");
    assert!(!dev.spool.enabled);
    let production = load("production.toml", &[]).expect("production profile");
    assert!(production.spool.enabled);
    assert_eq!(production.spool.dir, std::path::PathBuf::from("/var/lib/eventgw/spool"));
    assert!(production.spool.ack_timeout_ms < production.server.request_timeout_ms);
}

#[test]
fn a_relative_spool_dir_is_relative_to_the_config_file() {
    let dev = load("dev.toml", &[]).expect("dev config");
    assert!(dev.spool.dir.starts_with(common::repo_root().join("gateway/config")), "{:?}", dev.spool.dir);
}

#[test]
fn ack_timeout_must_leave_part_of_the_request_deadline() {
    let on = ("EVENTGW__SPOOL__ENABLED", "true");
    let at_limit = load("dev.toml", &[on, ("EVENTGW__SPOOL__ACK_TIMEOUT_MS", "10000")]).expect_err("equal is refused");
    assert_eq!(at_limit.key, "spool.ack_timeout_ms");
    assert!(at_limit.to_string().contains("dev.toml"), "{at_limit}");
    load("dev.toml", &[on, ("EVENTGW__SPOOL__ACK_TIMEOUT_MS", "9999")]).expect("one below is fine");
    let zero = load("dev.toml", &[on, ("EVENTGW__SPOOL__ACK_TIMEOUT_MS", "0")]).expect_err("0 is refused");
    assert_eq!(zero.key, "spool.ack_timeout_ms");
}

#[test]
fn bounds_are_checked_only_when_the_spool_is_on() {
    let small = ("EVENTGW__SPOOL__MAX_BYTES", "4095");
    load("dev.toml", &[small]).expect("off: not checked");
    let on = ("EVENTGW__SPOOL__ENABLED", "true");
    let segment = ("EVENTGW__SPOOL__SEGMENT_BYTES", "4096");
    let refused = load("dev.toml", &[on, segment, small]).expect_err("below a segment");
    assert_eq!(refused.key, "spool.max_bytes");
    load("dev.toml", &[on, segment, ("EVENTGW__SPOOL__MAX_BYTES", "4096")]).expect("one segment is enough");
    let tiny = load("dev.toml", &[on, ("EVENTGW__SPOOL__SEGMENT_BYTES", "4095")]).expect_err("tiny segment");
    assert_eq!(tiny.key, "spool.segment_bytes");
    let age = load("dev.toml", &[on, ("EVENTGW__SPOOL__MAX_AGE_SECS", "0")]).expect_err("no age");
    assert_eq!(age.key, "spool.max_age_secs");
    let unknown = load("dev.toml", &[("EVENTGW__SPOOL__FSYNC", "false")]).expect_err("unknown key");
    assert!(unknown.to_string().contains("fsync"), "{unknown}");
}

#[test]
fn a_source_may_opt_out_of_the_spool() {
    let dev = std::fs::read_to_string(common::repo_root().join("gateway/config/dev.toml")).expect("dev config");
    let edited = dev.replacen("strict = true\n", "strict = true\nspool = false\n", 1);
    assert_ne!(edited, dev, "the billing backend source is strict in dev.toml");
    let path = common::repo_root().join("gateway/config").join(format!(".spool-source-{}.toml", std::process::id()));
    std::fs::write(&path, edited).expect("write");
    let config = Config::load_with_env(&path, std::iter::empty());
    let _ = std::fs::remove_file(&path);
    let config = config.expect("`spool = false` is a source key");
    let spool_of = |id: &str| config.sources.iter().find(|s| s.id == id).map(|s| s.spool);
    assert_eq!(spool_of("billing-backend"), Some(false));
    assert_eq!(spool_of("demo"), Some(true), "sources use the spool by default");
}
