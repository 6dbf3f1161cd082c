//! Arbitrary bytes as a `tf.train.Example` and a `SequenceExample`. Decoding must never
//! panic; whatever decodes must re-encode stably and survive the canonical JSON mapping:
//! `from_json(to_json(m))` encodes exactly as `m` does (with every NaN made the canonical
//! NaN, as JSON has only `"NaN"`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_proto::example::{Feature, Features, feature::Kind};
use sluice_proto::{Example, SequenceExample, TfMessage};

fn canonical_nans(feature: &mut Feature) {
    if let Some(Kind::FloatList(list)) = &mut feature.kind {
        for v in &mut list.value {
            if v.is_nan() {
                *v = f32::NAN;
            }
        }
    }
}

fn canonical_features(features: &mut Features) {
    features.feature.values_mut().for_each(canonical_nans);
}

fn check<M: TfMessage + Clone>(msg: &M, canonical: impl Fn(&mut M)) {
    // Decoding drops unknown fields and takes the last of repeated map keys, so compare
    // with the re-encoding, which must itself be stable.
    let bytes = msg.to_bytes();
    let again = M::from_bytes(&bytes).expect("an encoded message decodes");
    assert_eq!(again.to_bytes(), bytes, "re-encoding is stable");

    let json = msg.to_json();
    let back = M::from_json(&json).unwrap_or_else(|e| panic!("own JSON must parse: {e}: {json}"));
    let mut want = msg.clone();
    canonical(&mut want);
    assert_eq!(
        back.to_bytes(),
        want.to_bytes(),
        "JSON round trip of {json}"
    );
    assert_eq!(back.to_json(), json, "printing is a fixed point");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(example) = Example::from_bytes(data) {
        check(&example, |e| {
            if let Some(f) = &mut e.features {
                canonical_features(f);
            }
        });
    }
    if let Ok(sequence) = SequenceExample::from_bytes(data) {
        check(&sequence, |s| {
            if let Some(f) = &mut s.context {
                canonical_features(f);
            }
            if let Some(lists) = &mut s.feature_lists {
                for list in lists.feature_list.values_mut() {
                    list.feature.iter_mut().for_each(canonical_nans);
                }
            }
        });
    }
});
