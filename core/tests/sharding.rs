//! Exactly-once sharding: the shards of a pipeline, taken together, read every record of
//! the data once, whatever the number of files against the number of shards (file level
//! when there are enough files, record level when not), with and without shuffling; and
//! the shards of a global shuffle read the one global permutation, each its positions.

use std::collections::BTreeSet;
use std::path::Path;

use proptest::prelude::*;
use sluice_core::prelude::*;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};

/// Files of `counts[i]` records each, every record distinct (`"file:record"`).
fn write_files(dir: &Path, counts: &[usize]) -> String {
    for (i, &n) in counts.iter().enumerate() {
        let p = dir.join(format!("f-{i:03}.tfrecord"));
        let mut w = TfRecordWriter::create(&p, Compression::None).unwrap();
        for j in 0..n {
            w.write_record(format!("{i}:{j}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    format!("{}/f-*.tfrecord", dir.display())
}

fn records(ds: &Dataset) -> Vec<String> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| {
            let t = e.tensor("record").unwrap();
            String::from_utf8(t.as_bytes_list().unwrap()[0].to_vec()).unwrap()
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Reading {
    InOrder,
    Interleave,
    Shuffled,
    GlobalShuffle,
}

fn pipeline(pattern: &str, reading: Reading, indexes: &Path) -> Dataset {
    let options = Options::default().with_seed(9);
    match reading {
        Reading::InOrder => Dataset::tfrecord([pattern]).unwrap(),
        Reading::Interleave => Dataset::tfrecord([pattern])
            .unwrap()
            .interleave(InterleaveSpec::new(2)),
        Reading::Shuffled => Dataset::tfrecord([pattern]).unwrap().shuffle(7),
        Reading::GlobalShuffle => Dataset::tfrecord_global_shuffle(
            [pattern],
            GlobalShuffleSpec::default().index_dir(indexes),
        )
        .unwrap(),
    }
    .with_options(options)
}

/// Every shard's records; checks their union is the data, each record once.
fn check_exactly_once(counts: &[usize], shards: u64, reading: Reading) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    let pattern = write_files(dir.path(), counts);
    let all: BTreeSet<String> = counts
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| (0..n).map(move |j| format!("{i}:{j}")))
        .collect();
    let per_shard: Vec<Vec<String>> = (0..shards)
        .map(|i| {
            let base = pipeline(&pattern, reading, dir.path());
            let sharded = match reading {
                // A shuffle after the shard: each shard shuffles its own part.
                Reading::Shuffled => Dataset::tfrecord([&pattern])
                    .unwrap()
                    .shard(shards, i)
                    .shuffle(7)
                    .with_options(Options::default().with_seed(9)),
                _ => base.shard(shards, i),
            };
            records(&sharded)
        })
        .collect();
    let mut seen = BTreeSet::new();
    for (i, shard) in per_shard.iter().enumerate() {
        for r in shard {
            assert!(
                seen.insert(r.clone()),
                "{r} read twice (shard {i}, {reading:?})"
            );
        }
    }
    assert_eq!(seen, all, "{reading:?}, {counts:?} over {shards} shards");
    per_shard
}

#[test]
fn file_level_and_record_level_shards_read_every_record_once() {
    // 8 files over 4 shards: file level; 5 over 4 and 2 over 3: record level.
    for counts in [&[5usize; 8][..], &[3, 0, 7, 2, 9][..], &[4, 6][..]] {
        for shards in [1, 3, 4] {
            for reading in [Reading::InOrder, Reading::Interleave, Reading::Shuffled] {
                check_exactly_once(counts, shards, reading);
            }
        }
    }
}

#[test]
fn the_shards_of_a_global_shuffle_take_turns_in_one_global_order() {
    let counts = [6, 1, 9, 4, 7];
    let dir = tempfile::tempdir().unwrap();
    let pattern = write_files(dir.path(), &counts);
    let whole = records(&pipeline(&pattern, Reading::GlobalShuffle, dir.path()));
    for shards in [2u64, 3, 5, 8] {
        let per_shard = check_exactly_once(&counts, shards, Reading::GlobalShuffle);
        // Shard i's q-th record is the global order's record i + q * shards.
        for (i, shard) in per_shard.iter().enumerate() {
            let expected: Vec<String> = whole
                .iter()
                .skip(i)
                .step_by(shards as usize)
                .cloned()
                .collect();
            assert_eq!(shard, &expected, "shard {i} of {shards}");
        }
    }
}

#[test]
fn explain_reports_where_each_shard_was_applied() {
    let dir = tempfile::tempdir().unwrap();
    let many = write_files(dir.path(), &[2; 8]);
    let file_level = Dataset::tfrecord([&many])
        .unwrap()
        .shard(4, 1)
        .explain()
        .unwrap();
    let few_dir = tempfile::tempdir().unwrap();
    let few = write_files(few_dir.path(), &[2; 3]);
    let record_level = Dataset::tfrecord([&few])
        .unwrap()
        .shard(4, 1)
        .explain()
        .unwrap();
    // File level: `shard` runs below the reader; record level: above it.
    let order = |text: &str| {
        let text = &text[text.find("plan that runs").unwrap()..];
        let shard = text.find("shard").unwrap();
        let reader = text.find("tfrecord").unwrap();
        shard < reader
    };
    assert!(!order(&file_level), "{file_level}");
    assert!(order(&record_level), "{record_level}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_files_any_shards_exactly_once(
        counts in prop::collection::vec(0usize..12, 1..7),
        shards in 1u64..6,
        reading in prop_oneof![
            Just(Reading::InOrder),
            Just(Reading::Interleave),
            Just(Reading::Shuffled),
            Just(Reading::GlobalShuffle),
        ],
    ) {
        check_exactly_once(&counts, shards, reading);
    }
}
