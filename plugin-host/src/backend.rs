//! The traits every plugin host implements: a [`Backend`] (a loaded plugin: its metadata
//! and a way to create instances) and its [`Instance`]s (one `sluice_process` call at a
//! time, or a `sluice_process_lent` call where the host has the lent path), and how a call
//! fails ([`CallFailure`]).

use sluice_core::Tensor;
use sluice_sdk::abi::status;
use sluice_sdk::{Entry, PluginInfo};

use crate::error::Result;
use crate::lent::LentCall;

/// A loaded plugin: its metadata and a way to create instances.
pub trait Backend: Send + Sync + 'static {
    /// The metadata the plugin declared.
    fn info(&self) -> &PluginInfo;

    /// Where it was loaded from (for messages).
    fn source(&self) -> String;

    /// A new instance for `config` (JSON bytes), through `sluice_init`.
    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>>;

    /// Whether its instances take the lent path ([`Instance::call_lent`]): a native plugin
    /// of ABI version 2 or later. Default: no (every call takes the wire path, as WASM
    /// modules do).
    fn lends(&self) -> bool {
        false
    }
}

/// How a lent call ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lent {
    /// The outputs are in the call's buffers (and `keep` flags).
    Done,
    /// The plugin declined (status DECLINED, with its message): make the same call through
    /// the wire path.
    Declined(String),
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    /// The status's name (`"plugin error"`, `"panic"`, `"timeout"`, `"trap"`, ...).
    pub status: String,
    /// The message.
    pub message: String,
    /// The instance must not be used again (it panicked or trapped).
    pub discard: bool,
}

/// What an error names as the plugin's message when the plugin gave none (an empty or
/// blank error buffer): a failure always says something.
pub const NO_MESSAGE: &str = "(the plugin gave no error message)";

/// A message the plugin gave (its error buffer, read leniently as UTF-8), or [`NO_MESSAGE`]
/// when it is empty or blank.
pub fn plugin_message(bytes: &[u8]) -> String {
    let message = String::from_utf8_lossy(bytes);
    if message.trim().is_empty() {
        NO_MESSAGE.to_string()
    } else {
        message.into_owned()
    }
}

impl CallFailure {
    /// A failure from an ABI status code and message ([`NO_MESSAGE`] for an empty one).
    pub fn from_status(code: i32, message: String) -> CallFailure {
        CallFailure {
            status: status::name(code).to_string(),
            message: plugin_message(message.as_bytes()),
            discard: code == status::PANIC || code == status::UNKNOWN_INSTANCE,
        }
    }
}

/// One instance of a plugin; the host never calls one instance from two threads at once.
pub trait Instance: Send {
    /// One `sluice_process` call: `input` is a batch buffer, `seeds` one per element;
    /// `output` is given the output buffer on success.
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure>;

    /// A call on the elements' features themselves rather than a batch buffer, for hosts
    /// that pass typed tensors (the WASM component host, `sdk/WIT.md`): `inputs` holds each
    /// element's features as the host sends them ([`crate::wire::select`]), `seeds` one per
    /// element; the outputs come back as a decoded output buffer would give them.
    ///
    /// `None` (the default): this instance takes batch buffers only, and
    /// [`PluginStage`](crate::PluginStage) calls [`Instance::call`].
    fn call_features(
        &mut self,
        inputs: &[Vec<(&str, &Tensor)>],
        seeds: &[u64],
    ) -> Option<std::result::Result<Vec<Entry>, CallFailure>> {
        let _ = (inputs, seeds);
        None
    }

    /// One `sluice_process_lent` call (ABI version 2, native hosts): the chunk's tensors
    /// lent in place and the host's output allocator, both in `call`. The default declines
    /// (the host then calls [`Instance::call`]): what a host without the lent path does.
    fn call_lent(&mut self, call: &mut LentCall<'_>) -> std::result::Result<Lent, CallFailure> {
        let _ = call;
        Ok(Lent::Declined("this host has no lent path".to_string()))
    }
}
