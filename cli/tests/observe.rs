//! `sluice run --trace FILE --tensorboard DIR --json` (issue 27): on the demo's pipeline with
//! its sandboxed WASM plugin, the trace has a track per thread, every stage's spans, the
//! plugin's calls as spans of a WASM host, and counters; the TensorBoard event file holds
//! scalars; `--json` keeps the timeline `sluice report` plots; the table has p50/p99.

use std::collections::BTreeSet;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn example_file(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/pipelines")
        .join(name)
}

/// Runs `sluice ARGS...`, which must succeed; returns its stdout.
fn succeeds(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `sluice demo --keep DIR`: 16 images and the demo's WASM module in `DIR`.
fn demo_data() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    succeeds(
        sluice()
            .args(["demo", "--images", "16", "--keep"])
            .arg(dir.path()),
    );
    dir
}

#[test]
fn a_run_writes_a_trace_tensorboard_events_and_its_timeline() {
    let data = demo_data();
    let work = tempfile::tempdir().unwrap();
    let trace = work.path().join("trace.json");
    let board = work.path().join("tb");
    let stdout = succeeds(
        sluice()
            .arg("run")
            .arg(example_file("wasm_augment.toml"))
            .arg("--data")
            .arg(data.path())
            .arg("--plugin-dir")
            .arg(data.path())
            .arg("--trace")
            .arg(&trace)
            .arg("--tensorboard")
            .arg(&board)
            .arg("--json"),
    );
    let run: Value = serde_json::from_slice(&stdout).expect("--json prints one object");

    // The trace: JSON in the trace event format, every stage's spans, the WASM calls.
    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    let span_names: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for stage in run["stages"].as_array().unwrap() {
        let name = stage["name"].as_str().unwrap();
        assert!(
            span_names.contains(name),
            "no span of {name}: {span_names:?}"
        );
    }
    assert!(
        span_names.contains("call gray_solarize (wasm)"),
        "{span_names:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "C" && e["name"] == "bytes in buffers")
    );
    let threads: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(threads.len() >= 3, "{threads:?}");

    // The TensorBoard event file.
    let files: Vec<_> = std::fs::read_dir(&board)
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("events.out.tfevents."), "{name}");
    assert!(std::fs::metadata(&files[0]).unwrap().len() > 100);

    // The timeline in --json, and the table's percentiles.
    let timeline = &run["timeline"];
    let samples = timeline["samples"].as_array().unwrap();
    assert!(!samples.is_empty());
    assert_eq!(samples.last().unwrap()["elements"], run["batches"]);
    assert_eq!(
        timeline["stages"].as_array().unwrap().len(),
        run["stages"].as_array().unwrap().len()
    );
    assert!(
        run["stages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["element_p99_seconds"].is_number())
    );
    assert!(run["cpus"].as_u64().unwrap() >= 1);
}

#[test]
fn the_table_shows_p50_and_p99_and_explains_the_bottleneck() {
    let data = demo_data();
    let stdout = succeeds(
        sluice()
            .arg("run")
            .arg(example_file("gen_augment.toml"))
            .arg("--data")
            .arg(data.path()),
    );
    let text = String::from_utf8(stdout).unwrap();
    let header = text
        .lines()
        .find(|l| l.contains("busy%"))
        .expect("the table");
    assert!(
        header.contains(" p50 ") && header.contains(" p99 "),
        "{header}"
    );
    let bottleneck = text
        .lines()
        .find(|l| l.starts_with("bottleneck: #"))
        .expect("{text}");
    assert!(bottleneck.contains("% of all waiting"), "{bottleneck}");
    assert!(bottleneck.contains("per element at p50"), "{bottleneck}");
    assert!(bottleneck.contains("on its input"), "{bottleneck}");
}
