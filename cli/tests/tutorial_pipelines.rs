//! The TensorFlow tutorials' pipelines in `examples/pipelines/`: PetFinder's structured data
//! (`petfinder_analyze.toml` → `sluice adapt` → `petfinder_tabular.toml`) and IMDB's text
//! (`imdb_analyze.toml` → `sluice adapt` → `imdb_text.toml`), on small generated data of
//! the tutorials' shapes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn pipeline(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/pipelines")
        .join(name)
}

fn sluice(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn petfinder_structured_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut csv = String::from(
        "Type,Age,Breed1,Gender,Color1,Color2,MaturitySize,FurLength,Vaccinated,Sterilized,Health,Fee,Description,PhotoAmt,AdoptionSpeed\n",
    );
    let kinds = ["Cat", "Dog"];
    let breeds = ["Tabby", "Mixed Breed", "Domestic Short Hair"];
    for i in 0..600 {
        csv.push_str(&format!(
            "{},{},{},{},Black,{},Small,Short,{},No,Healthy,{},\"A pet, number {i}\",{},{}\n",
            kinds[i % 2],
            1 + i % 7,
            breeds[i % 3],
            if i % 3 == 0 { "Male" } else { "Female" },
            if i % 4 == 0 { "White" } else { "No Color" },
            if i % 2 == 0 { "Yes" } else { "No" },
            (i * 37) % 200,
            i % 5,
            i % 5
        ));
    }
    std::fs::write(d.join("petfinder-mini.csv"), csv).unwrap();
    let analyze = pipeline("petfinder_analyze.toml");
    let mut args = vec![
        "adapt",
        analyze.to_str().unwrap(),
        "--data",
        ".",
        "--out",
        "petfinder_stats.json",
        "--batch-mean-variance",
        "PhotoAmt",
        "--batch-mean-variance",
        "Fee",
        "--batch-size",
        "256",
        "--vocabulary",
        "Age:5",
    ];
    for c in [
        "Type",
        "Breed1",
        "Color1",
        "Color2",
        "Gender",
        "MaturitySize",
        "FurLength",
        "Vaccinated",
        "Sterilized",
        "Health",
    ] {
        args.extend(["--vocabulary", c]);
    }
    sluice(d, &args);
    let report = sluice(
        d,
        &[
            "run",
            pipeline("petfinder_tabular.toml").to_str().unwrap(),
            "--data",
            ".",
            "--json",
        ],
    );
    let stats: serde_json::Value = serde_json::from_str(report.lines().last().unwrap()).unwrap();
    // 600 rows in batches of 256: 3 batches, through every layer.
    assert_eq!(stats["elements"], 600, "{report}");
    assert_eq!(stats["batches"], 3, "{report}");
    let names: Vec<&str> = stats["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.iter().filter(|n| **n == "string_lookup").count(), 10);
    assert!(names.contains(&"normalization") && names.contains(&"integer_lookup"));
}

#[test]
fn imdb_text_classification() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let words = [
        "movie", "great", "bad", "plot", "acting", "the", "a", "was", "<br />", "<BR />",
    ];
    let mut text = String::new();
    for i in 0..100 {
        let n = 5 + i % 40;
        let review: Vec<&str> = (0..n)
            .map(|k| words[(i * 7 + k * 3) % words.len()])
            .collect();
        text.push_str(&format!("{}!\n", review.join(" ")));
    }
    std::fs::write(d.join("reviews.txt"), text).unwrap();
    sluice(
        d,
        &[
            "adapt",
            pipeline("imdb_analyze.toml").to_str().unwrap(),
            "--data",
            ".",
            "--out",
            "imdb_vocab.json",
            "--text-vocabulary",
            "line:10000",
        ],
    );
    let vocab: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("imdb_vocab.json")).unwrap()).unwrap();
    // The HTML line breaks are gone (not "br"), as the tutorial's standardization does.
    let tokens = vocab["features"]["line"]["tokens"].as_array().unwrap();
    assert!(tokens.iter().any(|t| t == "movie"));
    assert!(!tokens.iter().any(|t| t == "br" || t == ""), "{tokens:?}");
    let report = sluice(
        d,
        &[
            "run",
            pipeline("imdb_text.toml").to_str().unwrap(),
            "--data",
            ".",
            "--json",
        ],
    );
    let stats: serde_json::Value = serde_json::from_str(report.lines().last().unwrap()).unwrap();
    // 100 reviews in batches of 32: 4 batches.
    assert_eq!(stats["elements"], 100, "{report}");
    assert_eq!(stats["batches"], 4, "{report}");
}
