//! Real user agents: our SDKs, the server SDKs and current browsers are not
//! bots; common crawlers and headless browsers are. Then, end to end, a
//! crawler's event is labelled and routed to the source's bot topic, and a
//! browser's client hints refine its device.

mod common;
#[path = "support/edge.rs"]
mod edge;
#[path = "support/mmdb.rs"]
mod mmdb;

use common::{TestGateway, brokers, find, unique};
use gateway::enrichment::BotPolicy;
use gateway::enrichment::device::profile;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use serde_json::json;

/// Not bots, each with where its string comes from.
const PEOPLE_AND_SDKS: [(&str, &str); 22] = [
    ("eventgw-sdk-rust/0.1.0", "sdk-rust/src/transport.rs: concat!(\"eventgw-sdk-rust/\", CARGO_PKG_VERSION)"),
    ("node", "sdk-js under Node: undici's fetch default"),
    ("analytics-node-next/latest", "segmentio/analytics-next packages/node publisher.ts"),
    ("analytics-node/6.2.0", "segmentio/analytics-node index.js `analytics-node/${version}`"),
    ("analytics-python/2.3.3", "segmentio/analytics-python request.py; rudder-sdk-python keeps it"),
    ("analytics-java/3.5.1", "segmentio/analytics-java Analytics.Builder DEFAULT_USER_AGENT; rudder-sdk-java keeps it"),
    ("analytics-go (version: 3.3.0)", "segmentio/analytics-go analytics.go; rudder-sdk-go keeps it"),
    ("okhttp/4.12.0", "OkHttp's default, under Android and Java SDKs"),
    ("python-requests/2.32.3", "requests' default"),
    ("Go-http-client/1.1", "net/http's default"),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
        "Chrome 131, Windows",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
        "Edge 131",
    ),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox 133, macOS"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox 133, Linux"),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
        "Safari 18, macOS",
    ),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
        "Safari, iPhone",
    ),
    (
        "Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
        "Safari, iPad",
    ),
    (
        "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
        "Chrome, Android (reduced UA)",
    ),
    (
        "Mozilla/5.0 (Linux; Android 14; SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
        "Samsung Internet",
    ),
    ("Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0", "Firefox, Android"),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
        "Chrome, iOS",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/116.0.0.0",
        "Opera 116",
    ),
];

/// Bots, with the category they must get.
const BOTS: [(&str, &str); 14] = [
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "crawler"),
    (
        "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "crawler",
    ),
    ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "crawler"),
    (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36",
        "crawler",
    ),
    ("Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", "crawler"),
    ("Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)", "crawler"),
    ("DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", "crawler"),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
        "crawler",
    ),
    (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
        "crawler",
    ),
    ("Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", "crawler"),
    ("facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "crawler"),
    ("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "crawler"),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36",
        "headless",
    ),
    (
        "Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1",
        "headless",
    ),
];

#[test]
fn our_sdks_server_sdks_and_browsers_are_not_bots_and_crawlers_are() {
    let parser = woothee::parser::Parser::new();
    for (agent, origin) in PEOPLE_AND_SDKS {
        let found = profile(&parser, agent, None);
        assert!(found.bot.is_none(), "{origin} flagged as {:?}: {agent}", found.bot);
    }
    for (agent, category) in BOTS {
        let found = profile(&parser, agent, None);
        assert_eq!(found.bot.as_ref().map(|b| b.category), Some(category), "{agent}");
        assert_eq!(found.agent["deviceClass"], "bot");
    }
    let iphone = profile(&parser, PEOPLE_AND_SDKS[15].0, None);
    assert_eq!((iphone.agent["os"].as_str(), iphone.agent["deviceClass"].as_str()), (Some("iPhone"), Some("mobile")));
    let ipad = profile(&parser, PEOPLE_AND_SDKS[16].0, None);
    assert_eq!(ipad.agent["deviceClass"], "tablet");
    let firefox = profile(&parser, PEOPLE_AND_SDKS[12].0, None);
    assert_eq!(
        (firefox.agent["browser"].as_str(), firefox.agent["deviceClass"].as_str()),
        (Some("Firefox"), Some("desktop"))
    );
}

async fn create_topic(name: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("admin");
    let topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    // Already there from an earlier run is fine.
    let _ = admin.create_topics(&[topic], &AdminOptions::new()).await.expect("create topics");
}

#[actix_web::test]
async fn crawlers_are_labelled_and_routed_and_client_hints_refine_the_device() {
    if common::without_kafka() {
        return;
    }
    create_topic("web.bots").await;
    let files = edge::files();
    let mut config = edge::config(&brokers(), &files);
    let demo = &mut config.sources[0].enrichment;
    (demo.device, demo.bots, demo.bot_topic) = (true, BotPolicy::Route, Some("web.bots".into()));
    let gw = TestGateway::start(config).await;
    let page = |id: &str| {
        json!({"batch": [{"type": "page", "messageId": id, "anonymousId": unique("anon"),
                          "properties": {"url": "https://shop.example/", "path": "/"}}]})
    };
    let (crawled, browsed) = (unique("bot"), unique("bot"));
    let response = common::client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .header("user-agent", BOTS[0].0)
        .json(&page(&crawled))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status().as_u16(), 200);
    let chrome = PEOPLE_AND_SDKS[10].0;
    let response = common::client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .header("user-agent", chrome)
        .header("sec-ch-ua", "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"")
        .header("sec-ch-ua-mobile", "?0")
        .header("sec-ch-ua-platform", "\"Windows\"")
        .header("sec-ch-ua-platform-version", "\"15.0.0\"")
        .json(&page(&browsed))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status().as_u16(), 200);

    let bot = find(&brokers(), "web.bots", &crawled);
    assert_eq!(bot.len(), 1, "routed to the bot topic");
    assert!(find(&brokers(), "web.tracking", &crawled).is_empty(), "not on the domain topic");
    assert_eq!(bot[0].headers["bot"], "Googlebot");
    assert_eq!(bot[0].value["context"]["bot"], json!({"name": "Googlebot", "category": "crawler"}));
    let person = find(&brokers(), "web.tracking", &browsed);
    assert_eq!(person.len(), 1);
    assert!(!person[0].headers.contains_key("bot") && person[0].value["context"].get("bot").is_none());
    let agent = &person[0].value["context"]["agent"];
    assert_eq!(agent["browser"], "Google Chrome", "{agent}");
    assert_eq!((agent["os"].as_str(), agent["osVersion"].as_str()), (Some("Windows"), Some("11")), "from the hints");
    assert_eq!(agent["deviceClass"], "desktop");
    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("eventgw_bots_total{name=\"Googlebot\"} 1"), "{metrics}");
    gw.stop().await;
}
