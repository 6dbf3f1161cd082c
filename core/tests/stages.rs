//! Every stage against a simple sequential reference model (proptest).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rand::Rng;
use sluice_core::prelude::*;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};

fn values(ds: &Dataset) -> Vec<i64> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| e.tensor("value").unwrap().as_i64().unwrap()[0])
        .collect()
}

fn range(n: i64, seed: u64) -> Dataset {
    Dataset::range(0, n).with_options(Options::default().with_seed(seed))
}

/// Writes `files[i]` records `"{i}:{j}"` to TFRecord files in `dir`.
fn write_files(dir: &Path, counts: &[usize]) -> Vec<PathBuf> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let p = dir.join(format!("f-{i:03}.tfrecord"));
            let mut w = TfRecordWriter::create(&p, Compression::None).unwrap();
            for j in 0..n {
                w.write_record(format!("{i}:{j}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
            p
        })
        .collect()
}

fn records(ds: &Dataset) -> Vec<String> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| {
            String::from_utf8(e.tensor("record").unwrap().as_bytes_list().unwrap()[0].to_vec())
                .unwrap()
        })
        .collect()
}

/// tf.data's interleave order, computed directly.
fn reference_interleave(counts: &[usize], cycle: usize, block: usize) -> Vec<String> {
    let mut slots: Vec<Option<(usize, usize)>> = vec![None; cycle]; // (file, next record)
    let mut next_file = 0;
    let mut out = Vec::new();
    let (mut i, mut b) = (0, 0);
    loop {
        if next_file >= counts.len() && slots.iter().all(Option::is_none) {
            return out;
        }
        match slots[i] {
            Some((f, r)) if r < counts[f] => {
                out.push(format!("{f}:{r}"));
                slots[i] = Some((f, r + 1));
                b += 1;
                if b == block {
                    i = (i + 1) % cycle;
                    b = 0;
                }
            }
            Some(_) => {
                slots[i] = None;
                i = (i + 1) % cycle;
                b = 0;
            }
            None if next_file < counts.len() => {
                slots[i] = Some((next_file, 0));
                next_file += 1;
            }
            None => {
                i = (i + 1) % cycle;
                b = 0;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn shuffle_is_a_permutation(n in 0i64..300, buffer in 1usize..64, seed in any::<u64>()) {
        let ds = range(n, seed).shuffle(buffer);
        let mut got = values(&ds);
        got.sort();
        prop_assert_eq!(got, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn shuffle_is_fixed_by_the_seed_and_reshuffles_per_epoch(seed in any::<u64>()) {
        let ds = range(200, seed).shuffle(200);
        let a = values(&ds);
        let b = values(&ds); // second epoch
        prop_assert_ne!(&a, &b);
        prop_assert_eq!(a, values(&range(200, seed).shuffle(200)));
        let other = values(&range(200, seed.wrapping_add(1)).shuffle(200));
        prop_assert_ne!(values(&range(200, seed).shuffle(200)), other);
    }

    #[test]
    fn batch_then_unbatch_is_the_identity(
        n in 0i64..200, size in 1usize..40, drop in any::<bool>(), threads in 0usize..4
    ) {
        let mut spec = BatchSpec::new(size).drop_remainder(drop);
        if threads > 0 {
            spec = spec.num_parallel(threads);
        }
        let batched = range(n, 0)
            .batch_with(spec)
            .with_options(Options::default().with_cpu_budget(4));
        let sizes: Vec<usize> = batched
            .collect()
            .unwrap()
            .iter()
            .map(|b| b.tensor("value").unwrap().shape()[0])
            .collect();
        let full = n as usize / size;
        let rem = n as usize % size;
        let mut want = vec![size; full];
        if rem > 0 && !drop {
            want.push(rem);
        }
        prop_assert_eq!(sizes, want);
        let kept = if drop { (full * size) as i64 } else { n };
        prop_assert_eq!(values(&batched.unbatch()), (0..kept).collect::<Vec<_>>());
    }

    #[test]
    fn shard_covers_every_element_exactly_once(n in 0i64..200, shards in 1u64..8) {
        let mut all = Vec::new();
        for i in 0..shards {
            all.extend(values(&range(n, 0).shard(shards, i)));
        }
        all.sort();
        prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn repeat_take_skip_arithmetic(n in 0i64..50, reps in 0u64..4, take in 0u64..120, skip in 0u64..120) {
        let ds = range(n, 0).repeat(Some(reps)).skip(skip).take(take);
        let full: Vec<i64> = (0..reps).flat_map(|_| 0..n).collect();
        let want: Vec<i64> = full.into_iter().skip(skip as usize).take(take as usize).collect();
        prop_assert_eq!(values(&ds), want);
    }

    #[test]
    fn parallel_map_equals_sequential_at_any_parallelism(
        n in 0i64..300, workers in 1usize..6, deterministic in any::<bool>(), seed in any::<u64>()
    ) {
        // A random transform: the element RNG makes it reproducible.
        let f = |e: Element, rng: &mut sluice_core::rng::ElementRng| {
            let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
            let noise: i64 = rng.random_range(0..1000);
            Ok(Element::scalar_i64(e.id(), "value", v * 1000 + noise))
        };
        let seq = values(&range(n, seed).map_with(MapSpec::default(), f));
        let par = range(n, seed)
            .map_with(MapSpec::parallel(workers).deterministic(deterministic), f)
            .with_options(Options::default().with_seed(seed).with_cpu_budget(8));
        let mut got = values(&par);
        if !deterministic {
            got.sort();
            let mut s = seq.clone();
            s.sort();
            prop_assert_eq!(got, s);
        } else {
            prop_assert_eq!(got, seq);
        }
    }

    #[test]
    fn same_seed_gives_identical_batches_at_1_and_n_threads(seed in any::<u64>(), workers in 2usize..6) {
        let pipeline = |w: usize| {
            range(100, seed)
                .shuffle(30)
                .map_with(MapSpec::parallel(w), |e, rng| {
                    let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
                    Ok(e.with("noise", Tensor::scalar_f32(rng.random::<f32>() + v as f32)))
                })
                .batch(7)
                .with_options(Options::default().with_seed(seed).with_cpu_budget(8))
        };
        let one = pipeline(1).collect().unwrap();
        let many = pipeline(workers).collect().unwrap();
        prop_assert_eq!(one.len(), many.len());
        for (a, b) in one.iter().zip(&many) {
            prop_assert_eq!(a.tensor("value"), b.tensor("value"));
            let (x, y) = (a.tensor("noise").unwrap().as_f32().unwrap(), b.tensor("noise").unwrap().as_f32().unwrap());
            prop_assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()));
        }
    }

    #[test]
    fn interleave_equals_the_reference_order(
        counts in prop::collection::vec(0usize..12, 0..9),
        cycle in 1usize..5,
        block in 1usize..4,
        threads in 0usize..4,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &counts);
        // Sequential, 1 or 2 open files on reading threads (the others read on the
        // consumer's thread), or autotuned.
        let spec = InterleaveSpec::new(cycle).block_length(block).num_parallel(match threads {
            0 => NumParallel::Sequential,
            3 => NumParallel::Auto,
            n => NumParallel::Fixed(n),
        });
        let ds = Dataset::file_list(files).read_tfrecord(TfRecordSpec::default()).interleave(spec);
        prop_assert_eq!(records(&ds), reference_interleave(&counts, cycle, block));
    }

    #[test]
    fn memory_cache_second_pass_equals_first(n in 0i64..100, seed in any::<u64>()) {
        let ds = range(n, seed).shuffle(10).cache(CacheSpec::Memory);
        let first = values(&ds);
        let second = values(&ds);
        prop_assert_eq!(first, second);
    }
}

#[test]
fn sharding_a_tfrecord_source_shards_files() {
    let dir = tempfile::tempdir().unwrap();
    // Six files over two shards: enough for file-level sharding (3 each).
    let files = write_files(dir.path(), &[3, 2, 4, 1, 5, 2]);
    let source = Dataset::file_list(files).read_tfrecord(TfRecordSpec::default());
    let mut seen = Vec::new();
    for i in 0..2 {
        let shard = source.shard(2, i);
        // The shard reads whole files: its file list holds every other file.
        let got = records(&shard);
        let files: BTreeSet<&str> = got.iter().map(|r| r.split(':').next().unwrap()).collect();
        let want: BTreeSet<String> = (0..6)
            .filter(|f| f % 2 == i as usize)
            .map(|f| f.to_string())
            .collect();
        assert_eq!(files, want.iter().map(String::as_str).collect());
        seen.extend(got);
    }
    assert_eq!(seen.len(), 17);
}

#[test]
fn disk_cache_is_written_after_a_complete_pass_only() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    let ds = range(50, 3)
        .shuffle(8)
        .cache(CacheSpec::Directory(cache_dir.clone()));
    // A partial pass leaves no cache behind.
    let partial: Vec<_> = ds.iter().unwrap().take(10).collect();
    assert_eq!(partial.len(), 10);
    let listing = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        listing(&cache_dir)
            .iter()
            .all(|n| !n.ends_with(".tfrecord")),
        "{:?}",
        listing(&cache_dir)
    );
    let first = values(&ds);
    assert_eq!(
        listing(&cache_dir)
            .iter()
            .filter(|n| n.ends_with(".tfrecord"))
            .count(),
        1
    );
    // Later passes (and other datasets with the same definition) read the cache.
    let second = values(&ds);
    assert_eq!(first, second);
    let again = range(50, 3)
        .shuffle(8)
        .cache(CacheSpec::Directory(cache_dir.clone()));
    assert_eq!(values(&again), first);
    // A different pipeline definition does not reuse it.
    let other = range(50, 3)
        .shuffle(9)
        .cache(CacheSpec::Directory(cache_dir.clone()));
    let _ = values(&other);
    assert_eq!(
        listing(&cache_dir)
            .iter()
            .filter(|n| n.ends_with(".tfrecord"))
            .count(),
        2
    );
}

#[test]
fn a_second_writer_on_the_same_cache_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let ds = range(20, 1).cache(CacheSpec::Directory(dir.path().to_path_buf()));
    let mut first = ds.iter().unwrap();
    assert!(first.next().unwrap().is_ok());
    let err = ds.iter().expect_err("the second writer is refused");
    assert!(
        err.to_string()
            .contains("another pipeline is writing this cache"),
        "{err}"
    );
    // The first writer finishes and the cache is then readable.
    let rest: Vec<_> = first.collect::<Result<_>>().unwrap();
    assert_eq!(rest.len(), 19);
    assert_eq!(values(&ds), (0..20).collect::<Vec<_>>());
}

#[test]
fn padded_batch_pads_to_the_longest() {
    let elems: Vec<Element> = (0..3)
        .map(|i| {
            Element::new(ElementId::new(0, i)).with(
                "v",
                Tensor::vector(TensorData::I64((0..=i as i64).collect::<Vec<_>>().into())),
            )
        })
        .collect();
    let mut spec = PaddedBatchSpec::new(3);
    spec.padding_values.insert("v".into(), PadValue::Int(-1));
    let out = Dataset::from_elements(elems)
        .padded_batch(spec)
        .collect()
        .unwrap();
    let t = out[0].tensor("v").unwrap();
    assert_eq!(t.shape(), &[3, 3]);
    assert_eq!(t.as_i64().unwrap(), &[0, -1, -1, 0, 1, -1, 0, 1, 2]);
}

#[test]
fn zip_concatenate_and_sample_from() {
    let a = Dataset::range(0, 3);
    let b = Dataset::range(10, 15).map(|e| {
        let v = e.tensor("value").unwrap().clone();
        Ok(Element::new(e.id()).with("other", v))
    });
    let z = Dataset::zip(vec![a.clone(), b]).collect().unwrap();
    assert_eq!(z.len(), 3);
    assert_eq!(z[2].tensor("other").unwrap().as_i64().unwrap(), &[12]);
    assert_eq!(
        values(&a.concatenate(&Dataset::range(5, 7))),
        vec![0, 1, 2, 5, 6]
    );

    let sample = || {
        Dataset::sample_from(
            vec![Dataset::range(0, 100), Dataset::range(1000, 1100)],
            vec![0.5, 0.5],
        )
        .with_options(Options::default().with_seed(7))
    };
    let s = sample();
    let got = values(&s);
    assert_eq!(got.len(), 200);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, (0..100).chain(1000..1100).collect::<Vec<_>>());
    // Mixed, not concatenated, fixed by the seed, and redrawn in the next epoch.
    assert!(got[..100].iter().any(|v| *v >= 1000));
    assert_eq!(got, values(&sample()));
    assert_ne!(got, values(&s));
}

#[test]
fn repeat_forever_over_an_empty_dataset_ends() {
    assert!(values(&Dataset::range(0, 0).repeat(None)).is_empty());
    assert_eq!(
        values(&Dataset::range(0, 2).repeat(None).take(5)),
        vec![0, 1, 0, 1, 0]
    );
}

#[test]
fn files_pattern_without_match_is_an_error_naming_it() {
    let err = Dataset::files(["/nonexistent/dir/*.tfrecord"]).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/dir/*.tfrecord"),
        "{err}"
    );
}

#[test]
fn files_shuffle_is_seeded_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[1; 12]);
    let ds = Dataset::files_with(FilesSpec {
        patterns: vec![format!("{}/*.tfrecord", dir.path().display())],
        shuffle: true,
        storage: Default::default(),
    })
    .unwrap()
    .with_options(Options::default().with_seed(5));
    let names = |ds: &Dataset| -> Vec<String> {
        ds.collect()
            .unwrap()
            .iter()
            .map(|e| {
                String::from_utf8(
                    e.tensor("filename").unwrap().as_bytes_list().unwrap()[0].to_vec(),
                )
                .unwrap()
            })
            .collect()
    };
    let a = names(&ds);
    let b = names(&ds);
    assert_eq!(a.len(), 12);
    assert_ne!(a, b, "a new epoch reshuffles");
    let mut s = a.clone();
    s.sort();
    assert_ne!(a, s, "shuffled");
}

#[test]
fn repeat_reshuffles_each_pass_unless_asked_not_to() {
    let ds = range(50, 11).shuffle(50).repeat(Some(2));
    let v = values(&ds);
    assert_ne!(v[..50], v[50..]);
    let fixed = range(50, 11)
        .shuffle_with(ShuffleSpec {
            buffer_size: 50,
            seed: None,
            reshuffle_each_epoch: false,
        })
        .repeat(Some(2));
    let v = values(&fixed);
    assert_eq!(v[..50], v[50..]);
}
