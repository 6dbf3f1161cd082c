//! `sluice-wasm`: the sandboxed WASM plugin host.
//!
//! **Status: not yet implemented.** Nothing in this crate works yet; it exists so the
//! workspace layout is in place. It will run plugins compiled to `wasm32-unknown-unknown` in
//! wasmtime, through the same ABI as native plugins.
#![forbid(unsafe_code)]
