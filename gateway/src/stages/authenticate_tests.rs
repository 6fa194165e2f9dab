//! Every credential of a request names one source, or the request is refused
//! with the code that says why.

use actix_web::http::header::{AUTHORIZATION, ORIGIN};
use actix_web::test::TestRequest;

use super::*;
use crate::stages::testing::{basic, state};

fn code(error: ApiError) -> &'static str {
    error.code().as_str()
}

#[actix_web::test]
async fn a_basic_header_names_its_source() {
    let (state, _) = state(|_| {});
    for origin in [Some("https://shop.example"), None] {
        let mut req = TestRequest::default().insert_header((AUTHORIZATION, basic("demo-write-key")));
        if let Some(origin) = origin {
            req = req.insert_header((ORIGIN, origin));
        }
        let req = req.to_http_request();
        let mut request = Request::new(&req, &state, "batch");
        header(&mut request, req.headers()).await.expect("valid key");
        let found = principal(&request, &req, None).expect("principal");
        assert_eq!(&*found.source.id, "demo");
        assert_eq!(found.method.as_str(), "write-key");
        assert_eq!(
            req.extensions().get::<Authenticated>().is_some(),
            origin.is_some(),
            "left for the CORS middleware only when there is an Origin to answer"
        );
    }
}

#[actix_web::test]
async fn bad_headers_are_refused_before_the_body() {
    let (state, _) = state(|_| {});
    for (value, want) in [("Basic %%%", "malformed_credentials"), (basic("nobody").as_str(), "invalid_write_key")] {
        let req = TestRequest::default().insert_header((AUTHORIZATION, value)).to_http_request();
        let mut request = Request::new(&req, &state, "batch");
        assert_eq!(code(header(&mut request, req.headers()).await.expect_err(value)), want);
    }
}

#[actix_web::test]
async fn every_key_must_name_the_same_source() {
    let (state, _) = state(|_| {});
    let req = TestRequest::default().insert_header((AUTHORIZATION, basic("demo-write-key"))).to_http_request();
    let mut request = Request::new(&req, &state, "batch");
    header(&mut request, req.headers()).await.expect("valid key");
    assert_eq!(principal(&request, &req, Some("demo-write-key")).expect("same source").source.id.as_ref(), "demo");
    let other = principal(&request, &req, Some("billing-backend-key")).expect_err("other source");
    assert_eq!(code(other), "conflicting_write_keys");
}

#[actix_web::test]
async fn a_body_key_alone_is_enough_and_none_at_all_is_not() {
    let (state, _) = state(|_| {});
    let req = TestRequest::default().to_http_request();
    let request = Request::new(&req, &state, "batch");
    assert_eq!(principal(&request, &req, Some("demo-write-key")).expect("body key").source.id.as_ref(), "demo");
    assert_eq!(code(principal(&request, &req, None).expect_err("no key")), "missing_credentials");
    assert_eq!(code(principal(&request, &req, Some("nobody")).expect_err("unknown")), "invalid_write_key");
}

#[actix_web::test]
async fn a_server_key_may_not_travel_in_a_url() {
    let (state, _) = state(|_| {});
    let req = TestRequest::with_uri("/v1/pixel.gif?writeKey=billing-backend-key").to_http_request();
    let request = Request::new(&req, &state, "pixel");
    assert_eq!(url_write_key(&req).as_deref(), Some("billing-backend-key"));
    assert_eq!(code(principal(&request, &req, None).expect_err("server key")), "key_not_allowed_in_url");
    let req = TestRequest::with_uri("/v1/pixel.gif?writeKey=demo-write-key").to_http_request();
    let request = Request::new(&req, &state, "pixel");
    assert_eq!(principal(&request, &req, None).expect("browser key").source.id.as_ref(), "demo");
}

#[test]
fn a_url_key_is_read_only_from_a_query_that_names_one() {
    for (uri, want) in [
        ("/v1/batch", None),
        ("/v1/batch?", None),
        ("/v1/p?data=e30", None),
        ("/v1/p?data=e30&writeKey=demo-write-key", Some("demo-write-key")),
    ] {
        let req = TestRequest::with_uri(uri).to_http_request();
        assert_eq!(url_write_key(&req).as_deref(), want, "{uri}");
    }
}
