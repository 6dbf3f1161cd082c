//! `sluice plugin check` on the plugins written in C from `sdk/ABI.md` alone
//! (`examples/plugins/c-brightness`, `examples/plugins/c-invert`), compiled to wasm32 with
//! clang here: they pass, and a build whose outputs depend on their neighbours is caught.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;
use sluice_plugin_check::{CheckOptions, Outcome, check, render};
use sluice_plugin_wasm::guests;

/// Compiles the C plugin into `dir` with clang (which `.ci/run` installs).
fn compile(dir: &std::path::Path) -> PathBuf {
    compile_with(dir, &[])
}

fn compile_with(dir: &std::path::Path, defines: &[&str]) -> PathBuf {
    let source = guests::workspace_dir().join("examples/plugins/c-brightness/brightness.c");
    let out = dir.join("c_brightness.wasm");
    let result = Command::new("clang")
        .args(["--target=wasm32-unknown-unknown", "-O2", "-nostdlib"])
        .args(["-Wl,--no-entry", "-Wl,--export-dynamic"])
        .args(defines)
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .output()
        .expect("clang, to build the C plugin: apt-get install clang lld");
    assert!(
        result.status.success(),
        "clang failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

/// Compiles `examples/plugins/c-invert/invert.c` into `dir` with the README's command.
fn compile_invert(dir: &std::path::Path) -> PathBuf {
    let source = guests::workspace_dir().join("examples/plugins/c-invert/invert.c");
    let out = dir.join("c_invert.wasm");
    let result = match Command::new("clang")
        .args(["--target=wasm32-unknown-unknown", "-O2", "-nostdlib"])
        .args(["-Wl,--no-entry", "-Wl,--export-dynamic", "-o"])
        .arg(&out)
        .arg(&source)
        .output()
    {
        Ok(result) => result,
        Err(e) => panic!(
            "cannot run clang ({e}), needed to build the C plugin {}: install it with \
             `apt-get update && apt-get install -y clang lld` (.ci/run does)",
            source.display()
        ),
    };
    assert!(
        result.status.success(),
        "clang failed on {} (is lld installed? `apt-get install -y clang lld`): {}",
        source.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

#[test]
fn the_c_plugin_passes_sluice_plugin_check() {
    let dir = tempfile::tempdir().unwrap();
    let report = check(
        &compile(dir.path()),
        &CheckOptions {
            config: json!({"delta": 17, "p": 0.5}),
            cases: 24,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(report.passed(), "{}", render(&report));
}

#[test]
fn a_build_whose_outputs_depend_on_neighbours_fails_the_independence_check() {
    let dir = tempfile::tempdir().unwrap();
    let report = check(
        &compile_with(dir.path(), &["-DBROKEN_NEIGHBOURS"]),
        &CheckOptions {
            cases: 24,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    let independent = report
        .checks
        .iter()
        .find(|c| c.check == "independent")
        .unwrap();
    match &independent.outcome {
        Outcome::Fail {
            message,
            minimal_case,
        } => {
            assert!(message.contains("depends on its neighbours"), "{message}");
            assert_eq!(
                minimal_case
                    .as_deref()
                    .unwrap()
                    .matches("Element::new")
                    .count(),
                2
            );
        }
        other => panic!("{other:?}\n{}", render(&report)),
    }
    assert!(!report.passed());
}

#[test]
fn c_invert_passes_sluice_plugin_check() {
    let dir = tempfile::tempdir().unwrap();
    let report = check(
        &compile_invert(dir.path()),
        &CheckOptions {
            config: json!({"p": 0.5}),
            cases: 24,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(report.passed(), "{}", render(&report));
}
