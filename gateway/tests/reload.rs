//! SIGHUP reloads sources and keys in the running binary without a restart;
//! a broken file is refused and the running configuration kept.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{answer, client};
use serde_json::json;

struct Running {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_config(path: &Path, port: u16, extra_source: &str) {
    let dev = common::repo_root().join("gateway/config/dev.toml");
    let catalog = common::repo_root().join("schemas");
    let text = std::fs::read_to_string(dev)
        .expect("dev config")
        .replace("listen = \"127.0.0.1:8080\"", &format!("listen = \"127.0.0.1:{port}\""))
        .replace("dir = \"../../schemas\"", &format!("dir = \"{}\"", catalog.display()));
    std::fs::write(path, format!("{text}\n{extra_source}")).expect("write config");
}

fn hup(child: &Child) {
    let status = Command::new("kill").args(["-HUP", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
}

async fn start(config: &Path, port: u16, log: PathBuf) -> Running {
    let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["serve", "--config"])
        .arg(config)
        .env("EVENTGW__KAFKA__BROKERS", common::brokers())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("gateway starts");
    // Owned before waiting, so a failed start still kills the process.
    let running = Running { child, url: format!("http://127.0.0.1:{port}"), log };
    let deadline = Instant::now() + Duration::from_secs(30);
    while client().get(format!("{}/healthz", running.url)).send().await.is_err() {
        let log = std::fs::read_to_string(&running.log).unwrap_or_default();
        assert!(Instant::now() < deadline, "gateway did not start: {log}");
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    running
}

async fn status_with(gw: &Running, key: &str) -> u16 {
    let body = json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": "r",
        "properties": {"href": "https://shop.example/"}}]});
    let request = client().post(format!("{}/v1/batch", gw.url)).basic_auth(key, Some("")).json(&body);
    answer(request.send().await.expect("sent")).await.0
}

async fn eventually(gw: &Running, key: &str, want: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if status_with(gw, key).await == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never {want} with {key}: {}",
            std::fs::read_to_string(&gw.log).unwrap_or_default()
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn sighup_swaps_in_new_keys_and_refuses_a_broken_file() {
    if common::without_kafka() {
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let dir = std::env::temp_dir().join(format!("eventgw-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("gateway.toml");
    write_config(&config, port, "");
    let gw = start(&config, port, dir.join("gateway.log")).await;
    assert_eq!(status_with(&gw, "demo-write-key").await, 200);
    assert_eq!(status_with(&gw, "new-partner-key").await, 401);

    let partner = "[[sources]]\nid = \"partner\"\nwrite_key = \"new-partner-key\"\ndomains = [\"web\"]\n";
    write_config(&config, port, partner);
    hup(&gw.child);
    eventually(&gw, "new-partner-key", 200).await;
    assert_eq!(status_with(&gw, "demo-write-key").await, 200, "existing sources keep working");

    std::fs::write(&config, "[server\nthis is not TOML").expect("break the file");
    hup(&gw.child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&gw.log).unwrap_or_default().contains("Configuration reload refused") {
        assert!(Instant::now() < deadline, "no log line for the refused reload");
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status_with(&gw, "new-partner-key").await, 200, "the running configuration was kept");
    let log = std::fs::read_to_string(&gw.log).unwrap_or_default();
    assert!(log.contains("gateway.toml"), "the log line names the file: {log}");
}
