//! Broker control through scripts/kafka-cluster: each scenario owns a
//! cluster (its own name, ports and data), never the shared dev broker.

use std::process::Command;

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

    pub async fn kill9(&self, n: u16) {
        assert!(self.run(&["kill", &n.to_string()]).await, "kill node {n}");
    }

    pub async fn pause(&self, n: u16) {
        assert!(self.run(&["pause", &n.to_string()]).await, "pause node {n}");
    }

    pub async fn resume(&self, n: u16) {
        assert!(self.run(&["resume", &n.to_string()]).await, "resume node {n}");
    }

    pub async fn start_node(&self, n: u16) {
        assert!(self.run(&["start-node", &n.to_string()]).await, "start node {n}");
    }

    pub async fn stop(&self) {
        self.run(&["stop"]).await;
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
