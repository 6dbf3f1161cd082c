//! Local TFRecord files are read mapped into memory by default (`mmap = true`): the same
//! records, ids and errors as reading them with read(2) (`mmap = false`), and a file cut
//! short while it is read is a typed error, never a crash.

use std::path::Path;

use sluice_core::Error;
use sluice_core::pipeline_file::PipelineFile;
use sluice_core::prelude::*;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};

/// Writes `n` records of `len` bytes each (record `i` filled with byte `i`).
fn write(path: &Path, n: usize, len: usize, compression: Compression) {
    let mut w = TfRecordWriter::new(std::fs::File::create(path).unwrap(), compression).unwrap();
    for i in 0..n {
        w.write_record(&vec![i as u8; len]).unwrap();
    }
    w.finish().unwrap();
}

fn pipeline(dir: &Path, mmap: Option<bool>, interleave: bool) -> Dataset {
    let mmap = mmap.map_or(String::new(), |m| format!("mmap = {m}\n"));
    let stages = if interleave {
        "[[stage]]\nkind = 'interleave'\ncycle_length = 3\nnum_parallel = 2\n"
    } else {
        ""
    };
    let text = format!(
        "[source]\ndir = '{}'\nfiles = ['*.tfrecord*']\n{mmap}\n{stages}",
        dir.display()
    );
    PipelineFile::from_toml(&text).unwrap().build().unwrap()
}

fn records(ds: &Dataset) -> Vec<(u64, u64, Vec<u8>)> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| {
            let id = e.id();
            let bytes = e.tensor("record").unwrap().as_bytes_list().unwrap()[0].to_vec();
            (id.source, id.index, bytes)
        })
        .collect()
}

#[test]
fn mapped_and_copied_reads_give_the_same_records_plain_and_compressed() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a.tfrecord"), 40, 3000, Compression::None);
    write(&dir.path().join("b.tfrecord.gz"), 7, 100, Compression::Gzip);
    write(&dir.path().join("c.tfrecord"), 0, 0, Compression::None);
    write(&dir.path().join("d.tfrecord.z"), 9, 5000, Compression::Zlib);
    for interleave in [false, true] {
        let copied = records(&pipeline(dir.path(), Some(false), interleave));
        assert_eq!(copied.len(), 40 + 7 + 9);
        assert_eq!(records(&pipeline(dir.path(), None, interleave)), copied);
        assert_eq!(
            records(&pipeline(dir.path(), Some(true), interleave)),
            copied
        );
    }
}

#[test]
fn the_mmap_key_round_trips_and_is_left_out_at_its_default() {
    let text = "[source]\nfiles = ['x']\nmmap = false\n";
    let p = PipelineFile::from_toml(text).unwrap();
    assert_eq!(p.source.mmap, Some(false));
    assert!(!p.source.reader().mmap);
    assert!(toml::to_string(&p).unwrap().contains("mmap = false"));
    let d = PipelineFile::from_toml("[source]\nfiles = ['x']\n").unwrap();
    assert!(d.source.reader().mmap);
    assert!(!toml::to_string(&d).unwrap().contains("mmap"));
}

#[test]
fn a_damaged_mapped_file_is_the_same_typed_error_as_a_copied_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.tfrecord");
    write(&path, 10, 1000, Compression::None);
    let mut bytes = std::fs::read(&path).unwrap();
    // Record 4's data (each record is 12 + 1000 + 4 bytes).
    bytes[4 * 1016 + 12 + 500] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let message = |mmap| {
        let err = pipeline(dir.path(), Some(mmap), false)
            .collect()
            .unwrap_err();
        assert!(matches!(err, Error::Stage { .. }), "{err:?}");
        err.to_string()
    };
    let mapped = message(true);
    assert_eq!(mapped, message(false));
    assert!(mapped.contains("a.tfrecord"), "{mapped}");
    assert!(mapped.contains("corrupted record at 4076"), "{mapped}");
}

#[test]
fn a_file_cut_short_while_it_is_read_mapped_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.tfrecord");
    // Records of two pages each: the cut leaves whole pages behind the reader unmapped.
    write(&path, 64, 8192, Compression::None);
    let ds = pipeline(dir.path(), Some(true), false);
    let mut it = ds.iter().unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(16 * 8208)
        .unwrap();
    // Records before the cut come (some may already have been read ahead); past it, the
    // zeros the guard maps in fail the length checksum: a typed error naming the file.
    let mut read = 3;
    let err = loop {
        match it.next() {
            Some(Ok(_)) => read += 1,
            Some(Err(e)) => break e,
            None => panic!("the stream ended without an error after {read} records"),
        }
    };
    assert!(read < 64, "{read}");
    let message = err.to_string();
    assert!(message.contains("a.tfrecord"), "{message}");
    assert!(message.contains("corrupted record"), "{message}");
}

/// Where each record's bytes lie, and the bytes.
fn records_at(ds: &Dataset) -> Vec<(usize, Vec<u8>)> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| {
            let bytes = &e.tensor("record").unwrap().as_bytes_list().unwrap()[0];
            (bytes.as_ptr() as usize, bytes.to_vec())
        })
        .collect()
}

fn repeated(dir: &Path, between: &str) -> Dataset {
    let text = format!(
        "[source]\ndir = '{}'\nfiles = ['*.tfrecord']\n\n\
         [[stage]]\nkind = 'interleave'\ncycle_length = 2\nnum_parallel = 2\n\n\
         {between}[[stage]]\nkind = 'repeat'\ncount = 3\n",
        dir.display()
    );
    PipelineFile::from_toml(&text).unwrap().build().unwrap()
}

#[test]
fn a_repeat_reads_every_pass_from_the_mappings_of_the_first() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a.tfrecord"), 5, 3000, Compression::None);
    write(&dir.path().join("b.tfrecord"), 4, 100, Compression::None);
    let all = records_at(&repeated(dir.path(), ""));
    assert_eq!(all.len(), 3 * 9);
    let (first, rest) = all.split_at(9);
    for pass in rest.chunks(9) {
        // The same records, from the same memory: each file was mapped once. (All passes'
        // records are alive together here, so a file mapped again would lie elsewhere.)
        assert_eq!(pass, first);
    }
    // With a `cache` replaying the records, the files are read once anyway and nothing is
    // kept for the passes: the same records either way.
    let cached = records_at(&repeated(dir.path(), "[[stage]]\nkind = 'cache'\n\n"));
    let bytes = |v: &[(usize, Vec<u8>)]| v.iter().map(|r| r.1.clone()).collect::<Vec<_>>();
    assert_eq!(bytes(&cached), bytes(&all));
}
