//! End-to-end: the client against the real gateway (in-process) and the
//! real Kafka broker. Events must arrive on their catalog topics, keyed by
//! the catalog's key field, with their `messageId` as `event-id`; an invalid
//! event must come back to the caller as invalid and land on the
//! dead-letter topic.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::gateway::{RunningGateway, find, marks, unique};
use eventgw_sdk::catalog::billing::{OrderCompleted, PaymentCaptured, PaymentCapturedV1Method};
use eventgw_sdk::catalog::web::{PageViewed, PageViewedV1};
use eventgw_sdk::{BlockingClient, Client, Credentials, Identity, OutcomeEvent, Report, Status};
use futures::StreamExt as _;
use serde_json::json;

fn client(url: &str) -> eventgw_sdk::ClientBuilder {
    Client::builder(url, Credentials::write_key("demo-write-key")).linger(Duration::from_millis(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_keyed_on_their_topics_and_an_invalid_one_is_reported() {
    if common::servers::without_kafka() {
        return;
    }
    let gateway = tokio::task::spawn_blocking(RunningGateway::start).await.expect("gateway thread");
    let topics = ["billing.payments", "web.tracking", "crm.identities", "eventgw.dead-letter"];
    let since = tokio::task::spawn_blocking(move || marks(&topics)).await.expect("marks");
    let client = client(&gateway.url).build().expect("client");
    let mut outcomes = client.outcomes();
    let user = Identity::user(unique("user"));
    let order_id = unique("order");

    let order = client
        .record(
            &user,
            &OrderCompleted { order_id: order_id.clone(), total: 42.5, currency: "EUR".into(), products: None },
        )
        .await
        .expect("queued");
    let payment = PaymentCaptured {
        order_id: order_id.clone(),
        payment_id: unique("pay"),
        amount: 42.5,
        currency: "EUR".into(),
        method: Some(PaymentCapturedV1Method::Card),
    };
    let payment = client.record(&user, &payment).await.expect("queued");
    let page_v1 = PageViewedV1 {
        url: "https://shop.example/pricing".into(),
        path: "/pricing".into(),
        title: Some("Pricing".into()),
        referrer: None,
    };
    let page = client.record(&user, &page_v1).await.expect("queued");
    let page_latest = PageViewed {
        url: "https://shop.example/s?q=x".into(),
        path: "/s".into(),
        title: None,
        referrer: None,
        search: Some("q=x".into()),
        category: None,
    };
    let page2 = client.record(&user, &page_latest).await.expect("queued");
    let identify = client.identify(&user, &json!({"email": "someone@example.com"})).await.expect("queued");
    // Untyped, and wrong: `amount` must be a number. The gateway dead-letters it.
    let bad = json!({"order_id": order_id, "payment_id": "p", "amount": "lots", "currency": "EUR"});
    let invalid = client.track(&user, "Payment Captured", &bad).await.expect("queued");

    let report = client.shutdown(Duration::from_secs(30)).await;
    assert_eq!(report, Report { sent: 5, invalid: 1, ..Report::default() });

    let mut statuses = HashMap::new();
    while statuses.len() < 6 {
        match outcomes.next().await {
            Some(OutcomeEvent::Outcome(o)) => statuses.insert(o.message_id, o.status),
            other => panic!("expected six outcomes, got {other:?}"),
        };
    }
    assert_eq!(statuses[&order], Status::Accepted { topic: Some("billing.payments".into()) });
    assert_eq!(statuses[&page], Status::Accepted { topic: Some("web.tracking".into()) });
    assert_eq!(statuses[&identify], Status::Accepted { topic: Some("crm.identities".into()) });
    let Status::Invalid { code, topic, .. } = &statuses[&invalid] else { panic!("invalid: {:?}", statuses[&invalid]) };
    assert_eq!((code.as_str(), topic.as_deref()), ("schema_violation", Some("eventgw.dead-letter")));

    let user_id = user.user_id.clone().expect("a user id");
    let ids = |list: &[uuid::Uuid]| list.iter().map(ToString::to_string).collect::<Vec<_>>();
    let billing = find("billing.payments", &since, &ids(&[order, payment]));
    for id in [order, payment] {
        let records = &billing[&id.to_string()];
        assert_eq!(records.len(), 1, "once on billing.payments");
        assert_eq!(records[0].key.as_deref(), Some(order_id.as_str()), "keyed by properties.order_id");
        assert_eq!(records[0].headers["schema-version"], "1");
    }
    let web = find("web.tracking", &since, &ids(&[page, page2]));
    assert_eq!(web[&page.to_string()][0].key.as_deref(), Some(user_id.as_str()), "keyed by userId");
    assert_eq!(web[&page.to_string()][0].headers["schema-version"], "1", "a V1 struct pins version 1");
    assert_eq!(web[&page2.to_string()][0].headers["schema-version"], "2");
    assert_eq!(web[&page2.to_string()][0].value["properties"]["search"], "q=x");
    let identities = find("crm.identities", &since, &ids(&[identify]));
    assert_eq!(identities[&identify.to_string()][0].key.as_deref(), Some(user_id.as_str()));
    let dead = find("eventgw.dead-letter", &since, &ids(&[invalid]));
    assert_eq!(dead[&invalid.to_string()].len(), 1, "the invalid event is dead-lettered, not lost");
    drop(gateway);
}

#[test]
fn the_blocking_client_delivers_from_plain_threads() {
    if common::servers::without_kafka() {
        return;
    }
    let gateway = RunningGateway::start();
    let since = marks(&["web.tracking"]);
    let client = BlockingClient::new(client(&gateway.url).batch_max_events(50)).expect("client");
    let user = Identity::anonymous(unique("anon"));
    let mut ids = Vec::new();
    for i in 0..120 {
        let props = json!({"form_id": format!("form-{i}"), "field_count": i});
        ids.push(client.track(&user, "Form Submitted", &props).expect("queued").to_string());
    }
    client.flush();
    assert_eq!(client.metrics().sent, 120);
    let report = client.shutdown(Duration::from_secs(10));
    assert_eq!(report, Report { sent: 120, ..Report::default() });
    let found = find("web.tracking", &since, &ids);
    assert_eq!(found.len(), 120, "every event is on web.tracking");
    assert!(found.values().all(|records| records.len() == 1), "exactly once");
    let anonymous_id = user.anonymous_id.as_deref();
    assert!(found.values().all(|r| r[0].key.as_deref() == anonymous_id), "keyed by anonymousId");
}
