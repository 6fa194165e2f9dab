//! Uploads of SDKs that cannot run on this machine (iOS, Android, Flutter,
//! React Native), rebuilt as their sources build them: the configuration
//! fetch they make first, then the upload's path, headers, encoding and
//! body, judged by the rule the SDK applies to the answer. Each builder
//! names the file it mirrors (repository and path); when that SDK changes,
//! read the file again and update the builder.
//!
//! One deliberate difference: these SDKs force `https://`; here the rebuilt
//! requests use the suite's plain-HTTP gateway. TLS itself is proven with a
//! real SDK in the TLS case.
#![allow(dead_code)]

use std::io::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

use crate::harness::WRITE_KEY;

/// One HTTP request as an SDK sends it.
pub struct Request {
    pub method: reqwest::Method,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Sent with `Transfer-Encoding: chunked` and no `Content-Length`, as
    /// `HttpURLConnection.setChunkedStreamingMode(0)` does.
    pub chunked: bool,
}

/// What came back.
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Request {
    pub fn get(url: String) -> Self {
        Self { method: reqwest::Method::GET, url, headers: Vec::new(), body: Vec::new(), chunked: false }
    }

    pub fn post(url: String, body: Vec<u8>) -> Self {
        Self { method: reqwest::Method::POST, url, headers: Vec::new(), body, chunked: false }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn chunked(mut self) -> Self {
        self.chunked = true;
        self
    }

    /// Sends it with no client defaults beyond what HTTP needs (reqwest adds
    /// no Accept or User-Agent of its own).
    pub async fn send(self) -> Answer {
        let mut builder = reqwest::Client::new().request(self.method, &self.url);
        for (name, value) in &self.headers {
            builder = builder.header(*name, value);
        }
        builder = if self.chunked {
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = self.body.chunks(512).map(|c| Ok(c.to_vec())).collect();
            builder.body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        } else {
            builder.body(self.body)
        };
        let response = builder.send().await.unwrap_or_else(|e| panic!("request to {} failed: {e}", self.url));
        let status = response.status().as_u16();
        let bytes = response.bytes().await.expect("answer body");
        Answer { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// `Basic base64(writeKey:)`, as every one of these SDKs builds it.
pub fn basic() -> String {
    format!("Basic {}", BASE64.encode(format!("{WRITE_KEY}:")))
}

pub fn base64(text: &str) -> String {
    BASE64.encode(text)
}

/// An RFC 3339 UTC timestamp with milliseconds, as the Apple and Android
/// SDKs format them (`2026-12-03T05:00:00.123Z`).
pub fn now_millis() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The host part the gateway is reached at (`127.0.0.1:PORT`).
pub fn host_of(url: &str) -> &str {
    url.trim_start_matches("http://").trim_start_matches("https://")
}

/// The three calls every mobile case makes, in the envelope of Segment's
/// mobile SDKs: a track, a screen and an identify for `user`, with the
/// common fields those SDKs add (`anonymousId`, `messageId`, `timestamp`,
/// `context.library`, `integrations`, `_metadata`).
pub fn segment_events(user: &str, library: &str, version: &str, uppercase_ids: bool) -> Vec<Value> {
    let id = || {
        let id = uuid::Uuid::new_v4().to_string();
        if uppercase_ids { id.to_uppercase() } else { id }
    };
    let anonymous = id();
    let context = json!({
        "library": {"name": library, "version": version},
        "app": {"name": "Conformance", "version": "3.2.1", "build": "321", "namespace": "dev.eventgw.conformance"},
        "device": {"manufacturer": "Apple", "model": "iPhone15,2", "type": "ios", "id": id()},
        "os": {"name": "iOS", "version": "17.4"},
        "screen": {"width": 393, "height": 852},
        "network": {"wifi": true, "cellular": false},
        "locale": "en-US",
        "timezone": "Europe/Berlin",
        "instanceId": id(),
    });
    let common = |mut event: Value| {
        let fields = event.as_object_mut().expect("object");
        fields.insert("anonymousId".into(), json!(anonymous));
        fields.insert("userId".into(), json!(user));
        fields.insert("messageId".into(), json!(id()));
        fields.insert("timestamp".into(), json!(now_millis()));
        fields.insert("context".into(), context.clone());
        fields.insert("integrations".into(), json!({}));
        fields.insert("_metadata".into(), json!({"bundled": [], "unbundled": [], "bundledIds": []}));
        event
    };
    vec![
        common(json!({"type": "track", "event": "Link Clicked",
                      "properties": {"href": "https://example.com/pricing", "text": "Pricing"}})),
        common(json!({"type": "screen", "name": "Pricing", "properties": {"variation": "b"}})),
        common(json!({"type": "identify", "traits": {"plan": "pro"}})),
    ]
}

/// The same three calls in the envelope of RudderStack's mobile SDKs:
/// `originalTimestamp` instead of `timestamp`, `channel`, `integrations:
/// {"All": true}`, and a screen's name as its `event` and
/// `properties.name` (RudderStack's screen shape).
pub fn rudder_events(user: &str, library: &str, version: &str) -> (String, Vec<Value>) {
    let anonymous = uuid::Uuid::new_v4().to_string();
    let context = json!({
        "library": {"name": library, "version": version},
        "app": {"name": "Conformance", "version": "3.2.1", "build": "321", "namespace": "dev.eventgw.conformance"},
        "device": {"id": anonymous, "manufacturer": "Google", "model": "Pixel 8", "name": "shiba", "type": "Android"},
        "os": {"name": "Android", "version": "14"},
        "screen": {"density": 420, "width": 1080, "height": 2400},
        "network": {"wifi": true, "carrier": "", "cellular": false, "bluetooth": false},
        "locale": "en-US",
        "timezone": "Europe/Berlin",
        "traits": {"anonymousId": anonymous, "userId": user},
    });
    let common = |mut event: Value| {
        let fields = event.as_object_mut().expect("object");
        fields.insert("messageId".into(), json!(uuid::Uuid::new_v4().to_string()));
        fields.insert("channel".into(), json!("mobile"));
        fields.insert("context".into(), context.clone());
        fields.insert("originalTimestamp".into(), json!(now_millis()));
        fields.insert("anonymousId".into(), json!(anonymous));
        fields.insert("userId".into(), json!(user));
        fields.insert("integrations".into(), json!({"All": true}));
        event
    };
    let events = vec![
        common(json!({"type": "track", "event": "Link Clicked",
                      "properties": {"href": "https://example.com/pricing", "text": "Pricing"}})),
        common(json!({"type": "screen", "event": "Pricing", "properties": {"name": "Pricing"}})),
        common(json!({"type": "identify", "event": "identify", "traits": {"plan": "pro"}})),
    ];
    (anonymous, events)
}

/// Segment's settings document as a mobile SDK fetches it first; returns
/// `integrations["Segment.io"].apiHost`, which analytics-swift, -kotlin,
/// Flutter and React Native then upload to.
pub async fn segment_settings(request: Request, ok: impl Fn(u16) -> bool) -> String {
    let answer = request.send().await;
    assert!(ok(answer.status), "settings answered {}: {}", answer.status, answer.body);
    answer.body["integrations"]["Segment.io"]["apiHost"]
        .as_str()
        .unwrap_or_else(|| panic!("settings carry no integrations[\"Segment.io\"].apiHost: {}", answer.body))
        .to_owned()
}

/// RudderStack's `sourceConfig` as its mobile SDKs fetch it first; they
/// send nothing unless it is `200` with `source.enabled`.
pub async fn rudder_source_config(request: Request) {
    let answer = request.send().await;
    assert_eq!(answer.status, 200, "sourceConfig answered {}: {}", answer.status, answer.body);
    assert_eq!(answer.body["source"]["enabled"], true, "sourceConfig says the source is disabled: {}", answer.body);
}
