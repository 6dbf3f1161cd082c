//! `sluice-plugin-build`: Sluice plugins in Rust, C, Python, JavaScript and Zig, built into
//! components of the Sluice worlds (`sdk/wit/sluice.wit`) with each language's own
//! toolchain; and the template projects `sluice plugin new` writes. The CLI's `sluice
//! plugin new` and `sluice plugin build` are this crate; the tests build the examples of
//! `examples/plugins/` with it too.
//!
//! | Language | Toolchain (looked up as [`toolchain`] says) | How |
//! |---|---|---|
//! | Rust | cargo, `wasm32-unknown-unknown` | `wit-bindgen` (crates.io); the core module made a component here (wit-component) |
//! | C | clang, wasi-libc (Debian) | bindings from wit-bindgen's C generator (here, as a library); clang; made a component here |
//! | Python | componentize-py (PyPI) | `componentize-py componentize` (CPython in the component: imports sandboxed WASI) |
//! | JavaScript | componentize-js (npm), node | `componentize-js` (StarlingMonkey in the component: imports sandboxed WASI: stdio, the wall clock, the filesystem) |
//! | Zig | zig (PyPI's `ziglang`) | the C bindings compiled by Zig beside the plugin's Zig code; made a component here |
//!
//! ```no_run
//! use sluice_plugin_build::{BuildOptions, Project, build};
//! let project = Project::open(std::path::Path::new("myplug"))?;
//! let built = build(&project, &BuildOptions::default())?;
//! println!("{}", built.path.display());
//! # Ok::<(), sluice_plugin_build::Error>(())
//! ```
#![deny(unsafe_code)]

mod bindings;
mod build;
mod error;
mod manifest;
mod template;
pub mod toolchain;

pub use bindings::{CBindings, c_bindings, componentize};
pub use build::{BuildOptions, Built, JS_DISABLED, build};
pub use error::Error;
pub use manifest::{BuildSection, Language, MANIFEST, Manifest, PluginSection, Project, WORLDS};
pub use template::{SLUICE_WIT, new_project};
