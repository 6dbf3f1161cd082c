//! `flat_map` (Rust closures, in order at any parallelism, ids, errors, checkpoints) and
//! `scan` (closures with an `Element` state; the pipeline file's built-in ops against
//! tf.data's `scan`, `tests/fixtures/transformations/resample.json`; checkpoints; errors).

use serde_json::Value;
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;
use sluice_core::{Checkpoint, ErrorKind};

fn value(e: &Element, name: &str) -> i64 {
    e.tensor(name).unwrap().as_i64().unwrap()[0]
}

fn ints(ds: &Dataset, name: &str) -> Vec<i64> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| value(e, name))
        .collect()
}

/// Each n becomes n elements `n * 10 + k`.
fn repeat_n(e: Element) -> Result<Vec<Element>> {
    let n = value(&e, "value");
    Ok((0..n)
        .map(|k| e.clone().with("value", Tensor::scalar_i64(n * 10 + k)))
        .collect())
}

#[test]
fn flat_map_keeps_order_at_any_parallelism() {
    let want: Vec<i64> = (0..40)
        .flat_map(|n: i64| (0..n).map(move |k| n * 10 + k))
        .collect();
    let sequential = Dataset::range(0, 40).flat_map(repeat_n);
    assert_eq!(ints(&sequential, "value"), want);
    for threads in [2, 4] {
        let parallel = Dataset::range(0, 40).flat_map_with(MapSpec::parallel(threads), |e, _| {
            // Uneven work, so threads finish out of order.
            std::thread::sleep(std::time::Duration::from_micros(
                (40 - value(&e, "value")) as u64 * 20,
            ));
            repeat_n(e)
        });
        assert_eq!(ints(&parallel, "value"), want, "{threads} threads");
    }
}

#[test]
fn flat_map_ids_one_output_keeps_the_id_several_are_children() {
    let out = Dataset::range(0, 3).flat_map(repeat_n).collect().unwrap();
    let ids: Vec<String> = out.iter().map(|e| e.id().to_string()).collect();
    // 0 has no output, 1 one (its id), 2 two (children).
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], ElementId::new(0, 1).to_string());
    assert_eq!(ids[1], ElementId::new(0, 2).child(0).to_string());
    assert_eq!(ids[2], ElementId::new(0, 2).child(1).to_string());
}

#[test]
fn flat_map_random_outputs_are_seeded_and_a_checkpoint_resumes() {
    let make = |threads: usize| {
        Dataset::range(0, 30)
            .flat_map_with(MapSpec::parallel(threads), |e, rng| {
                use rand::Rng;
                let k = rng.random_range(0..3);
                Ok(vec![e; k])
            })
            .with_options(Options::default().with_seed(4))
    };
    let all = ints(&make(1), "value");
    assert_eq!(all, ints(&make(3), "value"));
    let ds = make(2);
    let mut it = ds.iter().unwrap();
    for _ in 0..7 {
        it.next().unwrap().unwrap();
    }
    let cp = Checkpoint::from_json(&it.checkpoint().unwrap().to_json()).unwrap();
    drop(it);
    let rest: Vec<i64> = ds
        .resume(&cp)
        .unwrap()
        .map(|e| value(&e.unwrap(), "value"))
        .collect();
    assert_eq!(rest, all[7..]);
}

#[test]
fn flat_map_errors_name_the_stage_and_element() {
    let ds = Dataset::range(0, 5).flat_map(|e| {
        if value(&e, "value") == 3 {
            return Err(sluice_core::Error::invalid("three is not allowed"));
        }
        Ok(vec![e])
    });
    let err = ds.collect().unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("flat_map") && msg.contains("three is not allowed"),
        "{msg}"
    );
    let skipped = ds.with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    assert_eq!(ints(&skipped, "value"), [0, 1, 2, 4]);
}

/// A running total of `value` in the state, written as `total`; odd totals dropped.
fn running_total(state: &mut Element, mut e: Element) -> Result<Option<Element>> {
    let total = value(state, "total") + value(&e, "value");
    state.insert("total", Tensor::scalar_i64(total));
    e.insert("total", Tensor::scalar_i64(total));
    Ok((total % 2 == 0).then_some(e))
}

fn start() -> Element {
    Element::new(ElementId::new(0, 0)).with("total", Tensor::scalar_i64(0))
}

#[test]
fn scan_carries_its_state_and_restarts_each_epoch() {
    let ds = Dataset::range(1, 9).scan(start(), running_total);
    // Totals 1 3 6 10 15 21 28 36: the even ones.
    assert_eq!(ints(&ds, "total"), [6, 10, 28, 36]);
    // Two epochs: the state starts afresh.
    let mut it = ds.iter().unwrap();
    assert_eq!(it.by_ref().count(), 4);
    assert_eq!(ints(&ds, "total"), [6, 10, 28, 36]);
    // `repeat` after it: each pass its own epoch and state.
    assert_eq!(
        ints(&ds.repeat(Some(2)), "total"),
        [6, 10, 28, 36, 6, 10, 28, 36]
    );
}

#[test]
fn scan_state_is_re_derived_on_resume() {
    // A fresh dataset each time: a dataset's epoch counts its iterations.
    let make = || {
        Dataset::range(0, 50)
            .shuffle(8)
            .scan(start(), running_total)
            .with_options(Options::default().with_seed(9))
    };
    let all = ints(&make(), "total");
    for stop in [0, 1, 5, all.len() - 1] {
        let ds = make();
        let mut it = ds.iter().unwrap();
        for _ in 0..stop {
            it.next().unwrap().unwrap();
        }
        let cp = Checkpoint::from_json(&it.checkpoint().unwrap().to_json()).unwrap();
        drop(it);
        let rest: Vec<i64> = make()
            .resume(&cp)
            .unwrap()
            .map(|e| value(&e.unwrap(), "total"))
            .collect();
        assert_eq!(rest, all[stop..], "resumed after {stop}");
    }
    // Elastic resume is refused with the reason.
    let mut it = Dataset::range(0, 10)
        .shard(2, 0)
        .scan(start(), running_total)
        .iter()
        .unwrap();
    it.next().unwrap().unwrap();
    let why = it
        .checkpoint()
        .unwrap()
        .elastic
        .unwrap()
        .unavailable
        .unwrap();
    assert!(why.contains("scan"), "{why}");
}

#[test]
fn scan_errors_and_panics_name_the_element() {
    let ds = Dataset::range(0, 5).scan(start(), |state, e| {
        if value(&e, "value") == 2 {
            return Err(sluice_core::Error::invalid("no twos"));
        }
        running_total(state, e)
    });
    let msg = ds.collect().unwrap_err().to_string();
    assert!(msg.contains("scan") && msg.contains("no twos"), "{msg}");
    // Skipped: the state goes on without it (0 1 | 3 4 → totals 0 1 4 8).
    let skipped = ds.with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    assert_eq!(ints(&skipped, "total"), [0, 4, 8]);
    let panics = Dataset::range(0, 2).scan(start(), |_, _| panic!("boom"));
    let msg = panics.collect().unwrap_err().to_string();
    assert!(msg.contains("boom"), "{msg}");
}

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/transformations/resample.json"
    );
    serde_json::from_str::<Value>(&std::fs::read_to_string(path).unwrap()).unwrap()["scan"].clone()
}

/// The fixture's inputs as elements with `x`: float32 rows of 2, or int64 scalars.
fn inputs(fx: &Value, floats: bool) -> Dataset {
    let rows = fx[if floats { "float_values" } else { "int_values" }]
        .as_array()
        .unwrap();
    let elements = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let x = if floats {
                let v: Vec<f32> = row
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect();
                Tensor::vector(TensorData::F32(v.into()))
            } else {
                Tensor::scalar_i64(row.as_i64().unwrap())
            };
            Element::new(ElementId::new(0, i as u64)).with("x", x)
        })
        .collect();
    Dataset::from_elements(elements)
}

fn run_op(input: &Dataset, json: Value) -> Vec<Element> {
    let spec = StageSpec::from_json(json).unwrap();
    spec.validate().unwrap();
    spec.append_to(input).unwrap().collect().unwrap()
}

fn f32_rows(out: &[Element], name: &str) -> Vec<Vec<f32>> {
    out.iter()
        .map(|e| e.tensor(name).unwrap().as_f32().unwrap().to_vec())
        .collect()
}

fn want_f32(v: &Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|row| match row.as_array() {
            Some(r) => r.iter().map(|x| x.as_f64().unwrap() as f32).collect(),
            None => vec![row.as_f64().unwrap() as f32],
        })
        .collect()
}

#[test]
fn scan_ops_match_tf_data_scan() {
    let fx = fixture();
    let (floats, int) = (inputs(&fx, true), inputs(&fx, false));
    let out = run_op(&int, serde_json::json!({"kind": "scan", "op": "count"}));
    let counts: Vec<i64> = out.iter().map(|e| value(e, "count")).collect();
    let want: Vec<i64> = serde_json::from_value(fx["count"].clone()).unwrap();
    assert_eq!(counts, want);
    let out = run_op(
        &floats,
        serde_json::json!({"kind": "scan", "op": "cumsum", "input": "x", "output": "s"}),
    );
    assert_eq!(f32_rows(&out, "s"), want_f32(&fx["cumsum_float"]));
    assert_eq!(out[0].tensor("s").unwrap().shape(), &[2]);
    let out = run_op(
        &int,
        serde_json::json!({"kind": "scan", "op": "cumsum", "input": "x"}),
    );
    let sums: Vec<i64> = out.iter().map(|e| value(e, "x")).collect();
    let want: Vec<i64> = serde_json::from_value(fx["cumsum_int"].clone()).unwrap();
    assert_eq!(sums, want);
    let out = run_op(
        &floats,
        serde_json::json!({"kind": "scan", "op": "running_mean", "input": "x", "output": "m"}),
    );
    assert_eq!(f32_rows(&out, "m"), want_f32(&fx["running_mean_float"]));
    let out = run_op(
        &int,
        serde_json::json!({"kind": "scan", "op": "running_mean", "input": "x"}),
    );
    assert_eq!(f32_rows(&out, "x"), want_f32(&fx["running_mean_int"]));
    assert_eq!(out[0].tensor("x").unwrap().shape(), &[] as &[usize]);
    // The Rust API runs the same op.
    let rust = Dataset::range(1, 4)
        .scan_op(ScanSpec::new(ScanOp::Cumsum, Some("value")).output("c"))
        .collect()
        .unwrap();
    assert_eq!(
        rust.iter().map(|e| value(e, "c")).collect::<Vec<_>>(),
        [1, 3, 6]
    );
}

#[test]
fn scan_ops_resume_from_a_checkpoint() {
    let spec = StageSpec::from_json(
        serde_json::json!({"kind": "scan", "op": "running_mean", "input": "value"}),
    )
    .unwrap();
    let make = || {
        spec.append_to(&Dataset::range(0, 40).shuffle(10))
            .unwrap()
            .with_options(Options::default().with_seed(2))
    };
    let all = f32_rows(&make().collect().unwrap(), "value");
    let ds = make();
    let mut it = ds.iter().unwrap();
    for _ in 0..13 {
        it.next().unwrap().unwrap();
    }
    let cp = it.checkpoint().unwrap();
    drop(it);
    let rest: Vec<Vec<f32>> = make()
        .resume(&cp)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .tensor("value")
                .unwrap()
                .as_f32()
                .unwrap()
                .to_vec()
        })
        .collect();
    assert_eq!(rest, all[13..]);
}

#[test]
fn scan_op_errors_name_feature_and_what_was_expected() {
    let elements = |xs: Vec<Tensor>| {
        Dataset::from_elements(
            xs.into_iter()
                .enumerate()
                .map(|(i, x)| Element::new(ElementId::new(0, i as u64)).with("x", x))
                .collect(),
        )
    };
    let cumsum = serde_json::json!({"kind": "scan", "op": "cumsum", "input": "x"});
    let fail = |ds: Dataset, json: Value| {
        StageSpec::from_json(json)
            .unwrap()
            .append_to(&ds)
            .unwrap()
            .collect()
            .unwrap_err()
    };
    let err = fail(
        elements(vec![Tensor::scalar_f32(1.0), Tensor::scalar_i64(2)]),
        cumsum.clone(),
    );
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert_eq!(err.feature(), Some("x"));
    let msg = err.to_string();
    assert!(
        msg.contains("is int64, expected float") && msg.contains("0:1"),
        "{msg}"
    );
    let err = fail(
        elements(vec![
            Tensor::scalar_f32(1.0),
            Tensor::vector(TensorData::F32(vec![1.0, 2.0].into())),
        ]),
        cumsum.clone(),
    )
    .to_string();
    assert!(err.contains("has shape [2], expected []"), "{err}");
    let err = fail(
        elements(vec![Tensor::scalar_bytes(bytes::Bytes::from_static(b"a"))]),
        cumsum.clone(),
    )
    .to_string();
    assert!(err.contains("is string, expected a number"), "{err}");
    let err = fail(
        elements(vec![Tensor::scalar_i64(i64::MAX), Tensor::scalar_i64(1)]),
        cumsum.clone(),
    )
    .to_string();
    assert!(err.contains("overflows int64"), "{err}");
    let err = fail(
        elements(vec![Tensor::scalar_i64(1)]),
        serde_json::json!({
        "kind": "scan", "op": "running_mean", "input": "y"}),
    )
    .to_string();
    assert!(err.contains("no feature `y`"), "{err}");
    // Parameters.
    let problem = |json: Value| {
        StageSpec::from_json(json)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string()
    };
    let err = problem(serde_json::json!({"kind": "scan", "op": "count", "input": "x"}));
    assert!(
        err.starts_with("input: ") && err.contains("reads no"),
        "{err}"
    );
    let err = problem(serde_json::json!({"kind": "scan", "op": "cumsum"}));
    assert!(
        err.starts_with("input: ") && err.contains("need an `input`"),
        "{err}"
    );
    assert!(StageSpec::from_json(serde_json::json!({"kind": "scan", "op": "cumprod"})).is_err());
    // The Rust API checks them when the pipeline is built.
    let err = Dataset::range(0, 2)
        .scan_op(ScanSpec::new(ScanOp::Count, Some("value")))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(err.contains("reads no `input`"), "{err}");
}
