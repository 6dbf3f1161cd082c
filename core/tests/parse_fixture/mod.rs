//! Reading `tests/fixtures/parse/parse.json` (TensorFlow's outputs, written by
//! `tests/fixtures/parse/generate.py`) and comparing Sluice's outputs with them exactly.
// Each test file uses some of these.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine;
use bytes::Bytes;
use serde_json::Value as Json;
use sluice_core::ErrorKind;
use sluice_core::prelude::*;

/// The fixture, parsed.
pub(crate) fn fixture() -> Json {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/parse/parse.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("the parse fixture"))
        .expect("valid JSON")
}

fn b64(s: &Json) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s.as_str().expect("a base64 string"))
        .expect("base64")
}

/// A case's records.
pub(crate) fn records(case: &Json) -> Vec<Bytes> {
    case["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| Bytes::from(b64(r)))
        .collect()
}

/// A dense tensor in the fixture's form.
fn dense(t: &Tensor) -> Json {
    let (dtype, values) = match t.data() {
        TensorData::I64(v) => ("int64", v.iter().map(|x| Json::from(*x)).collect()),
        TensorData::F32(v) => (
            "float",
            v.iter().map(|x| Json::from(f64::from(*x))).collect(),
        ),
        TensorData::Bytes(v) => (
            "string",
            v.iter()
                .map(|b| Json::from(base64::engine::general_purpose::STANDARD.encode(b)))
                .collect::<Vec<_>>(),
        ),
        other => panic!("unexpected dtype {}", other.dtype()),
    };
    serde_json::json!({"dtype": dtype, "shape": t.shape(), "values": Json::Array(values)})
}

/// Sluice's outputs in the fixture's form: name → `{"dense": ...}` or `{"ragged": ...}`.
pub(crate) fn canon(values: &[(String, Value)]) -> BTreeMap<String, Json> {
    values
        .iter()
        .map(|(k, v)| {
            let j = match v {
                Value::Dense(t) => serde_json::json!({ "dense": dense(t) }),
                Value::Ragged(r) => serde_json::json!({
                    "ragged": {"values": dense(&r.values), "row_splits": r.row_splits.to_vec()}
                }),
            };
            (k.clone(), j)
        })
        .collect()
}

/// TensorFlow's outputs of an outcome, as a map.
pub(crate) fn expected(outcome: &Json) -> BTreeMap<String, Json> {
    outcome["output"]
        .as_object()
        .expect("an output")
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether TensorFlow's output in any mode is a ragged tensor whose splits do not fit.
pub(crate) fn inconsistent(case: &Json) -> bool {
    std::iter::once(&case["batched"])
        .chain(case["single"].as_array().expect("single"))
        .any(|o| o.get("valid") == Some(&Json::Bool(false)))
}

/// Checks one outcome: the same outputs as TensorFlow's, or an error whose message has
/// every phrase of the case's `meaning`. `what` names the case in failures.
pub(crate) fn check(what: &str, ours: sluice_core::Result<Vec<(String, Value)>>, tf: &Json) {
    match (ours, tf.get("error")) {
        (Ok(values), None) => {
            let got = canon(&values);
            let want = expected(tf);
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                want.keys().collect::<Vec<_>>(),
                "{what}: output names"
            );
            for (k, w) in &want {
                assert_eq!(&got[k], w, "{what}: output {k}");
            }
        }
        (Err(e), Some(tf_error)) => {
            let message = e.to_string();
            for phrase in tf["meaning"].as_array().expect("meaning") {
                let phrase = phrase.as_str().expect("a phrase");
                assert!(
                    message.contains(phrase),
                    "{what}: our error {message:?} lacks {phrase:?} (TensorFlow: {})",
                    tf_error["message"]
                );
            }
            assert_eq!(
                e.kind(),
                ErrorKind::InvalidData,
                "{what}: {message} is bad data"
            );
        }
        (Ok(values), Some(tf_error)) => panic!(
            "{what}: TensorFlow failed ({}) but we gave {:?}",
            tf_error["message"],
            canon(&values)
        ),
        (Err(e), None) => panic!("{what}: TensorFlow parsed it but we failed: {e}"),
    }
}
