//! The blocking facade, for programs without an async runtime.
//!
//! ```sh
//! cargo run -p eventgw-sdk --example blocking
//! ```

use std::time::Duration;

use eventgw_sdk::{BlockingClient, Client, Credentials, Identity};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("EVENTGW_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let client = BlockingClient::new(Client::builder(url, Credentials::write_key("demo-write-key")))?;
    let visitor = Identity::anonymous("anon-42");
    for i in 0..10 {
        client.track(&visitor, "Form Submitted", &json!({"form_id": "newsletter", "field_count": i}))?;
    }
    client.flush();
    println!("{:?}", client.metrics());
    println!("{:?}", client.shutdown(Duration::from_secs(5)));
    Ok(())
}
