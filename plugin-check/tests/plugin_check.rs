//! `sluice_plugin_check` on the example plugins (native and WASM builds, which must agree)
//! and on deliberately broken plugins, each caught by the right check.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use sluice_guest_build as guests;
use sluice_plugin_check::{CheckOptions, Outcome, Report, check, render};
use sluice_plugins::testing::cdylib_beside_exe;

fn options(config: serde_json::Value) -> CheckOptions {
    CheckOptions {
        config,
        cases: 12,
        ..CheckOptions::default()
    }
}

fn wasm(package: &str) -> PathBuf {
    guests::build(&guests::workspace_dir(), package).unwrap()
}

fn outcome<'a>(report: &'a Report, name: &str) -> &'a Outcome {
    &report
        .checks
        .iter()
        .find(|c| c.check == name)
        .unwrap()
        .outcome
}

#[test]
fn the_example_plugins_pass_and_their_builds_agree() {
    for (native, package, config) in [
        (
            "sluice_example_noise",
            "sluice-example-noise",
            json!({"sigma": 0.1, "p": 0.7}),
        ),
        (
            "sluice_example_solarize",
            "sluice-example-solarize",
            json!({"p_gray": 0.5, "p_solarize": 0.5}),
        ),
    ] {
        let mut o = options(config);
        o.other = Some(wasm(package));
        let report = check(&cdylib_beside_exe(native).unwrap(), &o).unwrap();
        assert!(report.passed(), "{}", render(&report));
        assert_eq!(outcome(&report, "agrees_with_other"), &Outcome::Pass);
        // And from the WASM side.
        o.other = None;
        let report = check(&wasm(package), &o).unwrap();
        assert!(report.passed(), "{}", render(&report));
    }
}

#[test]
fn the_example_components_pass_and_agree_with_their_native_builds() {
    for (native, package, config) in [
        (
            "sluice_example_noise",
            "sluice-example-noise-component",
            json!({"sigma": 0.1, "p": 0.7}),
        ),
        (
            "sluice_example_solarize",
            "sluice-example-solarize-component",
            json!({"p_gray": 0.5, "p_solarize": 0.5}),
        ),
    ] {
        let component = guests::build_component(&guests::workspace_dir(), package).unwrap();
        let mut o = options(config);
        o.other = Some(cdylib_beside_exe(native).unwrap());
        let report = check(&component, &o).unwrap();
        assert!(report.passed(), "{}", render(&report));
        assert_eq!(outcome(&report, "agrees_with_other"), &Outcome::Pass);
        // The damaged-buffer check runs through the host's decoding for a component.
        assert_eq!(outcome(&report, "malformed_input"), &Outcome::Pass);
        // And the native build checked against the component.
        o.other = Some(component);
        let report = check(&cdylib_beside_exe(native).unwrap(), &o).unwrap();
        assert!(report.passed(), "{}", render(&report));
        assert_eq!(outcome(&report, "agrees_with_other"), &Outcome::Pass);
    }
}

#[test]
fn each_broken_plugin_is_caught_by_its_check() {
    let broken = cdylib_beside_exe("sluice_test_plugin_broken").unwrap();
    let clean = check(&broken, &options(json!({"break": "none"}))).unwrap();
    assert!(clean.passed(), "{}", render(&clean));
    for (mode, failing, message) in [
        (
            "nondeterministic",
            "deterministic",
            "gave different outputs",
        ),
        ("contract", "output_contract", "expected u8"),
        ("refuse", "accepts_contract", "refusing an image"),
        ("panic", "accepts_contract", "cannot handle an image"),
        ("slow", "time_limit", "over the limit of 20ms"),
    ] {
        let mut o = options(json!({"break": mode}));
        o.time_limit = Duration::from_millis(20);
        o.cases = 6;
        let report = check(&broken, &o).unwrap();
        let text = render(&report);
        match outcome(&report, failing) {
            Outcome::Fail {
                message: m,
                minimal_case,
            } => {
                assert!(m.contains(message), "{mode}: {m}\n{text}");
                let code = minimal_case.as_deref().expect("a minimal case");
                assert!(
                    code.contains("Element::new(ElementId::new(0, 0))"),
                    "{code}"
                );
                assert!(code.contains(".with(\"image\", Tensor::new(&["), "{code}");
            }
            other => panic!("{mode}: {failing} should fail, got {other:?}\n{text}"),
        }
        assert!(!report.passed());
        assert!(text.contains(&format!("FAIL     {failing}")), "{text}");
    }
}

#[test]
fn a_shrunk_case_is_minimal() {
    // `refuse` fails on images wider than 2 pixels: the minimal case is one element, 3 wide.
    let report = check(
        &cdylib_beside_exe("sluice_test_plugin_broken").unwrap(),
        &options(json!({"break": "refuse"})),
    )
    .unwrap();
    let Outcome::Fail {
        minimal_case: Some(code),
        ..
    } = outcome(&report, "accepts_contract")
    else {
        panic!("{}", render(&report));
    };
    assert_eq!(code.matches("Element::new").count(), 1, "{code}");
    assert!(code.contains("Tensor::new(&[1, 3, 1]"), "{code}");
}

#[test]
fn a_module_that_accepts_garbage_fails_the_malformed_input_check() {
    // An echo module (no parsing at all): every damaged buffer comes back "OK".
    let dir = tempfile::tempdir().unwrap();
    let info = r#"{"abi_version":1,"name":"echo","version":"0","kind":"map","inputs":[{"name":"image","dtype":"u8","rank":3}]}"#;
    let wat = format!(
        r#"(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (global $p (mut i32) (i32.const 0)) (global $n (mut i32) (i32.const 0))
  (data (i32.const 1024) "{}")
  (func (export "sluice_abi_version") (result i32) (i32.const 1))
  (func (export "sluice_info_ptr") (result i32) (i32.const 1024))
  (func (export "sluice_info_len") (result i32) (i32.const {}))
  (func (export "sluice_alloc") (param $len i32) (result i32) (local $r i32)
    (local.set $r (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (global.get $heap) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (local.get $r))
  (func (export "sluice_free") (param i32 i32))
  (func (export "sluice_init") (param i32 i32) (result i32) (i32.const 1))
  (func (export "sluice_process") (param i32 i32 i32 i32 i32) (result i32)
    (global.set $p (local.get 1)) (global.set $n (local.get 2)) (i32.const 0))
  (func (export "sluice_output_ptr") (param i32) (result i32) (global.get $p))
  (func (export "sluice_output_len") (param i32) (result i32) (global.get $n))
  (func (export "sluice_error_ptr") (param i32) (result i32) (i32.const 0))
  (func (export "sluice_error_len") (param i32) (result i32) (i32.const 0))
  (func (export "sluice_destroy") (param i32)))"#,
        info.replace('"', "\\\""),
        info.len()
    );
    let path = dir.path().join("echo.wat");
    std::fs::write(&path, wat).unwrap();
    let report = check(&path, &options(json!({}))).unwrap();
    match outcome(&report, "malformed_input") {
        Outcome::Fail { message, .. } => {
            assert!(message.contains("was accepted (status OK)"), "{message}")
        }
        other => panic!("{other:?}\n{}", render(&report)),
    }
}

/// Compiles the native C plugin of ABI version 2 (`plugin-native/tests/c/lent_invert.c`,
/// written from `sdk/ABI.md`) with `defines` into `dir` as `name` (a library is loaded once
/// per path, so each build gets its own).
fn lent_invert(dir: &std::path::Path, name: &str, defines: &[&str]) -> PathBuf {
    let source = guests::workspace_dir().join("plugin-native/tests/c/lent_invert.c");
    let out = dir.join(format!("lib{name}{}", std::env::consts::DLL_SUFFIX));
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-pthread"])
        .args(defines)
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .status()
        .expect("a C compiler (`cc`)");
    assert!(status.success());
    out
}

#[test]
fn a_version_2_plugin_is_checked_through_both_paths() {
    let dir = tempfile::tempdir().unwrap();
    let report = check(&lent_invert(dir.path(), "v2", &[]), &options(json!({}))).unwrap();
    assert!(report.passed(), "{}", render(&report));
    assert_eq!(outcome(&report, "lent_agrees_with_wire"), &Outcome::Pass);
    assert_eq!(outcome(&report, "malformed_input"), &Outcome::Pass);
    // A lent path that disagrees with the wire path is caught, with a minimal case.
    let report = check(
        &lent_invert(dir.path(), "disagrees", &["-DLENT_DISAGREES"]),
        &options(json!({})),
    )
    .unwrap();
    match outcome(&report, "lent_agrees_with_wire") {
        Outcome::Fail {
            message,
            minimal_case,
        } => {
            assert!(message.contains("gave different outputs"), "{message}");
            assert!(minimal_case.as_deref().unwrap().contains("Element::new"));
        }
        other => panic!("{other:?}\n{}", render(&report)),
    }
    // Version 1 (the same plugin built without the lent path): the check does not apply.
    let report = check(
        &lent_invert(dir.path(), "v1", &["-DSLUICE_V1"]),
        &options(json!({})),
    )
    .unwrap();
    assert!(report.passed(), "{}", render(&report));
    assert!(matches!(
        outcome(&report, "lent_agrees_with_wire"),
        Outcome::Skipped { reason } if reason.contains("no lent path")
    ));
}

/// `gray_solarize` written in C, Python, JavaScript and Zig (`examples/plugins/<lang>-*`),
/// each built with its own toolchain (installed by `.ci/run`), passes every check and agrees
/// bit for bit with the Rust example's native build, both ways.
#[test]
fn the_examples_in_every_language_pass_and_agree_with_the_rust_build() {
    let workspace = guests::workspace_dir();
    let native = cdylib_beside_exe("sluice_example_solarize").unwrap();
    for dir in [
        "c-solarize",
        "python-solarize",
        "js-solarize",
        "zig-solarize",
    ] {
        let project =
            sluice_plugin_build::Project::open(&workspace.join("examples/plugins").join(dir))
                .unwrap();
        let built = sluice_plugin_build::build(
            &project,
            &sluice_plugin_build::BuildOptions {
                out_dir: Some(workspace.join("target/plugin-guests").join(dir)),
                force: false,
            },
        )
        .unwrap_or_else(|e| panic!("building examples/plugins/{dir}: {e}"))
        .path;
        let mut o = options(json!({"p_gray": 0.5, "p_solarize": 0.5, "threshold": 100}));
        o.cases = 6;
        o.other = Some(native.clone());
        let report = check(&built, &o).unwrap();
        assert!(report.passed(), "{dir}:\n{}", render(&report));
        assert_eq!(
            outcome(&report, "agrees_with_other"),
            &Outcome::Pass,
            "{dir}"
        );
        o.other = Some(built);
        let report = check(&native, &o).unwrap();
        assert!(
            report.passed(),
            "{dir}, native against it:\n{}",
            render(&report)
        );
    }
}
