//! Every stable machine code the gateway answers with, each a variant
//! defined once here with its text in [`Code::as_str`]: searching a code's
//! text finds its variant, and searching the variant finds every place that
//! produces it. Never change a code's text, only add codes. This module
//! uses nothing else of the crate, so every module may use it.

use std::fmt;

/// A stable machine code: of a whole request's error (docs/api.md, "Error
/// codes" table), or of one event's outcome (its "Event outcomes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// The body is not JSON.
    MalformedJson,
    /// The body is not UTF-8.
    InvalidUtf8,
    /// A `\u` escape is a lone surrogate.
    InvalidUnicodeEscape,
    /// An object repeats a key.
    DuplicateKey,
    /// A number no consumer can represent.
    NumberOutOfRange,
    /// Nesting deeper than `limits.max_json_depth`.
    JsonTooDeep,
    /// A string longer than `limits.max_string_bytes`.
    StringTooLong,
    /// Gzip that does not inflate.
    MalformedGzip,
    /// JSON, but not the endpoint's shape.
    InvalidBody,
    /// The pixel's `data` is missing or not base64url JSON.
    InvalidPixel,
    /// The connection broke mid-body.
    BodyReadFailed,
    /// No write key or token at all.
    MissingCredentials,
    /// An `Authorization` header that is neither Basic nor Bearer as expected.
    MalformedCredentials,
    /// No source has this write key.
    InvalidWriteKey,
    /// The request's keys name different sources.
    ConflictingWriteKeys,
    /// A server source's key in a URL.
    KeyNotAllowedInUrl,
    /// A Snowplow app id (`aid`) no source lists, or none.
    UnknownAppId,
    /// A Snowplow request whose app ids name different sources.
    ConflictingAppIds,
    /// A bearer token that is not a JWT.
    MalformedToken,
    /// A JWT with `alg: none`.
    UnsignedToken,
    /// A JWT algorithm its issuer does not use.
    AlgorithmNotAllowed,
    /// A JWT of an issuer not configured.
    InvalidIssuer,
    /// A JWT signed with a key its issuer does not have.
    UnknownKey,
    /// A JWT whose signature does not verify.
    InvalidSignature,
    /// A JWT past its `exp`.
    TokenExpired,
    /// A JWT before its `nbf`.
    TokenNotYetValid,
    /// A JWT for another audience.
    InvalidAudience,
    /// A JWT without a claim the gateway needs.
    MissingClaim,
    /// A JWT claim of the wrong type.
    InvalidClaimType,
    /// A JWT naming a source that does not exist.
    UnknownSource,
    /// A batch larger than a quota's burst.
    BatchExceedsQuota,
    /// Over a quota for now.
    QuotaExceeded,
    /// An address locked out after failed authentications.
    TooManyAuthFailures,
    /// A CORS preflight from an origin no source allows.
    OriginNotAllowed,
    /// The live view without the operator token, or with a wrong one.
    OperatorUnauthorized,
    /// No such endpoint.
    NotFound,
    /// A live-view event the view no longer holds (or never had).
    LiveEventGone,
    /// A live-view event's stored record Kafka did not return in time.
    LiveEventUnreadable,
    /// Another method than the endpoint's.
    MethodNotAllowed,
    /// A request head over `server.max_header_bytes`.
    HeadersTooLarge,
    /// A body over `limits.max_body_bytes`.
    BodyTooLarge,
    /// An inflated body over `limits.max_decompressed_bytes`.
    DecompressedTooLarge,
    /// More events than `limits.max_batch_events`.
    BatchTooLarge,
    /// A content type other than JSON or `text/plain`.
    UnsupportedMediaType,
    /// A content encoding other than gzip.
    UnsupportedEncoding,
    /// A strict source's batch with an event that would not be accepted.
    BatchRejected,
    /// Kafka (or the spool) did not store every record in time.
    KafkaUnavailable,
    /// The producer's queue is full.
    Backpressure,
    /// The body did not arrive in time.
    BodyTimeout,
    /// `/readyz`: not ready.
    NotReady,
    /// The buffers of unfinished bodies hold `limits.max_unfinished_body_bytes`.
    BodyBufferFull,
    /// An HTTP/2 connection with `server.max_streams_per_connection` requests in flight.
    TooManyStreams,
    /// `/readyz`: shutting down.
    Draining,
    // One event's outcome, in a 200 answer (or a strict source's 422).
    /// An event that is not a JSON object (rejected).
    EventNotObject,
    /// An event over `limits.max_event_bytes` (rejected).
    EventTooLarge,
    /// A `messageId` that cannot be a dedup key (rejected).
    InvalidMessageId,
    /// A `context` that is not an object (dead-lettered).
    InvalidContext,
    /// No `type`, or not a Segment call (rejected).
    InvalidType,
    /// A track call without `event` (dead-lettered).
    MissingEventName,
    /// An event of a domain the source may not send (rejected).
    DomainNotAllowed,
    /// An event the catalog does not know (per `unknown_events`).
    UnknownEvent,
    /// A `context.schemaVersion` that is not a positive integer (dead-lettered).
    InvalidSchemaVersion,
    /// A pinned schema version that does not exist (dead-lettered).
    UnknownSchemaVersion,
    /// An event that does not match its schema (dead-lettered).
    SchemaViolation,
    /// No value for the event's key field (dead-lettered).
    MissingKey,
    /// A key longer than a record key may be (dead-lettered).
    InvalidKey,
    /// A `timestamp` that is not a date-time (dead-lettered).
    InvalidTimestamp,
    /// The user did not consent to the event's purpose (dead-lettered under `enforce`).
    ConsentDenied,
    /// The event carries no consent for its purpose (dead-lettered under `enforce`).
    ConsentMissing,
    /// The user asked not to be tracked (produced nowhere).
    Suppressed,
    /// A `messageId` already stored, or repeated in the request.
    DuplicateMessageId,
    /// An `alias` under a JWT naming a `previousId` the token does not vouch for.
    IdentityNotVouched,
    /// An event its protocol's decoder could not read (dead-lettered as sent).
    UndecodableEvent,
}

impl Code {
    /// Every code, requests' first, then events'.
    pub const ALL: [Self; 73] = [
        Self::MalformedJson,
        Self::InvalidUtf8,
        Self::InvalidUnicodeEscape,
        Self::DuplicateKey,
        Self::NumberOutOfRange,
        Self::JsonTooDeep,
        Self::StringTooLong,
        Self::MalformedGzip,
        Self::InvalidBody,
        Self::InvalidPixel,
        Self::BodyReadFailed,
        Self::MissingCredentials,
        Self::MalformedCredentials,
        Self::InvalidWriteKey,
        Self::ConflictingWriteKeys,
        Self::KeyNotAllowedInUrl,
        Self::UnknownAppId,
        Self::ConflictingAppIds,
        Self::MalformedToken,
        Self::UnsignedToken,
        Self::AlgorithmNotAllowed,
        Self::InvalidIssuer,
        Self::UnknownKey,
        Self::InvalidSignature,
        Self::TokenExpired,
        Self::TokenNotYetValid,
        Self::InvalidAudience,
        Self::MissingClaim,
        Self::InvalidClaimType,
        Self::UnknownSource,
        Self::BatchExceedsQuota,
        Self::QuotaExceeded,
        Self::TooManyAuthFailures,
        Self::OriginNotAllowed,
        Self::OperatorUnauthorized,
        Self::NotFound,
        Self::LiveEventGone,
        Self::LiveEventUnreadable,
        Self::MethodNotAllowed,
        Self::HeadersTooLarge,
        Self::BodyTooLarge,
        Self::DecompressedTooLarge,
        Self::BatchTooLarge,
        Self::UnsupportedMediaType,
        Self::UnsupportedEncoding,
        Self::BatchRejected,
        Self::KafkaUnavailable,
        Self::Backpressure,
        Self::BodyTimeout,
        Self::NotReady,
        Self::BodyBufferFull,
        Self::TooManyStreams,
        Self::Draining,
        Self::EventNotObject,
        Self::EventTooLarge,
        Self::InvalidMessageId,
        Self::InvalidContext,
        Self::InvalidType,
        Self::MissingEventName,
        Self::DomainNotAllowed,
        Self::UnknownEvent,
        Self::InvalidSchemaVersion,
        Self::UnknownSchemaVersion,
        Self::SchemaViolation,
        Self::MissingKey,
        Self::InvalidKey,
        Self::InvalidTimestamp,
        Self::ConsentDenied,
        Self::ConsentMissing,
        Self::Suppressed,
        Self::DuplicateMessageId,
        Self::IdentityNotVouched,
        Self::UndecodableEvent,
    ];

    /// The code as answered, logged and counted.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MalformedJson => "malformed_json",
            Self::InvalidUtf8 => "invalid_utf8",
            Self::InvalidUnicodeEscape => "invalid_unicode_escape",
            Self::DuplicateKey => "duplicate_key",
            Self::NumberOutOfRange => "number_out_of_range",
            Self::JsonTooDeep => "json_too_deep",
            Self::StringTooLong => "string_too_long",
            Self::MalformedGzip => "malformed_gzip",
            Self::InvalidBody => "invalid_body",
            Self::InvalidPixel => "invalid_pixel",
            Self::BodyReadFailed => "body_read_failed",
            Self::MissingCredentials => "missing_credentials",
            Self::MalformedCredentials => "malformed_credentials",
            Self::InvalidWriteKey => "invalid_write_key",
            Self::ConflictingWriteKeys => "conflicting_write_keys",
            Self::KeyNotAllowedInUrl => "key_not_allowed_in_url",
            Self::UnknownAppId => "unknown_app_id",
            Self::ConflictingAppIds => "conflicting_app_ids",
            Self::MalformedToken => "malformed_token",
            Self::UnsignedToken => "unsigned_token",
            Self::AlgorithmNotAllowed => "algorithm_not_allowed",
            Self::InvalidIssuer => "invalid_issuer",
            Self::UnknownKey => "unknown_key",
            Self::InvalidSignature => "invalid_signature",
            Self::TokenExpired => "token_expired",
            Self::TokenNotYetValid => "token_not_yet_valid",
            Self::InvalidAudience => "invalid_audience",
            Self::MissingClaim => "missing_claim",
            Self::InvalidClaimType => "invalid_claim_type",
            Self::UnknownSource => "unknown_source",
            Self::BatchExceedsQuota => "batch_exceeds_quota",
            Self::QuotaExceeded => "quota_exceeded",
            Self::TooManyAuthFailures => "too_many_auth_failures",
            Self::OriginNotAllowed => "origin_not_allowed",
            Self::OperatorUnauthorized => "operator_unauthorized",
            Self::NotFound => "not_found",
            Self::LiveEventGone => "live_event_gone",
            Self::LiveEventUnreadable => "live_event_unreadable",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::HeadersTooLarge => "headers_too_large",
            Self::BodyTooLarge => "body_too_large",
            Self::DecompressedTooLarge => "decompressed_too_large",
            Self::BatchTooLarge => "batch_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::UnsupportedEncoding => "unsupported_encoding",
            Self::BatchRejected => "batch_rejected",
            Self::KafkaUnavailable => "kafka_unavailable",
            Self::Backpressure => "backpressure",
            Self::BodyTimeout => "body_timeout",
            Self::NotReady => "not_ready",
            Self::BodyBufferFull => "body_buffer_full",
            Self::TooManyStreams => "too_many_streams",
            Self::Draining => "draining",
            Self::EventNotObject => "event_not_object",
            Self::EventTooLarge => "event_too_large",
            Self::InvalidMessageId => "invalid_message_id",
            Self::InvalidContext => "invalid_context",
            Self::InvalidType => "invalid_type",
            Self::MissingEventName => "missing_event_name",
            Self::DomainNotAllowed => "domain_not_allowed",
            Self::UnknownEvent => "unknown_event",
            Self::InvalidSchemaVersion => "invalid_schema_version",
            Self::UnknownSchemaVersion => "unknown_schema_version",
            Self::SchemaViolation => "schema_violation",
            Self::MissingKey => "missing_key",
            Self::InvalidKey => "invalid_key",
            Self::InvalidTimestamp => "invalid_timestamp",
            Self::ConsentDenied => "consent_denied",
            Self::ConsentMissing => "consent_missing",
            Self::Suppressed => "suppressed",
            Self::DuplicateMessageId => "duplicate_message_id",
            Self::IdentityNotVouched => "identity_not_vouched",
            Self::UndecodableEvent => "undecodable_event",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_snake_case_and_all_listed() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            let text = code.as_str();
            assert!(seen.insert(text), "{text} twice");
            assert!(text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{text}");
            assert_eq!(serde_json::to_value(code).expect("serialises"), text);
        }
    }

    #[test]
    fn the_api_docs_name_every_code() {
        let api = include_str!("../../docs/api.md");
        let missing: Vec<&str> =
            Code::ALL.iter().map(|c| c.as_str()).filter(|c| !api.contains(&format!("`{c}`"))).collect();
        assert!(missing.is_empty(), "codes docs/api.md does not name: {missing:?}");
    }
}
