//! The SDK's error type.

use crate::abi::status;

/// What can go wrong in a plugin or at the ABI boundary. Each variant maps to a status code
/// ([`Error::status`]) that crosses the ABI with the message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A batch buffer is malformed.
    #[error("malformed batch buffer at byte {offset}: {message}")]
    Wire {
        /// Byte offset in the buffer.
        offset: usize,
        /// What is wrong.
        message: String,
    },
    /// The input does not meet the plugin's contract (a missing feature, a wrong dtype or
    /// rank).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Any other failure of the plugin's code.
    #[error("{0}")]
    Plugin(String),
}

impl Error {
    /// A [`Error::Wire`].
    pub fn wire(offset: usize, message: impl Into<String>) -> Error {
        Error::Wire {
            offset,
            message: message.into(),
        }
    }

    /// An [`Error::InvalidInput`].
    pub fn invalid_input(message: impl Into<String>) -> Error {
        Error::InvalidInput(message.into())
    }

    /// An [`Error::Config`].
    pub fn config(message: impl Into<String>) -> Error {
        Error::Config(message.into())
    }

    /// An [`Error::Plugin`].
    pub fn plugin(message: impl Into<String>) -> Error {
        Error::Plugin(message.into())
    }

    /// The ABI status code for this error.
    pub fn status(&self) -> i32 {
        match self {
            Error::Wire { .. } | Error::InvalidInput(_) => status::INVALID_INPUT,
            Error::Config(_) => status::INVALID_CONFIG,
            Error::Plugin(_) => status::PLUGIN_ERROR,
        }
    }
}

/// The SDK's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
