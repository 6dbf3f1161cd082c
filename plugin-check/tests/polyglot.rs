//! `sluice plugin check` on the plugins written in C from `sdk/ABI.md` alone
//! (`examples/plugins/c-brightness`, `examples/plugins/c-invert`), compiled to wasm32 with
//! clang here: they pass, and a build whose outputs depend on their neighbours is caught.

use std::path::PathBuf;

use serde_json::json;
use sluice_guest_build as guests;
use sluice_plugin_check::{CheckOptions, Outcome, check, render};

/// Compiles the C plugin into `dir` with clang (which `.ci/run` installs).
fn compile(dir: &std::path::Path) -> PathBuf {
    compile_with(dir, &[])
}

fn compile_with(dir: &std::path::Path, defines: &[&str]) -> PathBuf {
    let source = guests::workspace_dir().join("examples/plugins/c-brightness/brightness.c");
    guests::c(&source, &dir.join("c_brightness.wasm"), defines).unwrap()
}

/// Compiles `examples/plugins/c-invert/invert.c` into `dir` with the README's command.
fn compile_invert(dir: &std::path::Path) -> PathBuf {
    let source = guests::workspace_dir().join("examples/plugins/c-invert/invert.c");
    guests::c(&source, &dir.join("c_invert.wasm"), &[]).unwrap()
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
