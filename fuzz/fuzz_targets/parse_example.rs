//! `parse_example` with feature specs, as the stage uses them. The first byte picks one of
//! the feature specs of the TensorFlow-checked fixtures (`tests/fixtures/parse/parse.json`:
//! fixed_len with defaults and shapes, var_len, fixed_len_sequence, sparse, ragged with
//! every partition kind); the second how many records the rest is cut into (1 to 3, at
//! positions taken from the next bytes). Checks: no panic; every error is a typed
//! invalid-argument or invalid-data error (never internal) that names the feature or the
//! record; a batch parses exactly when each of its records parses alone (at its index).
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sluice_core::ErrorKind;
use sluice_core::prelude::{FeatureSpec, ParseExampleSpec};

fn specs() -> &'static [ParseExampleSpec] {
    static SPECS: OnceLock<Vec<ParseExampleSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let fixtures: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/parse/parse.json")).unwrap();
        fixtures["parse_example"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|case| {
                let features: BTreeMap<String, FeatureSpec> =
                    serde_json::from_value(case["features"].clone()).ok()?;
                Some(ParseExampleSpec::new(features))
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
    assert!(!e.to_string().is_empty());
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
        .map(|(i, r)| spec.parse_one_values(r, i))
        .collect();
    for s in &singles {
        if let Err(e) = s {
            check_error(e);
        }
    }
    // `parse_one` (dense outputs only) agrees with `parse_one_values` on success.
    if let Ok(dense) = spec.parse_one(&records[0], 0) {
        let values = singles[0].as_ref().expect("parse_one succeeded");
        assert_eq!(dense.len(), values.len());
    }
    let batch = spec.parse_batch(&records);
    match &batch {
        Ok(outputs) => {
            assert!(
                singles.iter().all(Result::is_ok),
                "batch parsed, a record alone did not: {singles:?}"
            );
            assert!(!outputs.is_empty() || spec.features.is_empty());
        }
        Err(e) => {
            check_error(e);
            assert!(
                singles.iter().any(Result::is_err),
                "each record parsed alone, the batch did not: {e}"
            );
        }
    }
});
