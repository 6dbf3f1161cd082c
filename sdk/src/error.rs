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
    /// (The lent path, ABI version 2) The plugin declines this lent call (it cannot give
    /// its outputs through host buffers: byte strings, say): the host makes the same call
    /// through the wire path instead, where [`crate::Plugin::map`] runs.
    #[error("declined: {0}")]
    Declined(String),
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

    /// An [`Error::Declined`].
    pub fn declined(message: impl Into<String>) -> Error {
        Error::Declined(message.into())
    }

    /// The ABI status code for this error.
    pub fn status(&self) -> i32 {
        match self {
            Error::Wire { .. } | Error::InvalidInput(_) => status::INVALID_INPUT,
            Error::Config(_) => status::INVALID_CONFIG,
            Error::Plugin(_) => status::PLUGIN_ERROR,
            Error::Declined(_) => status::DECLINED,
        }
    }
}

/// The SDK's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
