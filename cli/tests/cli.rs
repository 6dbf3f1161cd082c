//! The `sluice` command against the TensorFlow-written fixtures in
//! `tests/fixtures/tfrecord/` (see its `MANIFEST.json`).

use std::io::Read;
use std::process::Stdio;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sluice_proto::tfrecord::{Compression, TfRecordWriter};
use sluice_proto::{Example, TfMessage};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// The parsed contents of a fixture's `.json` expectation.
fn expected(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fixture(name)).expect("expectation exists");
    serde_json::from_str(&text).expect("expectation is JSON")
}

/// The JSON lines of an output.
fn json_lines(stdout: &[u8]) -> Vec<Value> {
    std::str::from_utf8(stdout)
        .expect("UTF-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// `value` with every number rounded to f32, so that values compare as TensorFlow's floats.
fn as_f32(value: Value) -> Value {
    match value {
        Value::Number(n) => Value::from(f64::from(n.as_f64().expect("finite") as f32)),
        Value::Array(values) => Value::Array(values.into_iter().map(as_f32).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, as_f32(v))).collect()),
        other => other,
    }
}

fn assert_same_messages(got: Vec<Value>, want: Vec<Value>) {
    assert_eq!(got.len(), want.len(), "number of records");
    for (i, (got, want)) in got.into_iter().zip(want).enumerate() {
        assert_eq!(as_f32(got), as_f32(want), "record {i}");
    }
}

/// Runs `sluice` and returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, Vec<u8>, String) {
    let output = sluice().args(args).output().expect("sluice runs");
    let stderr = String::from_utf8(output.stderr).expect("UTF-8 stderr");
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        output.status.code().expect("exit code"),
        output.stdout,
        stderr,
    )
}

#[test]
fn cat_prints_the_examples_tensorflow_read_in_every_compression() {
    for name in [
        "examples.tfrecord",
        "examples.tfrecord.gz",
        "examples.tfrecord.zlib",
    ] {
        let (code, stdout, stderr) = run(&["cat", &fixture(name)]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert!(stderr.is_empty(), "{name}: {stderr}");
        let lines = json_lines(&stdout);
        assert_eq!(lines.len(), 64, "{name}");
        assert_same_messages(lines, expected("examples.json"));
    }
    // The named compression works too; the wrong one is an error.
    let (code, stdout, _) = run(&[
        "cat",
        "--compression",
        "zlib",
        &fixture("examples.tfrecord.zlib"),
    ]);
    assert_eq!((code, json_lines(&stdout).len()), (0, 64));
    let (code, _, stderr) = run(&[
        "cat",
        "--compression",
        "none",
        &fixture("examples.tfrecord.gz"),
    ]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("examples.tfrecord.gz: corrupted record at 0"),
        "{stderr}"
    );
}

#[test]
fn cat_prints_sequence_examples() {
    let (code, stdout, stderr) = run(&[
        "cat",
        "--as",
        "sequence-example",
        &fixture("sequence_examples.tfrecord"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_same_messages(json_lines(&stdout), expected("sequence_examples.json"));
}

#[test]
fn cat_raw_prints_index_offset_length_and_sha256() {
    let (code, stdout, stderr) = run(&["cat", "--as", "raw", &fixture("raw_records.tfrecord")]);
    assert_eq!(code, 0, "{stderr}");
    let lines = json_lines(&stdout);
    let want = expected("raw_records.json");
    assert_eq!(lines.len(), want.len());
    let mut offset = 0;
    for (i, (got, want)) in lines.iter().zip(&want).enumerate() {
        assert_eq!(got["index"], i, "{got}");
        assert_eq!(got["offset"], offset, "{got}");
        assert_eq!(got["length"], want["len"], "{got}");
        assert_eq!(got["sha256"], want["sha256"], "{got}");
        offset += 16 + want["len"].as_u64().unwrap();
    }
    // Keys in the documented order.
    let first = std::str::from_utf8(&stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap();
    assert!(
        first.starts_with(r#"{"index":0,"offset":0,"length":0,"sha256":""#),
        "{first}"
    );
}

#[test]
fn cat_stops_at_a_bad_data_checksum_with_tensorflows_message() {
    let path = fixture("corrupt_data_crc.tfrecord");
    let (code, stdout, stderr) = run(&["cat", &path]);
    assert_eq!(code, 1);
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 1);
    assert_same_messages(lines, expected("examples.json")[..1].to_vec());
    assert_eq!(stderr, format!("{path}: corrupted record at 268\n"));
}

#[test]
fn cat_skips_a_bad_data_checksum_and_reports_it() {
    let path = fixture("corrupt_data_crc.tfrecord");
    let (code, stdout, stderr) = run(&["cat", "--on-error", "skip", &path]);
    assert_eq!(code, 0, "{stderr}");
    let mut want = expected("examples.json");
    want.remove(1);
    assert_same_messages(json_lines(&stdout), want);
    assert!(
        stderr.contains(&format!(
            "{path}: skipped record 1 at offset 256: corrupted record at 268\n"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("skipped 1 record;"), "{stderr}");
}

#[test]
fn cat_reports_a_bad_length_checksum_even_under_skip() {
    let path = fixture("corrupt_length_crc.tfrecord");
    for policy in ["fail", "skip"] {
        let (code, stdout, stderr) = run(&["cat", "--on-error", policy, &path]);
        assert_eq!(code, 1, "{policy}");
        assert_same_messages(json_lines(&stdout), expected("examples.json")[..2].to_vec());
        assert!(
            stderr.contains(&format!("{path}: corrupted record at 480\n")),
            "{stderr}"
        );
    }
}

#[test]
fn cat_reports_a_truncated_record() {
    let path = fixture("truncated.tfrecord");
    let (code, stdout, stderr) = run(&["cat", &path]);
    assert_eq!(code, 1);
    assert_same_messages(
        json_lines(&stdout),
        expected("examples.json")[..63].to_vec(),
    );
    assert_eq!(stderr, format!("{path}: truncated record at 15224\n"));
}

#[test]
fn cat_under_skip_goes_on_with_the_next_file_after_an_unskippable_error() {
    let truncated = fixture("truncated.tfrecord");
    let (code, stdout, stderr) = run(&[
        "cat",
        "--on-error",
        "skip",
        &truncated,
        &fixture("examples.tfrecord"),
    ]);
    assert_eq!(code, 1);
    assert_eq!(json_lines(&stdout).len(), 63 + 64);
    assert!(stderr.contains(&format!("{truncated}: truncated record at 15224\n")));
    assert!(
        stderr.contains("1 file with errors that cannot be skipped"),
        "{stderr}"
    );
    // Under fail, the first error ends everything.
    let (code, stdout, _) = run(&["cat", &truncated, &fixture("examples.tfrecord")]);
    assert_eq!((code, json_lines(&stdout).len()), (1, 63));
}

#[test]
fn cat_reads_files_in_order_and_limit_counts_across_them() {
    let examples = fixture("examples.tfrecord");
    let gz = fixture("examples.tfrecord.gz");
    let (code, stdout, _) = run(&["cat", &examples, &gz]);
    assert_eq!(code, 0);
    let mut want = expected("examples.json");
    want.extend(expected("examples.json"));
    assert_same_messages(json_lines(&stdout), want.clone());

    let (code, stdout, _) = run(&["cat", "--limit", "70", &examples, &gz]);
    assert_eq!(code, 0);
    assert_same_messages(json_lines(&stdout), want[..70].to_vec());

    let (code, stdout, _) = run(&["cat", "--limit", "0", &examples]);
    assert_eq!((code, stdout.len()), (0, 0));

    // The limit is reached before the damage: nothing more is read.
    let (code, stdout, stderr) =
        run(&["cat", "--limit", "1", &fixture("corrupt_data_crc.tfrecord")]);
    assert_eq!(
        (code, json_lines(&stdout).len(), stderr.as_str()),
        (0, 1, "")
    );
}

#[test]
fn cat_handles_a_record_that_is_not_an_example() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.tfrecord");
    let good =
        Example::from_json(r#"{"features":{"feature":{"x":{"int64List":{"value":["1"]}}}}}"#)
            .unwrap()
            .to_bytes();
    let mut writer =
        TfRecordWriter::new(std::fs::File::create(&path).unwrap(), Compression::None).unwrap();
    for record in [&good[..], b"\xff\xff\xff", &good[..]] {
        writer.write_record(record).unwrap();
    }
    writer.finish().unwrap();
    let path = path.to_str().unwrap();
    let bad_offset = 16 + good.len();

    let (code, stdout, stderr) = run(&["cat", path]);
    assert_eq!((code, json_lines(&stdout).len()), (1, 1));
    assert!(
        stderr.contains(&format!(
            "{path}: record 1 at offset {bad_offset} is not a valid tensorflow.Example"
        )),
        "{stderr}"
    );

    let (code, stdout, stderr) = run(&["cat", "--on-error", "skip", path]);
    assert_eq!((code, json_lines(&stdout).len()), (0, 2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}: skipped record 1 at offset {bad_offset}: not a valid tensorflow.Example"
        )),
        "{stderr}"
    );

    // As raw bytes, every record is fine.
    let (code, stdout, _) = run(&["cat", "--as", "raw", path]);
    assert_eq!((code, json_lines(&stdout).len()), (0, 3));
    let third = &json_lines(&stdout)[1];
    assert_eq!(
        third["sha256"],
        format!("{:x}", Sha256::digest(b"\xff\xff\xff"))
    );
}

#[test]
fn cat_exits_quietly_when_stdout_is_closed() {
    let examples = fixture("examples.tfrecord");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cat", &examples, &examples, &examples, &examples])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before anything is written: every write fails with EPIPE.
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn cat_rejects_an_unknown_compression() {
    sluice()
        .args(["cat", "--compression", "lz4", &fixture("examples.tfrecord")])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("lz4").and(predicate::str::contains("gzip")));
}

#[test]
fn cat_names_a_missing_file() {
    let missing = fixture("no-such.tfrecord");
    sluice()
        .args(["cat", &missing])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(format!("{missing}: cannot open")));
}

#[test]
fn verify_a_glob_of_good_shards() {
    let pattern = fixture("images.tfrecord-*");
    let (code, stdout, stderr) = run(&["verify", "--json", &pattern]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(report["total_files"], 4);
    assert_eq!(report["damaged_files"], 0);
    assert_eq!(report["records"], 32);
    let files = report["files"].as_array().unwrap();
    let mut bytes = 0;
    for (i, file) in files.iter().enumerate() {
        let path = fixture(&format!("images.tfrecord-0000{i}-of-00004"));
        assert_eq!(file["path"], path.as_str());
        assert_eq!(file["records"], 8);
        assert_eq!(file["status"], "ok");
        assert_eq!(file["error"], Value::Null);
        assert_eq!(file["error_offset"], Value::Null);
        assert_eq!(file["bytes"], std::fs::metadata(&path).unwrap().len());
        bytes += file["bytes"].as_u64().unwrap();
    }
    assert_eq!(report["bytes"], bytes);
    assert!(report["seconds"].as_f64().unwrap() > 0.0);
    assert!(report["mb_per_s"].as_f64().unwrap() > 0.0);

    // The table.
    let (code, stdout, _) = run(&["verify", &pattern]);
    assert_eq!(code, 0);
    let table = String::from_utf8(stdout).unwrap();
    assert!(table.starts_with("PATH "), "{table}");
    assert_eq!(table.matches("  ok\n").count(), 4, "{table}");
    assert!(table.contains("4 files, 0 damaged, 32 records"), "{table}");
}

#[test]
fn verify_reports_damage_with_tensorflows_message() {
    let path = fixture("corrupt_data_crc.tfrecord");
    // Mapped (the default) and read with read(2): the same report.
    for read in [None, Some("--no-mmap")] {
        let mut args = vec!["verify", "--json", &path];
        let gz = fixture("examples.tfrecord.gz");
        args.push(&gz);
        args.extend(read);
        let (code, stdout, _) = run(&args);
        assert_eq!(code, 1);
        let report: Value = serde_json::from_slice(&stdout).unwrap();
        assert_eq!(report["damaged_files"], 1);
        let damaged = &report["files"][0];
        assert_eq!(damaged["path"], path.as_str());
        assert_eq!(damaged["status"], "damaged");
        assert_eq!(damaged["records"], 1);
        assert_eq!(damaged["bytes"], 15491);
        assert_eq!(damaged["error"], "corrupted record at 268");
        assert_eq!(damaged["error_offset"], 268);
        assert_eq!(report["files"][1]["status"], "ok");
        assert_eq!(report["files"][1]["records"], 64);
    }

    for (name, message, read) in [
        (
            "corrupt_length_crc.tfrecord",
            "corrupted record at 480",
            None,
        ),
        ("truncated.tfrecord", "truncated record at 15224", None),
        (
            "corrupt_length_crc.tfrecord",
            "corrupted record at 480",
            Some("--no-mmap"),
        ),
        (
            "truncated.tfrecord",
            "truncated record at 15224",
            Some("--no-mmap"),
        ),
    ] {
        let file = fixture(name);
        let mut args = vec!["verify", &file];
        args.extend(read);
        let (code, stdout, _) = run(&args);
        assert_eq!(code, 1);
        let table = String::from_utf8(stdout).unwrap();
        assert!(
            table.contains(&format!("  damaged  {message}\n")),
            "{table}"
        );
        assert!(table.contains("1 file, 1 damaged"), "{table}");
    }
}

#[test]
fn verify_fails_on_a_pattern_that_matches_nothing() {
    let pattern = fixture("nothing-here-*.tfrecord");
    sluice()
        .args(["verify", &fixture("empty.tfrecord"), &pattern])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(pattern));
}

#[test]
fn verify_an_empty_file() {
    let (code, stdout, stderr) = run(&["verify", "--json", &fixture("empty.tfrecord")]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(report["files"][0]["status"], "ok");
    assert_eq!(report["files"][0]["records"], 0);
    assert_eq!(report["records"], 0);
    assert_eq!(report["bytes"], 0);
}

#[test]
fn version_and_help() {
    sluice()
        .arg("--version")
        .assert()
        .success()
        .stdout(format!("sluice {}\n", env!("CARGO_PKG_VERSION")));
    for command in ["cat", "verify"] {
        sluice()
            .args([command, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"));
    }
}
