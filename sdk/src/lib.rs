//! `sluice-sdk`: the SDK and versioned C ABI for Sluice plugins.
//!
//! **Status: not yet implemented.** Nothing in this crate works yet; it exists so the
//! workspace layout is in place. The plugin SDK issue will define the ABI (`sdk/ABI.md`), the
//! safe author trait and the `export_plugin!` macro here.
#![forbid(unsafe_code)]
