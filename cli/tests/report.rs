//! `sluice report` on real runs: `sluice gen` data, `sluice run --json`, then the HTML page
//! of one run and of two compared; old JSON without a timeline; bad input.

use std::fs;

use predicates::str::contains;
use serde_json::Value;

mod support;

use support::{gen_data, report, run_json, sluice};

#[test]
fn report_of_one_real_run_and_of_two_compared() {
    let dir = tempfile::tempdir().unwrap();
    let data = gen_data(dir.path(), 128, 2);
    let a = run_json(dir.path(), &data, "a.json", &[]);
    let b = run_json(dir.path(), &data, "b.json", &["--epochs", "2"]);

    // One run, written where -o says.
    let one = dir.path().join("one.html");
    report(&[&a], &one).stderr(contains("wrote"));
    let html = fs::read_to_string(&one).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Sluice run: gen_augment"));
    assert!(html.contains("The bottleneck is "), "no explanation");
    for section in [
        "throughput",
        "busy",
        "queues",
        "bottleneck-time",
        "autotune",
        "stages",
    ] {
        assert!(html.contains(&format!("<h2 id=\"{section}\"")), "{section}");
    }
    // Seven plots, each drawing data (no "nothing was recorded" box), every stage named.
    assert_eq!(html.matches("<svg").count(), 7);
    assert!(!html.contains("nothing was recorded"), "an empty plot");
    for stage in [
        "interleave#1",
        "parse_example#2",
        "image_ops#3",
        "batch#4",
        "prefetch#5",
    ] {
        assert!(html.contains(stage), "{stage}");
    }
    // Self-contained: no script, nothing fetched.
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));

    // Two runs: A and B labelled in the plots, and the differences table.
    let two = dir.path().join("two.html");
    report(&[&a, &b], &two);
    let html = fs::read_to_string(&two).unwrap();
    assert!(html.contains("A and B compared"));
    // The samples count records through the batch dimension: throughput in records/s.
    assert!(html.contains("A: a.json records/s (") && html.contains("B: b.json records/s ("));
    assert!(html.contains("A: image_ops#3") && html.contains("B: image_ops#3"));
    assert!(
        html.contains("B is faster") || html.contains("A is faster") || html.contains("as fast")
    );
    assert!(html.contains("<td>image_ops#3 busy</td>"));
    // B ran two epochs: its epoch marker is on the throughput plot.
    assert!(html.contains("B: epoch 1"));
}

#[test]
fn default_output_old_json_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = gen_data(dir.path(), 128, 2);
    let run = run_json(dir.path(), &data, "run.json", &["--take", "64"]);

    // JSON from before timelines (no timeline, no version) renders what it has.
    let mut old: Value = serde_json::from_slice(&fs::read(&run).unwrap()).unwrap();
    let obj = old.as_object_mut().unwrap();
    for key in ["timeline", "sluice_version", "cpus", "started_unix"] {
        obj.remove(key);
    }
    fs::write(dir.path().join("old.json"), old.to_string()).unwrap();
    sluice()
        .current_dir(dir.path())
        .args(["report", "old.json"])
        .assert()
        .success();
    let html = fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("has no timeline"));
    assert!(html.contains("The bottleneck is ") || html.contains("No bottleneck"));
    assert!(html.contains("<table class=\"stages\">"));

    // Bad input: exit 1, the message names the file (and the field).
    let bad = |name: &str, text: &str, says: &str| {
        fs::write(dir.path().join(name), text).unwrap();
        sluice()
            .current_dir(dir.path())
            .args(["report", "run.json", name, "-o", "x.html"])
            .assert()
            .code(1)
            .stderr(contains(name))
            .stderr(contains(says.to_string()));
    };
    bad("text.json", "not json", "not JSON at line 1");
    bad(
        "other.json",
        "{\"files\": []}",
        "not the JSON of `sluice run --json`",
    );
    bad(
        "field.json",
        "{\"stages\": [{\"index\": 0, \"busy_seconds\": \"slow\"}]}",
        "stages[0]",
    );
    sluice()
        .current_dir(dir.path())
        .args(["report", "missing.json"])
        .assert()
        .code(1)
        .stderr(contains("missing.json"));
    assert!(!dir.path().join("x.html").exists());
}
