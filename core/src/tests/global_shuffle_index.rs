//! Global shuffle's record indexes on disk: reused while they check out, rebuilt (and
//! rewritten) when the data changed or the index is damaged. Unit tests, because what they
//! check (where `record_index::load_or_build` got an index from) is not public; the rest of
//! global shuffle is tested through the public API in `core/tests/global_shuffle.rs`.

use std::fs;
use std::path::Path;

use sluice_proto::tfrecord::{Compression, TfRecordWriter};

use crate::prelude::GlobalShuffleSpec;
use crate::sources::record_index::{self, INDEX_SUFFIX, IndexOptions, IndexOrigin};
use crate::{Dataset, Element, ElementId, NumParallel, Options};

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

#[test]
fn a_stale_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let p = path.display().to_string();
    write_shard(&path, &[b"aaaa".to_vec(), b"bb".to_vec()]);
    // No index_dir: the index goes beside the (writable) data.
    let spec = GlobalShuffleSpec::default();
    let ds = || {
        Dataset::tfrecord_global_shuffle([&p], spec.clone())
            .unwrap()
            .with_options(Options::default().with_seed(1))
    };
    assert_eq!(ds().collect().unwrap().len(), 2);
    let beside = dir
        .path()
        .join(".sluice-index")
        .join(format!("s{INDEX_SUFFIX}"));
    assert!(beside.exists());
    // The index is not a file the data's patterns match: reading them in order still works.
    let in_order = Dataset::tfrecord([format!("{}/*", dir.path().display())]).unwrap();
    assert_eq!(in_order.collect().unwrap().len(), 2);
    let options = IndexOptions::default();
    let loaded = record_index::load_or_build(&path, &options).unwrap();
    assert_eq!(loaded.origin, IndexOrigin::Loaded(beside.clone()));
    // Rewritten with other records (another size): rebuilt and rewritten.
    write_shard(&path, &[b"x".to_vec(), b"".to_vec(), b"yyyyyyy".to_vec()]);
    let data: Vec<Vec<u8>> = {
        let mut v: Vec<Vec<u8>> = keys(&ds().collect().unwrap())
            .into_iter()
            .map(|k| k.3)
            .collect();
        v.sort();
        v
    };
    assert_eq!(data, [b"".to_vec(), b"x".to_vec(), b"yyyyyyy".to_vec()]);
    // Rewritten with the same size but other framing, and a new mtime: rebuilt too.
    write_shard(&path, &[b"".to_vec(), b"xyyyyyyy".to_vec()]);
    let later =
        fs::metadata(&path).unwrap().modified().unwrap() + std::time::Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let rebuilt = record_index::load_or_build(&path, &options).unwrap();
    assert_eq!(rebuilt.origin, IndexOrigin::Built(Some(beside.clone())));
    assert_eq!(rebuilt.index.len(), 2);
    assert_eq!(ds().collect().unwrap().len(), 2);
    let loaded = record_index::load_or_build(&path, &options).unwrap();
    assert_eq!(loaded.origin, IndexOrigin::Loaded(beside));
}

#[test]
fn a_damaged_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let records: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; i]).collect();
    write_shard(&path, &records);
    let idx = dir.path().join("idx");
    let options = IndexOptions {
        index_dir: Some(idx.clone()),
        ..Default::default()
    };
    let built = record_index::load_or_build(&path, &options).unwrap();
    let IndexOrigin::Built(Some(file)) = built.origin else {
        panic!("{:?}", built.origin)
    };
    assert!(file.starts_with(&idx));
    let good = fs::read(&file).unwrap();
    let damages: Vec<Vec<u8>> = vec![
        {
            let mut b = good.clone();
            b[60] ^= 4; // a boundary
            b
        },
        {
            let mut b = good.clone();
            b[0] = b'X'; // the magic
            b
        },
        good[..good.len() - 9].to_vec(), // truncated
        Vec::new(),
    ];
    for (i, bad) in damages.iter().enumerate() {
        fs::write(&file, bad).unwrap();
        let again = record_index::load_or_build(&path, &options).unwrap();
        assert_eq!(again.origin, IndexOrigin::Built(Some(file.clone())), "{i}");
        assert_eq!(fs::read(&file).unwrap(), good, "{i}");
        fs::write(&file, bad).unwrap();
        let p = path.display().to_string();
        let got = global(&p, &idx, NumParallel::Fixed(2), 4)
            .collect()
            .unwrap();
        assert_eq!(got.len(), 10, "{i}");
    }
}
