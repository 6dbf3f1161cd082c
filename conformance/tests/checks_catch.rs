//! The checks are not vacuous: a stage that breaks each property is caught, with a message
//! naming the property.

use std::sync::atomic::{AtomicI64, Ordering};

use sluice_conformance::{
    check_bounded, check_deterministic, check_error_propagation, check_exactly_once, check_ordered,
};
use sluice_core::prelude::*;
use sluice_core::{BoxStream, BuildContext, Input, Params, Stage};

fn value(e: &Element) -> i64 {
    e.tensor("value").unwrap().as_i64().unwrap()[0]
}

#[test]
fn each_broken_stage_is_caught() {
    let identity = |ds: Dataset| ds;
    let reversed = |v: &[i64]| v.iter().rev().copied().collect();
    let err = check_ordered(identity, 5, reversed).unwrap_err();
    assert!(err.starts_with("ordering:"), "{err}");

    let drops_one = |ds: Dataset| ds.filter(|e| Ok(value(e) != 3));
    let err = check_exactly_once(drops_one, 10, |v: &[i64]| v.to_vec()).unwrap_err();
    assert!(err.starts_with("exactly once:"), "{err}");

    static CALLS: AtomicI64 = AtomicI64::new(0);
    let counter = |ds: Dataset| {
        ds.map(|e| {
            let n = CALLS.fetch_add(1, Ordering::Relaxed);
            Ok(Element::scalar_i64(e.id(), "value", value(&e) + n))
        })
    };
    let err = check_deterministic(counter, 10, 1).unwrap_err();
    assert!(err.starts_with("determinism:"), "{err}");

    let greedy = |ds: Dataset| ds.prefetch(BufferSize::Fixed(64));
    let err = check_bounded(greedy, 200, 1, 2).unwrap_err();
    assert!(err.starts_with("bounded buffering:"), "{err}");

    // Bounded by count: a prefetch of 3 is within a bound of 6, and is seen at its peak.
    let prefetch = |ds: Dataset| ds.prefetch(BufferSize::Fixed(3));
    assert_eq!(check_bounded(prefetch, 100, 1, 6), Ok(()));

    let swallows = |ds: Dataset| ds.take(1);
    let err = check_error_propagation(swallows, 10, 5, |v: &[i64]| v.to_vec()).unwrap_err();
    assert!(err.starts_with("error propagation:"), "{err}");
}

/// A deliberately unbounded parallel stage (test only): a thread of its own pulls its whole
/// input into an unbounded queue, outside the byte ledger, while the consumer takes the
/// elements one by one.
#[derive(Debug)]
struct Hoarder;

impl Stage for Hoarder {
    fn name(&self) -> &'static str {
        "hoarder"
    }

    fn params(&self) -> Params {
        Params::new()
    }

    fn build(&self, inputs: &[Input], _: &BuildContext) -> sluice_core::Result<BoxStream> {
        let mut upstream = inputs[0].open()?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            while let Some(item) = upstream.next() {
                if tx.send(item).is_err() {
                    return;
                }
            }
        });
        Ok(Box::new(sluice_core::IterStream(rx.into_iter())))
    }

    fn runs_inline(&self) -> bool {
        false
    }
}

#[test]
fn an_unbounded_parallel_stage_fails_check_bounded() {
    let hoards = |ds: Dataset| Dataset::from_stage(Hoarder, vec![ds]);
    // It keeps the other properties: only the bound catches it.
    assert_eq!(check_ordered(hoards, 50, |v: &[i64]| v.to_vec()), Ok(()));
    let err = check_bounded(hoards, 120, 1, 16).unwrap_err();
    assert!(err.starts_with("bounded buffering:"), "{err}");
    assert!(err.contains("seen while the stage ran"), "{err}");
}

proptest::proptest! {
    /// The element strategies make what they say.
    #[test]
    fn image_batches_are_images(batch in sluice_conformance::image_batch(5)) {
        proptest::prop_assert!((1..=5).contains(&batch.len()));
        for (i, e) in batch.iter().enumerate() {
            proptest::prop_assert_eq!(e.id(), ElementId::new(0, i as u64));
            let shape = e.tensor("image").unwrap().shape().to_vec();
            proptest::prop_assert!(shape.len() == 3 && (shape[2] == 1 || shape[2] == 3));
        }
    }
}
