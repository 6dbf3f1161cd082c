//! `parse_example`'s `fixed_len_sequence`, `sparse` and `ragged` features against what
//! TensorFlow 2.21 parses from the same records (`tests/fixtures/parse/parse.json`, written
//! by `generate.py` there): the same outputs, alone (`parse_single_example`) and batched
//! (`parse_example`), or an error of the same meaning. Where TensorFlow builds a ragged
//! tensor whose partitions do not fit its values (it does not validate them), Sluice fails.

use std::collections::BTreeMap;

use crate::parse_fixture::{check, fixture, inconsistent, records};
use serde_json::Value as Json;
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;

fn spec_of(case: &Json) -> ParseExampleSpec {
    let features: BTreeMap<String, FeatureSpec> =
        serde_json::from_value(case["features"].clone()).expect("features as Sluice writes them");
    ParseExampleSpec::new(features)
}

#[test]
fn every_case_parses_as_tensorflow_parses_it() {
    let fixture = fixture();
    let cases = fixture["parse_example"].as_array().expect("cases");
    assert!(cases.len() >= 25, "{} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let spec = spec_of(case);
        let recs = records(case);
        if inconsistent(case) {
            let err = spec.parse_batch(&recs).expect_err(name);
            assert!(err.to_string().contains("RaggedFeature"), "{name}: {err}");
            for (i, r) in recs.iter().enumerate() {
                let err = spec.parse_one_values(r, 0).expect_err(name);
                assert_eq!(err.feature(), Some("r"), "{name} record {i}: {err}");
            }
            continue;
        }
        check(
            &format!("{name} (batched)"),
            spec.parse_batch(&recs),
            &case["batched"],
        );
        for (i, (r, tf)) in recs
            .iter()
            .zip(case["single"].as_array().expect("single"))
            .enumerate()
        {
            check(
                &format!("{name} (record {i} alone)"),
                spec.parse_one_values(r, 0),
                tf,
            );
        }
    }
}

#[test]
fn new_kinds_read_from_toml_and_round_trip() {
    let toml = r#"
        features.pairs = { dtype = "int64", kind = "fixed_len_sequence", shape = [2], allow_missing = true, default = -1 }
        features.s = { dtype = "float", kind = "sparse", index_key = ["i", "j"], value_key = "v", size = [5, 3] }
        features.s1 = { dtype = "float", kind = "sparse", index_key = "i", value_key = "v", size = 5, already_sorted = true }
        features.r = { dtype = "string", kind = "ragged", value_key = "w", partitions = [{ row_lengths = "l" }, { uniform_row_length = 2 }] }
    "#;
    let spec: ParseExampleSpec = toml::from_str(toml).expect("valid TOML");
    assert_eq!(
        spec.features["pairs"],
        FeatureSpec::FixedLenSequence {
            dtype: FeatureType::Int64,
            shape: vec![2],
            allow_missing: true,
            default: Some(sluice_core::prelude::PadValue::Int(-1)),
        }
    );
    assert_eq!(
        spec.features["s1"],
        FeatureSpec::Sparse {
            dtype: FeatureType::Float,
            index_key: vec!["i".into()],
            value_key: "v".into(),
            size: vec![5],
            already_sorted: true,
        }
    );
    assert_eq!(
        spec.features["r"],
        FeatureSpec::ragged(
            FeatureType::String,
            "w",
            [
                Partition::RowLengths("l".into()),
                Partition::UniformRowLength(2)
            ]
        )
    );
    // Through JSON (what Python sends) and back, unchanged; and valid.
    let json = serde_json::to_value(&spec).expect("serializes");
    let back: ParseExampleSpec = serde_json::from_value(json.clone()).expect("reads back");
    assert_eq!(back, spec);
    let mut stage = json;
    stage["kind"] = "parse_example".into();
    StageSpec::from_json(stage)
        .expect("a stage")
        .validate()
        .expect("valid");
}

fn invalid(features: Json) -> String {
    let stage = serde_json::json!({"kind": "parse_example", "features": features});
    match StageSpec::from_json(stage) {
        Err(e) => e.to_string(),
        Ok(s) => s.validate().expect_err("invalid").to_string(),
    }
}

#[test]
fn bad_feature_entries_are_refused_with_the_reason() {
    let cases = [
        (
            serde_json::json!({"a": {"dtype": "int64", "kind": "fixed_len_sequence"}}),
            "requires allow_missing to be True",
        ),
        (
            serde_json::json!({"s": {"dtype": "int64", "kind": "sparse", "value_key": "v", "size": 3}}),
            "needs `index_key`",
        ),
        (
            serde_json::json!({"s": {"dtype": "int64", "kind": "sparse", "index_key": ["i", "j"], "value_key": "v", "size": 3}}),
            "2 index keys but 1 sizes",
        ),
        (
            serde_json::json!({"r": {"dtype": "int64", "kind": "ragged", "shape": [2]}}),
            "a ragged feature takes no `shape`",
        ),
        (
            serde_json::json!({"r": {"dtype": "int64", "kind": "ragged", "partitions": [{"uniform_row_length": 0}]}}),
            "uniform_row_length must be at least 1",
        ),
        (
            serde_json::json!({"v": {"dtype": "string", "kind": "var_len"},
                               "r": {"dtype": "int64", "kind": "ragged", "value_key": "v"}}),
            "record key `v` is read by features",
        ),
        (
            serde_json::json!({"s.values": {"dtype": "float"},
                               "s": {"dtype": "float", "kind": "sparse", "index_key": "i", "value_key": "v", "size": 3}}),
            "both output `s.values`",
        ),
        (
            serde_json::json!({"a": {"dtype": "int64", "kind": "fixed_len_sequence", "allow_missing": true, "default": "x"}}),
            "does not fit",
        ),
    ];
    for (features, want) in cases {
        let got = invalid(features.clone());
        assert!(got.contains(want), "{features}: {got:?} lacks {want:?}");
    }
}

/// The stage in a pipeline: the same outputs as `parse_batch`, at any batch boundary, and
/// a resumed run continues with the same elements.
#[test]
fn the_stage_parses_single_records_and_batches() {
    let fixture = fixture();
    let case = fixture["parse_example"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["name"] == "ragged_row_lengths")
        .expect("the case")
        .clone();
    let spec = spec_of(&case);
    let recs = records(&case);
    let elements: Vec<Element> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut e = Element::new(ElementId::new(0, i as u64));
            e.insert("record", Tensor::scalar_bytes(r.clone()));
            e
        })
        .collect();
    let source = Dataset::from_elements(elements);
    let one = source
        .parse_example(spec.clone())
        .collect()
        .expect("parses");
    assert_eq!(one.len(), recs.len());
    for (e, r) in one.iter().zip(&recs) {
        let want = spec.parse_one_values(r, 0).expect("parses");
        for (k, v) in &want {
            assert_eq!(e.get(k), Some(v), "{k}");
        }
        assert!(e.get("record").is_none(), "the record is replaced");
    }
    let batched = source
        .batch(2)
        .parse_example(spec.clone())
        .collect()
        .expect("parses");
    let want = spec.parse_batch(&recs).expect("parses");
    for (k, v) in &want {
        assert_eq!(batched[0].get(k), Some(v), "{k}");
    }
}
