//! `group_by_window` and `bucket_by_sequence_length` against tf.data:
//! `tests/fixtures/transformations/grouping.json` (written by `generate_grouping.py` there
//! with TensorFlow 2.21) holds the inputs and what tf.data gave, batch by batch; plus
//! checkpoints, elastic resume and the errors.

use serde_json::{Value as Json, json};
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;
use sluice_core::{Checkpoint, ErrorKind};

fn fixture() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/transformations/grouping.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixture's elements (`key`, `label`, `tokens`, `weights`), or only the scalars.
fn elements(input: &Json, scalars_only: bool) -> Vec<Element> {
    input
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut el = Element::new(ElementId::new(0, i as u64))
                .with("key", Tensor::scalar_i64(e["key"].as_i64().unwrap()))
                .with("label", Tensor::scalar_i64(e["label"].as_i64().unwrap()));
            if !scalars_only {
                let tokens: Vec<i64> = serde_json::from_value(e["tokens"].clone()).unwrap();
                let weights: Vec<f32> = serde_json::from_value(e["weights"].clone()).unwrap();
                el = el
                    .with(
                        "tokens",
                        Tensor::new(&[tokens.len()], TensorData::I64(tokens.into())).unwrap(),
                    )
                    .with(
                        "weights",
                        Tensor::new(&[weights.len()], TensorData::F32(weights.into())).unwrap(),
                    );
            }
            el
        })
        .collect()
}

/// A batch as the fixture writes it: each feature's shape and values.
fn encode(batch: &Element) -> Json {
    let mut out = serde_json::Map::new();
    for (name, value) in batch.iter() {
        let Value::Dense(t) = value else {
            panic!("{name} is not dense")
        };
        let values: Vec<Json> = match t.data() {
            TensorData::I64(v) => v.iter().map(|x| json!(x)).collect(),
            TensorData::F32(v) => v.iter().map(|&x| json!(f64::from(x))).collect(),
            other => panic!("{name}: unexpected {other:?}"),
        };
        out.insert(
            name.to_string(),
            json!({"shape": t.shape(), "values": values}),
        );
    }
    Json::Object(out)
}

/// The batches until the end or the first error, and that error.
fn run(ds: &Dataset) -> (Vec<Json>, Option<sluice_core::Error>) {
    let mut got = Vec::new();
    for item in ds.iter().unwrap() {
        match item {
            Ok(b) => got.push(encode(&b)),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

/// Compares batches, floats as numbers (JSON writes `1.0` and `1` alike here).
fn same(got: &[Json], want: &[Json]) -> bool {
    let norm = |v: &[Json]| -> Vec<Json> {
        v.iter()
            .map(|b| {
                let mut b = b.clone();
                for f in b.as_object_mut().unwrap().values_mut() {
                    let vals: Vec<f64> = f["values"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_f64().unwrap())
                        .collect();
                    f["values"] = json!(vals);
                }
                b
            })
            .collect()
    };
    norm(got) == norm(want)
}

fn group_spec(case: &Json) -> GroupByWindowSpec {
    serde_json::from_value(json!({
        "key": "key",
        "window_size": case["window_size"],
        "drop_remainder": case["drop_remainder"],
        "padded": case["padded"],
        "padding_values": case["padding_values"],
        "padded_shapes": case["padded_shapes"],
    }))
    .unwrap()
}

#[test]
fn group_by_window_matches_tf_data() {
    let f = fixture();
    let cases = f["group_by_window"].as_array().unwrap();
    assert!(cases.len() > 40);
    for case in cases {
        let padded = case["padded"].as_bool().unwrap();
        let input = &f["inputs"]["group_by_window"][case["input"].as_str().unwrap()];
        let ds = Dataset::from_elements(elements(input, !padded)).group_by_window(group_spec(case));
        let (got, err) = run(&ds);
        assert!(err.is_none(), "{case}: {err:?}");
        let want = case["batches"].as_array().unwrap();
        assert!(same(&got, want), "{case}\ngot  {got:?}");
    }
}

fn bucket_spec(case: &Json) -> BucketBySequenceLengthSpec {
    let mut spec = json!({"input": "tokens"});
    for key in [
        "bucket_boundaries",
        "bucket_batch_sizes",
        "padding_values",
        "pad_to_bucket_boundary",
        "no_padding",
        "drop_remainder",
    ] {
        if !case[key].is_null() {
            spec[key] = case[key].clone();
        }
    }
    if let Some(shapes) = case["padded_shapes"].as_object() {
        // tf.data's unknown dimension (None) is "max" here.
        let shapes: serde_json::Map<String, Json> = shapes
            .iter()
            .map(|(k, dims)| {
                let dims: Vec<Json> = dims
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| if d.is_null() { json!("max") } else { d.clone() })
                    .collect();
                (k.clone(), json!(dims))
            })
            .collect();
        spec["padded_shapes"] = Json::Object(shapes);
    }
    serde_json::from_value(spec).unwrap()
}

#[test]
fn bucket_by_sequence_length_matches_tf_data() {
    let f = fixture();
    let cases = f["bucket_by_sequence_length"].as_array().unwrap();
    assert!(cases.len() >= 16);
    let mut errors = 0;
    for case in cases {
        let input = &f["inputs"]["bucket_by_sequence_length"][case["input"].as_str().unwrap()];
        let ds = Dataset::from_elements(elements(input, false))
            .bucket_by_sequence_length(bucket_spec(case));
        let (got, err) = run(&ds);
        let want = case["batches"].as_array().unwrap();
        assert!(same(&got, want), "{case}\ngot  {got:?}");
        match (&case["error"], err) {
            (Json::Null, None) => {}
            (Json::String(code), Some(e)) => {
                // tf.data: INVALID_ARGUMENT from the boundary assertion, when the last
                // bucket's batch is made.
                assert_eq!(code, "INVALID_ARGUMENT");
                assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
                assert_eq!(e.feature(), Some("tokens"));
                let msg = e.to_string();
                assert!(
                    msg.contains("pad_to_bucket_boundary") && msg.contains("last boundary (5)"),
                    "{msg}"
                );
                errors += 1;
            }
            (want, got) => panic!("{case}: wanted error {want}, got {got:?}"),
        }
    }
    assert_eq!(errors, 2);
}

/// Elements of `key = i % 4` (and `i % 7` tokens), from a range so elastic resume applies.
fn keyed(n: i64) -> Dataset {
    Dataset::range(0, n).map(|e| {
        let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
        let len = (v % 7) as usize;
        Ok(e.with("key", Tensor::scalar_i64(v % 4)).with(
            "tokens",
            Tensor::new(&[len], TensorData::I64(vec![v; len].into()))?,
        ))
    })
}

fn values(batches: &[Element]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| b.tensor("value").unwrap().as_i64().unwrap().to_vec())
        .collect()
}

#[test]
fn a_checkpoint_anywhere_resumes_with_the_open_groups_rebuilt() {
    type Make = Box<dyn Fn() -> Dataset>;
    let pipelines: Vec<(&str, Make)> = vec![
        (
            "group_by_window",
            Box::new(|| keyed(41).group_by_window(GroupByWindowSpec::new("key", 3).padded(true))),
        ),
        (
            "bucket_by_sequence_length",
            Box::new(|| {
                keyed(41).bucket_by_sequence_length(BucketBySequenceLengthSpec {
                    drop_remainder: true,
                    ..BucketBySequenceLengthSpec::new("tokens", vec![2, 5], vec![3, 2, 4])
                })
            }),
        ),
    ];
    for (name, make) in pipelines {
        for policy in [ErrorPolicy::Fail, ErrorPolicy::Skip] {
            let make = || make().with_options(Options::default().with_error_policy(policy));
            let all = make().collect().unwrap();
            assert!(all.len() > 8, "{name}");
            for stop in [0, 1, 4, all.len() - 1, all.len()] {
                let mut it = make().iter().unwrap();
                for _ in 0..stop {
                    it.next().unwrap().unwrap();
                }
                let json = it.checkpoint().unwrap().to_json();
                drop(it);
                let rest: Vec<Element> = make()
                    .resume(&Checkpoint::from_json(&json).unwrap())
                    .unwrap()
                    .map(|e| e.unwrap())
                    .collect();
                assert_eq!(rest, all[stop..], "{name} {policy:?} stopped after {stop}");
            }
        }
    }
}

#[test]
fn elastic_resume_delivers_every_record_once_on_another_number_of_hosts() {
    let n = 60;
    let pipeline = |hosts: u64, rank: u64| {
        keyed(n)
            .shard(hosts, rank)
            .group_by_window(GroupByWindowSpec::new("key", 4).padded(true))
            .with_options(Options::default().with_seed(5))
    };
    let mut seen = Vec::new();
    let mut checkpoints = Vec::new();
    for rank in 0..2 {
        let mut it = pipeline(2, rank).iter().unwrap();
        for b in it.by_ref().take(3) {
            seen.extend(values(&[b.unwrap()]));
        }
        let cp = it.checkpoint().unwrap();
        assert_eq!(cp.elastic.as_ref().unwrap().unavailable, None);
        checkpoints.push(cp);
    }
    // Records held in open groups were not delivered: they are read again.
    for rank in 0..3 {
        for b in pipeline(3, rank).resume_elastic(&checkpoints).unwrap() {
            seen.extend(values(&[b.unwrap()]));
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
}

fn one(key: Tensor) -> Dataset {
    Dataset::from_elements(vec![
        Element::new(ElementId::new(0, 0)).with("key", Tensor::scalar_i64(1)),
        Element::new(ElementId::new(0, 1)).with("key", key),
    ])
}

#[test]
fn a_bad_key_names_the_feature_and_the_element() {
    let cases = [
        (
            Tensor::new(&[], TensorData::I32(vec![1].into())).unwrap(),
            "must be int64 (i64), found i32",
        ),
        (
            Tensor::new(&[1], TensorData::I64(vec![1].into())).unwrap(),
            "must be a scalar, found shape [1]",
        ),
    ];
    for (key, why) in cases {
        let err = one(key)
            .group_by_window(GroupByWindowSpec::new("key", 2))
            .collect()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidData);
        assert_eq!(err.feature(), Some("key"));
        let msg = err.to_string();
        assert!(
            msg.contains(why) && msg.contains("element 0:1") && msg.contains("group_by_window"),
            "{msg}"
        );
    }
    let err = one(Tensor::scalar_i64(1))
        .group_by_window(GroupByWindowSpec::new("lang", 2))
        .collect()
        .unwrap_err();
    assert_eq!(err.feature(), Some("lang"));
    assert!(
        err.to_string()
            .contains("no key feature `lang` (the element has `key`)"),
        "{err}"
    );
    // Under the skip policy the bad element is counted and the rest grouped.
    let ds = one(Tensor::new(&[2], TensorData::I64(vec![1, 2].into())).unwrap())
        .group_by_window(GroupByWindowSpec::new("key", 2))
        .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    let mut it = ds.iter().unwrap();
    let out: Vec<Element> = it.by_ref().map(|e| e.unwrap()).collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].tensor("key").unwrap().as_i64().unwrap(), &[1]);
    assert_eq!(it.stats().skipped, 1);
}

#[test]
fn a_length_needs_a_feature_of_rank_one_or_more() {
    let ds = |v: Tensor| {
        Dataset::from_elements(vec![Element::new(ElementId::new(0, 0)).with("tokens", v)])
            .bucket_by_sequence_length(BucketBySequenceLengthSpec::new(
                "tokens",
                vec![3],
                vec![1, 1],
            ))
    };
    let err = ds(Tensor::scalar_i64(4)).collect().unwrap_err();
    assert_eq!(err.feature(), Some("tokens"));
    assert!(err.to_string().contains("is a scalar"), "{err}");
    let err = Dataset::range(0, 2)
        .bucket_by_sequence_length(BucketBySequenceLengthSpec::new(
            "tokens",
            vec![3],
            vec![1, 1],
        ))
        .collect()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no feature `tokens` (the element has `value`)"),
        "{err}"
    );
}

#[test]
fn no_padding_batches_different_lengths_as_ragged() {
    // tf.data's `batch` fails on different lengths; Sluice's `batch` makes a ragged value.
    let out = keyed(7)
        .bucket_by_sequence_length(BucketBySequenceLengthSpec {
            no_padding: true,
            ..BucketBySequenceLengthSpec::new("tokens", vec![3], vec![3, 4])
        })
        .collect()
        .unwrap();
    // Lengths 0..7: [0, 1, 2] fill bucket 0, [3, 4, 5, 6] bucket 1.
    assert_eq!(values(&out), vec![0, 1, 2, 3, 4, 5, 6]);
    assert!(matches!(out[0].get("tokens"), Some(Value::Ragged(_))));
}

#[test]
fn parameters_are_checked_with_their_key() {
    let check = |spec: Json| {
        StageSpec::from_json(spec)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        check(json!({"kind": "group_by_window", "key": "k", "window_size": 0})),
        "window_size: group_by_window: `window_size` must be at least 1"
    );
    assert_eq!(
        check(
            json!({"kind": "group_by_window", "key": "k", "window_size": 2,
                     "padding_values": {"t": -1}})
        ),
        "padding_values: group_by_window: `padding_values` needs `padded = true`"
    );
    assert_eq!(
        check(json!({"kind": "bucket_by_sequence_length", "input": "t",
                     "bucket_boundaries": [3, 5], "bucket_batch_sizes": [2, 2]})),
        "bucket_batch_sizes: bucket_by_sequence_length: `bucket_batch_sizes` must have one \
         more entry than `bucket_boundaries` (2 + 1), got 2"
    );
    assert_eq!(
        check(json!({"kind": "bucket_by_sequence_length", "input": "t",
                     "bucket_boundaries": [3], "bucket_batch_sizes": [2, 0]})),
        "bucket_batch_sizes[1]: bucket_by_sequence_length: `bucket_batch_sizes[1]` must be at least 1"
    );
    assert_eq!(
        check(json!({"kind": "bucket_by_sequence_length", "input": "t",
                     "bucket_boundaries": [3], "bucket_batch_sizes": [2, 2],
                     "no_padding": true, "pad_to_bucket_boundary": true})),
        "pad_to_bucket_boundary: bucket_by_sequence_length: `pad_to_bucket_boundary` pads, \
         and `no_padding` is true"
    );
}

#[test]
fn a_pipeline_file_names_both_stages() {
    let text = r#"
[source]
files = ["unused.tfrecord"]

[[stage]]
kind = "group_by_window"
key = "lang"
window_size = 8
padded = true
padding_values = { tokens = -1 }

[[stage]]
kind = "unbatch"

[[stage]]
kind = "bucket_by_sequence_length"
input = "tokens"
bucket_boundaries = [16, 32]
bucket_batch_sizes = [64, 32, 16]
pad_to_bucket_boundary = true
padded_shapes = { mask = ["max"] }
"#;
    let file = sluice_core::pipeline_file::PipelineFile::from_toml(text).unwrap();
    let kinds: Vec<&str> = file.stages.iter().map(|s| s.kind()).collect();
    assert_eq!(
        kinds,
        ["group_by_window", "unbatch", "bucket_by_sequence_length"]
    );
}

#[test]
fn open_groups_over_the_ram_budget_fail_with_resource_exhausted() {
    // Every element its own key: nothing is ever full, so all of them are held.
    let ds = Dataset::range(0, 1000)
        .map(|e| {
            let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
            Ok(e.with("key", Tensor::scalar_i64(v)))
        })
        .group_by_window(GroupByWindowSpec::new("key", 2))
        .with_options(Options::default().with_ram_budget(4096));
    let err = ds.collect().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err}");
    assert!(err.to_string().contains("ram_budget"), "{err}");
    // Within the budget the same pipeline yields every element once, keys in order.
    let out = Dataset::range(0, 50)
        .map(|e| {
            let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
            Ok(e.with("key", Tensor::scalar_i64(-v)))
        })
        .group_by_window(GroupByWindowSpec::new("key", 2))
        .collect()
        .unwrap();
    assert_eq!(values(&out), (0..50).rev().collect::<Vec<_>>());
}
