//! What the report tests share: `sluice gen` data, `sluice run --json` runs of
//! `examples/pipelines/gen_augment.toml` on it, and `sluice report` of those runs.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The `sluice` binary under test.
pub(crate) fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// `examples/pipelines/gen_augment.toml`.
fn pipeline() -> String {
    format!(
        "{}/../examples/pipelines/gen_augment.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `images` generated 256×256 JPEGs in `shards` shards, in `dir/data`.
pub(crate) fn gen_data(dir: &Path, images: u32, shards: u32) -> PathBuf {
    let data = dir.join("data");
    sluice()
        .args(["gen", "--size", "256", "--images", &images.to_string()])
        .args(["--shards", &shards.to_string(), "--out"])
        .arg(&data)
        .assert()
        .success();
    data
}

/// `sluice run gen_augment.toml --data DATA --json` with `extra` arguments, its JSON
/// written to `dir/NAME`.
pub(crate) fn run_json(dir: &Path, data: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = sluice()
        .arg("run")
        .arg(pipeline())
        .arg("--data")
        .arg(data)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(name);
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// `sluice report RUNS... -o OUT`, which must succeed (its assertion, for more checks).
pub(crate) fn report(runs: &[&Path], out: &Path) -> assert_cmd::assert::Assert {
    sluice()
        .arg("report")
        .args(runs)
        .arg("-o")
        .arg(out)
        .assert()
        .success()
}
