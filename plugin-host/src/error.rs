//! The plugin hosts' error type.

use std::path::PathBuf;

/// What can go wrong loading or running a plugin. Every variant names the plugin (its file
/// when it is not loaded yet).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The library or module could not be opened.
    #[error("{path}: cannot load the plugin: {message}")]
    Load {
        /// The plugin file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A symbol the ABI requires is missing.
    #[error(
        "{path}: not a Sluice plugin: missing symbol `{symbol}` (ABI version {version} requires it)"
    )]
    MissingSymbol {
        /// The plugin file.
        path: PathBuf,
        /// The symbol.
        symbol: String,
        /// The ABI version that requires it.
        version: u32,
    },
    /// The plugin was built for an ABI version this host does not support.
    #[error(
        "{path}: the plugin uses ABI version {found}; this host supports versions 1 to {supported}"
    )]
    AbiVersion {
        /// The plugin file.
        path: PathBuf,
        /// The plugin's version.
        found: u32,
        /// The newest version the host supports (it supports every one from 1).
        supported: u32,
    },
    /// The plugin's metadata is unreadable or inconsistent.
    #[error("{path}: bad plugin metadata: {message}")]
    Info {
        /// The plugin file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `sluice_init` refused the configuration.
    #[error("plugin {plugin}: init failed: {message}")]
    Init {
        /// The plugin's name.
        plugin: String,
        /// The plugin's message.
        message: String,
    },
    /// A call failed: the plugin returned an error status, panicked, or broke the ABI.
    #[error("plugin {plugin}: {status} on elements {elements}: {message}")]
    Call {
        /// The plugin's name.
        plugin: String,
        /// The status's name (`plugin error`, `panic`, `invalid input`, ...).
        status: String,
        /// The call's elements: their ids (the first three and a count for a longer
        /// chunk).
        elements: String,
        /// The plugin's (or the host's) message.
        message: String,
    },
    /// An element does not meet the plugin's declared input contract.
    #[error("plugin {plugin}: element {element}: {message}")]
    Contract {
        /// The plugin's name.
        plugin: String,
        /// The element's id.
        element: String,
        /// What is missing or wrong.
        message: String,
    },
    /// A pipeline file names a plugin by a file whose extension no host takes.
    #[error(
        "{path}: not a plugin file: {extension} (expected .so, .dylib or .dll for a native plugin, .wasm or .wat for a WASM plugin)"
    )]
    UnknownExtension {
        /// The plugin file.
        path: PathBuf,
        /// The extension, as the message shows it (`the extension .txt`, `no extension`).
        extension: String,
    },
    /// A pipeline file's `limits` (the host's options) are not ones the host takes.
    #[error("{path}: {message}")]
    Limits {
        /// The plugin file.
        path: PathBuf,
        /// What is wrong, naming the key (`limits.memory`, ...).
        message: String,
    },
    /// `limits` were given for a native plugin, which cannot be limited.
    #[error(
        "{path}: `limits` apply to WASM plugins only: a native plugin runs inside the host process and cannot be limited (remove `limits`, or use the plugin's .wasm build)"
    )]
    NativeLimits {
        /// The plugin file.
        path: PathBuf,
    },
    /// The configuration could not be turned into the plugin's JSON.
    #[error("plugin {plugin}: configuration: {message}")]
    Config {
        /// The plugin's name or file.
        plugin: String,
        /// What is wrong.
        message: String,
    },
}

/// The hosts' result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for sluice_core::Error {
    fn from(e: Error) -> Self {
        sluice_core::Error::plugin(e)
    }
}
