//! C plugins written from `sdk/ABI.md` alone (core modules: `examples/plugins/c-brightness`
//! and `c-invert`), compiled to wasm32 with clang and lld (which `.ci/run` installs), as
//! their READMEs say. `c-solarize`, a component, is built by `sluice-plugin-build`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::Error;

/// Compiles the C plugin `source` to the wasm32 module `out` with `clang
/// --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic` and
/// `extra` arguments (e.g. `-DNAME`); returns `out`.
pub fn c(source: &Path, out: &Path, extra: &[&str]) -> Result<PathBuf, Error> {
    let result = Command::new("clang")
        .args(["--target=wasm32-unknown-unknown", "-O2", "-nostdlib"])
        .args(["-Wl,--no-entry", "-Wl,--export-dynamic"])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(source)
        .output()
        .map_err(|e| Error::NoClang {
            file: source.to_path_buf(),
            cause: e.to_string(),
        })?;
    if !result.status.success() {
        return Err(Error::Clang {
            file: source.to_path_buf(),
            stderr: String::from_utf8_lossy(&result.stderr).into_owned(),
        });
    }
    Ok(out.to_path_buf())
}
