//! The native host's lent path (ABI version 2) against a plugin written in C from
//! `sdk/ABI.md` alone (`tests/c/lent_invert.c`, compiled here with the system's `cc`): built
//! as version 2 it is called through `sluice_process_lent` and agrees with its own wire path;
//! built as version 1 it loads and runs through the wire, as before; declines, refusals and
//! errors are handled as the ABI says.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugin_host::testing::{Spy, digest, image_elements, run_stage};
use sluice_plugin_host::{Backend, CallCounts, CallPath, Error, PluginStage};
use sluice_plugin_native::NativePlugin;

/// Compiles `tests/c/lent_invert.c` with `defines` into `dir`.
fn build(dir: &Path, name: &str, defines: &[&str]) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/lent_invert.c");
    let out = dir.join(format!("lib{name}{}", std::env::consts::DLL_SUFFIX));
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-pthread", "-Wall", "-Werror"])
        .args(defines)
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .status()
        .expect("a C compiler (`cc`) to build the test libraries");
    assert!(status.success(), "cc {defines:?} failed");
    out
}

fn run(stage: &Arc<PluginStage>, input: &[Element], threads: usize, chunk: usize) -> Vec<Element> {
    run_stage(stage, input, threads, chunk, 5).unwrap()
}

fn image_addresses(elements: &[Element]) -> Vec<usize> {
    elements
        .iter()
        .map(|e| e.tensor("image").unwrap().as_u8().unwrap().as_ptr() as usize)
        .collect()
}

#[test]
fn a_version_2_c_library_takes_the_lent_path_and_agrees_with_its_wire_path() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = NativePlugin::load(build(dir.path(), "v2", &[])).unwrap();
    assert_eq!(v2.abi_version(), 2);
    assert!(v2.lends());
    let input = image_elements(23, [4, 5, 3], true);
    let lent = PluginStage::new(v2.clone(), &json!({})).unwrap();
    let wire = PluginStage::with_path(v2.clone(), &json!({}), CallPath::Wire).unwrap();
    assert!(lent.lends() && !wire.lends());
    let want = digest(&run(&wire, &input, 0, 8));
    for (threads, chunk) in [(0, 1), (0, 8), (2, 5), (3, 64)] {
        assert_eq!(digest(&run(&lent, &input, threads, chunk)), want);
    }
    assert_eq!(lent.calls().wire, 0);
    assert_eq!(lent.calls().lent, 23 + 3 + 5 + 1);
    assert_eq!(wire.calls().lent, 0);
    // Some elements are inverted, some unchanged.
    let out = run(&lent, &input, 0, 23);
    let changed = out.iter().zip(&input).filter(|(o, i)| o != i).count();
    assert!((5..=18).contains(&changed), "{changed} of 23 changed");

    // Nothing is copied: the plugin read the elements' own buffers; an unchanged element
    // keeps its buffer, a changed one gets the buffer the plugin wrote.
    let spy = Spy::new(v2);
    let stage = PluginStage::new(spy.clone(), &json!({})).unwrap();
    let before = image_addresses(&input);
    let out = run(&stage, &input, 0, 23);
    let seen = spy.take();
    assert_eq!(seen.len(), 1, "one lent call");
    let lent_addresses: Vec<usize> = seen[0].lent.iter().map(|e| e[0].1).collect();
    assert_eq!(lent_addresses, before);
    let after = image_addresses(&out);
    for (i, (o, x)) in out.iter().zip(&input).enumerate() {
        if o == x {
            assert_eq!(after[i], before[i], "element {i} unchanged, same buffer");
        } else {
            let allocated: Vec<usize> = seen[0]
                .allocated
                .iter()
                .filter(|(e, n, _)| *e as usize == i && n == "image")
                .map(|(_, _, a)| *a)
                .collect();
            assert_eq!(allocated, vec![after[i]], "element {i}: the host's buffer");
        }
    }
}

#[test]
fn a_version_1_build_loads_and_runs_through_the_wire_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = NativePlugin::load(build(dir.path(), "v1", &["-DSLUICE_V1"])).unwrap();
    assert_eq!(v1.abi_version(), 1);
    assert_eq!(v1.info().abi_version, 1);
    assert!(!v1.lends());
    let v2 = NativePlugin::load(build(dir.path(), "v2", &[])).unwrap();
    let input = image_elements(17, [3, 2, 3], true);
    let stage = PluginStage::new(v1, &json!({})).unwrap();
    assert!(!stage.lends());
    let got = digest(&run(&stage, &input, 2, 4));
    assert_eq!(
        stage.calls(),
        CallCounts {
            lent: 0,
            wire: 5,
            declined: 0
        }
    );
    let lent = PluginStage::new(v2, &json!({})).unwrap();
    assert_eq!(got, digest(&run(&lent, &input, 2, 4)));
}

#[test]
fn declined_calls_take_the_wire_path_with_the_same_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = NativePlugin::load(build(dir.path(), "v2", &[])).unwrap();
    let input = image_elements(12, [2, 2, 3], true);
    let normal = PluginStage::new(v2.clone(), &json!({})).unwrap();
    let declining = PluginStage::new(v2, &json!({"mode": "decline"})).unwrap();
    let want = digest(&run(&normal, &input, 0, 4));
    assert_eq!(digest(&run(&declining, &input, 0, 4)), want);
    assert_eq!(
        declining.calls(),
        CallCounts {
            lent: 0,
            wire: 3,
            declined: 3
        }
    );
}

#[test]
fn refusals_and_errors_fail_the_call_naming_plugin_status_and_elements() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = NativePlugin::load(build(dir.path(), "v2", &[])).unwrap();
    let input = image_elements(6, [2, 2, 3], true);
    // OK after the host refused a buffer (a byte-string output): a broken output.
    let refusing = PluginStage::new(v2.clone(), &json!({"mode": "refuse"})).unwrap();
    let err = run_stage(&refusing, &input, 0, 6, 5)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("plugin lent_invert: broken output on elements [0:0, 0:1, 0:2, ... 6 in all]"),
        "{err}"
    );
    assert!(
        err.contains("returned OK after the host refused an output buffer"),
        "{err}"
    );
    assert!(err.contains("byte strings cannot be lent"), "{err}");
    // An error status, after output buffers were taken: the error, and the next call works.
    for path in [CallPath::Lent, CallPath::Wire] {
        let failing = PluginStage::with_path(v2.clone(), &json!({"mode": "fail"}), path).unwrap();
        let err = run_stage(&failing, &input[..2], 0, 2, 5)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "plugin lent_invert: plugin error on elements [0:0, 0:1]: failing on request"
            ),
            "{path:?}: {err}"
        );
    }
    // A contract violation is caught by the host before the call, on the lent path too.
    let stage = PluginStage::new(v2, &json!({})).unwrap();
    let floats = image_elements(2, [2, 2, 3], false);
    let err = run_stage(&stage, &floats, 0, 2, 5).unwrap_err().to_string();
    assert!(
        err.contains("plugin lent_invert: element 0:0: feature \"image\" is f32, expected u8"),
        "{err}"
    );
    assert_eq!(stage.calls().lent + stage.calls().wire, 0);
}

#[test]
fn a_version_2_library_must_export_the_lent_function_and_agree_with_its_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let no_lent = build(dir.path(), "no_lent", &["-DOMIT_LENT"]);
    let err = NativePlugin::load(&no_lent).unwrap_err();
    assert!(
        matches!(&err, Error::MissingSymbol { symbol, version: 2, .. } if symbol == "sluice_process_lent"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("missing symbol `sluice_process_lent` (ABI version 2 requires it)"),
        "{err}"
    );
    let mismatch = build(dir.path(), "mismatch", &["-DINFO_ABI=1"]);
    let err = NativePlugin::load(&mismatch).unwrap_err().to_string();
    assert!(
        err.contains("metadata says ABI version 1, the library says 2"),
        "{err}"
    );
}
