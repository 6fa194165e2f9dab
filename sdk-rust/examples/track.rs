//! Sends a few events to a running gateway (`scripts/dev`) and prints each
//! event's outcome and the shutdown report.
//!
//! ```sh
//! cargo run -p eventgw-sdk --example track            # http://127.0.0.1:8080
//! EVENTGW_URL=http://gateway:8080 cargo run -p eventgw-sdk --example track
//! ```

use std::time::Duration;

use eventgw_sdk::catalog::billing::{PaymentCaptured, PaymentCapturedV1Method};
use eventgw_sdk::catalog::web::PageViewedV1;
use eventgw_sdk::{Client, Credentials, Identity, OverflowPolicy};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("EVENTGW_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let client = Client::builder(url, Credentials::write_key("demo-write-key"))
        .linger(Duration::from_millis(200))
        // Back-pressure rather than loss: wait up to 50 ms for room.
        .overflow(OverflowPolicy::Wait(Duration::from_millis(50)))
        .on_outcome(|outcome| println!("{} {:?}", outcome.message_id, outcome.status))
        .build()?;
    let user = Identity::user("user-1");

    // Typed, from the catalog: a wrong property type would not compile.
    client
        .record(
            &user,
            &PaymentCaptured {
                order_id: "order-1001".into(),
                payment_id: "pay-555".into(),
                amount: 99.5,
                currency: "EUR".into(),
                method: Some(PaymentCapturedV1Method::Card),
            },
        )
        .await?;
    // Pinned to version 1 of `Page Viewed`.
    let page = PageViewedV1 { url: "https://shop.example/".into(), path: "/".into(), title: None, referrer: None };
    client.record(&user, &page).await?;
    client.identify(&user, &json!({"email": "user-1@example.com", "plan": "pro"})).await?;
    // Untyped and wrong (amount is not a number): comes back as invalid.
    client.track(&user, "Payment Captured", &json!({"order_id": "o", "payment_id": "p", "amount": "x"})).await?;

    let report = client.shutdown(Duration::from_secs(10)).await;
    println!("{report:?}");
    Ok(())
}
