//! The one error type of the HTTP API. Every status the gateway answers with,
//! other than 200, is decided here, and every error body is
//! `{"code": "...", "message": "..."}` with a stable machine code.

use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, RETRY_AFTER};
use actix_web::{HttpResponse, HttpResponseBuilder, ResponseError};
use serde::Serialize;

use crate::auth::AuthError;
use crate::auth::jwt::JwtError;
use crate::code::Code;
use crate::wire::WireError;

/// Everything that stops a whole request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No write key in the Authorization header or the body.
    #[error("no credentials: send the write key as the HTTP Basic user name, or as `writeKey` in the body")]
    MissingCredentials,
    /// The `Authorization` header and a `writeKey` in the body or the URL
    /// name different sources (or one of them none): which one to trust is
    /// ambiguous, so neither is.
    #[error(
        "the write key in the {0} names another source than the Authorization header; send one key, or the same key in both"
    )]
    ConflictingWriteKeys(&'static str),
    /// A Snowplow request whose events' app ids (`aid`) name different
    /// sources, or another source than the `Authorization` header: whose
    /// events they are is ambiguous, so none are taken.
    #[error("the request's Snowplow app ids (`aid`) name {0}; send each source's events in requests of their own")]
    ConflictingAppIds(&'static str),
    /// A server source's key in a URL (pixel, beacon, settings), where keys
    /// end up in access logs, proxies and referrers.
    #[error("this source's write key may not travel in a URL; send it as the HTTP Basic user name")]
    KeyNotAllowedInUrl,
    /// The request head is larger than `server.max_header_bytes`.
    #[error("the request headers are larger than the limit of {limit} bytes")]
    HeadersTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The client did not finish sending the body in time. Answered 503,
    /// not 408: most SDKs drop a batch on a 4xx other than 429 but retry a
    /// The source is strict and at least one event would not be accepted:
    /// nothing of the batch is produced.
    #[error("the source is strict and {0} event(s) would not be accepted; nothing was produced")]
    BatchRejected(usize, Vec<crate::outcome::EventOutcome>),
    /// A CORS preflight from an origin no source allows.
    #[error("origin `{0}` is not allowed by any source")]
    OriginNotAllowed(String),
    /// Over a quota: retry after `Retry-After`.
    #[error("over the {} quota; retry after the delay in Retry-After", .0.scope)]
    QuotaExceeded(crate::quota::Denied),
    /// A batch larger than a quota's burst can never conform.
    #[error("the batch is larger than the {} quota's burst of {} events; send smaller batches", .0.scope, .0.rate.burst)]
    BatchExceedsQuota(crate::quota::Denied),
    /// A pixel request without a decodable event.
    #[error("{0}")]
    InvalidPixel(String),
    /// The producer's bounded queue is full: Kafka is slower than the input.
    #[error("the gateway is at capacity; retry after the delay in Retry-After")]
    Backpressure {
        /// Seconds for `Retry-After`.
        retry_after: u64,
    },
    /// An HTTP/2 connection already has `server.max_streams_per_connection`
    /// requests in flight; answered before the body is read.
    #[error(
        "this HTTP/2 connection has {limit} requests in flight, the most the gateway takes on one connection; retry \
         after the delay in Retry-After"
    )]
    TooManyStreams {
        /// The configured limit.
        limit: usize,
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
    /// The live view (`/live/`, `/live/stream`) without the operator
    /// token, or with another one; the reason says which, never the token.
    #[error("{0}")]
    OperatorUnauthorized(&'static str),
    /// No endpoint at this path (also for a CORS preflight).
    #[error("no such endpoint; see docs/api.md for the API")]
    NotFound,
    /// `GET /live/events/{id}` of an event the live view no longer holds,
    /// or whose record Kafka no longer holds.
    #[error(
        "the live view no longer holds event {0} (it keeps the most recent `live.recent_mib` of rows), or Kafka \
         no longer holds its record (retention): the topic, partition and offset its row shows say where it was"
    )]
    LiveEventGone(String),
    /// `GET /live/events/{id}`: Kafka did not answer for the event's
    /// stored record.
    #[error("the stored record could not be read back from Kafka now ({0}); try again")]
    LiveEventUnreadable(String),
    /// The endpoint takes another method; `Allow` says which.
    #[error("this endpoint takes {} (and OPTIONS for CORS)", method_names(.0))]
    MethodNotAllowed(&'static [actix_web::http::Method]),
    /// `/readyz`: not ready to take traffic.
    #[error("not ready: {0}")]
    NotReady(String),
    /// `/readyz` once shutdown began: requests are still served for
    /// `server.drain_grace_secs`, but new traffic should go elsewhere.
    #[error("the gateway is shutting down; send new traffic to another instance")]
    Draining,
    /// The credentials do not hold (see [`AuthError`]).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The body could not be read or decoded (see [`WireError`]).
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// The JSON body of every error answer.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// Stable, machine-readable; documented in docs/api.md.
    pub code: &'a str,
    /// For the human reading a log or a browser console.
    pub message: String,
}

/// The 422 body of a strict source's refused batch: the usual error fields
/// plus what would have happened to each event.
#[derive(Debug, Serialize)]
struct RejectedBatch<'a> {
    code: &'a str,
    message: String,
    events: &'a [crate::outcome::EventOutcome],
}

/// The stable code of credentials the auth module refused.
pub fn auth_code(error: &AuthError) -> Code {
    match error {
        AuthError::MalformedCredentials(_) => Code::MalformedCredentials,
        AuthError::InvalidWriteKey => Code::InvalidWriteKey,
        AuthError::UnknownAppId(_) => Code::UnknownAppId,
        AuthError::Jwt(e) => jwt_code(e),
        AuthError::LockedOut(_) => Code::TooManyAuthFailures,
    }
}

/// The stable code of a bearer token that does not verify.
pub fn jwt_code(error: &JwtError) -> Code {
    match error {
        JwtError::Malformed => Code::MalformedToken,
        JwtError::Unsigned => Code::UnsignedToken,
        JwtError::InvalidIssuer => Code::InvalidIssuer,
        JwtError::AlgorithmNotAllowed(_) => Code::AlgorithmNotAllowed,
        JwtError::UnknownKey => Code::UnknownKey,
        JwtError::InvalidSignature => Code::InvalidSignature,
        JwtError::Expired => Code::TokenExpired,
        JwtError::NotYetValid => Code::TokenNotYetValid,
        JwtError::InvalidAudience => Code::InvalidAudience,
        JwtError::MissingClaim(_) => Code::MissingClaim,
        JwtError::InvalidClaimType(_) => Code::InvalidClaimType,
        JwtError::UnknownSource(_) => Code::UnknownSource,
    }
}

/// The stable code of a body the wire module refused.
pub fn wire_code(error: &WireError) -> Code {
    match error {
        WireError::BodyTooLarge { .. } => Code::BodyTooLarge,
        WireError::BatchTooLarge { .. } => Code::BatchTooLarge,
        WireError::MalformedJson(_) => Code::MalformedJson,
        WireError::InvalidUtf8(_) => Code::InvalidUtf8,
        WireError::DuplicateKey(_) => Code::DuplicateKey,
        WireError::InvalidUnicodeEscape(_) => Code::InvalidUnicodeEscape,
        WireError::NumberOutOfRange(_) => Code::NumberOutOfRange,
        WireError::TooDeep { .. } => Code::JsonTooDeep,
        WireError::StringTooLong { .. } => Code::StringTooLong,
        WireError::DecompressedTooLarge { .. } => Code::DecompressedTooLarge,
        WireError::MalformedGzip(_) => Code::MalformedGzip,
        WireError::UnsupportedMediaType(_) => Code::UnsupportedMediaType,
        WireError::UnsupportedEncoding(_) => Code::UnsupportedEncoding,
        WireError::BodyTimeout { .. } => Code::BodyTimeout,
        WireError::BodyBufferFull { .. } => Code::BodyBufferFull,
        WireError::InvalidBody(_) => Code::InvalidBody,
        WireError::BodyRead(_) => Code::BodyReadFailed,
    }
}

/// Left on error responses so the metrics middleware can count by code.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode(pub Code);

impl ApiError {
    /// The stable machine code (see [`Code`]).
    pub fn code(&self) -> Code {
        match self {
            Self::MissingCredentials => Code::MissingCredentials,
            Self::ConflictingWriteKeys(_) => Code::ConflictingWriteKeys,
            Self::ConflictingAppIds(_) => Code::ConflictingAppIds,
            Self::KeyNotAllowedInUrl => Code::KeyNotAllowedInUrl,
            Self::HeadersTooLarge { .. } => Code::HeadersTooLarge,
            Self::BatchRejected(..) => Code::BatchRejected,
            Self::OriginNotAllowed(_) => Code::OriginNotAllowed,
            Self::InvalidPixel(_) => Code::InvalidPixel,
            Self::Auth(e) => auth_code(e),
            Self::QuotaExceeded(_) => Code::QuotaExceeded,
            Self::BatchExceedsQuota(_) => Code::BatchExceedsQuota,
            Self::Backpressure { .. } => Code::Backpressure,
            Self::TooManyStreams { .. } => Code::TooManyStreams,
            Self::KafkaUnavailable { .. } => Code::KafkaUnavailable,
            Self::NotReady(_) => Code::NotReady,
            Self::OperatorUnauthorized(_) => Code::OperatorUnauthorized,
            Self::NotFound => Code::NotFound,
            Self::LiveEventGone(_) => Code::LiveEventGone,
            Self::LiveEventUnreadable(_) => Code::LiveEventUnreadable,
            Self::MethodNotAllowed(_) => Code::MethodNotAllowed,
            Self::Wire(e) => wire_code(e),
            Self::Draining => Code::Draining,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Backpressure { retry_after }
            | Self::KafkaUnavailable { retry_after, .. }
            | Self::TooManyStreams { retry_after, .. }
            | Self::Wire(WireError::BodyTimeout { retry_after, .. } | WireError::BodyBufferFull { retry_after, .. }) => {
                Some(*retry_after)
            }
            Self::QuotaExceeded(denied) | Self::Auth(AuthError::LockedOut(denied)) => {
                denied.retry_after.map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0)).map(|s| s.max(1))
            }
            _ => None,
        }
    }

    /// The IETF `RateLimit-Policy` and `RateLimit` headers of a quota refusal.
    fn rate_limit_headers(&self) -> Option<(String, String)> {
        let denied = match self {
            Self::QuotaExceeded(d) | Self::Auth(AuthError::LockedOut(d)) | Self::BatchExceedsQuota(d) => d,
            _ => return None,
        };
        let policy = format!("\"{}\";q={};w={}", denied.scope, denied.rate.burst, denied.rate.window_secs());
        let reset = self.retry_after().unwrap_or(denied.rate.window_secs());
        Some((policy, format!("\"{}\";r=0;t={reset}", denied.scope)))
    }
}

impl ApiError {
    /// The status, headers (`Retry-After`, `RateLimit-*`, no-store) and
    /// metrics code of this error's answer, for any body: JSON here, the
    /// GIF for the pixel.
    pub fn answer(&self) -> HttpResponseBuilder {
        let mut answer = HttpResponse::build(self.status_code());
        answer.insert_header((CACHE_CONTROL, "no-store"));
        if let Some(seconds) = self.retry_after() {
            answer.insert_header((RETRY_AFTER, seconds.to_string()));
        }
        if let Some((policy, state)) = self.rate_limit_headers() {
            answer.insert_header(("RateLimit-Policy", policy));
            answer.insert_header(("RateLimit", state));
        }
        if let Some(seconds) = self.rate_limit_reset() {
            // analytics-next reads this (seconds) to time its retry after a 429.
            answer.insert_header(("X-RateLimit-Reset", seconds.to_string()));
        }
        if let Self::MethodNotAllowed(allowed) = self {
            answer.insert_header((actix_web::http::header::ALLOW, format!("{}, OPTIONS", method_names(allowed))));
        }
        if self.closes_connection() {
            answer.force_close();
        }
        answer.extensions_mut().insert(ErrorCode(self.code()));
        answer
    }

    /// Whether the connection must not be reused after this answer: the
    /// rest of the body may still be on its way (or never come), and
    /// reading past it would hold the connection open.
    fn closes_connection(&self) -> bool {
        matches!(
            self,
            Self::Wire(WireError::BodyTimeout { .. })
                | Self::Wire(WireError::BodyBufferFull { .. })
                | Self::Wire(WireError::BodyRead(_))
                | Self::Wire(WireError::BodyTooLarge { .. })
                | Self::HeadersTooLarge { .. }
        )
    }

    fn rate_limit_reset(&self) -> Option<u64> {
        match self {
            Self::QuotaExceeded(_) | Self::Auth(AuthError::LockedOut(_)) => self.retry_after(),
            _ => None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::MissingCredentials
            | Self::Auth(
                AuthError::MalformedCredentials(_)
                | AuthError::InvalidWriteKey
                | AuthError::UnknownAppId(_)
                | AuthError::Jwt(_),
            )
            | Self::ConflictingWriteKeys(_)
            | Self::ConflictingAppIds(_)
            | Self::OperatorUnauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::KeyNotAllowedInUrl => StatusCode::FORBIDDEN,
            Self::HeadersTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::QuotaExceeded(_) | Self::Auth(AuthError::LockedOut(_)) => StatusCode::TOO_MANY_REQUESTS,
            Self::BatchExceedsQuota(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Wire(WireError::BodyTooLarge { .. })
            | Self::Wire(WireError::BatchTooLarge { .. })
            | Self::Wire(WireError::DecompressedTooLarge { .. }) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Wire(WireError::MalformedJson(_))
            | Self::Wire(WireError::InvalidBody(_))
            | Self::Wire(WireError::BodyRead(_))
            | Self::Wire(WireError::InvalidUtf8(_))
            | Self::Wire(WireError::DuplicateKey(_))
            | Self::Wire(WireError::InvalidUnicodeEscape(_))
            | Self::Wire(WireError::NumberOutOfRange(_))
            | Self::Wire(WireError::TooDeep { .. })
            | Self::Wire(WireError::StringTooLong { .. })
            | Self::Wire(WireError::MalformedGzip(_))
            | Self::InvalidPixel(_) => StatusCode::BAD_REQUEST,
            Self::Wire(WireError::UnsupportedMediaType(_)) | Self::Wire(WireError::UnsupportedEncoding(_)) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            Self::BatchRejected(..) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::OriginNotAllowed(_) => StatusCode::FORBIDDEN,
            Self::NotFound | Self::LiveEventGone(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Backpressure { .. }
            | Self::KafkaUnavailable { .. }
            | Self::NotReady(_)
            | Self::Draining
            | Self::TooManyStreams { .. }
            | Self::LiveEventUnreadable(_)
            | Self::Wire(WireError::BodyTimeout { .. })
            | Self::Wire(WireError::BodyBufferFull { .. }) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut answer = self.answer();
        if let Self::BatchRejected(_, events) = self {
            return answer.json(RejectedBatch { code: self.code().as_str(), message: self.to_string(), events });
        }
        answer.json(ErrorBody { code: self.code().as_str(), message: self.to_string() })
    }
}

/// `POST`, or `POST, GET`: the methods an endpoint takes.
fn method_names(methods: &[actix_web::http::Method]) -> String {
    methods.iter().map(actix_web::http::Method::as_str).collect::<Vec<_>>().join(", ")
}
