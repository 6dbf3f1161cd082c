//! `parse_sequence_example` with feature specs (`ParseSequenceExampleSpec::parse_one` and
//! `parse_batch`, as the stage uses them). The first byte picks one of the context and
//! sequence feature specs of the TensorFlow-checked fixtures
//! (`tests/fixtures/parse/parse.json`); the second how many records the rest is cut into (1
//! to 3). Checks: no panic; every error is a typed invalid-argument or invalid-data error;
//! a batch parses exactly when each of its records parses alone (at its index).
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sluice_core::ErrorKind;
use sluice_core::prelude::{FeatureSpec, ParseSequenceExampleSpec};

fn specs() -> &'static [ParseSequenceExampleSpec] {
    static SPECS: OnceLock<Vec<ParseSequenceExampleSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let fixtures: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/parse/parse.json")).unwrap();
        fixtures["parse_sequence_example"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|case| {
                let map = |key: &str| -> Option<BTreeMap<String, FeatureSpec>> {
                    match case.get(key) {
                        None => Some(BTreeMap::new()),
                        Some(v) => serde_json::from_value(v.clone()).ok(),
                    }
                };
                Some(ParseSequenceExampleSpec::new(
                    map("context_features")?,
                    map("sequence_features")?,
                ))
            })
            .collect()
    })
}

/// Cuts `rest` into `n` records at positions read from its first bytes.
fn records(n: usize, rest: &[u8]) -> Vec<Bytes> {
    let (cuts, body) = rest.split_at((n - 1).min(rest.len()));
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|&c| (c as usize * body.len()) / 255)
        .collect();
    at.sort_unstable();
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for end in at {
        out.push(Bytes::copy_from_slice(&body[start..end]));
        start = end;
    }
    out.push(Bytes::copy_from_slice(&body[start..]));
    out
}

fn check_error(e: &sluice_core::Error) {
    assert!(
        matches!(
            e.kind(),
            ErrorKind::InvalidArgument | ErrorKind::InvalidData
        ),
        "untyped error: {e:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let [pick, count, rest @ ..] = data else {
        return;
    };
    let specs = specs();
    let spec = &specs[*pick as usize % specs.len()];
    let records = records(1 + *count as usize % 3, rest);
    let singles: Vec<_> = records
        .iter()
        .enumerate()
        .map(|(i, r)| spec.parse_one(r, i))
        .collect();
    for e in singles.iter().filter_map(|s| s.as_ref().err()) {
        check_error(e);
    }
    match spec.parse_batch(&records) {
        Ok(_) => assert!(
            singles.iter().all(Result::is_ok),
            "batch parsed, a record alone did not: {singles:?}"
        ),
        Err(e) => {
            check_error(&e);
            assert!(
                singles.iter().any(Result::is_err),
                "each record parsed alone, the batch did not: {e}"
            );
        }
    }
});
