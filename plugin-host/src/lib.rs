//! `sluice-plugin-host`: what every Sluice plugin host shares, whatever runs the plugin's
//! code (a native library in `sluice-plugin-native`, a WASM module in `sluice-plugin-wasm`).
//! Users reach it through the `sluice-plugins` facade.
//!
//! - [`Backend`] and [`Instance`]: what a host implements (a loaded plugin, and one
//!   instance of it making one `sluice_process` call at a time; a native host of ABI
//!   version 2 also makes `sluice_process_lent` calls, [`Instance::call_lent`]).
//! - [`lent`]: the lent path (ABI version 2): a chunk's tensors lent to the plugin in
//!   place and its outputs written into buffers from the pool, no copies ([`LentCall`]).
//! - [`abi`] and [`metadata`]: the checks every host makes when it loads a plugin, in one
//!   place: the ABI version (read before anything else), the required symbols, and the
//!   metadata JSON.
//! - [`wire`]: pipeline elements to and from the batch buffers of `sdk/ABI.md`.
//! - [`contract`]: the declared input and output features, checked on every element.
//! - [`PluginStage`]: a backend with a configuration and a pool of instances, run as a
//!   pipeline stage (core's `map_chunks`), one call per chunk of elements.
//! - [`InProcess`]: a plugin crate compiled into the host process, as a backend: the
//!   reference loaded builds are compared with.
//! - [`Error`]: everything that can go wrong loading or running a plugin, by kind.
//! - [`testing`]: helpers for testing plugins and hosts.
//!
//! ```no_run
//! use sluice_core::prelude::*;
//! use sluice_plugin_host::{InProcess, PluginStage};
//! use sluice_sdk::{Config, Element, Kind, Plugin, PluginInfo, Result, Rng};
//!
//! struct Identity;
//!
//! impl Plugin for Identity {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("identity", "0.1.0", Kind::Map)
//!     }
//!     fn new(_: &Config) -> Result<Self> {
//!         Ok(Identity)
//!     }
//!     fn map(&mut self, element: Element, _: &mut Rng) -> Result<Element> {
//!         Ok(element)
//!     }
//! }
//!
//! # fn main() -> anyhow::Result<()> {
//! let backend = InProcess::<Identity>::new(); // or a NativePlugin, a WasmPlugin
//! let stage = PluginStage::new(backend, &serde_json::json!({}))?;
//! let same = stage.apply(&Dataset::range(0, 10), MapChunksSpec::new(64).num_parallel(2));
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]

pub mod abi;
mod backend;
pub mod contract;
mod error;
mod in_process;
#[allow(unsafe_code)]
pub mod lent;
pub mod metadata;
mod stage;
pub mod testing;
pub mod wire;

pub use backend::{Backend, CallFailure, Instance, Lent, NO_MESSAGE, plugin_message};
pub use error::{Error, Result};
pub use in_process::InProcess;
pub use lent::LentCall;
pub use stage::{CallCounts, CallPath, PluginStage};
