//! Why a guest could not be built.

use std::path::PathBuf;

use crate::rust::TARGET;

/// Why a guest could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The wasm32 target is not installed (and was not, or could not be, added).
    #[error(
        "the {TARGET} target is not installed (and `rustup target add` failed or rustup is \
         missing): run `rustup target add {TARGET}`"
    )]
    MissingTarget,
    /// Cargo failed.
    #[error("building the WASM guest `{package}` failed: {message}")]
    Build {
        /// The guest crate.
        package: String,
        /// The end of cargo's output.
        message: String,
    },
    /// The core module could not be made a component.
    #[error("making the WASM guest `{package}` a component failed: {message}")]
    Component {
        /// The guest crate.
        package: String,
        /// wit-component's error.
        message: String,
    },
    /// clang could not be run.
    #[error(
        "cannot run clang ({cause}), needed to build the C plugin {}: install it with \
         `apt-get update && apt-get install -y clang lld` (.ci/run does)",
        file.display()
    )]
    NoClang {
        /// The C source.
        file: PathBuf,
        /// Why it could not be run.
        cause: String,
    },
    /// clang failed.
    #[error(
        "clang failed on {} (is lld installed? `apt-get install -y clang lld`): {stderr}",
        file.display()
    )]
    Clang {
        /// The C source.
        file: PathBuf,
        /// clang's output.
        stderr: String,
    },
}
