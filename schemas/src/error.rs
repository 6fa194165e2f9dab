//! The one error a broken catalog produces: it always names the file at
//! fault, because the person reading it has to go and fix that file.

/// A catalog that cannot be used, and where the problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {problem}")]
pub struct CatalogError {
    /// The file (or directory) at fault, as the loader named it.
    pub origin: String,
    /// What is wrong with it, in words a schema author understands.
    pub problem: String,
}

impl CatalogError {
    pub(crate) fn new(origin: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { origin: origin.into(), problem: problem.into() }
    }
}
