//! Global shuffle over TFRecord shards: every record exactly once per epoch, seeded orders,
//! the sequential reader's ids, provenance and errors, and record indexes that are rebuilt
//! whenever they cannot be trusted. (Which index file is reused or rewritten is checked by
//! unit tests, in `core/src/tests/global_shuffle_index.rs`: it is not public.)

use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_core::prelude::{GlobalShuffleSpec, TfRecordSpec};
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Dataset, Element, ElementId, Error, ErrorPolicy, NumParallel, Options};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tfrecord")
}

fn write_shard(path: &Path, records: &[Vec<u8>]) {
    let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
    for r in records {
        w.write_record(r).unwrap();
    }
    fs::write(path, w.finish().unwrap()).unwrap();
}

/// What identifies an element: id, provenance and bytes.
type Key = (ElementId, String, u64, Vec<u8>);

fn key(e: &Element) -> Key {
    let p = e.provenance().expect("provenance");
    let data = e.tensor("record").unwrap().as_bytes_list().unwrap()[0].to_vec();
    (e.id(), p.file.to_string(), p.offset, data)
}

fn keys(elements: &[Element]) -> Vec<Key> {
    elements.iter().map(key).collect()
}

fn global(pattern: &str, index_dir: &Path, n: NumParallel, seed: u64) -> Dataset {
    let spec = GlobalShuffleSpec::default()
        .index_dir(index_dir)
        .num_parallel(n);
    Dataset::tfrecord_global_shuffle([pattern], spec)
        .unwrap()
        .with_options(Options::default().with_seed(seed))
}

fn sequential(pattern: &str) -> Dataset {
    Dataset::tfrecord([pattern])
        .unwrap()
        .with_options(Options::default().with_seed(0))
}

fn sorted(mut v: Vec<Key>) -> Vec<Key> {
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random shards (empty files, zero-length records included): each epoch yields every
    /// record once, with the sequential reader's id, provenance and bytes, at any
    /// parallelism; and the order does not depend on the threads.
    #[test]
    fn every_record_exactly_once_per_epoch_as_the_sequential_reader_gives_it(
        shards in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..30),
            1..6,
        ),
        seed in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        fs::create_dir(&data).unwrap();
        for (i, records) in shards.iter().enumerate() {
            write_shard(&data.join(format!("s-{i:03}")), records);
        }
        let pattern = format!("{}/s-*", data.display());
        let expected = sorted(keys(&sequential(&pattern).collect().unwrap()));
        let total: usize = shards.iter().map(Vec::len).sum();
        prop_assert_eq!(expected.len(), total);
        let idx = dir.path().join("idx");
        let inline = global(&pattern, &idx, NumParallel::Sequential, seed);
        let threaded = global(&pattern, &idx, NumParallel::Fixed(3), seed);
        for _epoch in 0..2 {
            let a = keys(&inline.collect().unwrap());
            let b = keys(&threaded.collect().unwrap());
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(sorted(a), expected.clone());
        }
    }
}

#[test]
fn the_fixtures_match_the_sequential_reader_and_the_seed_fixes_the_order() {
    let idx = tempfile::tempdir().unwrap();
    let pattern = format!("{}/images.tfrecord-*", fixtures().display());
    let expected = sorted(keys(&sequential(&pattern).collect().unwrap()));
    assert_eq!(expected.len(), 32);
    let a = keys(
        &global(&pattern, idx.path(), NumParallel::Auto, 1)
            .collect()
            .unwrap(),
    );
    assert_eq!(sorted(a.clone()), expected);
    // The indexes went to `index_dir`, not beside the fixtures (which stay as copied).
    let written = fs::read_dir(idx.path()).unwrap().count();
    assert_eq!(written, 4);
    // Same seed, same order (a new dataset: the first epoch again); another seed, another.
    let again = keys(
        &global(&pattern, idx.path(), NumParallel::Fixed(2), 1)
            .collect()
            .unwrap(),
    );
    assert_eq!(a, again);
    let other = keys(
        &global(&pattern, idx.path(), NumParallel::Auto, 2)
            .collect()
            .unwrap(),
    );
    assert_ne!(a, other);
    assert_eq!(sorted(other), expected);
    // Records of every shard come early: no locality.
    let first_files: std::collections::BTreeSet<u64> = a[..12].iter().map(|k| k.0.source).collect();
    assert!(first_files.len() >= 3, "{first_files:?}");
}

#[test]
fn each_epoch_and_each_pass_of_repeat_gets_a_new_permutation() {
    let dir = tempfile::tempdir().unwrap();
    for s in 0..3 {
        let records: Vec<Vec<u8>> = (0..40).map(|i| format!("{s}-{i}").into_bytes()).collect();
        write_shard(&dir.path().join(format!("s{s}")), &records);
    }
    let pattern = format!("{}/s*", dir.path().display());
    let ds = global(&pattern, &dir.path().join("idx"), NumParallel::Fixed(2), 9);
    let e1 = keys(&ds.collect().unwrap());
    let e2 = keys(&ds.collect().unwrap());
    assert_ne!(e1, e2);
    assert_eq!(sorted(e1.clone()), sorted(e2.clone()));
    // A fresh dataset with the same seed replays epoch 1, then epoch 2.
    let replay = global(
        &pattern,
        &dir.path().join("idx"),
        NumParallel::Sequential,
        9,
    );
    assert_eq!(keys(&replay.collect().unwrap()), e1);
    assert_eq!(keys(&replay.collect().unwrap()), e2);
    // repeat(3): three permutations, each a whole pass.
    let rep = keys(&ds.repeat(Some(3)).collect().unwrap());
    assert_eq!(rep.len(), 360);
    let passes: Vec<&[Key]> = rep.chunks(120).collect();
    for p in &passes {
        assert_eq!(sorted(p.to_vec()), sorted(e1.clone()));
    }
    assert_ne!(passes[0], passes[1]);
    assert_ne!(passes[1], passes[2]);
    // Without reshuffling, every epoch has the same order.
    let mut spec = GlobalShuffleSpec::default().index_dir(dir.path().join("idx"));
    spec.reshuffle_each_epoch = false;
    let fixed = Dataset::tfrecord_global_shuffle([&pattern], spec)
        .unwrap()
        .with_options(Options::default().with_seed(9));
    assert_eq!(
        keys(&fixed.collect().unwrap()),
        keys(&fixed.collect().unwrap())
    );
}

/// The first error of a pipeline, and the records before it.
fn run(ds: &Dataset) -> (Vec<Element>, Option<Error>) {
    let mut out = Vec::new();
    for item in ds.iter().unwrap() {
        match item {
            Ok(e) => out.push(e),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

#[test]
fn damaged_shards_give_the_sequential_readers_error_with_file_and_offset() {
    let idx = tempfile::tempdir().unwrap();
    for (file, tf) in [
        ("corrupt_data_crc.tfrecord", "corrupted record at 268"),
        ("corrupt_length_crc.tfrecord", "corrupted record at 480"),
        ("truncated.tfrecord", "truncated record at 15224"),
    ] {
        let path = fixtures().join(file).display().to_string();
        let (_, seq) = run(&sequential(&path));
        let seq = seq.expect("the sequential reader fails");
        for n in [NumParallel::Sequential, NumParallel::Fixed(2)] {
            let (_, err) = run(&global(&path, idx.path(), n, 3));
            let err = err.expect("global shuffle fails");
            assert_eq!(err.element(), seq.element(), "{file}");
            let Error::Stage { provenance, .. } = &err else {
                panic!("{err:?}")
            };
            let Error::Stage { provenance: p2, .. } = &seq else {
                unreachable!()
            };
            assert_eq!(provenance, p2, "{file}");
            assert_eq!(err.root().to_string(), seq.root().to_string());
            assert_eq!(err.root().to_string(), format!("{path}: {tf}"));
            assert!(
                err.to_string().contains(&format!("{path} at offset")),
                "{err}"
            );
        }
        // Damaged shards are never indexed on disk.
        assert!(fs::read_dir(idx.path()).unwrap().next().is_none(), "{file}");
    }
}

#[test]
fn under_the_skip_policy_the_same_records_come_as_from_the_sequential_reader() {
    let idx = tempfile::tempdir().unwrap();
    let skip = Options::default()
        .with_seed(5)
        .with_error_policy(ErrorPolicy::Skip);
    for file in [
        "corrupt_data_crc.tfrecord",
        "corrupt_length_crc.tfrecord",
        "truncated.tfrecord",
    ] {
        let path = fixtures().join(file).display().to_string();
        let seq = Dataset::tfrecord([&path])
            .unwrap()
            .with_options(skip.clone());
        let expected = sorted(keys(&seq.collect().unwrap()));
        let spec = GlobalShuffleSpec::default().index_dir(idx.path());
        let ds = Dataset::tfrecord_global_shuffle([&path], spec)
            .unwrap()
            .with_options(skip.clone());
        let got = keys(&ds.collect().unwrap());
        assert_eq!(sorted(got), expected, "{file}");
        let skipped: u64 = ds.stats().unwrap().stages.iter().map(|s| s.skipped).sum();
        assert_eq!(skipped, 1, "{file}");
    }
}

#[test]
fn a_record_damaged_after_indexing_fails_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    write_shard(
        &path,
        &[b"one".to_vec(), b"two".to_vec(), b"three".to_vec()],
    );
    let p = path.display().to_string();
    let idx = dir.path().join("idx");
    assert_eq!(
        global(&p, &idx, NumParallel::Sequential, 1)
            .collect()
            .unwrap()
            .len(),
        3
    );
    // Damage the second record's data in place, keeping size and mtime: the index is still
    // trusted, and the read's CRC check catches it.
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let mut bytes = fs::read(&path).unwrap();
    bytes[19 + 12] ^= 1;
    fs::write(&path, &bytes).unwrap();
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (_, err) = run(&global(&p, &idx, NumParallel::Fixed(2), 1));
    let err = err.unwrap();
    assert_eq!(err.element(), Some(ElementId::new(0, 1)));
    assert_eq!(
        err.root().to_string(),
        format!("{p}: corrupted record at 31")
    );
    assert!(
        err.to_string().contains(&format!("{p} at offset 19")),
        "{err}"
    );
}

#[test]
fn compressed_shards_are_refused() {
    let idx = tempfile::tempdir().unwrap();
    for (file, name) in [
        ("examples.tfrecord.gz", "gzip"),
        ("examples.tfrecord.zlib", "zlib"),
    ] {
        let path = fixtures().join(file).display().to_string();
        let (records, err) = run(&global(&path, idx.path(), NumParallel::Auto, 0));
        assert!(records.is_empty());
        let err = err.unwrap();
        assert!(
            matches!(err.root(), Error::CompressedShard { compression, .. } if *compression == name),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("{path} is {name}-compressed")),
            "{message}"
        );
        assert!(message.contains("cannot"), "{message}");
    }
    // Named compression is refused without looking at the file.
    let path = fixtures().join("examples.tfrecord").display().to_string();
    let reader = TfRecordSpec {
        compression: Compression::Gzip,
        ..Default::default()
    };
    let ds = Dataset::files([&path])
        .unwrap()
        .read_tfrecord_global_shuffle(reader, GlobalShuffleSpec::default().index_dir(idx.path()));
    let (_, err) = run(&ds);
    assert!(matches!(err.unwrap().root(), Error::CompressedShard { .. }));
}

#[test]
fn empty_shards_and_sharding_of_the_global_order() {
    let idx = tempfile::tempdir().unwrap();
    let empty = fixtures().join("empty.tfrecord").display().to_string();
    assert!(
        global(&empty, idx.path(), NumParallel::Auto, 0)
            .collect()
            .unwrap()
            .is_empty()
    );
    let pattern = format!("{}/images.tfrecord-*", fixtures().display());
    // A shard of a global shuffle takes every 2nd position of the one global order (not
    // a share of the files), so hosts sharding it read one global permutation together.
    let whole = keys(
        &global(&pattern, idx.path(), NumParallel::Fixed(2), 0)
            .collect()
            .unwrap(),
    );
    let ds = global(&pattern, idx.path(), NumParallel::Fixed(2), 0).shard(2, 1);
    let got = keys(&ds.collect().unwrap());
    assert_eq!(got.len(), 16);
    let expected: Vec<_> = whole.iter().skip(1).step_by(2).cloned().collect();
    assert_eq!(got, expected);
}

#[test]
fn the_spec_is_serde() {
    let spec = GlobalShuffleSpec::default()
        .index_dir("/tmp/i")
        .num_parallel(3)
        .seed(4);
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(
        json,
        r#"{"index_dir":"/tmp/i","num_parallel":3,"seed":4,"reshuffle_each_epoch":true}"#
    );
    assert_eq!(
        serde_json::from_str::<GlobalShuffleSpec>(&json).unwrap(),
        spec
    );
    let d: GlobalShuffleSpec = serde_json::from_str(r#"{"num_parallel":"auto"}"#).unwrap();
    assert_eq!(d, GlobalShuffleSpec::default());
    assert!(serde_json::from_str::<GlobalShuffleSpec>(r#"{"index":"x"}"#).is_err());
}

mod pipeline_file {
    use super::*;
    use sluice_core::pipeline_file::PipelineFile;

    fn error(text: &str) -> String {
        PipelineFile::from_toml(text).unwrap_err().to_string()
    }

    #[test]
    fn global_shuffle_in_the_source_table() {
        let idx = tempfile::tempdir().unwrap();
        let text = format!(
            "[source]\nfiles = ['images.tfrecord-*']\nglobal_shuffle = true\nindex_dir = {:?}\nnum_parallel = 2\n\n[options]\nseed = 3\n",
            idx.path().display().to_string()
        );
        let p = PipelineFile::from_toml(&text)
            .unwrap()
            .with_data_dir(fixtures());
        let spec = p.source.global_shuffle_spec().unwrap();
        assert_eq!(spec.num_parallel, NumParallel::Fixed(2));
        let ds = p.build().unwrap();
        let got = keys(&ds.collect().unwrap());
        let pattern = format!("{}/images.tfrecord-*", fixtures().display());
        let same = keys(
            &global(&pattern, idx.path(), NumParallel::Auto, 3)
                .collect()
                .unwrap(),
        );
        assert_eq!(got, same);
        // Without the key, the files are read in order (and nothing is indexed).
        let plain = PipelineFile::from_toml("[source]\nfiles = ['x']\n").unwrap();
        assert!(plain.source.global_shuffle_spec().is_none());
        assert!(
            !toml::to_string(&plain.source)
                .unwrap()
                .contains("global_shuffle")
        );
    }

    #[test]
    fn impossible_combinations_are_located() {
        assert_eq!(
            error("[source]\nfiles = ['x']\nindex_dir = 'i'\n"),
            "<string>:3:13: `index_dir` applies only with `global_shuffle = true`"
        );
        assert_eq!(
            error("[source]\nfiles = ['x']\nnum_parallel = 2\n"),
            "<string>:3:16: `num_parallel` applies only with `global_shuffle = true`"
        );
        assert_eq!(
            error("[source]\nfiles = ['x']\nglobal_shuffle = true\nnum_parallel = 0\n"),
            "<string>:4:16: `num_parallel` must be at least 1 or \"auto\" (the default)"
        );
        let gz = error("[source]\nfiles = ['x']\nglobal_shuffle = true\ncompression = 'gzip'\n");
        assert!(gz.starts_with("<string>:4:15: global shuffle reads records at their offsets, which a gzip stream cannot do"), "{gz}");
        let il = error(
            "[source]\nfiles = ['x']\nglobal_shuffle = true\n\n[[stage]]\nkind = 'interleave'\n",
        );
        assert!(
            il.starts_with(
                "<string>:5:1: interleave: the source reads its files by global shuffle"
            ),
            "{il}"
        );
        assert!(
            error("[source]\nfiles = ['x']\nglobal_shuffle = 1\n").contains("3:"),
            "bool"
        );
    }
}

#[test]
fn dropping_the_iterator_mid_epoch_stops_the_readers_and_stats_count_records() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..2000).map(|i| vec![(i % 251) as u8; 100]).collect();
    write_shard(&dir.path().join("big"), &records);
    let p = format!("{}/big", dir.path().display());
    let ds = global(&p, &dir.path().join("idx"), NumParallel::Fixed(3), 0);
    let mut it = ds.iter().unwrap();
    for _ in 0..5 {
        it.next().unwrap().unwrap();
    }
    drop(it); // joins the readers, which are blocked on full channels
    assert_eq!(ds.take(7).collect().unwrap().len(), 7);
    assert_eq!(ds.collect().unwrap().len(), 2000);
    let stats = ds.stats().unwrap();
    let gs = stats
        .stages
        .iter()
        .find(|s| s.name == "global_shuffle")
        .unwrap();
    assert_eq!((gs.elements_in, gs.elements_out), (2000, 2000));
}
