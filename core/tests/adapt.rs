//! `adapt` against Keras's `adapt` (the `adapt` section of
//! `tests/fixtures/preprocessing/keras_layers.json`, written by `generate.py` there):
//! vocabularies in Keras's order exactly, means and variances within float32 rounding; and
//! the stages loading a statistics file.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value as Json, json};
use sluice_core::adapt::{AdaptSpec, Analyzer, Statistics, adapt};
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;
use sluice_core::{Element, ElementId};

fn fixture() -> Json {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/preprocessing/keras_layers.json"
    ));
    serde_json::from_str::<Json>(&std::fs::read_to_string(path).unwrap()).unwrap()["adapt"].clone()
}

/// One element per value of the fixture tensor `t`, as feature `name`.
fn rows(t: &Json, name: &str) -> Dataset {
    let values = t["values"].as_array().unwrap();
    let elements = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let tensor = match t["dtype"].as_str().unwrap() {
                "string" => Tensor::scalar_bytes(
                    base64::engine::general_purpose::STANDARD
                        .decode(v.as_str().unwrap())
                        .unwrap()
                        .into(),
                ),
                "float32" => Tensor::scalar_f32(v.as_f64().unwrap() as f32),
                other => panic!("{other}"),
            };
            Element::new(ElementId::new(0, i as u64)).with(name, tensor)
        })
        .collect();
    Dataset::from_elements(elements)
}

fn strings(v: &Json) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn adapt_learns_what_keras_learns() {
    let f = fixture();
    let close = |a: f64, b: f64| ((a - b) / b).abs() < 1e-6;
    let stats = adapt(
        &rows(&f["numbers"], "x").batch(64),
        &AdaptSpec::default().with("x", Analyzer::MeanVariance),
    )
    .unwrap();
    let (mean, variance) = stats.mean_variance("x").unwrap();
    assert!(
        close(mean, f["mean"].as_f64().unwrap()),
        "{mean} vs {}",
        f["mean"]
    );
    assert!(
        close(variance, f["variance"].as_f64().unwrap()),
        "{variance} vs {}",
        f["variance"]
    );

    let vocab = |max_tokens: Option<usize>| {
        let spec = AdaptSpec::default().with(
            "w",
            serde_json::from_value::<Analyzer>(
                json!({"analyzer": "vocabulary", "max_tokens": max_tokens}),
            )
            .unwrap(),
        );
        adapt(&rows(&f["words"], "w"), &spec)
            .unwrap()
            .vocabulary("w")
            .unwrap()
            .to_vec()
    };
    // Keras's get_vocabulary() starts with its OOV token.
    assert_eq!(vocab(None), strings(&f["string_lookup"])[1..]);
    assert_eq!(
        vocab(Some(4)),
        strings(&f["string_lookup_max_tokens_4"])[1..]
    );

    let text = |analyzer: Json| {
        let spec =
            AdaptSpec::default().with("t", serde_json::from_value::<Analyzer>(analyzer).unwrap());
        adapt(&rows(&f["texts"], "t").batch(3), &spec)
            .unwrap()
            .vocabulary("t")
            .unwrap()
            .to_vec()
    };
    // TextVectorization's starts with "" and its OOV token.
    assert_eq!(
        text(json!({"analyzer": "text_vocabulary"})),
        strings(&f["text_vectorization"])[2..]
    );
    assert_eq!(
        text(json!({"analyzer": "text_vocabulary", "max_tokens": 6, "ngrams": 2})),
        strings(&f["text_vectorization_max_tokens_6_ngrams_2"])[2..]
    );
}

#[test]
fn stages_load_a_statistics_file() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let words = rows(&f["words"], "w");
    let spec = AdaptSpec::default().with(
        "w",
        serde_json::from_value(json!({"analyzer": "vocabulary"})).unwrap(),
    );
    adapt(&words, &spec).unwrap().save(&path).unwrap();
    let loaded = Statistics::load(&path).unwrap();
    assert_eq!(loaded.vocabulary("w").unwrap()[0], "a");
    // string_lookup with `vocabulary = { adapted = ... }`: "a" is the most frequent.
    let stage = StageSpec::from_json(json!({
        "kind": "string_lookup", "input": "w", "vocabulary": {"adapted": path.to_str().unwrap()}
    }))
    .unwrap();
    let out = stage.append_to(&words.take(2)).unwrap().collect().unwrap();
    let idx: Vec<i64> = out
        .iter()
        .map(|e| e.tensor("w").unwrap().as_i64().unwrap()[0])
        .collect();
    // "b" then "a": Keras's table [UNK]=0, a=1, c=2, b=3.
    assert_eq!(idx, [3, 1]);
    // normalization with `adapted`; a feature the file lacks is an error naming it.
    let numbers = Dataset::range(0, 5);
    let npath = dir.path().join("n.json");
    adapt(
        &numbers,
        &AdaptSpec::default().with("value", Analyzer::MeanVariance),
    )
    .unwrap()
    .save(&npath)
    .unwrap();
    let norm = StageSpec::from_json(json!({
        "kind": "normalization", "input": "value", "adapted": npath.to_str().unwrap()
    }))
    .unwrap();
    let out = norm.append_to(&numbers).unwrap().collect().unwrap();
    let x: Vec<f32> = out
        .iter()
        .map(|e| e.tensor("value").unwrap().as_f32().unwrap()[0])
        .collect();
    let s = 2f32.sqrt();
    assert_eq!(x, [-2.0 / s, -1.0 / s, 0.0, 1.0 / s, 2.0 / s]);
    let wrong = StageSpec::from_json(json!({
        "kind": "normalization", "input": "other", "adapted": npath.to_str().unwrap()
    }))
    .unwrap();
    let err = wrong
        .append_to(&numbers)
        .unwrap()
        .collect()
        .unwrap_err()
        .to_string();
    assert!(err.contains("`other`") && err.contains("`value`"), "{err}");
    let neither = StageSpec::from_json(json!({"kind": "normalization", "input": "value"}));
    let err = match neither {
        Err(e) => e.to_string(),
        Ok(s) => s.validate().unwrap_err().to_string(),
    };
    assert!(err.contains("adapted"), "{err}");
}
