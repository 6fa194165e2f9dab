//! A gzip bomb (a small body that inflates to 256 MiB) is refused with 413
//! having inflated no more than the cap. Alone in its test binary so the
//! process's peak memory reflects this request only.

mod common;

use std::io::Write;

use common::{TestGateway, answer, brokers, client, config};
use flate2::Compression;
use flate2::write::GzEncoder;

/// Peak resident memory of this process (the gateway runs in it), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).expect("a number of kB") * 1024
}

#[actix_web::test]
async fn a_gzip_bomb_is_refused_without_inflating_past_the_cap() {
    if common::without_kafka() {
        return;
    }
    let cfg = config(&brokers());
    let cap = cfg.limits.max_decompressed_bytes as u64;
    let gw = TestGateway::start(cfg).await;
    let zeros = vec![0u8; 1 << 20];
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    for _ in 0..256 {
        encoder.write_all(&zeros).expect("write");
    }
    let bomb = encoder.finish().expect("finish");
    drop(zeros);
    assert!(bomb.len() < 512 << 10, "the bomb fits the body limit: {} bytes", bomb.len());
    let before = peak_rss();
    let request = client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .header("content-encoding", "gzip")
        .body(bomb);
    let (status, _, body) = answer(request.send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("decompressed_too_large")));
    let growth = peak_rss().saturating_sub(before);
    eprintln!("peak RSS grew by {} KiB for a 256 MiB bomb (cap {} KiB)", growth / 1024, cap / 1024);
    assert!(growth <= cap + (8 << 20), "peak memory grew by {growth} bytes; the cap is {cap}");
    gw.stop().await;
}
