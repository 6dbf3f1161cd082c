//! `sluice demo`: generates data, runs the augmentation pipeline, reports, cleans up (or keeps
//! the data with `--keep`).

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// Runs `sluice demo ARGS --json` and returns its JSON object.
fn demo_json(args: &[&str]) -> Value {
    let out = sluice()
        .arg("demo")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON object only: {stdout}");
    serde_json::from_str(&stdout).unwrap()
}

fn shard(dir: &Path, i: u32, n: u32) -> std::path::PathBuf {
    dir.join(format!("train.tfrecord-{i:05}-of-{n:05}"))
}

#[test]
fn json_reports_the_run_and_the_temporary_data_is_deleted() {
    let v = demo_json(&["--images", "64", "--epochs", "1"]);
    assert_eq!(v["elements"], 64, "{v}");
    assert_eq!(v["batches"], 1, "one batch of 64: {v}");
    assert_eq!(v["epochs"], 1);
    assert_eq!(v["skipped"], 0);
    assert_eq!(v["pipeline"], "wasm_augment");
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    assert!(v["elements_per_s"].as_f64().unwrap() > 0.0);
    let names: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "files",
            "interleave",
            "parse_example",
            "image_ops",
            "plugin:gray_solarize",
            "image_ops",
            "batch",
            "prefetch"
        ]
    );
    let stage = |name: &str| {
        v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    // interleave takes in the 64 records of its files, not its 4 file names.
    assert_eq!(stage("interleave")["elements_in"], 64, "{v}");
    assert_eq!(stage("image_ops")["elements_out"], 64);
    // The WASM augmentation saw every image.
    assert_eq!(stage("plugin:gray_solarize")["elements_in"], 64, "{v}");
    assert_eq!(stage("plugin:gray_solarize")["elements_out"], 64, "{v}");
    // Decoding and augmenting is the work here: nothing else is named the bottleneck.
    assert_eq!(v["bottleneck"], "image_ops", "{v}");

    let data = &v["data"];
    assert_eq!(data["images"], 64);
    assert_eq!(data["size"], 256);
    assert_eq!(data["shards"], 4);
    assert_eq!(data["kept"], false);
    assert!(data["bytes"].as_u64().unwrap() > 64 * 1000, "{data}");
    let dir = Path::new(data["dir"].as_str().unwrap());
    assert!(!dir.as_os_str().is_empty());
    assert!(!dir.exists(), "{} was deleted", dir.display());
}

#[test]
fn keep_leaves_the_shards_and_a_rerun_reads_only_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let out = sluice()
        .args([
            "demo",
            "--no-wasm",
            "--images",
            "8",
            "--epochs",
            "2",
            "--keep",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    for want in [
        "sluice demo: writing 8 synthetic 256x256 JPEGs in 4 TFRecord shards",
        "interleave -> parse_example -> image_ops -> batch -> prefetch",
        "busy%",
        "\nbottleneck: #3 image_ops",
        "total: 16 elements in 2 batches",
        "images/s (16 images augmented and batched",
        "sluice demo: kept the data in",
    ] {
        assert!(stdout.contains(want), "{want:?} in:\n{stdout}");
    }
    for i in 0..4 {
        let path = shard(&dir, i, 4);
        assert!(path.metadata().unwrap().len() > 0, "{}", path.display());
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("labels.txt"))
            .unwrap()
            .lines()
            .count(),
        10
    );

    // Shards of another dataset in the folder are not read: 3 images, 3 shards of 1.
    std::fs::write(shard(&dir, 0, 8), b"not a tfrecord").unwrap();
    let v = demo_json(&[
        "--no-wasm",
        "--images",
        "3",
        "--epochs",
        "1",
        "--keep",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(v["elements"], 3, "{v}");
    assert_eq!(v["data"]["shards"], 3);
    assert_eq!(v["data"]["kept"], true);
    assert!(shard(&dir, 2, 3).exists());
}

#[test]
fn bad_options_are_refused() {
    sluice()
        .args(["demo", "--images", "0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--images"));
    // --keep names a file, not a folder.
    let file = tempfile::NamedTempFile::new().unwrap();
    sluice()
        .args(["demo", "--images", "4", "--keep"])
        .arg(file.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("sluice: cannot create"));
}
