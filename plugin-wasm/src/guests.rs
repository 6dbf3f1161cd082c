//! Building the workspace's guest crates (plugins written against `sluice-sdk`) for
//! `wasm32-unknown-unknown`, so tests, benches and `sluice demo` never depend on files built
//! by hand.
//!
//! Guests are built in release mode with `simd128`, without debug info, into
//! `<workspace>/target/wasm-guests` (a target directory of their own, so a build started from
//! inside `cargo test` does not wait on the outer build's lock).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The guests' target triple.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// Why a guest could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The wasm32 target is not installed and could not be added.
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
}

/// The workspace this crate was built in (where the guest crates are).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sluice-plugin-wasm lives in a workspace")
        .to_path_buf()
}

/// Where [`build`] puts the `.wasm` of `package`.
pub fn output_path(workspace: &Path, package: &str) -> PathBuf {
    workspace
        .join("target")
        .join("wasm-guests")
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")))
}

fn cargo_build(workspace: &Path, package: &str) -> std::io::Result<std::process::Output> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .current_dir(workspace)
        .args(["build", "--release", "--target", TARGET, "-p", package])
        .arg("--target-dir")
        .arg(workspace.join("target").join("wasm-guests"))
        .env(
            "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS",
            "-C target-feature=+simd128",
        )
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
}

fn missing_target(stderr: &str) -> bool {
    stderr.contains("may not be installed")
        || stderr.contains("can't find crate for `core`")
        || stderr.contains("can't find crate for `std`")
}

/// Builds the guest crate `package` of `workspace` for wasm32 and returns its `.wasm`. When
/// the wasm32 target is missing it runs `rustup target add wasm32-unknown-unknown` once and
/// retries; if that is not possible the error names the one command to run.
pub fn build(workspace: &Path, package: &str) -> Result<PathBuf, Error> {
    let failed = |message: String| Error::Build {
        package: package.to_string(),
        message,
    };
    let mut out =
        cargo_build(workspace, package).map_err(|e| failed(format!("cannot run cargo: {e}")))?;
    if !out.status.success() && missing_target(&String::from_utf8_lossy(&out.stderr)) {
        let added = Command::new("rustup")
            .args(["target", "add", TARGET])
            .status()
            .is_ok_and(|s| s.success());
        if !added {
            return Err(Error::MissingTarget);
        }
        out = cargo_build(workspace, package)
            .map_err(|e| failed(format!("cannot run cargo: {e}")))?;
    }
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if missing_target(&stderr) {
            return Err(Error::MissingTarget);
        }
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        return Err(failed(
            tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        ));
    }
    let path = output_path(workspace, package);
    if !path.exists() {
        return Err(failed(format!(
            "cargo succeeded but {} is missing",
            path.display()
        )));
    }
    Ok(path)
}
