//! The traits every plugin host implements: a [`Backend`] (a loaded plugin: its metadata
//! and a way to create instances) and its [`Instance`]s (one `sluice_process` call at a
//! time), and how a call fails ([`CallFailure`]).

use sluice_core::Tensor;
use sluice_sdk::abi::status;
use sluice_sdk::{Entry, PluginInfo};

use crate::error::Result;

/// A loaded plugin: its metadata and a way to create instances.
pub trait Backend: Send + Sync + 'static {
    /// The metadata the plugin declared.
    fn info(&self) -> &PluginInfo;

    /// Where it was loaded from (for messages).
    fn source(&self) -> String;

    /// A new instance for `config` (JSON bytes), through `sluice_init`.
    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>>;
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

impl CallFailure {
    /// A failure from an ABI status code and message.
    pub fn from_status(code: i32, message: String) -> CallFailure {
        CallFailure {
            status: status::name(code).to_string(),
            message,
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
}
