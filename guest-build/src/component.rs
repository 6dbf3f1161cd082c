//! Rust guest crates of the component worlds (`sdk/wit/sluice.wit`): built for wasm32 like
//! any guest (their core module carries wit-bindgen's `component-type` section), then made
//! a component with the `wit-component` crate, in-process: no tool to install.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::rust::{Options, build_with};

/// Where [`build_component_with`] puts the component of `package`:
/// `<target_dir>/components/<crate_name>.wasm`.
pub fn component_path(target_dir: &Path, package: &str) -> PathBuf {
    target_dir
        .join("components")
        .join(format!("{}.wasm", package.replace('-', "_")))
}

/// Builds the component guest crate `package` of `workspace` into
/// `<workspace>/target/wasm-guests` and returns the component (see [`build_component_with`]).
pub fn build_component(workspace: &Path, package: &str) -> Result<PathBuf, Error> {
    build_component_with(workspace, package, &Options::for_tests(workspace))
}

/// Builds the component guest crate `package` (a `cdylib` exporting one of the Sluice
/// worlds with wit-bindgen, e.g. through `sluice_sdk_component::export_map!`) for
/// `wasm32-unknown-unknown`, then encodes its core module as a component (wit-component's
/// `ComponentEncoder`, validated). The component imports nothing: the guest has no WASI.
/// Rewritten only when the core module changed.
pub fn build_component_with(
    workspace: &Path,
    package: &str,
    options: &Options,
) -> Result<PathBuf, Error> {
    let module = build_with(workspace, package, options)?;
    let failed = |message: String| Error::Component {
        package: package.to_string(),
        message,
    };
    let out = component_path(&options.target_dir, package);
    let fresh = match (std::fs::metadata(&module), std::fs::metadata(&out)) {
        (Ok(m), Ok(c)) => match (m.modified(), c.modified()) {
            (Ok(m), Ok(c)) => c >= m,
            _ => false,
        },
        _ => false,
    };
    if fresh {
        return Ok(out);
    }
    let bytes = std::fs::read(&module)
        .map_err(|e| failed(format!("cannot read {}: {e}", module.display())))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&bytes)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| failed(format!("{e:#}")))?;
    let dir = out.parent().expect("component_path has a parent");
    std::fs::create_dir_all(dir)
        .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
    // Written beside, then renamed: a concurrent build never sees half a component.
    let tmp = out.with_extension(format!("wasm.tmp{}", std::process::id()));
    std::fs::write(&tmp, &component)
        .and_then(|()| std::fs::rename(&tmp, &out))
        .map_err(|e| failed(format!("cannot write {}: {e}", out.display())))?;
    Ok(out)
}
