//! Builds the WASM augmentation `sluice demo` runs, the example plugin `gray_solarize`
//! (`examples/plugins/solarize`, crate `sluice-example-solarize`), for
//! `wasm32-unknown-unknown` into `OUT_DIR`, where `src/demo.rs` includes it: the binary
//! carries the module and never runs cargo itself.
//!
//! Without the wasm32 target (or the guest's sources) the build still succeeds: the module
//! is empty and `OUT_DIR/demo_guest.missing` says why; `sluice demo` then says how to get
//! the WASM part and runs the pipeline without it. Adding the target with rustup rewrites
//! the toolchain's component list, which is watched, so the next build includes it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The guest crate.
const GUEST: &str = "sluice-example-solarize";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest.parent().expect("the CLI lives in a workspace");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    for input in [
        "examples/plugins/solarize/src",
        "examples/plugins/solarize/Cargo.toml",
        "sdk/src",
        "sdk/Cargo.toml",
        "Cargo.lock",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            workspace.join(input).display()
        );
    }
    if let Some(components) = toolchain_components() {
        println!("cargo::rerun-if-changed={}", components.display());
    }
    let missing = match build(workspace, &out) {
        Ok(wasm) => {
            copy(&wasm, &out.join("demo_guest.wasm"));
            String::new()
        }
        Err(why) => {
            println!(
                "cargo::warning=`sluice demo` will run without its WASM augmentation: {} (`rustup \
                 target add wasm32-unknown-unknown`, then rebuild)",
                why.lines().next().unwrap_or_default()
            );
            write(&out.join("demo_guest.wasm"), b"");
            why
        }
    };
    write(&out.join("demo_guest.missing"), missing.as_bytes());
}

/// The guest's `.wasm`, built in a target directory under `out`, or why not.
fn build(workspace: &Path, out: &Path) -> Result<PathBuf, String> {
    if !workspace
        .join("examples/plugins/solarize/Cargo.toml")
        .is_file()
    {
        return Err(format!(
            "its sources (examples/plugins/solarize) are not in {}",
            workspace.display()
        ));
    }
    let options = sluice_guest_build::Options {
        target_dir: out.join("guests"),
        // A build script does not change the toolchain.
        add_target: false,
    };
    sluice_guest_build::build_with(workspace, GUEST, &options).map_err(|e| match e {
        sluice_guest_build::Error::MissingTarget => {
            format!("the {} target is not installed", sluice_guest_build::TARGET)
        }
        other => other.to_string(),
    })
}

/// `rustup target add` rewrites `<sysroot>/lib/rustlib/components`; `None` without rustup.
fn toolchain_components() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let components = Path::new(sysroot.trim())
        .join("lib")
        .join("rustlib")
        .join("components");
    components.is_file().then_some(components)
}

fn copy(from: &Path, to: &Path) {
    if let Err(e) = std::fs::copy(from, to) {
        panic!("cannot copy {} to {}: {e}", from.display(), to.display());
    }
}

fn write(path: &Path, bytes: &[u8]) {
    if let Err(e) = std::fs::write(path, bytes) {
        panic!("cannot write {}: {e}", path.display());
    }
}
