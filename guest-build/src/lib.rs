//! `sluice-guest-build`: builds the workspace's WASM guests, so tests, benches and the
//! CLI never depend on files built by hand, and no library runs cargo or clang at run
//! time. A development crate (`publish = false`): a dev-dependency of the tests and benches
//! that run guests, and a build-dependency of the CLI, whose build script builds the
//! module `sluice demo` carries.
//!
//! - [`build`] / [`build_with`]: a Rust guest crate (`sluice-example-noise`, ...) with cargo
//!   for `wasm32-unknown-unknown` (release, `simd128`, no debug info).
//! - [`build_component`] / [`build_component_with`]: a Rust guest crate of the component
//!   worlds (`sdk/wit/sluice.wit`, e.g. `sluice-example-noise-component`), built the same
//!   way and made a component with the `wit-component` crate.
//! - [`c`]: a C plugin of the core-module ABI (`examples/plugins/c-brightness`, `c-invert`)
//!   with clang.
//!
//! ```no_run
//! let workspace = sluice_guest_build::workspace_dir();
//! let wasm = sluice_guest_build::build(&workspace, "sluice-example-noise")?;
//! # Ok::<(), sluice_guest_build::Error>(())
//! ```
#![deny(unsafe_code)]

mod c;
mod component;
mod error;
mod rust;

pub use c::c;
pub use component::{build_component, build_component_with, component_path};
pub use error::Error;
pub use rust::{Options, TARGET, build, build_with, output_path, workspace_dir};
