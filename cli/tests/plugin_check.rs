//! `sluice plugin check`: a good plugin passes (exit 0), a broken one fails with the check's
//! name and a minimal case (exit 1), bad arguments are refused.

use assert_cmd::Command;
use sluice_plugins::testing::cdylib_beside_exe;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

#[test]
fn a_good_plugin_passes_every_check() {
    let out = sluice()
        .args(["plugin", "check", "--cases", "8"])
        .arg(cdylib_beside_exe("sluice_example_noise").unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "pass     accepts_contract",
        "pass     deterministic",
        "pass     independent",
        "pass     output_contract",
        "pass     time_limit",
        // The example is a native plugin of ABI version 2: both paths are compared.
        "pass     lent_agrees_with_wire",
        // Run in a child process for a native plugin.
        "pass     malformed_input",
        "skipped  agrees_with_other (no --other build given)",
        "totals: pass 7, FAIL 0, skipped 1",
    ] {
        assert!(stdout.contains(line), "{line:?} in:\n{stdout}");
    }
}

#[test]
fn a_broken_plugin_fails_with_the_check_and_a_minimal_case() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"break": "refuse"}"#).unwrap();
    let out = sluice()
        .args(["plugin", "check", "--cases", "8", "--config"])
        .arg(&config)
        .arg(cdylib_beside_exe("sluice_test_plugin_broken").unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL     accepts_contract: plugin broken: plugin error on elements [0:0]: refusing an image 3 wide"), "{stdout}");
    assert!(stdout.contains("minimal failing case:"), "{stdout}");
    assert!(stdout.contains("Tensor::new(&[1, 3, 1]"), "{stdout}");

    let out = sluice()
        .args(["plugin", "check", "--json", "--cases", "4", "--config"])
        .arg(&config)
        .arg(cdylib_beside_exe("sluice_test_plugin_broken").unwrap())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["info"]["name"], "broken");
    assert_eq!(v["checks"][0]["check"], "accepts_contract");
    assert_eq!(v["checks"][0]["outcome"], "fail");
}

#[test]
fn missing_files_and_unknown_kinds_are_refused() {
    let out = sluice()
        .args(["plugin", "check", "no/such/plugin.so"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("no/such/plugin.so: cannot load the plugin"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("plugin.txt");
    std::fs::write(&text, "hello").unwrap();
    let out = sluice()
        .args(["plugin", "check"])
        .arg(&text)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}
