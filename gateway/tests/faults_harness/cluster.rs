//! Broker control through scripts/kafka-cluster: each scenario owns a
//! cluster (its own name, ports and data), never the shared dev broker.

use std::process::Command;
use std::time::{Duration, Instant};

use super::blocking;

#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    pub nodes: u16,
    pub base_port: u16,
    /// When set, node i also advertises 127.0.0.1:proxy_base+i-1 (through a proxy).
    pub proxy_base: Option<u16>,
    /// Extra server.properties lines, `;` separated.
    pub extra_props: String,
}

impl Cluster {
    pub fn new(name: &str, nodes: u16, base_port: u16) -> Self {
        Self { name: name.into(), nodes, base_port, proxy_base: None, extra_props: String::new() }
    }

    /// Direct addresses of every node (for read-back and topic creation).
    pub fn brokers(&self) -> String {
        (1..=self.nodes).map(|n| format!("127.0.0.1:{}", self.port(n))).collect::<Vec<_>>().join(",")
    }

    /// The port node `n` listens on directly.
    pub fn port(&self, n: u16) -> u16 {
        self.base_port + 3 * (n - 1)
    }

    /// The port of node `n`'s listener whose advertised address is the proxy.
    pub fn external_port(&self, n: u16) -> u16 {
        self.port(n) + 2
    }

    fn script(&self, args: &[String]) -> bool {
        let mut cmd = Command::new(crate::common::repo_root().join("scripts/kafka-cluster"));
        cmd.args(args)
            .env("KAFKA_CLUSTER", &self.name)
            .env("KAFKA_NODES", self.nodes.to_string())
            .env("KAFKA_BASE_PORT", self.base_port.to_string())
            .env("KAFKA_EXTRA_PROPS", &self.extra_props)
            .env("KAFKA_HEAP", "384m");
        if let Some(p) = self.proxy_base {
            cmd.env("KAFKA_PROXY_BASE_PORT", p.to_string());
        }
        cmd.status().expect("scripts/kafka-cluster runs").success()
    }

    pub async fn run(&self, args: &[&str]) -> bool {
        let me = self.clone();
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        blocking(move || me.script(&args)).await
    }

    /// A fresh cluster: old data deleted, every node up.
    pub async fn start_fresh(&self) {
        assert!(self.run(&["reset"]).await, "reset {}", self.name);
        assert!(self.run(&["start"]).await, "start {}", self.name);
    }

    /// SIGKILL to node `n`; returns once its process is gone (the script
    /// refuses a node that is not running, so the fault was injected).
    pub async fn kill9(&self, n: u16) {
        let pid = self.pid(n).await;
        assert!(self.run(&["kill", &n.to_string()]).await, "kill node {n}");
        wait_for_state(pid, |s| s.is_none_or(|s| s == 'Z'), &format!("node {n} (pid {pid}) gone after SIGKILL")).await;
    }

    /// SIGSTOP to node `n`, then checks the kernel says its process is
    /// stopped: the scenario injected the freeze it reports.
    pub async fn pause(&self, n: u16) {
        let pid = self.pid(n).await;
        assert!(self.run(&["pause", &n.to_string()]).await, "pause node {n}");
        wait_for_state(pid, |s| s == Some('T'), &format!("node {n} (pid {pid}) stopped by SIGSTOP")).await;
    }

    pub async fn resume(&self, n: u16) {
        let pid = self.pid(n).await;
        assert!(self.run(&["resume", &n.to_string()]).await, "resume node {n}");
        wait_for_state(pid, |s| s.is_some_and(|s| s != 'T'), &format!("node {n} (pid {pid}) running after SIGCONT"))
            .await;
    }

    /// The process id of node `n`, which must be running.
    pub async fn pid(&self, n: u16) -> u32 {
        let me = self.clone();
        let output = blocking(move || {
            let mut cmd = Command::new(crate::common::repo_root().join("scripts/kafka-cluster"));
            cmd.args(["pid", &n.to_string()])
                .env("KAFKA_CLUSTER", &me.name)
                .env("KAFKA_NODES", me.nodes.to_string())
                .env("KAFKA_BASE_PORT", me.base_port.to_string());
            cmd.output().expect("scripts/kafka-cluster runs")
        })
        .await;
        let text = String::from_utf8_lossy(&output.stdout);
        text.trim().parse().unwrap_or_else(|_| panic!("node {n} of {} is not running: {text:?}", self.name))
    }

    pub async fn start_node(&self, n: u16) {
        assert!(self.run(&["start-node", &n.to_string()]).await, "start node {n}");
    }

    pub async fn stop(&self) {
        self.run(&["stop"]).await;
    }

    /// Creates `topic` (the partitions and settings `gateway topics` would give
    /// it) with node `follower` last in every partition's replica list, so it
    /// leads none of them.
    pub async fn followers_only(&self, topic: &str, follower: i32) {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        let brokers = self.brokers();
        let brokers = brokers.as_str();
        let cfg = crate::common::config(brokers);
        let catalog = eventgw_schemas::loader::load_catalog(&cfg.catalog.dir).expect("catalog");
        let (_, partitions) = gateway::topics::wanted(&catalog, &cfg.kafka)
            .into_iter()
            .find(|(name, _)| name == topic)
            .unwrap_or_else(|| panic!("{topic} is a catalog topic"));
        let leaders: Vec<i32> = (1..=3).filter(|n| *n != follower).collect();
        let assignment: Vec<Vec<i32>> = (0..partitions as usize)
            .map(|p| {
                let leader = leaders[p % leaders.len()];
                let other = leaders[(p + 1) % leaders.len()];
                vec![leader, other, follower]
            })
            .collect();
        let replicas: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
        let admin: AdminClient<_> =
            rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
        let new =
            NewTopic::new(topic, partitions, TopicReplication::Variable(&replicas)).set("min.insync.replicas", "2");
        let created = admin.create_topics([&new], &AdminOptions::new()).await.expect("create_topics");
        for result in created {
            result.unwrap_or_else(|(name, e)| panic!("create {name}: {e}"));
        }
        let brokers = brokers.to_owned();
        let topic = topic.to_owned();
        let leaders = blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let leaders = crate::common::partition_leaders(&brokers, &topic);
                if leaders.len() == partitions as usize || Instant::now() > deadline {
                    return leaders;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
        .await;
        assert!(!leaders.contains(&follower) && !leaders.contains(&-1), "node {follower} leads none: {leaders:?}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Stops brokers even when the scenario failed (data kept for inspection).
        if std::thread::panicking() {
            self.script(&["stop".into()]);
        }
    }
}

/// The state letter of a process (`R`, `S`, `T` stopped, `Z` zombie...), or
/// None when it no longer exists.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the state follows the last `)`.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Waits (10 s at most: a signal takes effect in milliseconds) until the
/// state of `pid` satisfies `reached`; fails naming `what` otherwise.
async fn wait_for_state(pid: u32, reached: impl Fn(Option<char>) -> bool, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !reached(process_state(pid)) {
        assert!(std::time::Instant::now() < deadline, "{what}: state {:?}", process_state(pid));
        super::sleep(std::time::Duration::from_millis(20)).await;
    }
}
