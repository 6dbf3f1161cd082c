//! `sluice-plugin-wasm`: run Sluice plugins compiled to `wasm32` in a sandbox, on wasmtime,
//! through the same ABI as native plugins (`sdk/ABI.md`) and as the same kind of pipeline
//! stage ([`sluice_plugin_host::PluginStage`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use sluice_core::prelude::*;
//! use sluice_plugin_host::PluginStage;
//! use sluice_plugin_wasm::{WasmLimits, WasmOptions, WasmPlugin};
//!
//! # fn main() -> anyhow::Result<()> {
//! let options = WasmOptions {
//!     limits: WasmLimits::default()
//!         .memory_bytes(256 << 20)                 // per instance
//!         .time(Duration::from_millis(500)),       // per call
//!     ..WasmOptions::default()
//! };
//! let plugin = WasmPlugin::load_with("sluice_example_noise.wasm", &options)?;
//! let stage = PluginStage::new(plugin, &serde_json::json!({ "sigma": 0.05 }))?;
//! let images = Dataset::range(0, 10); // your decoded images here
//! let noisy = stage.apply(&images, MapChunksSpec::new(64).num_parallel(2));
//! # Ok(())
//! # }
//! ```
//!
//! - **One engine** per process ([`engine`]), with epoch interruption for time limits.
//! - **Compiled once**: modules are cached on disk ([`compile`]), keyed by the module's
//!   SHA-256 and the engine's compatibility hash (wasmtime version and settings), with a
//!   checksum of the compiled code; a stale, foreign or damaged entry is recompiled and
//!   replaced, never used.
//! - **Pre-linked** with no imports (`InstancePre`): the guest gets no WASI, so no files,
//!   network, clock or environment; a module that imports anything is refused at load.
//! - **One store and instance per worker thread** (the plugin stage's instance pool), each
//!   with a memory cap ([`WasmLimits::memory_bytes`]); each call has a time limit
//!   ([`WasmLimits::time`]). An instance that traps is discarded.
//! - **Typed errors**: traps, timeouts, memory exhaustion and broken outputs (pointers or
//!   lengths outside the guest's memory) fail the call's elements with
//!   [`sluice_plugin_host::Error::Call`], naming the plugin, the element ids and the cause; the
//!   pipeline's error policy fails the run or skips and counts them. The host keeps running.
//! - `.wasm` and `.wat` files are accepted.
#![deny(unsafe_code)]

mod cache;
mod component;
mod engine;
mod limits;
mod plugin;
mod wasi;

pub use cache::{CacheOutcome, compile, compile_component, default_cache_dir};
pub use component::{WORLD_PACKAGE, is_component};
pub use engine::engine;
pub use limits::{DEFAULT_MEMORY_BYTES, DEFAULT_TIME, MIN_MEMORY_BYTES, TICK, WasmLimits};
pub use plugin::{WasmFormat, WasmOptions, WasmPlugin};
pub use wasi::{LOG_BUDGET, MONOTONIC_STEP_NS, WALL_CLOCK_SECONDS};
