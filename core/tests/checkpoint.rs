//! Checkpoint and resume: for random pipelines and random cut points, the elements of a
//! resumed run (also with other thread counts and buffer sizes, and after the checkpoint
//! went through JSON) are exactly those an uninterrupted run yields after the cut.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use rand::RngCore;
use sluice_core::prelude::*;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Checkpoint, Error};

/// Five TFRecord shards of 0 to 40 records, written once.
fn shards() -> &'static (tempfile::TempDir, Vec<PathBuf>) {
    static SHARDS: OnceLock<(tempfile::TempDir, Vec<PathBuf>)> = OnceLock::new();
    SHARDS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = vec![];
        for (s, n) in [17usize, 40, 0, 9, 23].into_iter().enumerate() {
            let path = dir.path().join(format!("data.tfrecord-{s:05}-of-00005"));
            let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
            for r in 0..n {
                w.write_record(format!("shard {s} record {r}").as_bytes())
                    .unwrap();
            }
            std::fs::write(&path, w.finish().unwrap()).unwrap();
            paths.push(path);
        }
        (dir, paths)
    })
}

#[derive(Debug, Clone)]
enum Source {
    Range(i64),
    /// Interleave of the shards with this cycle length.
    Interleave(usize),
    /// The shards file after file.
    Files,
    /// A global shuffle of every record, read inline (`None`) or on threads.
    Global(Option<usize>),
}

#[derive(Debug, Clone)]
enum Op {
    /// A 1:1 map drawing from the element RNG.
    Map,
    Filter,
    Shuffle(usize),
    Batch(usize, bool),
    Unbatch,
    Repeat(u64),
    Take(u64),
    Skip(u64),
    Prefetch,
}

fn source() -> impl Strategy<Value = Source> {
    prop_oneof![
        (0i64..120).prop_map(Source::Range),
        (1usize..4).prop_map(Source::Interleave),
        Just(Source::Files),
        prop::option::of(1usize..4).prop_map(Source::Global),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Map),
        Just(Op::Filter),
        (1usize..40).prop_map(Op::Shuffle),
        (1usize..6, any::<bool>()).prop_map(|(n, d)| Op::Batch(n, d)),
        Just(Op::Unbatch),
        (0u64..3).prop_map(Op::Repeat),
        (0u64..80).prop_map(Op::Take),
        (0u64..20).prop_map(Op::Skip),
        Just(Op::Prefetch),
    ]
}

/// The pipeline, with `threads` workers wherever a stage can have them (`None`:
/// sequential) and prefetch buffers of `buffer`.
fn build(source: &Source, ops: &[Op], threads: Option<usize>, buffer: usize) -> Dataset {
    let np = threads.map_or(NumParallel::Sequential, NumParallel::Fixed);
    let files: Vec<String> = shards().1.iter().map(|p| p.display().to_string()).collect();
    let mut ds = match source {
        Source::Range(n) => Dataset::range(0, *n),
        Source::Interleave(c) => Dataset::tfrecord(&files)
            .unwrap()
            .interleave(InterleaveSpec::new(*c).num_parallel(np)),
        Source::Files => Dataset::tfrecord(&files).unwrap(),
        Source::Global(threads) => Dataset::tfrecord_global_shuffle(
            &files,
            GlobalShuffleSpec {
                num_parallel: threads.map_or(NumParallel::Sequential, NumParallel::Fixed),
                ..GlobalShuffleSpec::default()
            },
        )
        .unwrap(),
    };
    let mut batched = 0;
    for op in ops {
        ds = match op {
            // (After a batch, a scalar added to the batch could not be unbatched.)
            Op::Map if batched > 0 => ds,
            Op::Map => ds.map_with(MapSpec::parallel(np), |mut e, rng| {
                let r = rng.next_u64() as i64;
                e.insert("r", Tensor::scalar_i64(r));
                Ok(e)
            }),
            Op::Filter => ds.filter_with(MapSpec::parallel(np), |e, rng| {
                Ok((e.id().index + rng.next_u64() % 2) % 3 != 0)
            }),
            Op::Shuffle(n) => ds.shuffle(*n),
            // Batches of batches would be ragged: one level at a time.
            Op::Batch(..) if batched > 0 => ds,
            Op::Batch(n, drop) => {
                batched += 1;
                ds.batch_with(BatchSpec {
                    drop_remainder: *drop,
                    ..BatchSpec::new(*n).num_parallel(np)
                })
            }
            Op::Unbatch if batched > 0 => {
                batched -= 1;
                ds.unbatch()
            }
            Op::Unbatch => ds,
            Op::Repeat(n) => ds.repeat(Some(*n)),
            Op::Take(n) => ds.take(*n),
            Op::Skip(n) => ds.skip(*n),
            Op::Prefetch => ds.prefetch(BufferSize::Fixed(buffer)),
        };
    }
    ds.with_options(Options::default().with_seed(11).with_cpu_budget(4))
}

fn run(it: impl Iterator<Item = sluice_core::Result<Element>>) -> Vec<Element> {
    it.map(|e| e.expect("runs")).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn resumed_equals_uninterrupted(
        source in source(),
        ops in prop::collection::vec(op(), 0..6),
        cut in any::<prop::sample::Index>(),
        threads in prop::option::of(1usize..4),
        threads_after in prop::option::of(1usize..4),
        second_epoch in any::<bool>(),
    ) {
        let reference = build(&source, &ops, None, 1);
        if second_epoch {
            reference.collect().unwrap();
        }
        let all = run(reference.iter().unwrap());
        let cut = cut.index(all.len() + 1);

        let ds = build(&source, &ops, threads, 3);
        if second_epoch {
            ds.collect().unwrap();
        }
        let mut it = ds.iter().unwrap();
        let head = run(it.by_ref().take(cut));
        prop_assert_eq!(it.position(), cut as u64);
        let json = it.checkpoint().unwrap().to_json();
        drop(it);

        // A fresh dataset, other threads and buffers, in "another process".
        let again = build(&source, &ops, threads_after, 5);
        let checkpoint = Checkpoint::from_json(&json).unwrap();
        let mut resumed = again.resume(&checkpoint).unwrap();
        let tail = run(resumed.by_ref());
        prop_assert_eq!(resumed.position(), all.len() as u64);
        prop_assert_eq!(head.len() + tail.len(), all.len());
        prop_assert_eq!(&head[..], &all[..cut]);
        prop_assert_eq!(&tail[..], &all[cut..]);
        // The next iteration of the resumed dataset is the epoch after the checkpoint's.
        let next = run(again.iter().unwrap());
        let expected = run(reference.iter().unwrap());
        prop_assert_eq!(next, expected);
    }
}

#[test]
fn a_one_to_one_map_is_not_run_for_the_skipped_elements() {
    let calls = Arc::new(AtomicUsize::new(0));
    let build = |calls: Arc<AtomicUsize>| {
        Dataset::range(0, 1000)
            .map_with(MapSpec::parallel(2), move |e, _| {
                calls.fetch_add(1, Ordering::Relaxed);
                Ok(e)
            })
            .batch(10)
            .prefetch(BufferSize::Auto)
            .with_options(Options::default().with_seed(1))
    };
    let ds = build(Arc::clone(&calls));
    let mut it = ds.iter().unwrap();
    it.by_ref().take(60).for_each(drop);
    let checkpoint = it.checkpoint().unwrap();
    drop(it);
    assert_eq!(checkpoint.position, 60);

    let resumed_calls = Arc::new(AtomicUsize::new(0));
    let tail: Vec<Element> = build(Arc::clone(&resumed_calls))
        .resume(&checkpoint)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(tail.len(), 40);
    assert_eq!(
        tail[0].tensor("value").unwrap().as_i64().unwrap()[0],
        600,
        "the first batch after the cut"
    );
    // Only the 400 remaining elements were mapped, none of the 600 skipped.
    assert_eq!(resumed_calls.load(Ordering::Relaxed), 400);
}

#[test]
fn checkpoints_do_not_grow_with_buffers() {
    let size = |buffer: usize| {
        let ds = Dataset::range(0, 100_000)
            .shuffle(buffer)
            .prefetch(BufferSize::Fixed(buffer))
            .with_options(Options::default().with_seed(3));
        let mut it = ds.iter().unwrap();
        it.by_ref().take(5000).for_each(drop);
        // The position part (what resumes this host exactly); the elastic part grows with
        // the records in flight (tests/elastic.rs bounds it).
        let mut cp = it.checkpoint().unwrap();
        cp.elastic = None;
        cp.to_json().len()
    };
    let small = size(10);
    assert_eq!(small, size(50_000));
    assert!(small < 200, "{small} bytes");
}

#[test]
fn another_pipeline_or_seed_is_refused() {
    let ds = Dataset::range(0, 100)
        .shuffle(10)
        .with_options(Options::default().with_seed(5));
    let mut it = ds.iter().unwrap();
    it.next();
    let checkpoint = it.checkpoint().unwrap();

    let other = Dataset::range(0, 100)
        .shuffle(11)
        .with_options(Options::default().with_seed(5));
    let err = other.resume(&checkpoint).unwrap_err();
    assert!(matches!(err, Error::Checkpoint(_)), "{err}");
    assert!(err.to_string().contains("another pipeline"), "{err}");

    let reseeded = Dataset::range(0, 100)
        .shuffle(10)
        .with_options(Options::default().with_seed(6));
    let err = reseeded.resume(&checkpoint).unwrap_err().to_string();
    assert!(err.contains("seed 5") && err.contains("seed 6"), "{err}");

    // Without a fixed seed, the checkpoint's is used.
    let unseeded = Dataset::range(0, 100).shuffle(10);
    let resumed: Vec<Element> = unseeded
        .resume(&checkpoint)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    let expected: Vec<Element> = Dataset::range(0, 100)
        .shuffle(10)
        .with_options(Options::default().with_seed(5))
        .collect()
        .unwrap()
        .split_off(1);
    assert_eq!(resumed, expected);
    assert_eq!(unseeded.seed(), Some(5));

    let beyond = Checkpoint {
        position: 101,
        ..checkpoint
    };
    let err = ds.resume(&beyond).unwrap_err().to_string();
    assert!(
        err.contains("fewer than the checkpoint's position 101"),
        "{err}"
    );
}

#[test]
fn a_stage_in_completion_order_cannot_be_checkpointed() {
    let ds =
        Dataset::range(0, 100).map_with(MapSpec::parallel(2).deterministic(false), |e, _| Ok(e));
    let mut it = ds.iter().unwrap();
    it.next();
    let err = it.checkpoint().unwrap_err().to_string();
    assert!(
        err.contains("map#1") && err.contains("deterministic = false"),
        "{err}"
    );
}

#[test]
fn after_an_error_there_is_no_checkpoint() {
    let ds = Dataset::range(0, 10).map(|e| {
        if e.id().index == 3 {
            Err(Error::invalid("boom"))
        } else {
            Ok(e)
        }
    });
    let mut it = ds.iter().unwrap();
    while let Some(Ok(_)) = it.next() {}
    let err = it.checkpoint().unwrap_err().to_string();
    assert!(err.contains("ended with an error"), "{err}");
}

#[test]
fn a_global_shuffle_resumes_at_its_position_without_reading_what_came_before() {
    let files: Vec<String> = shards().1.iter().map(|p| p.display().to_string()).collect();
    let ds = || {
        Dataset::tfrecord_global_shuffle(&files, GlobalShuffleSpec::default())
            .unwrap()
            .with_options(Options::default().with_seed(4))
    };
    let all = run(ds().iter().unwrap());
    assert_eq!(all.len(), 89);
    let mut it = ds().iter().unwrap();
    it.by_ref().take(50).for_each(drop);
    let checkpoint = it.checkpoint().unwrap();
    drop(it);
    let again = ds();
    let tail = run(again.resume(&checkpoint).unwrap());
    assert_eq!(&tail[..], &all[50..]);
    // Only the 39 records after the position were read.
    let stats = again.stats().unwrap();
    let global = stats
        .stages
        .iter()
        .find(|s| s.name == "global_shuffle")
        .unwrap();
    assert_eq!(global.elements_in, 39);
}
