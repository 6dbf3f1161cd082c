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

#[test]
fn decode_raw_matches_tf_io_decode_raw() {
    use base64::Engine;
    use sluice_core::TensorData;
    let f = fixture()["decode_raw"].clone();
    let inputs: Vec<bytes::Bytes> = f["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            base64::engine::general_purpose::STANDARD
                .decode(s.as_str().unwrap())
                .unwrap()
                .into()
        })
        .collect();
    let strings = Tensor::new(&[inputs.len()], TensorData::Bytes(inputs.into())).unwrap();
    let run = |spec: serde_json::Value, t: Tensor| {
        let mut spec = spec;
        spec["kind"] = "decode_raw".into();
        spec["input"] = "r".into();
        sluice_core::registry::StageSpec::from_json(spec)
            .unwrap()
            .append_to(&Dataset::from_elements(vec![
                Element::new(ElementId::new(0, 0)).with("r", t),
            ]))
            .unwrap()
            .collect()
    };
    for case in f["cases"].as_array().unwrap() {
        let spec = serde_json::json!({
            "out_type": case["out_type"], "little_endian": case["little_endian"]
        });
        let out = run(spec, strings.clone()).unwrap();
        let t = out[0].tensor("r").unwrap();
        let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
        assert_eq!(t.shape(), &shape[..], "{case}");
        let got: Vec<String> = match t.data() {
            TensorData::U8(v) => v.iter().map(|x| x.to_string()).collect(),
            TensorData::I32(v) => v.iter().map(|x| x.to_string()).collect(),
            TensorData::I64(v) => v.iter().map(|x| x.to_string()).collect(),
            // Python's repr of the float64 value of each.
            TensorData::F32(v) => v.iter().map(|&x| py_repr(f64::from(x))).collect(),
            TensorData::F64(v) => v.iter().map(|&x| py_repr(x)).collect(),
            other => panic!("{other:?}"),
        };
        let want: Vec<String> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        assert_eq!(got, want, "{case}");
    }
    // Strings of two lengths: an error, as TensorFlow's.
    assert!(f["two_lengths_error"].is_string());
    let two = Tensor::new(
        &[2],
        TensorData::Bytes(
            vec![
                bytes::Bytes::from_static(b"abcd"),
                bytes::Bytes::from_static(b"ab"),
            ]
            .into(),
        ),
    )
    .unwrap();
    let err = run(serde_json::json!({"out_type": "uint8"}), two)
        .unwrap_err()
        .to_string();
    assert!(err.contains("one length") && err.contains("`r`"), "{err}");
}

/// Python's `repr` of a float (shortest round-trip digits, `nan`, `inf`).
fn py_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{x:?}");
    // Both print the shortest digits that round-trip; Python writes the exponent with a
    // sign and at least two digits (`1e+16`, `1e-07`), Rust without (`1e16`, `1e-7`).
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ("-", d),
                None => ("+", e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}
