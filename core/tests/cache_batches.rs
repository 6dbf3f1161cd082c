//! A `batch` after an in-memory `cache` is cached as batches (the `batch_before_cache`
//! rule): every pass gives the same batches as batching the cached elements would, the
//! input is computed once, and later passes hand out the cached batches without a copy.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_core::prelude::*;

fn values(batches: &[Element]) -> Vec<Vec<f32>> {
    batches
        .iter()
        .map(|b| b.tensor("x").unwrap().as_f32().unwrap().to_vec())
        .collect()
}

#[test]
fn cached_batches_are_the_batches_of_the_cached_elements() {
    let computed = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&computed);
    let d = Dataset::range(0, 10)
        .map(move |e| {
            counter.fetch_add(1, Ordering::Relaxed);
            let v = e.tensor("value").unwrap().as_i64().unwrap()[0] as f32;
            let mut out = Element::new(e.id());
            out.insert("x", Tensor::new(&[3], TensorData::F32(vec![v; 3].into()))?);
            Ok(out)
        })
        .cache(CacheSpec::Memory)
        .batch(4);
    assert!(d.explain().unwrap().contains("batch_before_cache"));
    // The same pipeline with a stage between the cache and the batch: no rewrite.
    let reference = Dataset::range(0, 10)
        .map(|e| {
            let v = e.tensor("value").unwrap().as_i64().unwrap()[0] as f32;
            let mut out = Element::new(e.id());
            out.insert("x", Tensor::new(&[3], TensorData::F32(vec![v; 3].into()))?);
            Ok(out)
        })
        .cache(CacheSpec::Memory)
        .map(Ok)
        .batch(4);
    let want = values(&reference.collect().unwrap());
    assert_eq!(want.len(), 3, "two batches of 4 and one of 2");
    let first = d.collect().unwrap();
    let second = d.collect().unwrap();
    let third = d.collect().unwrap();
    for pass in [&first, &second, &third] {
        assert_eq!(values(pass), want);
        let ids: Vec<_> = pass.iter().map(|b| b.id()).collect();
        let ids_ref: Vec<_> = reference
            .collect()
            .unwrap()
            .iter()
            .map(|b| b.id())
            .collect();
        assert_eq!(ids, ids_ref);
    }
    assert_eq!(computed.load(Ordering::Relaxed), 10, "the input ran once");
    // Later passes hand out the first pass's batches themselves.
    for (a, b) in first.iter().zip(&second) {
        let (a, b) = (a.tensor("x").unwrap(), b.tensor("x").unwrap());
        assert_eq!(a.as_f32().unwrap().as_ptr(), b.as_f32().unwrap().as_ptr());
    }
}
