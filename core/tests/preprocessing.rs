//! The Keras preprocessing stages against Keras itself: each case of
//! `tests/fixtures/preprocessing/keras_layers.json` (written by `generate.py` there with
//! Keras 3 on TensorFlow 2.21) is the layer's config, an input and what Keras returned (or
//! the error it raised). The stage is made from the config as a pipeline file writes it
//! (`kind` = the layer's name in snake_case, the layer's own parameter names), run on the
//! input, and compared bit for bit.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value as Json, json};
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;
use sluice_core::{Element, ElementId, ErrorPolicy, TensorData};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/preprocessing"
    ))
}

fn b64(s: &Json) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s.as_str().unwrap())
        .unwrap()
}

fn float(v: &Json) -> f64 {
    match v {
        Json::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            other => panic!("{other}"),
        },
        other => other.as_f64().unwrap(),
    }
}

fn tensor(t: &Json) -> Tensor {
    let shape: Vec<usize> = t["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let values = t["values"].as_array().unwrap();
    let data = match t["dtype"].as_str().unwrap() {
        "string" => TensorData::Bytes(
            values
                .iter()
                .map(|v| b64(v).into())
                .collect::<Vec<bytes::Bytes>>()
                .into(),
        ),
        "int64" => TensorData::I64(
            values
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect::<Vec<_>>()
                .into(),
        ),
        "int32" => TensorData::I32(
            values
                .iter()
                .map(|v| v.as_i64().unwrap() as i32)
                .collect::<Vec<_>>()
                .into(),
        ),
        "float32" => TensorData::F32(
            values
                .iter()
                .map(|v| float(v) as f32)
                .collect::<Vec<_>>()
                .into(),
        ),
        other => panic!("dtype {other}"),
    };
    Tensor::new(&shape, data).unwrap()
}

/// `HashedCrossing` → `hashed_crossing`.
fn snake(layer: &str) -> String {
    let mut out = String::new();
    for (i, c) in layer.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Floats compared by their bits (NaN as NaN).
fn same(a: &Tensor, b: &Tensor) -> bool {
    if a.shape() != b.shape() {
        return false;
    }
    match (a.data(), b.data()) {
        (TensorData::F32(x), TensorData::F32(y)) => x
            .iter()
            .zip(y.iter())
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())),
        _ => a == b,
    }
}

#[test]
fn every_layer_matches_keras_bit_for_bit() {
    let text = std::fs::read_to_string(fixtures().join("keras_layers.json")).unwrap();
    let fixture: Json = serde_json::from_str(&text).unwrap();
    let mut checked = 0;
    for case in fixture["cases"].as_array().unwrap() {
        let layer = case["layer"].as_str().unwrap();
        let what = format!("{layer} {} {}", case["name"], case["config"]);
        let mut config = case["config"].as_object().unwrap().clone();
        config.insert("kind".into(), json!(snake(layer)));
        let mut element = Element::new(ElementId::new(0, 0));
        match case.get("inputs") {
            // A layer of several inputs (hashed_crossing): x, x1, x2, ... written to x.
            Some(inputs) => {
                let names: Vec<String> = (0..inputs.as_array().unwrap().len())
                    .map(|k| {
                        if k == 0 {
                            "x".to_string()
                        } else {
                            format!("x{k}")
                        }
                    })
                    .collect();
                for (name, t) in names.iter().zip(inputs.as_array().unwrap()) {
                    element = element.with(name, tensor(t));
                }
                config.insert("inputs".into(), json!(names));
                config.insert("output".into(), json!("x"));
            }
            None => {
                config.insert("input".into(), json!("x"));
                element = element.with("x", tensor(&case["input"]));
            }
        }
        let spec =
            StageSpec::from_json(Json::Object(config)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let source = Dataset::from_elements(vec![element]);
        let ds = spec.append_to(&source).unwrap();
        let got: Vec<_> = ds.iter().unwrap().collect();
        match (&case.get("output"), got.into_iter().next().unwrap()) {
            (Some(want), Ok(e)) => {
                let want = tensor(want);
                let got = e.tensor("x").unwrap();
                assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
                assert!(same(got, &want), "{what}:\n got  {got:?}\n want {want:?}");
            }
            (None, Err(e)) => {
                let message = e.to_string();
                assert!(
                    message.contains('x'),
                    "{what}: the error names the feature: {message}"
                );
            }
            (Some(_), Err(e)) => panic!("{what}: Keras gave an output, Sluice an error: {e}"),
            (None, Ok(e)) => panic!(
                "{what}: Keras raised {}, Sluice gave {:?}",
                case["error"],
                e.tensor("x")
            ),
        }
        checked += 1;
    }
    assert!(checked >= 50, "{checked} cases");
}

#[test]
fn a_batch_is_one_call_and_equals_the_elements_batched() {
    let words = ["cat", "zebra", "", "dog", "été", "cat", "ant"];
    let elements: Vec<Element> = words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            Element::new(ElementId::new(0, i as u64))
                .with("w", Tensor::scalar_bytes(w.as_bytes().to_vec().into()))
        })
        .collect();
    let lookup = StringLookupSpec {
        num_oov_indices: 3,
        ..StringLookupSpec::new("w", vec!["cat".into(), "dog".into()])
    };
    let before: Vec<Element> = Dataset::from_elements(elements.clone())
        .preprocess(lookup.clone())
        .batch(3)
        .collect()
        .unwrap();
    let after: Vec<Element> = Dataset::from_elements(elements)
        .batch(3)
        .preprocess(lookup)
        .collect()
        .unwrap();
    assert_eq!(before, after);
    assert_eq!(before[0].tensor("w").unwrap().as_i64().unwrap()[0], 3);
}

#[test]
fn errors_name_the_feature_and_skips_are_counted() {
    let elements: Vec<Element> = [Tensor::scalar_i64(3), Tensor::scalar_bytes("no".into())]
        .into_iter()
        .enumerate()
        .map(|(i, t)| Element::new(ElementId::new(0, i as u64)).with("c", t))
        .collect();
    let spec = CategoryEncodingSpec {
        input: "c".into(),
        output: Some("c_hot".into()),
        num_tokens: 4,
        output_mode: EncodingMode::OneHot,
    };
    let err = Dataset::from_elements(elements.clone())
        .preprocess(spec.clone())
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("category_encoding") && err.contains("`c`") && err.contains("string"),
        "{err}"
    );
    let missing = Dataset::from_elements(elements.clone())
        .preprocess(HashingSpec::new("nope", 4))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("no feature `nope`") && missing.contains("`c`"),
        "{missing}"
    );
    let ds = Dataset::from_elements(elements)
        .preprocess(spec)
        .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    let kept = ds.collect().unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        kept[0].tensor("c_hot").unwrap().as_f32().unwrap(),
        &[0.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(kept[0].tensor("c").unwrap().as_i64().unwrap(), &[3]);
    let skipped: u64 = ds.stats().unwrap().stages.iter().map(|s| s.skipped).sum();
    assert_eq!(skipped, 1);
}

#[test]
fn a_vocabulary_file_reads_as_tensorflow_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab.txt");
    std::fs::write(&path, "cat\r\ndog\n\nété\n").unwrap();
    let spec = StringLookupSpec {
        vocabulary: sluice_core::prelude::Vocabulary::File(path.to_str().unwrap().into()),
        ..StringLookupSpec::new("w", vec![])
    };
    let words = ["dog", "", "été", "cat", "cow"];
    let batch = Tensor::new(
        &[words.len()],
        TensorData::Bytes(
            words
                .iter()
                .map(|w| bytes::Bytes::from(w.as_bytes().to_vec()))
                .collect::<Vec<_>>()
                .into(),
        ),
    )
    .unwrap();
    let out = Dataset::from_elements(vec![Element::new(ElementId::new(0, 0)).with("w", batch)])
        .preprocess(spec)
        .collect()
        .unwrap();
    // OOV 0 ... no: one OOV index (0), then cat 1, dog 2, "" 3, été 4.
    assert_eq!(
        out[0].tensor("w").unwrap().as_i64().unwrap(),
        &[2, 3, 4, 1, 0]
    );
}

#[test]
fn text_vectorization_in_parallel_gives_the_sequential_batches_in_order() {
    let texts: Vec<Element> = (0..200)
        .map(|i| {
            let text = format!("The cat {} sat, on the mat {}!", i % 7, i % 3);
            Element::new(ElementId::new(0, i))
                .with("t", Tensor::scalar_bytes(text.into_bytes().into()))
        })
        .collect();
    let spec = |threads: NumParallel| {
        let mut s: TextVectorizationSpec = serde_json::from_value(json!({
            "input": "t",
            "vocabulary": ["the", "cat", "sat", "on", "mat", "1", "2"],
            "output_sequence_length": 8,
        }))
        .unwrap();
        s.num_parallel = threads;
        s
    };
    let run = |threads| {
        Dataset::from_elements(texts.clone())
            .batch(16)
            .preprocess(spec(threads))
            .collect()
            .unwrap()
    };
    let one = run(NumParallel::Sequential);
    assert_eq!(one.len(), 13);
    assert_eq!(run(NumParallel::Fixed(2)), one);
    assert_eq!(run(NumParallel::Auto), one);
}
