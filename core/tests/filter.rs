//! `filter` in pipeline files: comparisons on one scalar feature, with the Keras
//! preprocessing stages in the same file.

use sluice_core::Value;
use sluice_core::pipeline_file::PipelineFile;
use sluice_core::prelude::*;

fn run(dir: &std::path::Path, stages: &str) -> sluice_core::Result<Vec<Element>> {
    let toml = format!(
        r#"
[source]
dir = "{}"
files = ["data.csv"]
format = "csv"
header = true
record_defaults = [0, "", 0.0]

{stages}
"#,
        dir.display()
    );
    PipelineFile::from_toml(&toml)?.build()?.collect()
}

fn ids(rows: &[Element]) -> Vec<i32> {
    rows.iter()
        .map(|e| match e.get("id") {
            Some(Value::Dense(t)) => match t.data() {
                sluice_core::TensorData::I32(v) => v[0],
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn comparisons_and_sets_keep_what_they_say() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("data.csv"),
        "id,city,temp\n1,lima,12.5\n2,rome,8\n3,paris,NaN\n4,lima,-3\n5,oslo,20\n",
    )
    .unwrap();
    let cases = [
        ("feature = \"city\"\neq = \"lima\"", vec![1, 4]),
        ("feature = \"city\"\nin = [\"rome\", \"oslo\"]", vec![2, 5]),
        (
            "feature = \"city\"\nnot_in = [\"rome\", \"oslo\"]",
            vec![1, 3, 4],
        ),
        ("feature = \"temp\"\ngt = 8", vec![1, 5]),
        ("feature = \"temp\"\nge = 8\nlt = 20.0", vec![1, 2]),
        // NaN is unordered: it passes only `ne`.
        ("feature = \"temp\"\nne = 8", vec![1, 3, 4, 5]),
        ("feature = \"temp\"\nle = 100", vec![1, 2, 4, 5]),
        ("feature = \"id\"\nin = [2, 3, 99]", vec![2, 3]),
    ];
    for (filter, want) in cases {
        let rows = run(
            dir.path(),
            &format!("[[stage]]\nkind = \"filter\"\n{filter}"),
        )
        .unwrap();
        assert_eq!(ids(&rows), want, "{filter}");
    }
    // With a Keras layer after it, in the same file.
    let rows = run(
        dir.path(),
        "[[stage]]\nkind = \"filter\"\nfeature = \"temp\"\ngt = 0\n\n\
         [[stage]]\nkind = \"string_lookup\"\ninput = \"city\"\nvocabulary = [\"lima\", \"oslo\"]\n\n\
         [[stage]]\nkind = \"batch\"\nbatch_size = 8",
    )
    .unwrap();
    assert_eq!(
        rows[0].tensor("city").unwrap().as_i64().unwrap(),
        &[1, 0, 2]
    );
}

#[test]
fn mistakes_are_errors_naming_the_key_or_feature() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.csv"), "id,city,temp\n1,lima,12.5\n").unwrap();
    let none = run(
        dir.path(),
        "[[stage]]\nkind = \"filter\"\nfeature = \"city\"",
    )
    .unwrap_err();
    assert!(none.to_string().contains("give a comparison"), "{none}");
    let typo = run(
        dir.path(),
        "[[stage]]\nkind = \"filter\"\nfeature = \"city\"\nequals = 1",
    )
    .unwrap_err();
    assert!(typo.to_string().contains("equals"), "{typo}");
    let mixed = run(
        dir.path(),
        "[[stage]]\nkind = \"filter\"\nfeature = \"city\"\nlt = 3",
    )
    .unwrap_err();
    assert!(
        mixed.to_string().contains("`city`") && mixed.to_string().contains("string"),
        "{mixed}"
    );
    let missing = run(
        dir.path(),
        "[[stage]]\nkind = \"filter\"\nfeature = \"zip\"\neq = 1",
    )
    .unwrap_err();
    assert!(missing.to_string().contains("`zip`"), "{missing}");
    // Under skip, the bad element is skipped and counted, not dropped silently.
    let toml = format!(
        "[source]\ndir = \"{}\"\nfiles = [\"data.csv\"]\nformat = \"csv\"\nheader = true\n\
         record_defaults = [0, \"\", 0.0]\n[options]\nerror_policy = \"skip\"\n\
         [[stage]]\nkind = \"filter\"\nfeature = \"city\"\nlt = 3\n",
        dir.path().display()
    );
    let ds = PipelineFile::from_toml(&toml).unwrap().build().unwrap();
    assert!(ds.collect().unwrap().is_empty());
    let skipped: u64 = ds.stats().unwrap().stages.iter().map(|s| s.skipped).sum();
    assert_eq!(skipped, 1);
}
