//! `parse_sequence_example` against what TensorFlow 2.21 parses from the same
//! `tf.train.SequenceExample` records (`tests/fixtures/parse/parse.json`, written by
//! `generate.py` there): `parse_single_sequence_example` for each record alone and
//! `parse_sequence_example` for the batch; the same outputs, or an error of the same meaning
//! (missing required context features and feature lists, wrong types, wrong sizes, records
//! that are not SequenceExamples).

use std::collections::BTreeMap;

use crate::parse_fixture::{check, fixture, records};
use serde_json::Value as Json;
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;

fn table(j: &Json) -> BTreeMap<String, FeatureSpec> {
    serde_json::from_value(j.clone()).expect("features as Sluice writes them")
}

fn spec_of(case: &Json) -> ParseSequenceExampleSpec {
    ParseSequenceExampleSpec::new(
        table(&case["context_features"]),
        table(&case["sequence_features"]),
    )
}

#[test]
fn every_case_parses_as_tensorflow_parses_it() {
    let fixture = fixture();
    let cases = fixture["parse_sequence_example"].as_array().expect("cases");
    assert!(cases.len() >= 10, "{} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let spec = spec_of(case);
        let recs = records(case);
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
                spec.parse_one(r, 0),
                tf,
            );
        }
    }
}

#[test]
fn errors_name_the_feature_and_the_record() {
    let fixture = fixture();
    let case = fixture["parse_sequence_example"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["name"] == "missing_feature_list")
        .expect("the case")
        .clone();
    let err = spec_of(&case)
        .parse_batch(&records(&case))
        .expect_err("tok is missing");
    assert_eq!(err.feature(), Some("tok"));
    assert!(err.to_string().contains("Index: 1"), "{err}");
}

#[test]
fn the_stage_reads_toml_and_runs_alone_and_after_batch() {
    let toml = r#"
        kind = "parse_sequence_example"
        context_features.len = { dtype = "int64" }
        context_features.tags = { dtype = "string", kind = "var_len" }
        sequence_features.tok = { dtype = "int64", kind = "fixed_len_sequence" }
        sequence_features.emb = { dtype = "float", kind = "fixed_len_sequence", shape = [2] }
        sequence_features.w = { dtype = "string", kind = "var_len" }
    "#;
    let value: toml::Value = toml::from_str(toml).expect("TOML");
    let json = serde_json::to_value(value).expect("as JSON");
    let stage = StageSpec::from_json(json).expect("a stage");
    stage.validate().expect("valid");
    let fixture = fixture();
    let case = fixture["parse_sequence_example"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["name"] == "basic")
        .expect("the case")
        .clone();
    let spec = spec_of(&case);
    assert_eq!(stage.get::<ParseSequenceExampleSpec>(), Some(&spec));
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
    let alone = stage
        .append_to(&source)
        .expect("appends")
        .collect()
        .expect("parses");
    assert_eq!(alone.len(), 3);
    for (e, r) in alone.iter().zip(&recs) {
        for (k, v) in spec.parse_one(r, 0).expect("parses") {
            assert_eq!(e.get(&k), Some(&v), "{k}");
        }
    }
    let batched = stage
        .append_to(&source.batch(3))
        .expect("appends")
        .collect()
        .expect("parses");
    for (k, v) in spec.parse_batch(&recs).expect("parses") {
        assert_eq!(batched[0].get(&k), Some(&v), "{k}");
    }
    assert_eq!(
        batched[0].tensor("tok.lengths").and_then(|t| t.as_i64()),
        Some(&[2, 0, 3][..])
    );
}

#[test]
fn bad_specs_are_refused_with_the_reason() {
    let cases = [
        (
            serde_json::json!({"sequence_features": {"t": {"dtype": "int64"}}}),
            "sequence_features are fixed_len_sequence or var_len",
        ),
        (
            serde_json::json!({"context_features": {"t": {"dtype": "int64", "kind": "fixed_len_sequence", "allow_missing": true}}}),
            "context_features are fixed_len or var_len",
        ),
        (
            serde_json::json!({"sequence_features": {"t": {"dtype": "int64", "kind": "fixed_len_sequence", "default": 1}}}),
            "takes no default",
        ),
        (
            serde_json::json!({"context_features": {"t.lengths": {"dtype": "int64"}},
                               "sequence_features": {"t": {"dtype": "int64", "kind": "fixed_len_sequence"}}}),
            "both output `t.lengths`",
        ),
        (serde_json::json!({}), "at least one"),
    ];
    for (params, want) in cases {
        let mut stage = params.clone();
        stage["kind"] = "parse_sequence_example".into();
        let got = match StageSpec::from_json(stage) {
            Err(e) => e.to_string(),
            Ok(s) => s.validate().expect_err("invalid").to_string(),
        };
        assert!(got.contains(want), "{params}: {got:?} lacks {want:?}");
    }
}
