//! `sluice adapt`: learns from a pipeline file's output and writes the statistics file the
//! Keras stages of another pipeline file load.

use std::process::Command;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

#[test]
fn adapt_writes_statistics_that_a_pipeline_loads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("data.csv"), "city,temp\nlima,12\nrome,8\nlima,10\n").unwrap();
    std::fs::write(
        d.join("analyze.toml"),
        "[source]\nfiles = [\"data.csv\"]\nformat = \"csv\"\nheader = true\nrecord_defaults = [\"\", 0.0]\n",
    )
    .unwrap();
    let out = sluice()
        .args([
            "adapt",
            "analyze.toml",
            "--out",
            "stats.json",
            "--mean-variance",
            "temp",
        ])
        .args(["--vocabulary", "city:2", "--data"])
        .arg(d)
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["format"], "sluice-adapt");
    assert_eq!(stats["features"]["temp"]["mean"], 10.0);
    // max_tokens 2 counts the OOV index: one token.
    assert_eq!(
        stats["features"]["city"]["tokens"],
        serde_json::json!(["lima"])
    );
    // A training pipeline loading it.
    let stats_path = d.join("stats.json");
    std::fs::write(
        d.join("train.toml"),
        format!(
            "[source]\nfiles = [\"data.csv\"]\nformat = \"csv\"\nheader = true\nrecord_defaults = [\"\", 0.0]\n\n\
             [[stage]]\nkind = \"normalization\"\ninput = \"temp\"\nadapted = {stats:?}\n\n\
             [[stage]]\nkind = \"string_lookup\"\ninput = \"city\"\nvocabulary = {{ adapted = {stats:?} }}\n",
            stats = stats_path.display().to_string()
        ),
    )
    .unwrap();
    let run = sluice()
        .args(["run", "train.toml", "--json"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report = String::from_utf8_lossy(&run.stdout);
    assert!(
        report.contains("normalization") && report.contains("string_lookup"),
        "{report}"
    );
    // Nothing to learn is an error that says so.
    let none = sluice()
        .args(["adapt", "analyze.toml", "--out", "x.json"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("nothing to learn"));
}

#[test]
fn adapt_learns_quantiles_and_document_frequencies_that_a_pipeline_loads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut csv = String::from("text,income\n");
    for i in 0..40 {
        csv.push_str(&format!(
            "{} cat sat,{}\n",
            ["the", "a", "one"][i % 3],
            i * i
        ));
    }
    std::fs::write(d.join("data.csv"), csv).unwrap();
    let source = "[source]\nfiles = [\"data.csv\"]\nformat = \"csv\"\nheader = true\nrecord_defaults = [\"\", 0.0]\n";
    std::fs::write(d.join("analyze.toml"), source).unwrap();
    let out = sluice()
        .args(["adapt", "analyze.toml", "--out", "stats.json"])
        .args([
            "--quantiles",
            "income:4",
            "--batch-size",
            "8",
            "--steps",
            "4",
        ])
        .args(["--text-vocabulary", "text", "--tf-idf", "--data"])
        .arg(d)
        .current_dir(d)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("income: 3 bin boundaries (32 values in 4 batches)"),
        "{stderr}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("stats.json")).unwrap()).unwrap();
    let income = &stats["features"]["income"];
    assert_eq!(income["num_bins"], 4);
    assert_eq!(income["bin_boundaries"].as_array().unwrap().len(), 3);
    let text = &stats["features"]["text"];
    assert_eq!(text["documents"], 40);
    // "cat" and "sat" are in every document.
    let tokens = text["tokens"].as_array().unwrap();
    let at = tokens.iter().position(|t| t == "cat").unwrap();
    assert_eq!(text["document_counts"][at], 40);
    let stats_path = d.join("stats.json").display().to_string();
    std::fs::write(
        d.join("train.toml"),
        format!(
            "{source}\n[[stage]]\nkind = \"discretization\"\ninput = \"income\"\nnum_bins = 4\nadapted = {stats_path:?}\n\n\
             [[stage]]\nkind = \"text_vectorization\"\ninput = \"text\"\noutput_mode = \"tf_idf\"\nvocabulary = {{ adapted = {stats_path:?} }}\n\n\
             [[stage]]\nkind = \"clip\"\ninput = \"text\"\nclip_value_max = 1.0\n"
        ),
    )
    .unwrap();
    let run = sluice()
        .args(["run", "train.toml", "--json"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report = String::from_utf8_lossy(&run.stdout);
    assert!(
        report.contains("discretization") && report.contains("text_vectorization"),
        "{report}"
    );
    // A bad --quantiles says what it wants.
    let bad = sluice()
        .args([
            "adapt",
            "analyze.toml",
            "--out",
            "x.json",
            "--quantiles",
            "income",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("FEATURE:NUM_BINS"));
}
