//! Capacity and quotas refuse with the codes and statuses clients act on.

use actix_web::test::TestRequest;

use super::*;
use crate::quota::Rate;
use crate::stages::authenticate;
use crate::stages::testing::state;

#[actix_web::test]
async fn a_full_producer_queue_refuses_before_any_work() {
    let (state, sink) = state(|_| {});
    let threshold = i64::try_from(state.config.kafka.backpressure_threshold()).expect("fits");
    sink.set_queue_depth(threshold - 1);
    assert!(capacity(&state).is_ok(), "one below the mark");
    sink.set_queue_depth(threshold);
    assert_eq!(capacity(&state).expect_err("at the mark").code(), "backpressure");
}

#[actix_web::test]
async fn events_are_charged_all_or_nothing() {
    let (state, _) = state(|c| c.quotas.source = Some(Rate { per_second: 0.001, burst: 3 }));
    let req = TestRequest::default().to_http_request();
    let request = Request::new(&req, &state, "batch");
    let principal = authenticate::principal(&request, &req, Some("demo-write-key")).expect("principal");
    assert_eq!(events(&request, &principal, 4).expect_err("above the burst").code(), "batch_exceeds_quota");
    events(&request, &principal, 2).expect("within the burst");
    assert_eq!(events(&request, &principal, 2).expect_err("one short").code(), "quota_exceeded");
    events(&request, &principal, 1).expect("the refused batch spent nothing");
}

#[actix_web::test]
async fn requests_are_charged_per_address() {
    let (state, _) = state(|c| c.quotas.ip = Some(Rate { per_second: 0.001, burst: 1 }));
    let req = TestRequest::default().peer_addr("192.0.2.7:5000".parse().expect("addr")).to_http_request();
    let request_ = Request::new(&req, &state, "batch");
    request(&request_).expect("first");
    assert_eq!(request(&request_).expect_err("second").code(), "quota_exceeded");
}
