//! The conformance suite (issue 12): other vendors' SDKs, unchanged, deliver
//! through the gateway into their domain topics.
//!
//! Each case runs one SDK against a real gateway and a real Kafka and proves
//! two things: the SDK itself reports success (callback, return value, flush
//! result, nothing left queued), and every event it sent is read back from
//! its domain topic with the right key, none dead-lettered. SDKs that run on
//! this machine (Node, Python, Go, JVM, browser) are driven by small programs
//! under `gateway/tests/conformance/`, installed at pinned versions by
//! `scripts/test-conformance`, which runs this target (its cases are
//! `#[ignore]`d so a plain `cargo test` without the SDKs stays green). SDKs
//! that cannot run here (iOS, Android, Flutter, React Native) are in
//! `conformance/mobile.rs`: their upload rebuilt exactly as their source
//! builds it, each citing the file it mirrors.

mod common;
#[path = "conformance/harness.rs"]
mod harness;

use harness::{Driver, IDENTIFY, LINK_CLICKED, PAGE_VIEWED, assert_delivered, deps_dir, driver_env, start_gateway, suite_dir, user};

/// The three calls every server SDK driver makes: a track, a page and an identify.
const SERVER_CALLS: [harness::Expect; 3] = [LINK_CLICKED, PAGE_VIEWED, IDENTIFY];

fn node(script: &str) -> Driver {
    Driver::new("node", suite_dir().join("node")).arg(script)
}

fn python(sdk: &str) -> Driver {
    Driver::new(deps_dir().join("venv/bin/python"), suite_dir().join("python")).arg("driver.py").arg(sdk)
}

/// The built Go driver (`scripts/test-conformance` builds it from `conformance/go`).
fn go(sdk: &str) -> Driver {
    Driver::new(deps_dir().join("bin/conformance-go"), suite_dir().join("go")).arg(sdk)
}

/// The JVM driver, compiled by Maven into `conformance/jvm/target`, with the
/// classpath Maven resolved.
fn jvm(sdk: &str) -> Driver {
    let dir = suite_dir().join("jvm");
    let deps = std::fs::read_to_string(dir.join("target/classpath.txt")).unwrap_or_default();
    Driver::new("java", &dir).arg("-cp").arg(format!("target/classes:{}", deps.trim())).arg("conformance.Main").arg(sdk)
}

async fn server_case(case: &str, driver: Driver) {
    let gateway = start_gateway(&[]).await;
    let user = user(case);
    let report = driver_env(driver, &gateway.url, &user).run().await;
    eprintln!("{case}: {report}");
    assert_delivered(case, &user, &SERVER_CALLS, 0);
    gateway.stop().await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_node() {
    server_case("segment-node", node("segment-node.mjs")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_node() {
    server_case("rudder-node", node("rudder-node.mjs")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_python() {
    server_case("segment-python", python("segment")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_python() {
    server_case("rudder-python", python("rudder")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_go() {
    server_case("segment-go", go("segment")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_go() {
    server_case("rudder-go", go("rudder")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_java() {
    server_case("segment-java", jvm("segment-java")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_java() {
    server_case("rudder-java", jvm("rudder-java")).await;
}

/// A free port for a browser case's page, so its origin (`http://localhost:PORT`)
/// can be allowed before the gateway starts.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A browser SDK on a page of another origin: `http://localhost:PORT`
/// against a gateway on `http://127.0.0.1:...`.
async fn browser_case(case: &str, sdk: &str) {
    let port = free_port();
    let gateway = start_gateway(&[format!("http://localhost:{port}")]).await;
    let user = user(case);
    let driver = node("browser.mjs").arg(sdk).env("PAGE_PORT", port.to_string());
    let report = driver_env(driver, &gateway.url, &user).run().await;
    eprintln!("{case}: {report}");
    assert_delivered(case, &user, &SERVER_CALLS, 0);
    gateway.stop().await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_browser() {
    browser_case("segment-browser", "segment").await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_browser() {
    browser_case("rudder-browser", "rudder").await;
}
