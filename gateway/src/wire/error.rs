//! Why a body could not be read or decoded. The wire module knows nothing
//! of HTTP answers: `crate::error` turns each of these into its status and
//! stable code.

/// Everything reading and decoding a body can refuse.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
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
    /// The body is not UTF-8; the number is the offset of the first bad byte.
    #[error("the request body is not UTF-8 (first invalid byte at offset {0})")]
    InvalidUtf8(usize),
    /// An object repeats a key; which value wins is ambiguous, so neither does.
    #[error("the request body repeats a key: {0}")]
    DuplicateKey(String),
    /// A `\u` escape that is a lone surrogate (not a character).
    #[error("the request body has an invalid unicode escape: {0}")]
    InvalidUnicodeEscape(String),
    /// A number no consumer can represent.
    #[error("the request body has a number out of range: {0}")]
    NumberOutOfRange(String),
    /// Objects and arrays nested deeper than `limits.max_json_depth`.
    #[error("the request body nests objects and arrays deeper than {limit} levels")]
    TooDeep {
        /// The configured limit.
        limit: usize,
    },
    /// A string longer than `limits.max_string_bytes`.
    #[error("the request body has a string longer than {limit} bytes")]
    StringTooLong {
        /// The configured limit.
        limit: usize,
    },
    /// Inflating the gzip body passed `limits.max_decompressed_bytes`.
    #[error("the decompressed request body is larger than the limit of {limit} bytes")]
    DecompressedTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The body claimed gzip but is not a valid gzip stream.
    #[error("the request body is not valid gzip: {0}")]
    MalformedGzip(String),
    /// A `Content-Type` other than JSON or `text/plain`.
    #[error("content type `{0}` is not accepted; send application/json or text/plain")]
    UnsupportedMediaType(String),
    /// A `Content-Encoding` other than gzip.
    #[error("content encoding `{0}` is not accepted; send gzip or no encoding")]
    UnsupportedEncoding(String),
    /// 5xx, and a stalled upload is worth retrying.
    #[error("the request body did not arrive within {seconds} s; retry after the delay in Retry-After")]
    BodyTimeout {
        /// The configured deadline.
        seconds: f64,
        /// Seconds for `Retry-After`.
        retry_after: u64,
    },
    /// The buffers of all unfinished bodies hold
    /// `limits.max_unfinished_body_bytes`: 503, worth retrying.
    #[error(
        "the gateway holds as many unfinished request bodies as it may ({limit} bytes together); retry after the \
         delay in Retry-After"
    )]
    BodyBufferFull {
        /// The configured limit.
        limit: usize,
        /// Seconds for `Retry-After`.
        retry_after: u64,
    },
    /// The body is JSON but not the shape the endpoint takes.
    #[error("{0}")]
    InvalidBody(String),
    /// The client stopped sending or the connection broke mid-body.
    #[error("the request body could not be read: {0}")]
    BodyRead(String),
}

#[cfg(test)]
impl WireError {
    /// The stable code it is answered with (`crate::error` decides it).
    pub(crate) fn code(&self) -> crate::code::Code {
        crate::error::wire_code(self)
    }
}
