//! The `gateway` binary's command line (clap): every subcommand scripts
//! and the docs use, `--help`, and usage errors; no broker needed.

use std::process::{Command, Output};

fn gateway(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
    command.args(args).env_remove("EVENTGW_CONFIG").env("RUST_LOG", "warn");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the gateway binary runs")
}

fn dev_config() -> String {
    format!("{}/config/dev.toml", env!("CARGO_MANIFEST_DIR"))
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn help_lists_every_command_and_exits_zero() {
    let out = gateway(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for command in ["serve", "topics", "check-config", "spool", "--config", "EVENTGW__SECTION__KEY"] {
        assert!(text(&out).contains(command), "`{command}` in: {}", text(&out));
    }
    let out = gateway(&["spool", "--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    for command in ["status", "inspect", "replay"] {
        assert!(text(&out).contains(command), "`{command}` in: {}", text(&out));
    }
    assert!(text(&gateway(&["spool", "inspect", "--help"], &[])).contains("--records"));
}

#[test]
fn usage_errors_and_a_missing_configuration_fail() {
    let out = gateway(&["bogus"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!gateway(&["spool"], &[]).status.success(), "spool needs a command");
    let out = gateway(&["check-config"], &[]);
    assert!(!out.status.success());
    assert!(text(&out).contains("no configuration: pass --config FILE or set EVENTGW_CONFIG"), "{}", text(&out));
}

#[test]
fn check_config_and_spool_status_take_the_config_before_or_after_the_command() {
    let config = dev_config();
    let out = gateway(&["check-config", "--config", &config], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("configuration and catalog are valid"), "{}", text(&out));
    let out = gateway(&["-c", &config, "check-config"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let out = gateway(&["check-config"], &[("EVENTGW_CONFIG", &config)]);
    assert!(out.status.success(), "EVENTGW_CONFIG names the file: {}", text(&out));

    let dir = std::env::temp_dir().join(format!("eventgw-cli-spool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("spool dir");
    let spool = [("EVENTGW__SPOOL__DIR", dir.to_str().expect("utf-8 path"))];
    let out = gateway(&["spool", "status", "--config", &config], &spool);
    assert!(out.status.success(), "{}", text(&out));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status is JSON");
    assert_eq!(status["records"], 0);
    let out = gateway(&["--config", &config, "spool", "inspect", "--records"], &spool);
    assert!(out.status.success(), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dead_letter_refuses_bad_ranges_and_unknown_sources_with_their_codes() {
    let config = dev_config();
    for (args, code) in [
        (vec!["--from", "1h", "--to", "2h"], "empty_range"),
        (vec!["--from", "1h", "--to", "1h"], "empty_range"),
        (vec!["--from", "yesterday"], "invalid_time"),
        (vec!["--source", "no-such-source"], "unknown_source"),
    ] {
        for command in ["inspect", "replay"] {
            let mut all = vec!["--config", config.as_str(), "dead-letter", command];
            all.extend(&args);
            // A broker nobody runs: each refusal comes before Kafka is asked.
            let out = gateway(&all, &[("EVENTGW__KAFKA__BROKERS", "127.0.0.1:1")]);
            assert_eq!(out.status.code(), Some(1), "{all:?}: {}", text(&out));
            assert!(text(&out).contains(code), "{all:?}: `{code}` in {}", text(&out));
        }
    }
    let help = text(&gateway(&["dead-letter", "replay", "--help"], &[]));
    for flag in ["--from", "--to", "--source", "--event", "--reason", "--dry-run"] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
}
