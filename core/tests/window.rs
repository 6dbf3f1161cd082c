//! `window` and `enumerate` against tf.data: `tests/fixtures/transformations/tfdata.json`
//! (written by `generate.py` there with TensorFlow 2.21) holds what tf.data gave.

use serde_json::Value as Json;
use sluice_core::prelude::*;

fn fixture() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/transformations/tfdata.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn windows_match_tf_data() {
    let f = fixture();
    for case in f["window"].as_array().unwrap() {
        let spec = WindowSpec {
            size: case["size"].as_u64().unwrap() as usize,
            shift: case["shift"].as_u64().map(|s| s as usize),
            stride: case["stride"].as_u64().unwrap() as usize,
            drop_remainder: case["drop_remainder"].as_bool().unwrap(),
        };
        let n = case["n"].as_i64().unwrap();
        let got: Vec<Vec<i64>> = Dataset::range(0, n)
            .window(spec)
            .collect()
            .unwrap()
            .iter()
            .map(|w| w.tensor("value").unwrap().as_i64().unwrap().to_vec())
            .collect();
        let want: Vec<Vec<i64>> = serde_json::from_value(case["windows"].clone()).unwrap();
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn enumerate_matches_tf_data() {
    let f = fixture();
    let want: Vec<(i64, i64)> = serde_json::from_value(f["enumerate"].clone()).unwrap();
    let got: Vec<(i64, i64)> = Dataset::range(5, 9)
        .enumerate(3)
        .collect()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.tensor("index").unwrap().as_i64().unwrap()[0],
                e.tensor("value").unwrap().as_i64().unwrap()[0],
            )
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_window_checkpoint_resumes_and_elastic_resume_says_why_not() {
    let make = || {
        Dataset::range(0, 20).window(WindowSpec {
            shift: Some(2),
            ..WindowSpec::new(5)
        })
    };
    let all = make().collect().unwrap();
    let mut it = make().iter().unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    let cp = it.checkpoint().unwrap();
    let rest: Vec<_> = make().resume(&cp).unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(rest, all[3..]);
    let why = cp.elastic.as_ref().unwrap().unavailable.clone().unwrap();
    assert!(why.contains("window"), "{why}");
}
