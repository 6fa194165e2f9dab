//! The backend client for the event-tracking gateway.
//!
//! Not written yet: this crate holds its place in the workspace so that the
//! layout is fixed from the start. Until it lands, backends post Segment-style
//! batches to `POST /v1/batch` directly (see the top-level README).
