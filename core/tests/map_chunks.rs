//! `map_chunks`: outputs and ids against a sequential reference, determinism at any
//! parallelism, and errors (returned, invalid parents, panics) under both error policies.

use proptest::prelude::*;
use rand::Rng;
use sluice_core::Error;
use sluice_core::prelude::*;
use sluice_core::rng::ElementRng;

fn value(e: &Element) -> i64 {
    e.tensor("value").unwrap().as_i64().unwrap()[0]
}

/// Each input `v` gives `v % 3` outputs (0, 1 or 2): a filter and a flat map at once. Each
/// output carries `v * 10 + k` and a random draw from its input's RNG.
fn fan_out(chunk: Vec<Element>, rngs: &mut [ElementRng]) -> Result<Vec<(usize, Element)>> {
    let mut out = Vec::new();
    for (i, (e, rng)) in chunk.iter().zip(rngs.iter_mut()).enumerate() {
        let v = value(e);
        let draw: i64 = rng.random_range(0..1_000_000);
        for k in 0..v % 3 {
            out.push((
                i,
                Element::scalar_i64(e.id(), "value", v * 10 + k).with(
                    "draw",
                    Tensor::new(&[], TensorData::I64(vec![draw].into())).unwrap(),
                ),
            ));
        }
    }
    Ok(out)
}

fn run(n: i64, chunk: usize, parallel: NumParallel, seed: u64) -> Vec<(i64, i64, ElementId)> {
    Dataset::range(0, n)
        .map_chunks(MapChunksSpec::new(chunk).num_parallel(parallel), fan_out)
        .with_options(Options::default().with_seed(seed))
        .collect()
        .unwrap()
        .iter()
        .map(|e| {
            (
                value(e),
                e.tensor("draw").unwrap().as_i64().unwrap()[0],
                e.id(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Outputs in input order, as many per input as the function says, the same at any
    /// chunk size and thread count (the draws are keyed by element id, not by chunk).
    #[test]
    fn outputs_follow_the_reference_at_any_chunking_and_parallelism(
        n in 0i64..200, chunk in 1usize..40, threads in 1usize..4, seed in any::<u64>(),
    ) {
        let want: Vec<i64> = (0..n).flat_map(|v| (0..v % 3).map(move |k| v * 10 + k)).collect();
        let sequential = run(n, chunk, NumParallel::Sequential, seed);
        let got: Vec<i64> = sequential.iter().map(|x| x.0).collect();
        prop_assert_eq!(&got, &want);
        let parallel = run(n, chunk.max(2) - 1, NumParallel::Fixed(threads), seed);
        prop_assert_eq!(&parallel, &sequential);
    }
}

#[test]
fn a_single_output_keeps_its_id_and_several_get_child_ids() {
    let out = run(6, 4, NumParallel::Sequential, 1);
    let ids = Dataset::range(0, 6).collect().unwrap();
    // Input 1 gives one output: the same id. Input 2 gives two: child ids 0 and 1.
    assert_eq!(out[0].0, 10);
    assert_eq!(out[0].2, ids[1].id());
    assert_eq!((out[1].0, out[2].0), (20, 21));
    assert_eq!(out[1].2, ids[2].id().child(0));
    assert_eq!(out[2].2, ids[2].id().child(1));
    // Both outputs of input 2 saw the same RNG draw (one RNG per input).
    assert_eq!(out[1].1, out[2].1);
}

#[test]
fn errors_fail_the_chunk_or_are_skipped_and_counted() {
    let failing = |policy: ErrorPolicy, parallel: NumParallel| {
        Dataset::range(0, 40)
            .map_chunks(MapChunksSpec::new(8).num_parallel(parallel), |chunk, _| {
                if chunk.iter().any(|e| value(e) == 13) {
                    return Err(Error::user("thirteen is unlucky"));
                }
                Ok(chunk.into_iter().map(|e| (0, e)).take(0).collect())
            })
            .with_options(Options::default().with_error_policy(policy))
    };
    for parallel in [NumParallel::Sequential, NumParallel::Fixed(2)] {
        let err = failing(ErrorPolicy::Fail, parallel)
            .collect()
            .unwrap_err()
            .to_string();
        assert!(err.contains("thirteen is unlucky"), "{err}");
        assert!(
            err.contains("map_chunks"),
            "the error names the stage: {err}"
        );
        let ds = failing(ErrorPolicy::Skip, parallel);
        let mut it = ds.iter().unwrap();
        assert_eq!(it.by_ref().count(), 0);
        assert_eq!(
            it.stats().skipped,
            8,
            "the failed chunk's 8 elements counted"
        );
    }
}

#[test]
fn outputs_naming_a_bad_input_or_out_of_order_are_errors() {
    let bad = |pairs: Vec<usize>| {
        Dataset::range(0, 4)
            .map_chunks(MapChunksSpec::new(4), move |chunk, _| {
                Ok(pairs.iter().map(|&p| (p, chunk[0].clone())).collect())
            })
            .collect()
            .unwrap_err()
            .to_string()
    };
    assert!(
        bad(vec![4]).contains("names input 4 (chunk of 4"),
        "{}",
        bad(vec![4])
    );
    assert!(
        bad(vec![2, 1]).contains("names input 1"),
        "{}",
        bad(vec![2, 1])
    );
}

#[test]
fn a_panicking_function_is_an_error_not_an_abort() {
    for parallel in [NumParallel::Sequential, NumParallel::Fixed(2)] {
        let err = Dataset::range(0, 10)
            .map_chunks(MapChunksSpec::new(3).num_parallel(parallel), |_, _| {
                panic!("chunk function broke")
            })
            .collect()
            .unwrap_err()
            .to_string();
        assert!(err.contains("chunk function broke"), "{err}");
    }
}

#[test]
fn an_upstream_error_comes_after_the_outputs_of_the_inputs_before_it() {
    // Element 6 fails upstream, in the middle of the second chunk of 4: the outputs of 0..6
    // arrive first (as a plain map would give them), then the error naming element 0:6.
    for parallel in [NumParallel::Sequential, NumParallel::Fixed(3)] {
        let ds = Dataset::range(0, 20)
            .map(|e| {
                if value(&e) == 6 {
                    return Err(Error::user("six fails"));
                }
                Ok(e)
            })
            .map_chunks(MapChunksSpec::new(4).num_parallel(parallel), |c, _| {
                Ok(c.into_iter().enumerate().collect())
            });
        let mut got = Vec::new();
        let mut err = None;
        for e in ds.iter().unwrap() {
            match e {
                Ok(e) => got.push(value(&e)),
                Err(e) => {
                    err = Some(e.to_string());
                    break;
                }
            }
        }
        assert_eq!(got, (0..6).collect::<Vec<_>>(), "{parallel:?}");
        let err = err.expect("the error arrives");
        assert!(
            err.contains("six fails") && err.contains("element 0:6"),
            "{err}"
        );
    }
}
