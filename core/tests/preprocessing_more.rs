//! The adapted Keras layers and numeric helpers against Keras and TensorFlow
//! (`tests/fixtures/preprocessing/adapt_more.json`, written by `generate_adapt_more.py`
//! there): `discretization` boundaries learnt by `adapt` (Keras's quantile summary, batch by
//! batch), `tf_idf` vectors of `text_vectorization` / `string_lookup` / `integer_lookup`
//! with document frequencies learnt by `adapt`, `clip` and `log1p`, all bit for bit; and the
//! bounded-memory vocabulary.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value as Json, json};
use sluice_core::adapt::{AdaptSpec, Analyzer, Learnt, Statistics, TokenCounts, adapt};
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;
use sluice_core::{Element, ElementId, TensorData};

fn fixture() -> Json {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/preprocessing/adapt_more.json"
    ));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn shape(t: &Json) -> Vec<usize> {
    t["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

fn f32s(t: &Json) -> Vec<f32> {
    t["bits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| f32::from_bits(b.as_u64().unwrap() as u32))
        .collect()
}

fn f64s(t: &Json) -> Vec<f64> {
    t["bits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| f64::from_bits(b.as_u64().unwrap()))
        .collect()
}

/// A fixture tensor (floats by bits, strings base64, integers as numbers).
fn tensor(t: &Json) -> Tensor {
    let shape = shape(t);
    let data = match t["dtype"].as_str().unwrap() {
        "float32" => TensorData::F32(f32s(t).into()),
        "float64" => TensorData::F64(f64s(t).into()),
        "string" => TensorData::Bytes(
            t["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    base64::engine::general_purpose::STANDARD
                        .decode(v.as_str().unwrap())
                        .unwrap()
                        .into()
                })
                .collect::<Vec<bytes::Bytes>>()
                .into(),
        ),
        "int64" => TensorData::I64(
            t["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect::<Vec<_>>()
                .into(),
        ),
        "int32" => TensorData::I32(
            t["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap() as i32)
                .collect::<Vec<_>>()
                .into(),
        ),
        other => panic!("dtype {other}"),
    };
    Tensor::new(&shape, data).unwrap()
}

/// Float tensors equal bit for bit (any NaN equal to any NaN).
fn same_bits(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {:?} vs {:?}", got.shape(), want.shape()));
    }
    let pairs: Vec<(u64, u64, bool)> = match (got.data(), want.data()) {
        (TensorData::F32(a), TensorData::F32(b)) => a
            .iter()
            .zip(b.iter())
            .map(|(x, y)| {
                (
                    x.to_bits().into(),
                    y.to_bits().into(),
                    x.is_nan() && y.is_nan(),
                )
            })
            .collect(),
        (TensorData::F64(a), TensorData::F64(b)) => a
            .iter()
            .zip(b.iter())
            .map(|(x, y)| (x.to_bits(), y.to_bits(), x.is_nan() && y.is_nan()))
            .collect(),
        _ => {
            return if got == want {
                Ok(())
            } else {
                Err(format!("{got:?} vs {want:?}"))
            };
        }
    };
    for (i, (a, b, nans)) in pairs.into_iter().enumerate() {
        if a != b && !nans {
            return Err(format!("value {i}: bits {a:#x} vs {b:#x}"));
        }
    }
    Ok(())
}

/// One element per tensor, as feature `name`.
fn elements(tensors: Vec<Tensor>, name: &str) -> Dataset {
    Dataset::from_elements(
        tensors
            .into_iter()
            .enumerate()
            .map(|(i, t)| Element::new(ElementId::new(0, i as u64)).with(name, t))
            .collect(),
    )
}

/// The stage of `spec` (JSON, as a pipeline file's table) run on one element holding `t`
/// as `x`: its output.
fn run_stage(spec: Json, t: Tensor) -> sluice_core::Result<Tensor> {
    let stage = StageSpec::from_json(spec).unwrap();
    let out = stage.append_to(&elements(vec![t], "x"))?.collect()?;
    Ok(out[0].tensor("x").unwrap().clone())
}

/// The batches of a discretization case.
fn batches(f: &Json, case: &Json) -> Vec<Vec<f32>> {
    match case.get("array") {
        Some(name) => {
            let all = f32s(&f["arrays"][name.as_str().unwrap()]);
            let mut at = 0;
            case["batch_sizes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| {
                    let n = n.as_u64().unwrap() as usize;
                    at += n;
                    all[at - n..at].to_vec()
                })
                .collect()
        }
        None => case["batches"]
            .as_array()
            .unwrap()
            .iter()
            .map(f32s)
            .collect(),
    }
}

fn quantiles(case: &Json) -> Analyzer {
    Analyzer::Quantiles {
        num_bins: case["num_bins"].as_u64().unwrap() as usize,
        epsilon: case["epsilon"].as_f64().unwrap(),
        batch_size: None,
        steps: None,
    }
}

#[test]
fn discretization_adapt_matches_keras_bit_for_bit() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    for case in f["discretization"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        assert!(case["stable_sort_matches"].as_bool().unwrap(), "{name}");
        let batches = batches(&f, case);
        // Each element is one batch, as Keras's adapt of a batched dataset.
        let data = elements(
            batches
                .iter()
                .map(|b| Tensor::new(&[b.len()], TensorData::F32(b.clone().into())).unwrap())
                .collect(),
            "x",
        );
        let stats = adapt(&data, &AdaptSpec::default().with("x", quantiles(case))).unwrap();
        let (got, _) = stats.bin_boundaries("x").unwrap();
        let got: Vec<u32> = got.iter().map(|&b| (b as f32).to_bits()).collect();
        let want: Vec<u32> = f32s(&case["bin_boundaries"])
            .iter()
            .map(|b| b.to_bits())
            .collect();
        assert_eq!(got, want, "{name}");
        // The layer with the learnt boundaries buckets as Keras's adapted layer.
        let path = dir.path().join("stats.json");
        stats.save(&path).unwrap();
        let all: Vec<f32> = batches.concat();
        let out = run_stage(
            json!({"kind": "discretization", "input": "x", "adapted": path.to_str().unwrap(),
                   "num_bins": case["num_bins"]}),
            Tensor::new(&[all.len()], TensorData::F32(all.into())).unwrap(),
        )
        .unwrap();
        let want: Vec<i32> = case["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap() as i32)
            .collect();
        assert_eq!(out.data(), &TensorData::I32(want.into()), "{name}");
    }
}

#[test]
fn quantile_batches_by_batch_size_or_batch_stage_and_steps() {
    let f = fixture();
    let case = f["discretization"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "normal, batches of 64")
        .unwrap();
    let want = f32s(&case["bin_boundaries"]);
    let values: Vec<f32> = batches(&f, case).concat();
    let scalars = || elements(values.iter().map(|&v| Tensor::scalar_f32(v)).collect(), "x");
    let learn = |data: &Dataset, analyzer: Analyzer| -> Vec<f32> {
        let stats = adapt(data, &AdaptSpec::default().with("x", analyzer)).unwrap();
        stats
            .bin_boundaries("x")
            .unwrap()
            .0
            .iter()
            .map(|&b| b as f32)
            .collect()
    };
    let batched = |batch_size, steps| Analyzer::Quantiles {
        num_bins: 4,
        epsilon: 0.01,
        batch_size,
        steps,
    };
    // Scalars gathered 64 at a time, or batched by the pipeline: Keras's boundaries.
    assert_eq!(learn(&scalars(), batched(Some(64), None)), want);
    assert_eq!(learn(&scalars().batch(64), Analyzer::quantiles(4)), want);
    // Each scalar its own batch is another summary (Keras's adapt of an unbatched dataset).
    assert_ne!(learn(&scalars(), Analyzer::quantiles(4)), want);
    // `steps`: only the first batches, as adapting those alone.
    let first: Vec<f32> = values[..3 * 64].to_vec();
    let three = elements(first.iter().map(|&v| Tensor::scalar_f32(v)).collect(), "x");
    assert_eq!(
        learn(&scalars(), batched(Some(64), Some(3))),
        learn(&three, batched(Some(64), None))
    );
    let stats = adapt(
        &scalars(),
        &AdaptSpec::default().with("x", batched(Some(64), Some(3))),
    )
    .unwrap();
    match &stats.features["x"] {
        Learnt::Quantiles {
            values, batches, ..
        } => assert_eq!((*values, *batches), (192, 3)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn quantile_and_discretization_errors_name_what_is_wrong() {
    let words = elements(vec![Tensor::scalar_bytes("a".into())], "x");
    let err = adapt(
        &words,
        &AdaptSpec::default().with("x", Analyzer::quantiles(3)),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`x`") && err.contains("numbers"), "{err}");
    let err = adapt(
        &words,
        &AdaptSpec::default().with("x", Analyzer::quantiles(0)),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("num_bins"), "{err}");
    // A statistics file without the feature, or learnt for other bins.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let numbers = Dataset::range(0, 50).batch(10);
    adapt(
        &numbers,
        &AdaptSpec::default().with("value", Analyzer::quantiles(4)),
    )
    .unwrap()
    .save(&path)
    .unwrap();
    let p = path.to_str().unwrap();
    let err = run_stage(
        json!({"kind": "discretization", "input": "x", "adapted": p}),
        Tensor::scalar_f32(1.0),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`x`") && err.contains("`value`"), "{err}");
    let wrong_bins = StageSpec::from_json(
        json!({"kind": "discretization", "input": "value", "adapted": p, "num_bins": 5}),
    )
    .unwrap();
    let err = wrong_bins
        .append_to(&numbers)
        .unwrap()
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("4 bins") && err.contains("num_bins = 5"),
        "{err}"
    );
    let ok = StageSpec::from_json(
        json!({"kind": "discretization", "input": "value", "adapted": p, "num_bins": 4}),
    )
    .unwrap();
    let out = ok.append_to(&numbers).unwrap().collect().unwrap();
    assert_eq!(out.len(), 5);
    // Neither boundaries nor a file; or both.
    for bad in [
        json!({"kind": "discretization", "input": "value"}),
        json!({"kind": "discretization", "input": "value", "bin_boundaries": [1.0], "adapted": p}),
        json!({"kind": "discretization", "input": "value", "bin_boundaries": [1.0], "num_bins": 2}),
    ] {
        let err = match StageSpec::from_json(bad) {
            Err(e) => e.to_string(),
            Ok(s) => s.validate().unwrap_err().to_string(),
        };
        assert!(err.contains("discretization"), "{err}");
    }
}

/// The statistics of a tf_idf case adapted as Keras adapted it (the data batched).
fn adapt_tf_idf(case: &Json) -> (Statistics, Dataset) {
    let data = tensor(&case["adapt"]);
    let rows = data.shape()[0];
    let row_shape = data.shape()[1..].to_vec();
    let width: usize = row_shape.iter().product();
    let row = |r: usize| match data.data() {
        TensorData::Bytes(v) => TensorData::Bytes(v[r * width..(r + 1) * width].to_vec().into()),
        TensorData::I64(v) => TensorData::I64(v[r * width..(r + 1) * width].to_vec().into()),
        other => panic!("{other:?}"),
    };
    let ds = elements(
        (0..rows)
            .map(|r| Tensor::new(&row_shape, row(r)).unwrap())
            .collect(),
        "x",
    )
    .batch(case["batch"].as_u64().unwrap() as usize);
    let mut analyzer = json!({"tf_idf": true});
    let config = &case["config"];
    if let Some(m) = config.get("max_tokens") {
        analyzer["max_tokens"] = m.clone();
    }
    if let Some(n) = config.get("ngrams") {
        analyzer["ngrams"] = n.clone();
    }
    analyzer["analyzer"] = json!(if case["layer"] == "TextVectorization" {
        "text_vocabulary"
    } else {
        "vocabulary"
    });
    let spec = AdaptSpec::default().with("x", serde_json::from_value(analyzer).unwrap());
    (adapt(&ds, &spec).unwrap(), ds)
}

#[test]
fn tf_idf_matches_keras_bit_for_bit() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    for case in f["tf_idf"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (stats, _) = adapt_tf_idf(case);
        // Keras's vocabulary starts with its OOV token.
        let want_vocab: Vec<String> = case["vocabulary"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .skip(1)
            .map(|v| match v {
                Json::String(s) => {
                    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(s).unwrap())
                        .unwrap()
                }
                other => other.to_string(),
            })
            .collect();
        assert_eq!(stats.vocabulary("x").unwrap(), want_vocab, "{name}");
        let idf = f32s(&case["idf_weights"]);
        let got: Vec<u32> = stats
            .idf_weights("x")
            .unwrap()
            .iter()
            .map(|w| w.to_bits())
            .collect();
        let want: Vec<u32> = idf[1..].iter().map(|w| w.to_bits()).collect();
        assert_eq!(got, want, "{name}: idf weights");
        let path = dir.path().join("stats.json");
        stats.save(&path).unwrap();
        let kind = match case["layer"].as_str().unwrap() {
            "TextVectorization" => "text_vectorization",
            "StringLookup" => "string_lookup",
            _ => "integer_lookup",
        };
        let mut spec = json!({"kind": kind, "input": "x", "output_mode": "tf_idf",
                              "vocabulary": {"adapted": path.to_str().unwrap()}});
        if let Some(n) = case["config"].get("ngrams") {
            spec["ngrams"] = n.clone();
        }
        let out = run_stage(spec, tensor(&case["input"])).unwrap();
        same_bits(&out, &tensor(&case["output"])).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn tf_idf_with_given_idf_weights_matches_keras() {
    let f = fixture();
    let g = &f["tf_idf_given"];
    let out = run_stage(
        json!({"kind": "text_vectorization", "input": "x", "output_mode": "tf_idf",
               "vocabulary": g["vocabulary"], "idf_weights": g["idf_weights"]}),
        tensor(&g["input"]),
    )
    .unwrap();
    same_bits(&out, &tensor(&g["output"])).unwrap();
    // tf_idf needs weights for a given vocabulary, and an adapted one brings its own.
    for (bad, says) in [
        (
            json!({"kind": "text_vectorization", "input": "x", "output_mode": "tf_idf",
                "vocabulary": ["a"]}),
            "idf_weights",
        ),
        (
            json!({"kind": "text_vectorization", "input": "x", "output_mode": "tf_idf",
                "vocabulary": ["a", "b"], "idf_weights": [1.0]}),
            "1 idf weights for 2",
        ),
        (
            json!({"kind": "string_lookup", "input": "x", "output_mode": "tf_idf",
                "vocabulary": ["a"], "invert": true, "idf_weights": [1.0]}),
            "invert",
        ),
        (
            json!({"kind": "text_vectorization", "input": "x", "vocabulary": ["a"],
                "idf_weights": [1.0]}),
            "tf_idf",
        ),
    ] {
        let err = match StageSpec::from_json(bad) {
            Err(e) => e.to_string(),
            Ok(s) => s.validate().unwrap_err().to_string(),
        };
        assert!(err.contains(says), "{err}");
    }
    // A vocabulary adapted without tf_idf has no document frequencies: the error says how.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.json");
    let words = elements(vec![Tensor::scalar_bytes("the cat".into())], "x");
    adapt(
        &words,
        &AdaptSpec::default().with(
            "x",
            serde_json::from_value(json!({"analyzer": "text_vocabulary"})).unwrap(),
        ),
    )
    .unwrap()
    .save(&path)
    .unwrap();
    let err = run_stage(
        json!({"kind": "text_vectorization", "input": "x", "output_mode": "tf_idf",
               "vocabulary": {"adapted": path.to_str().unwrap()}}),
        Tensor::scalar_bytes("cat".into()),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("tf_idf") && err.contains("`x`"), "{err}");
}

#[test]
fn log1p_matches_tensorflow_bit_for_bit() {
    let f = fixture();
    for dtype in ["float32", "float64"] {
        let case = &f["log1p"][dtype];
        let input = tensor(&case["input"]);
        // The whole tensor at once: TF's vectorized packets and its scalar tail.
        let out = run_stage(json!({"kind": "log1p", "input": "x"}), input.clone()).unwrap();
        same_bits(&out, &tensor(&case["output"])).unwrap_or_else(|e| panic!("{dtype}: {e}"));
        // Each value alone (a scalar): the C library's log1p, as TF's scalar path.
        let want = tensor(&case["scalars"]);
        let n = input.len();
        let stage = StageSpec::from_json(json!({"kind": "log1p", "input": "x"})).unwrap();
        let scalars: Vec<Tensor> = (0..n)
            .map(|i| match input.data() {
                TensorData::F32(v) => Tensor::scalar_f32(v[i]),
                TensorData::F64(v) => Tensor::new(&[], TensorData::F64(vec![v[i]].into())).unwrap(),
                _ => unreachable!(),
            })
            .collect();
        let outs = stage
            .append_to(&elements(scalars, "x"))
            .unwrap()
            .collect()
            .unwrap();
        for (i, e) in outs.iter().enumerate() {
            let got = e.tensor("x").unwrap();
            let w = match want.data() {
                TensorData::F32(v) => Tensor::scalar_f32(v[i]),
                TensorData::F64(v) => Tensor::new(&[], TensorData::F64(vec![v[i]].into())).unwrap(),
                _ => unreachable!(),
            };
            same_bits(got, &w).unwrap_or_else(|e| panic!("{dtype} scalar {i}: {e}"));
        }
    }
    // Integers are cast to float32 first.
    let case = &f["log1p"]["int32"];
    let out = run_stage(
        json!({"kind": "log1p", "input": "x"}),
        tensor(&case["input"]),
    )
    .unwrap();
    same_bits(&out, &tensor(&case["output"])).unwrap();
    let err = run_stage(
        json!({"kind": "log1p", "input": "x"}),
        Tensor::scalar_bytes("a".into()),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`x`") && err.contains("string"), "{err}");
}

#[test]
fn clip_matches_tensorflow_bit_for_bit() {
    let f = fixture();
    for case in f["clip"].as_array().unwrap() {
        let lo = match tensor(&case["clip_value_min"]).data() {
            TensorData::F32(v) => f64::from(v[0]),
            TensorData::F64(v) => v[0],
            _ => unreachable!(),
        };
        let hi = match tensor(&case["clip_value_max"]).data() {
            TensorData::F32(v) => f64::from(v[0]),
            TensorData::F64(v) => v[0],
            _ => unreachable!(),
        };
        let spec =
            json!({"kind": "clip", "input": "x", "clip_value_min": lo, "clip_value_max": hi});
        let input = tensor(&case["input"]);
        let what = format!("clip({lo}, {hi}) of {:?}", input.dtype());
        let out = run_stage(spec.clone(), input.clone()).unwrap();
        same_bits(&out, &tensor(&case["output"])).unwrap_or_else(|e| panic!("{what}: {e}"));
        // One value at a time: TF's scalar path (signed zeros can differ from the vector's).
        let want = tensor(&case["scalars"]);
        for i in 0..input.len() {
            let (x, w) = match (input.data(), want.data()) {
                (TensorData::F32(v), TensorData::F32(w)) => {
                    (Tensor::scalar_f32(v[i]), Tensor::scalar_f32(w[i]))
                }
                (TensorData::F64(v), TensorData::F64(w)) => (
                    Tensor::new(&[], TensorData::F64(vec![v[i]].into())).unwrap(),
                    Tensor::new(&[], TensorData::F64(vec![w[i]].into())).unwrap(),
                ),
                _ => unreachable!(),
            };
            let got = run_stage(spec.clone(), x).unwrap();
            same_bits(&got, &w).unwrap_or_else(|e| panic!("{what} scalar {i}: {e}"));
        }
    }
    for case in f["clip_int"].as_array().unwrap() {
        let out = run_stage(
            json!({"kind": "clip", "input": "x", "min": case["clip_value_min"],
                   "max": case["clip_value_max"]}),
            tensor(&case["input"]),
        )
        .unwrap();
        assert_eq!(out, tensor(&case["output"]), "{case}");
    }
    // Integers take integral bounds; bounds in order; at least one.
    let err = run_stage(
        json!({"kind": "clip", "input": "x", "clip_value_min": 0.5}),
        Tensor::new(&[1], TensorData::I64(vec![3].into())).unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`x`") && err.contains("0.5"), "{err}");
    for bad in [
        json!({"kind": "clip", "input": "x"}),
        json!({"kind": "clip", "input": "x", "clip_value_min": 2.0, "clip_value_max": 1.0}),
    ] {
        let err = match StageSpec::from_json(bad) {
            Err(e) => e.to_string(),
            Ok(s) => s.validate().unwrap_err().to_string(),
        };
        assert!(err.contains("clip"), "{err}");
    }
}

#[test]
fn bounded_vocabulary_holds_at_most_capacity_tokens() {
    // ~2M distinct tokens, each seen once, among which 5 tokens are seen 20 000 times each.
    let capacity = 10_000;
    let mut counts = TokenCounts::new(Some(capacity));
    let heavy: Vec<String> = (0..5).map(|i| format!("heavy{i}")).collect();
    let mut token = String::new();
    let mut n: u64 = 0;
    for i in 0..2_000_000u64 {
        use std::fmt::Write;
        token.clear();
        write!(token, "t{i}").unwrap();
        counts.add(token.as_bytes());
        n += 1;
        if i % 20 == 0 {
            counts.add(heavy[(i / 20 % 5) as usize].as_bytes());
            n += 1;
        }
        assert!(counts.len() <= capacity);
    }
    assert!(counts.peak() <= capacity, "{}", counts.peak());
    assert!(counts.is_approximate());
    assert_eq!(counts.seen(), n);
    // Every heavy token is kept, low by at most n / (capacity + 1).
    let bound = n / (capacity as u64 + 1);
    for h in &heavy {
        let c = counts.get(h.as_bytes());
        assert!(
            c <= 20_000 && c + bound >= 20_000,
            "{h}: {c} (bound {bound})"
        );
    }
    // Through adapt: the vocabulary's top tokens are the heavy ones, marked approximate.
    // With at most `capacity` distinct tokens, the result is the exact one.
    let words: Vec<Tensor> = (0..3000)
        .map(|i| Tensor::scalar_bytes(format!("w{}", (i * 7) % 500 + (i % 3)).into()))
        .collect();
    let ds = elements(words, "x").batch(100);
    let learn = |capacity: Option<usize>| {
        adapt(
            &ds,
            &AdaptSpec::default().with(
                "x",
                serde_json::from_value(json!({"analyzer": "vocabulary", "capacity": capacity}))
                    .unwrap(),
            ),
        )
        .unwrap()
        .features
        .remove("x")
        .unwrap()
    };
    let exact = learn(None);
    assert_eq!(learn(Some(502)), exact);
    match (learn(Some(50)), &exact) {
        (
            Learnt::Vocabulary {
                tokens,
                approximate,
                ..
            },
            Learnt::Vocabulary { tokens: all, .. },
        ) => {
            assert!(approximate);
            assert!(
                tokens.len() <= 50 && all.len() == 502,
                "{} {}",
                tokens.len(),
                all.len()
            );
        }
        other => panic!("{other:?}"),
    }
    // A capacity with tf_idf is refused (document frequencies are exact).
    let err = adapt(
        &ds,
        &AdaptSpec::default().with(
            "x",
            serde_json::from_value(
                json!({"analyzer": "vocabulary", "capacity": 5, "tf_idf": true}),
            )
            .unwrap(),
        ),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("capacity") && err.contains("`x`"), "{err}");
}
