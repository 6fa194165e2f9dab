//! The one error type of the HTTP API. Every status the gateway answers with,
//! other than 200, is decided here, and every error body is
//! `{"code": "...", "message": "..."}` with a stable machine code.

use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, RETRY_AFTER};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

/// Everything that stops a whole request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No write key in the Authorization header or the body.
    #[error("no credentials: send the write key as the HTTP Basic user name, or as `writeKey` in the body")]
    MissingCredentials,
    /// The Authorization header could not be read.
    #[error("the Authorization header is malformed: {0}")]
    MalformedCredentials(&'static str),
    /// No source has this write key.
    #[error("the write key is not valid")]
    InvalidWriteKey,
    /// The body is larger than `limits.max_body_bytes`.
    #[error("the request body is larger than the limit of {limit} bytes")]
    BodyTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The batch holds more events than `limits.max_batch_events`.
    #[error("the batch holds {count} events; at most {limit} are accepted per request")]
    BatchTooLarge {
        /// Events in the batch.
        count: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The body is not JSON.
    #[error("the request body is not valid JSON: {0}")]
    MalformedJson(String),
    /// The body is JSON but not the shape the endpoint takes.
    #[error("{0}")]
    InvalidBody(String),
    /// The client stopped sending or the connection broke mid-body.
    #[error("the request body could not be read: {0}")]
    BodyRead(String),
    /// The producer's bounded queue is full: Kafka is slower than the input.
    #[error("the gateway is at capacity; retry after the delay in Retry-After")]
    Backpressure {
        /// Seconds for `Retry-After`.
        retry_after: u64,
    },
    /// Kafka did not acknowledge every record in time. Nothing of the request
    /// may be assumed lost or kept; retry with the same `messageId`s.
    #[error("Kafka did not acknowledge the events ({detail}); retry with the same messageIds")]
    KafkaUnavailable {
        /// What the producer reported, for operators.
        detail: String,
        /// Seconds for `Retry-After`.
        retry_after: u64,
    },
    /// `/readyz`: not ready to take traffic.
    #[error("not ready: {0}")]
    NotReady(String),
}

/// The JSON body of every error answer.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// Stable, machine-readable; documented in the README.
    pub code: &'a str,
    /// For the human reading a log or a browser console.
    pub message: String,
}

impl ApiError {
    /// The stable machine code; never change one, only add.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingCredentials => "missing_credentials",
            Self::MalformedCredentials(_) => "malformed_credentials",
            Self::InvalidWriteKey => "invalid_write_key",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::BatchTooLarge { .. } => "batch_too_large",
            Self::MalformedJson(_) => "malformed_json",
            Self::InvalidBody(_) => "invalid_body",
            Self::BodyRead(_) => "body_read_failed",
            Self::Backpressure { .. } => "backpressure",
            Self::KafkaUnavailable { .. } => "kafka_unavailable",
            Self::NotReady(_) => "not_ready",
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Backpressure { retry_after } | Self::KafkaUnavailable { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::MissingCredentials | Self::MalformedCredentials(_) | Self::InvalidWriteKey => {
                StatusCode::UNAUTHORIZED
            }
            Self::BodyTooLarge { .. } | Self::BatchTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::MalformedJson(_) | Self::InvalidBody(_) | Self::BodyRead(_) => StatusCode::BAD_REQUEST,
            Self::Backpressure { .. } | Self::KafkaUnavailable { .. } | Self::NotReady(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut answer = HttpResponse::build(self.status_code());
        answer.insert_header((CACHE_CONTROL, "no-store"));
        if let Some(seconds) = self.retry_after() {
            answer.insert_header((RETRY_AFTER, seconds.to_string()));
        }
        answer.json(ErrorBody { code: self.code(), message: self.to_string() })
    }
}
