//! `gaussian_noise` as a WebAssembly component: the `sluice-example-noise` plugin exported
//! in the `map-transform` world of `sdk/wit/sluice.wit` (one call per element). The same code
//! as the core-ABI build, so the same seeds give the same bits.
//!
//! `sluice-guest-build` builds it for wasm32 and makes the component
//! (`sluice_guest_build::build_component`).
#![deny(unsafe_code)]

sluice_sdk_component::export_map!(sluice_example_noise::GaussianNoise);
