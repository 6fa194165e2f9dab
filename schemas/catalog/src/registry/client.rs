//! A small client of the Confluent Schema Registry API (Apicurio's
//! `ccompat/v7`), used by the gateway for schema ids and by
//! `eventgw-catalog registry` for plan and apply.

use std::time::Duration;

use serde_json::Value;

/// Why schema ids cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A domain is framed but no registry is configured.
    #[error("domain `{0}` has wire_format = \"confluent\" but the configuration has no [registry] url")]
    NotConfigured(String),
    /// The registry did not answer as expected.
    #[error("schema registry {url}: {problem}")]
    Unreachable {
        /// Where it was asked.
        url: String,
        /// What went wrong.
        problem: String,
    },
    /// The registry holds something else under a catalog version.
    #[error(
        "schema registry: subject `{subject}` version {version} is not the catalog's schema ({schema}); run `eventgw-catalog registry plan`"
    )]
    Differs {
        /// The subject.
        subject: String,
        /// The version.
        version: u32,
        /// `domain/schema`.
        schema: String,
    },
}

/// A small client of the Confluent Schema Registry API (the `ccompat/v7`
/// API of Apicurio Registry), shared with `eventgw-catalog registry`.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    /// Base URL, e.g. `http://127.0.0.1:18481/apis/ccompat/v7`.
    pub url: String,
    http: reqwest::Client,
}

/// The registry's content type for requests and answers.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

impl RegistryClient {
    /// A client of the registry at `url`, each request bounded by `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, RegistryError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| RegistryError::Unreachable { url: url.to_owned(), problem: e.to_string() })?;
        Ok(Self { url: url.trim_end_matches('/').to_owned(), http })
    }

    /// Sends `method path` with an optional JSON body: the status and the
    /// JSON answer (`Null` when the answer is not JSON).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), RegistryError> {
        let fail = |problem: String| RegistryError::Unreachable { url: self.url.clone(), problem };
        let mut request = self.http.request(method, format!("{}{path}", self.url)).header("accept", CONTENT_TYPE);
        if let Some(body) = body {
            request = request.header("content-type", CONTENT_TYPE).body(body.to_string());
        }
        let response = request.send().await.map_err(|e| fail(e.to_string()))?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| fail(e.to_string()))?;
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    /// A subject's version as stored: its id and schema, `None` when the
    /// subject or version does not exist.
    pub async fn version(&self, subject: &str, version: u32) -> Result<Option<(u32, Value)>, RegistryError> {
        let (status, body) =
            self.call(reqwest::Method::GET, &format!("/subjects/{subject}/versions/{version}"), None).await?;
        match status {
            200 => {
                let id = body.get("id").and_then(Value::as_u64).and_then(|id| u32::try_from(id).ok());
                let schema = body.get("schema").and_then(Value::as_str).and_then(|s| serde_json::from_str(s).ok());
                match (id, schema) {
                    (Some(id), Some(schema)) => Ok(Some((id, schema))),
                    _ => Err(RegistryError::Unreachable {
                        url: self.url.clone(),
                        problem: format!("unexpected answer {body}"),
                    }),
                }
            }
            404 => Ok(None),
            _ => Err(RegistryError::Unreachable { url: self.url.clone(), problem: format!("{status}: {body}") }),
        }
    }
}
