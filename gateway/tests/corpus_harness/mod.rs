//! The corpus replay harness: the file format and its placeholders
//! (`request`), a raw HTTP/1.1 client that tells an answer from a close and
//! a hang (`reply`), and the tally, invariants and report (`report`).
#![allow(dead_code, missing_docs)]

pub mod reply;
pub mod report;
pub mod request;
