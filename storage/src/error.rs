//! The crate's error.

use std::path::PathBuf;

/// A storage error; each names the URL or path it is about (never a credential).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A URL Sluice cannot read (unknown scheme, malformed).
    #[error("{url}: {message}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The object or file does not exist (or the bucket does not).
    #[error("{url}: not found{}", if message.is_empty() { String::new() } else { format!(" ({message})") })]
    NotFound {
        /// The URL or path.
        url: String,
        /// What the store said.
        message: String,
    },
    /// A glob matched nothing.
    #[error("{pattern}: no file matches")]
    NoMatch {
        /// The pattern.
        pattern: String,
    },
    /// The pattern is not a valid glob.
    #[error("{pattern}: {message}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// What is wrong.
        message: String,
    },
    /// The store refused the credentials (or gave none access).
    #[error("{url}: access denied: {message}")]
    Unauthenticated {
        /// The URL.
        url: String,
        /// What the store said.
        message: String,
    },
    /// The object changed while it was being read (its ETag differs from the one seen when
    /// it was opened).
    #[error("{url}: the object changed while it was read (at byte {offset}); restart the read")]
    Changed {
        /// The URL.
        url: String,
        /// Where the read was.
        offset: u64,
    },
    /// A request failed, after the retries the options allow when it could be retried.
    #[error("{url}: at byte {offset}: {message} (after {attempts} attempt(s))")]
    Request {
        /// The URL.
        url: String,
        /// Where the read was.
        offset: u64,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        message: String,
    },
    /// A local file could not be read.
    #[error("{}: {error}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error from an object-store call on `url`.
    pub(crate) fn from_store(
        url: &str,
        offset: u64,
        attempts: u32,
        e: object_store::Error,
    ) -> Error {
        match e {
            object_store::Error::NotFound { source, .. } => Error::NotFound {
                url: url.to_string(),
                message: source.to_string(),
            },
            object_store::Error::Precondition { .. } => Error::Changed {
                url: url.to_string(),
                offset,
            },
            object_store::Error::Unauthenticated { source, .. }
            | object_store::Error::PermissionDenied { source, .. } => Error::Unauthenticated {
                url: url.to_string(),
                message: source.to_string(),
            },
            other => Error::Request {
                url: url.to_string(),
                offset,
                attempts,
                message: other.to_string(),
            },
        }
    }

    /// This error as an `io::Error` (for [`std::io::Read`]), keeping it as the source.
    pub fn into_io(self) -> std::io::Error {
        let kind = match &self {
            Error::NotFound { .. } => std::io::ErrorKind::NotFound,
            Error::Unauthenticated { .. } => std::io::ErrorKind::PermissionDenied,
            Error::Changed { .. } => std::io::ErrorKind::InvalidData,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, self)
    }
}
