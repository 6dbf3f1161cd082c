//! Rust guest crates (plugins written against `sluice-sdk`), built with cargo for
//! `wasm32-unknown-unknown` in release mode with `simd128` and without debug info, into a
//! target directory of their own (so a build started from inside `cargo test` or a build
//! script does not wait on the outer build's lock).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::Error;

/// The guests' target triple.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// Environment variables of an outer cargo (running a test or a build script) that must not
/// reach the guest's build: flags, target and target directory meant for the host build,
/// and clippy's wrapper.
const OUTER_CARGO_ENV: [&str; 6] = [
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "RUSTC_WORKSPACE_WRAPPER",
];

/// How to build a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The target directory of the guest builds.
    pub target_dir: PathBuf,
    /// When the wasm32 target is missing, run `rustup target add` once and retry (tests);
    /// else fail with [`Error::MissingTarget`] (build scripts, which must not change the
    /// toolchain).
    pub add_target: bool,
}

impl Options {
    /// What tests and benches use: `<workspace>/target/wasm-guests`, adding the target when
    /// it is missing.
    pub fn for_tests(workspace: &Path) -> Options {
        Options {
            target_dir: workspace.join("target").join("wasm-guests"),
            add_target: true,
        }
    }
}

/// The workspace this crate is part of (where the guest crates are).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sluice-guest-build lives in a workspace")
        .to_path_buf()
}

/// Where [`build_with`] puts the `.wasm` of `package`.
pub fn output_path(target_dir: &Path, package: &str) -> PathBuf {
    target_dir
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")))
}

fn cargo_build(
    workspace: &Path,
    package: &str,
    target_dir: &Path,
) -> std::io::Result<std::process::Output> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["build", "--release", "--target", TARGET, "-p", package])
        .arg("--target-dir")
        .arg(target_dir)
        .env(
            "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS",
            "-C target-feature=+simd128",
        )
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false");
    for name in OUTER_CARGO_ENV {
        command.env_remove(name);
    }
    command.output()
}

fn missing_target(stderr: &str) -> bool {
    stderr.contains("may not be installed")
        || stderr.contains("can't find crate for `core`")
        || stderr.contains("can't find crate for `std`")
}

/// Builds the guest crate `package` of `workspace` for wasm32 into
/// `<workspace>/target/wasm-guests` and returns its `.wasm`. When the wasm32 target is
/// missing it runs `rustup target add wasm32-unknown-unknown` once and retries; if that is
/// not possible the error names the one command to run.
pub fn build(workspace: &Path, package: &str) -> Result<PathBuf, Error> {
    build_with(workspace, package, &Options::for_tests(workspace))
}

/// Builds the guest crate `package` of `workspace` for wasm32 as `options` say and returns
/// its `.wasm`.
pub fn build_with(workspace: &Path, package: &str, options: &Options) -> Result<PathBuf, Error> {
    let failed = |message: String| Error::Build {
        package: package.to_string(),
        message,
    };
    let target_dir = options.target_dir.as_path();
    let mut out = cargo_build(workspace, package, target_dir)
        .map_err(|e| failed(format!("cannot run cargo: {e}")))?;
    if !out.status.success() && missing_target(&String::from_utf8_lossy(&out.stderr)) {
        let added = options.add_target
            && Command::new("rustup")
                .args(["target", "add", TARGET])
                .status()
                .is_ok_and(|s| s.success());
        if !added {
            return Err(Error::MissingTarget);
        }
        out = cargo_build(workspace, package, target_dir)
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
    let path = output_path(target_dir, package);
    if !path.exists() {
        return Err(failed(format!(
            "cargo succeeded but {} is missing",
            path.display()
        )));
    }
    Ok(path)
}
