//! The conformance properties on stages over several inputs and over TFRecord files:
//! zip, sample_from, and files → shard → interleave → parse_example (the checks' input is
//! ignored by the file pipelines, which read Examples holding the same values).
//!
//! | stage | ordered | exactly once | deterministic | bounded |
//! |---|---|---|---|---|
//! | zip | ✓ | | ✓ | |
//! | sample_from | | ✓ | ✓ | |
//! | tfrecord → interleave (parallel) → parse_example | | ✓ | ✓ | ✓ |
//! | tfrecord → shard (file or record level) → parse_example | ✓ | | ✓ | |

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use sluice_conformance::{check_bounded, check_deterministic, check_exactly_once, check_ordered};
use sluice_core::prelude::*;
use sluice_core::proto::TfMessage;
use sluice_core::proto::example::{Example, Feature, Features, Int64List, feature::Kind};
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};

fn value(e: &Element) -> i64 {
    e.tensor("value").unwrap().as_i64().unwrap()[0]
}

/// `files` shards in `dir`; record `j` of the shard `f` of all holds value `f + files * j`
/// (values `0..n` dealt round-robin, as `n` records).
fn write(dir: &Path, n: i64, files: i64) {
    for f in 0..files {
        let path = dir.join(format!("part-{f:03}.tfrecord"));
        let mut w = TfRecordWriter::create(&path, Compression::None).unwrap();
        let mut v = f;
        while v < n {
            let example = Example {
                features: Some(Features {
                    feature: BTreeMap::from([(
                        "value".to_string(),
                        Feature {
                            kind: Some(Kind::Int64List(Int64List { value: vec![v] })),
                        },
                    )]),
                }),
            };
            w.write_record(&example.to_bytes()).unwrap();
            v += files;
        }
        w.finish().unwrap();
    }
}

fn parse() -> ParseExampleSpec {
    ParseExampleSpec::new([("value", FeatureSpec::scalar(FeatureType::Int64))])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn zip_and_sample_from(n in 0i64..200, extra in 0i64..20, seed: u64) {
        let zip = |ds: Dataset| {
            let other = Dataset::range(0, n + extra)
                .map(|e| Ok(Element::scalar_i64(e.id(), "other", value(&e) * 10)));
            Dataset::zip(vec![ds, other])
        };
        prop_assert_eq!(check_ordered(zip, n, |v: &[i64]| v.to_vec()), Ok(()));
        prop_assert_eq!(check_deterministic(zip, n, seed), Ok(()));
        let sample = |ds: Dataset| Dataset::sample_from(vec![ds, Dataset::range(1000, 1000 + extra)], vec![0.7, 0.3]);
        let union = |v: &[i64]| v.iter().copied().chain(1000..1000 + extra).collect();
        prop_assert_eq!(check_exactly_once(sample, n, union), Ok(()));
        prop_assert_eq!(check_deterministic(sample, n, seed), Ok(()));
    }

    #[test]
    fn tfrecord_interleave_shard_parse(n in 0i64..150, files in 1i64..6, cycle in 1usize..4, threads in 1usize..3, shards in 1u64..4, seed: u64) {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), n, files);
        let pattern = format!("{}/part-*.tfrecord", dir.path().display());
        let interleaved = |_: Dataset| {
            Dataset::tfrecord([pattern.as_str()])
                .unwrap()
                .interleave(InterleaveSpec::new(cycle).num_parallel(threads))
                .parse_example(parse())
        };
        prop_assert_eq!(check_exactly_once(interleaved, n, |v: &[i64]| v.to_vec()), Ok(()));
        prop_assert_eq!(check_deterministic(interleaved, n, seed), Ok(()));
        prop_assert_eq!(check_bounded(interleaved, n, 0, 64 * cycle + n as usize), Ok(()));
        // With enough files, shard 0 of `shards` reads files 0, shards, 2 * shards, ... one
        // after the other (file level); with fewer, every file, keeping records 0, shards,
        // 2 * shards, ... of the whole stream (record level).
        let sharded = |_: Dataset| {
            Dataset::tfrecord([pattern.as_str()]).unwrap().shard(shards, 0).parse_example(parse())
        };
        let file_level = sluice_core::optimize::enough_files(files as u64, shards);
        let mine = |_: &[i64]| {
            let in_order = |f: i64| (f..n).step_by(files as usize);
            if file_level {
                (0..files)
                    .filter(|f| (*f as u64).is_multiple_of(shards))
                    .flat_map(in_order)
                    .collect()
            } else {
                (0..files).flat_map(in_order).step_by(shards as usize).collect()
            }
        };
        prop_assert_eq!(check_ordered(sharded, n, mine), Ok(()));
        prop_assert_eq!(check_deterministic(sharded, n, seed), Ok(()));
    }
}
