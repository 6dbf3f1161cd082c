//! Every property of `sluice-conformance` against the built-in element stages, over random
//! sizes, parameters, thread counts and seeds.
//!
//! | stage | ordered | exactly once | deterministic | bounded | errors |
//! |---|---|---|---|---|---|
//! | map (parallel) | ✓ | | ✓ | ✓ | ✓ |
//! | filter (parallel) | ✓ | | ✓ | | ✓ |
//! | map_chunks (parallel) | ✓ | | ✓ | ✓ | ✓ |
//! | shuffle | | ✓ | ✓ | ✓ | ✓ |
//! | repeat | ✓ | | ✓ | | ✓ |
//! | take, skip | ✓ | | ✓ | | |
//! | batch (parallel), batch → unbatch, padded_batch | ✓ | | ✓ | ✓ (batch) | ✓ (batch) |
//! | prefetch | ✓ | | ✓ | ✓ | ✓ |
//! | group_by_window, bucket_by_sequence_length | ✓ (tf.data's order) | | ✓ | | ✓ |
//! | flat_map (parallel), scan (`cumsum`), rejection_resample | ✓ | | ✓ | ✓ (flat_map) | ✓ |
//! | cache (memory) | ✓ | | ✓ | | |
//! | concatenate | ✓ | | ✓ | | ✓ |
//! | choose_from (round robin with a second input) | ✓ (tf.data's order) | | ✓ | | ✓ |
//! | Keras layers (`hashing`, `integer_lookup`, `discretization`), `filter` of pipeline files | ✓ | | ✓ | | ✓ |
//!
//! Shutdown (dropping the iterator joins every thread) is checked in `shutdown.rs`, alone in
//! its binary. Stages over files and images (interleave, shard, parse_example, zip,
//! sample_from, image_ops) have their property tests beside them in `core/tests/`.

use proptest::prelude::*;
use sluice_conformance::{
    StageParams, check_bounded, check_deterministic, check_error_propagation, check_exactly_once,
    check_ordered,
};
use sluice_core::prelude::*;

fn value(e: &Element) -> i64 {
    e.tensor("value").unwrap().as_i64().unwrap()[0]
}

fn identity(v: &[i64]) -> Vec<i64> {
    v.to_vec()
}

/// tf.data's `group_by_window` order of `v`: a group's window as soon as it is full, the
/// groups left at the end in ascending key order.
fn grouped(v: &[i64], key: impl Fn(i64) -> i64, size: impl Fn(i64) -> usize) -> Vec<i64> {
    let mut open: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    let mut out = Vec::new();
    for &x in v {
        let k = key(x);
        let group = open.entry(k).or_default();
        group.push(x);
        if group.len() == size(k) {
            out.extend(open.remove(&k).unwrap());
        }
    }
    out.extend(open.into_values().flatten());
    out
}

/// Most elements a parallel stage may hold ahead of its consumer: 4 chunks per worker of at
/// most 256 elements each, plus what sits in its channels.
fn parallel_bound(p: NumParallel) -> usize {
    match p {
        NumParallel::Fixed(w) => 4 * w * 256 + 64,
        _ => 4 * 4 * 256 + 64,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn map(p: StageParams) {
        let stage = |ds: Dataset| ds.map_with(MapSpec::parallel(p.parallel), |e, _| {
            Ok(Element::scalar_i64(e.id(), "value", value(&e) + 1))
        });
        let plus_one = |v: &[i64]| v.iter().map(|x| x + 1).collect();
        prop_assert_eq!(check_ordered(stage, p.n, plus_one), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        prop_assert_eq!(check_bounded(stage, p.n.min(120), 1, parallel_bound(p.parallel)), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n / 2, plus_one), Ok(()));
        }
    }

    #[test]
    fn filter(p: StageParams) {
        let stage = |ds: Dataset| ds.filter_with(MapSpec::parallel(p.parallel), |e, _| Ok(value(e) % 3 != 0));
        let kept = |v: &[i64]| v.iter().copied().filter(|x| x % 3 != 0).collect();
        prop_assert_eq!(check_ordered(stage, p.n, kept), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n - 1, kept), Ok(()));
        }
    }

    #[test]
    fn map_chunks(p: StageParams) {
        let stage = |ds: Dataset| ds.map_chunks(MapChunksSpec::new(p.size).num_parallel(p.parallel), |chunk, _| {
            // Each element twice (a flat map).
            Ok(chunk.into_iter().enumerate().flat_map(|(i, e)| [(i, e.clone()), (i, e)]).collect())
        });
        let twice = |v: &[i64]| v.iter().flat_map(|&x| [x, x]).collect();
        prop_assert_eq!(check_ordered(stage, p.n, twice), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        prop_assert_eq!(check_bounded(stage, p.n.min(120), 0, parallel_bound(p.parallel) * p.size), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, 0, twice), Ok(()));
        }
    }

    #[test]
    fn shuffle(p: StageParams) {
        let stage = |ds: Dataset| ds.shuffle(p.size);
        prop_assert_eq!(check_exactly_once(stage, p.n, identity), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        prop_assert_eq!(check_bounded(stage, p.n.min(120), 1, p.size + 2), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n / 3, identity), Ok(()));
        }
    }

    #[test]
    fn repeat(p: StageParams) {
        let stage = |ds: Dataset| ds.repeat(Some(2));
        let twice = |v: &[i64]| v.iter().chain(v).copied().collect();
        prop_assert_eq!(check_ordered(stage, p.n, twice), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n / 2, twice), Ok(()));
        }
    }

    #[test]
    fn take_and_skip(p: StageParams) {
        let take = |ds: Dataset| ds.take(p.size as u64);
        let skip = |ds: Dataset| ds.skip(p.size as u64);
        prop_assert_eq!(check_ordered(take, p.n, |v| v.iter().copied().take(p.size).collect()), Ok(()));
        prop_assert_eq!(check_ordered(skip, p.n, |v| v.iter().copied().skip(p.size).collect()), Ok(()));
        prop_assert_eq!(check_deterministic(take, p.n, p.seed), Ok(()));
        prop_assert_eq!(check_deterministic(skip, p.n, p.seed), Ok(()));
    }

    #[test]
    fn batch_unbatch_padded_batch(p: StageParams) {
        let batch = |ds: Dataset| ds.batch_with(BatchSpec::new(p.size).num_parallel(p.parallel));
        let round_trip = |ds: Dataset| ds.batch(p.size).unbatch();
        let padded = |ds: Dataset| ds.padded_batch(PaddedBatchSpec::new(p.size));
        for stage in [&batch as &dyn Fn(Dataset) -> Dataset, &round_trip, &padded] {
            prop_assert_eq!(check_ordered(stage, p.n, identity), Ok(()));
            prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        }
        prop_assert_eq!(check_bounded(batch, p.n.min(120), p.size, parallel_bound(p.parallel) * p.size), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(batch, p.n, p.n / 2, identity), Ok(()));
        }
    }

    /// Grouping by a key (`value % 3`) or by length bucket: batches in tf.data's order (a
    /// group as soon as it is full, the rest by key at the end), the same for a seed at
    /// any thread count, and errors passed through.
    #[test]
    fn group_by_window_and_bucket_by_sequence_length(p: StageParams) {
        let size = p.size;
        let by_key = move |ds: Dataset| {
            ds.map(|e| {
                let v = value(&e);
                Ok(e.with("key", Tensor::scalar_i64(v % 3)))
            })
            .group_by_window(GroupByWindowSpec::new("key", size))
        };
        let by_key_model = move |v: &[i64]| grouped(v, |x| x % 3, |_| size);
        prop_assert_eq!(check_ordered(by_key, p.n, by_key_model), Ok(()));
        prop_assert_eq!(check_deterministic(by_key, p.n, p.seed), Ok(()));
        // Lengths 0..5 in buckets [0, 2), [2, 4), [4, ...) of 2, `size` and 3 elements.
        let by_length = move |ds: Dataset| {
            ds.map(|e| {
                let len = (value(&e) % 5) as usize;
                Ok(e.with("tokens", Tensor::new(&[len], TensorData::I64(vec![1; len].into()))?))
            })
            .bucket_by_sequence_length(BucketBySequenceLengthSpec::new("tokens", vec![2, 4], vec![2, size, 3]))
        };
        let bucket = |x: i64| match x % 5 { 0 | 1 => 0, 2 | 3 => 1, _ => 2 };
        let by_length_model = move |v: &[i64]| grouped(v, bucket, |b| [2, size, 3][b as usize]);
        prop_assert_eq!(check_ordered(by_length, p.n, by_length_model), Ok(()));
        prop_assert_eq!(check_deterministic(by_length, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(by_key, p.n, p.n / 2, by_key_model), Ok(()));
            prop_assert_eq!(check_error_propagation(by_length, p.n, p.n / 2, by_length_model), Ok(()));
        }
    }

    /// `flat_map` (each element twice, on threads), `scan`'s `cumsum` and
    /// `rejection_resample` (passing everything when the input is at the target; seeded and
    /// the same at any thread count when it resamples).
    #[test]
    fn flat_map_scan_and_rejection_resample(p: StageParams) {
        let flat = |ds: Dataset| ds.flat_map_with(MapSpec::parallel(p.parallel), |e, _| Ok(vec![e.clone(), e]));
        let twice = |v: &[i64]| v.iter().flat_map(|&x| [x, x]).collect();
        prop_assert_eq!(check_ordered(flat, p.n, twice), Ok(()));
        prop_assert_eq!(check_deterministic(flat, p.n, p.seed), Ok(()));
        prop_assert_eq!(check_bounded(flat, p.n.min(120), 0, parallel_bound(p.parallel)), Ok(()));
        let scan = |ds: Dataset| ds.scan_op(ScanSpec::new(ScanOp::Cumsum, Some("value")));
        let sums = |v: &[i64]| v.iter().scan(0, |s, &x| { *s += x; Some(*s) }).collect();
        prop_assert_eq!(check_ordered(scan, p.n, sums), Ok(()));
        prop_assert_eq!(check_deterministic(scan, p.n, p.seed), Ok(()));
        let labelled = |ds: Dataset| ds.map(|e| {
            let v = value(&e);
            Ok(e.with("label", Tensor::scalar_i64(v % 2)))
        });
        let at_target = move |ds: Dataset| labelled(ds).rejection_resample(
            RejectionResampleSpec::new("label", vec![0.5, 0.5]).initial_dist(vec![0.5, 0.5]));
        let resampled = move |ds: Dataset| labelled(ds).rejection_resample(RejectionResampleSpec::new("label", vec![0.2, 0.8]));
        prop_assert_eq!(check_ordered(at_target, p.n, identity), Ok(()));
        prop_assert_eq!(check_deterministic(resampled, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(flat, p.n, 0, twice), Ok(()));
            prop_assert_eq!(check_error_propagation(scan, p.n, p.n / 2, sums), Ok(()));
            prop_assert_eq!(check_error_propagation(at_target, p.n, p.n / 2, identity), Ok(()));
        }
    }

    #[test]
    fn prefetch(p: StageParams) {
        let stage = |ds: Dataset| ds.prefetch(BufferSize::Fixed(p.size));
        prop_assert_eq!(check_ordered(stage, p.n, identity), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        prop_assert_eq!(check_bounded(stage, p.n.min(120), 1, p.size + 3), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n / 2, identity), Ok(()));
        }
    }

    #[test]
    fn cache_and_concatenate(p: StageParams) {
        let cache = |ds: Dataset| ds.cache(CacheSpec::Memory);
        prop_assert_eq!(check_ordered(cache, p.n, identity), Ok(()));
        prop_assert_eq!(check_deterministic(cache, p.n, p.seed), Ok(()));
        let tail = p.size as i64;
        let concat = |ds: Dataset| ds.concatenate(&Dataset::range(0, tail));
        let reference = |v: &[i64]| v.iter().copied().chain(0..tail).collect();
        prop_assert_eq!(check_ordered(concat, p.n, reference), Ok(()));
        prop_assert_eq!(check_deterministic(concat, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(concat, p.n, p.n - 1, reference), Ok(()));
        }
    }

    /// `choose_from` alternating the input with another, until the input is exhausted
    /// (tf.data's `stop_on_empty_dataset`).
    #[test]
    fn choose_from(p: StageParams) {
        let n = p.n;
        let stage = move |ds: Dataset| {
            Dataset::choose_from(vec![ds, Dataset::range(1000, 1000 + n)], &Dataset::range(0, 2).repeat(None))
        };
        let alternated = |v: &[i64]| {
            v.iter().zip(1000..).flat_map(|(&x, y)| [x, y]).collect()
        };
        prop_assert_eq!(check_ordered(stage, p.n, alternated), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n / 2, alternated), Ok(()));
        }
    }

    /// A Keras layer (here `hashing`, replacing the feature) is one output per input, in
    /// order, the same for a seed, and passes errors through in place.
    #[test]
    fn hashing_layer(p: StageParams) {
        let stage = |ds: Dataset| ds.preprocess(HashingSpec::new("value", 7));
        let bins = |v: &[i64]| v.iter().map(|x| to_hash_bucket_fast(x.to_string().as_bytes(), 7) as i64).collect();
        prop_assert_eq!(check_ordered(stage, p.n, bins), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n / 2, bins), Ok(()));
        }
    }

    /// `clip` (a numeric helper layer) keeps the properties of every Keras layer stage.
    #[test]
    fn clip_layer(p: StageParams) {
        let stage = |ds: Dataset| ds.preprocess(ClipSpec::new("value", 2.0, 10.0));
        let clipped = |v: &[i64]| v.iter().map(|&x| x.clamp(2, 10)).collect();
        prop_assert_eq!(check_ordered(stage, p.n, clipped), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(stage, p.n, p.n / 2, clipped), Ok(()));
        }
    }

    #[test]
    fn lookup_and_discretization_layers(p: StageParams) {
        let stage = |ds: Dataset| {
            ds.preprocess(IntegerLookupSpec { num_oov_indices: 2, ..IntegerLookupSpec::new("value", vec![3, 1, 4]) })
        };
        let index = |v: &[i64]| v.iter().map(|&x| match x { 3 => 2, 1 => 3, 4 => 4, x => x % 2 }).collect();
        prop_assert_eq!(check_ordered(stage, p.n, index), Ok(()));
        prop_assert_eq!(check_deterministic(stage, p.n, p.seed), Ok(()));
        let buckets = |ds: Dataset| ds.preprocess(DiscretizationSpec::new("value", vec![2.0, 10.0]));
        let expect = |v: &[i64]| v.iter().map(|&x| i64::from(x >= 2) + i64::from(x >= 10)).collect::<Vec<i64>>();
        // Discretization writes int32: compared through the i64 view of the reference.
        let got: Vec<i64> = buckets(Dataset::range(0, p.n)).collect().unwrap().iter()
            .map(|e| match e.tensor("value").unwrap().data() {
                sluice_core::TensorData::I32(v) => i64::from(v[0]),
                other => panic!("{other:?}"),
            }).collect();
        let want = expect(&(0..p.n).collect::<Vec<_>>());
        prop_assert_eq!(got, want);
    }

    /// `filter` as a pipeline file writes it: the elements it keeps, in order, and errors
    /// passed through.
    #[test]
    fn filter_of_pipeline_files(p: StageParams) {
        let spec: FilterSpec = serde_json::from_value(serde_json::json!({
            "feature": "value", "not_in": [4, 5], "ge": 2,
            "num_parallel": serde_json::to_value(p.parallel).unwrap(),
        })).unwrap();
        let stage = move |ds: Dataset| sluice_core::registry::StageSpec::new(spec.clone()).append_to(&ds).unwrap();
        let kept = |v: &[i64]| v.iter().copied().filter(|&x| x >= 2 && x != 4 && x != 5).collect();
        prop_assert_eq!(check_ordered(&stage, p.n, kept), Ok(()));
        prop_assert_eq!(check_deterministic(&stage, p.n, p.seed), Ok(()));
        if p.n > 0 {
            prop_assert_eq!(check_error_propagation(&stage, p.n, p.n - 1, kept), Ok(()));
        }
    }
}
