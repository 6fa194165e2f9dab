//! The spool's age bound against the real broker: `spool.max_age_secs` is
//! a bound, not a deletion. With the broker down longer than it, new
//! requests get 503 `kafka_unavailable` naming the bound (a client that
//! retries comes back later; nothing is accepted and dropped), what the
//! spool already holds, however old, is replayed when the broker returns,
//! and the gateway takes events again by itself.
//! Long-running: `cargo test -p eventgw --test spool_max_age -- --ignored`.

mod common;
mod faults_harness;
mod spool_support;

use std::time::Duration;

use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::GatewayProcess;
use faults_harness::reconcile::{read_back, reconcile};
use faults_harness::{run_id, sleep};
use spool_support::{Beacons, Healed, beacons, borrowed, settle, spool_dir, spool_env};

/// The age bound of this scenario, far below the outage.
const MAX_AGE_SECS: u64 = 5;

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn spool_past_max_age_answers_503_then_replays_everything_it_took() {
    let cluster = Cluster::new("spool-age", 1, 19470);
    cluster.start_fresh().await;
    let dir = spool_dir("age");
    let mut env = spool_env(&dir);
    env.push(("EVENTGW__SPOOL__MAX_AGE_SECS".into(), MAX_AGE_SECS.to_string()));
    let gw = GatewayProcess::start_with_env("spool-age", &cluster.brokers(), 1, &borrowed(&env)).await;
    let run = run_id("spoolage");
    let down = Duration::from_secs(20);
    let healed = Healed::default();
    let load = Beacons {
        users: 8,
        run_for: down,
        after_heal: Some((healed.clone(), Duration::from_secs(10))),
        ..Beacons::default()
    };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(3)).await;
        cluster.kill9(1).await;
        sleep(down).await;
        cluster.start_node(1).await;
        healed.now()
    });
    let too_old: usize =
        answers.refused.iter().filter(|(why, _)| why.contains("spool.max_age_secs")).map(|(_, n)| n).sum();
    let other_refusals: Vec<String> =
        answers.refused.keys().filter(|why| !why.contains("spool.max_age_secs")).cloned().collect();
    let title = "Spool: the age bound reached";
    let injected = format!(
        "Spool on with `max_age_secs = {MAX_AGE_SECS}`, 8 beacon users. The broker is down from 3 s for {} s \
         (then restarted); the beacons keep sending until 10 s after it is back. Once the oldest spooled record is \
         {MAX_AGE_SECS} s old, requests are answered 503 (`kafka_unavailable`, naming `spool.max_age_secs`) \
         instead of being spooled; what the spool holds is replayed when the broker returns; then the same load \
         runs 5 s more, with no operator action.",
        down.as_secs()
    );
    let mut r = settle(&cluster.brokers(), &run, title, &injected, answers, healed, &gw).await;
    let after_run = run_id("spoolageafter");
    let after = beacons(
        Beacons { users: 8, run_for: Duration::from_secs(5), ..Beacons::default() },
        after_run.clone(),
        gw.url.clone(),
    )
    .await;
    let recovered = reconcile("after", "", &after.logs, &read_back(&cluster.brokers(), &after_run).await, None);
    r.notes.push(format!(
        "Refused as too old: {too_old} requests. After the drain: {} of {} events answered 200, {} of them missing \
         from Kafka.",
        recovered.acked,
        recovered.events_sent,
        recovered.lost.len()
    ));
    r.write("75-spool-max-age");
    eprintln!("{}", r.markdown());
    r.assert_no_loss();
    assert!(r.acked > 0, "the spool took events before the bound");
    assert!(too_old > 0, "past the age bound requests are refused with 503 naming it");
    assert!(other_refusals.is_empty(), "no refusal for another reason: {other_refusals:?}");
    recovered.assert_no_loss();
    assert_eq!(recovered.acked, recovered.events_sent, "every request is answered 200 again after the drain");
    cluster.stop().await;
}
