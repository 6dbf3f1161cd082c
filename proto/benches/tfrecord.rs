//! TFRecord reader and writer throughput.
//!
//! Two record shapes, each making a ~64 MB uncompressed stream:
//!
//! - `jpeg`: records of 16-24 KiB (about 20 KiB on average) of incompressible bytes, the size
//!   and entropy of the encoded images of an image dataset;
//! - `small`: 100-byte records that look like small serialized Examples (a constant feature
//!   layout with a few varying bytes), so they compress as such records do.
//!
//! Groups (throughput in bytes of the *uncompressed* TFRecord stream, headers included, so
//! that compressed and uncompressed numbers compare the work done per byte of records):
//!
//! - `reader_mem`: [`TfRecordReader`] over a `&[u8]` (uncompressed and GZIP), every record
//!   dropped at once; plus `jpeg_hold256`, which keeps the last 256 records alive as a batching
//!   stage would, so the reader cannot reuse its buffer.
//! - `reader_disk`: [`TfRecordReader::open`] on a temporary file whose pages are in the page
//!   cache (it is read once before measuring).
//! - `writer`: [`TfRecordWriter`] into a pre-reserved `Vec` and into a file (created or
//!   truncated each iteration); GZIP into a `Vec` for information, on a smaller stream.
//!
//! Run with `cargo bench -p sluice-proto --bench tfrecord`; the whole run takes a minute or
//! two. Add a filter (`-- reader_mem`) to run one group.

use std::cell::OnceCell;
use std::collections::VecDeque;
use std::hint::black_box;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use criterion::{
    BatchSize, BenchmarkGroup, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main, measurement::WallTime,
};
use sluice_proto::tfrecord::{
    Compression, FOOTER_LEN, HEADER_LEN, ReaderOptions, TfRecordReader, TfRecordWriter,
};

/// Target size of each uncompressed stream.
const STREAM_BYTES: usize = 64 << 20;
/// Size of the streams the (slow) GZIP writer benchmarks compress.
const GZIP_WRITE_BYTES: usize = 4 << 20;

/// A small deterministic generator (xorshift64*), so every run measures the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let x = self.next().to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
    }
}

/// JPEG-like records: 16-24 KiB of incompressible bytes each, `total` stream bytes in all.
fn jpeg_records(total: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x5eed_0001);
    let mut records = Vec::new();
    let mut size = 0;
    while size < total {
        let len = (16 << 10) + (rng.next() % (8 << 10)) as usize;
        let mut r = vec![0u8; len];
        rng.fill(&mut r);
        size += HEADER_LEN + len + FOOTER_LEN;
        records.push(r);
    }
    records
}

/// 100-byte Example-like records: a fixed layout of feature names with a label, an id and a
/// few bytes of payload that vary.
fn small_records(total: usize) -> Vec<Vec<u8>> {
    const TEMPLATE: &[u8] = b"\n`\n\x0e\n\x05label\x12\x05\x1a\x03\n\x01\x07\n\x13\n\x02id\x12\x0d\x1a\x0b\n\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\n\x39\n\x07payload\x12\x2e\x0a\x2c\n\x2a0123456789abcdef0123456789abcdef0123456789";
    let mut rng = Rng(0x5eed_0002);
    let mut records = Vec::new();
    let mut size = 0;
    let mut id = 0u64;
    while size < total {
        let mut r = TEMPLATE.to_vec();
        r.resize(100, b'.');
        r[20] = (rng.next() % 10) as u8;
        r[31..39].copy_from_slice(&id.to_le_bytes());
        let x = rng.next().to_le_bytes();
        r[90..98].copy_from_slice(&x);
        id += 1;
        size += HEADER_LEN + r.len() + FOOTER_LEN;
        records.push(r);
    }
    records
}

/// The TFRecord stream of `records`.
fn encode(records: &[Vec<u8>], compression: Compression) -> Vec<u8> {
    let mut w = TfRecordWriter::new(Vec::new(), compression).expect("writer");
    for r in records {
        w.write_record(r).expect("write");
    }
    w.finish().expect("finish")
}

/// Reads a whole stream, dropping each record at once; returns data bytes (checked).
fn read_all<R: Read>(reader: TfRecordReader<R>) -> u64 {
    let mut n = 0u64;
    for r in reader {
        let r = r.expect("valid record");
        n += black_box(r.data.len()) as u64;
    }
    n
}

/// Reads a whole stream keeping the last `keep` records alive, as a batching stage does.
fn read_all_holding<R: Read>(reader: TfRecordReader<R>, keep: usize) -> u64 {
    let mut held = VecDeque::with_capacity(keep);
    let mut n = 0u64;
    for r in reader {
        let r = r.expect("valid record");
        n += r.data.len() as u64;
        if held.len() == keep {
            held.pop_front();
        }
        held.push_back(r);
    }
    black_box(held);
    n
}

fn data_bytes(records: &[Vec<u8>]) -> u64 {
    records.iter().map(|r| r.len() as u64).sum()
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
}

struct Shape {
    name: &'static str,
    records: Vec<Vec<u8>>,
    plain: Vec<u8>,
}

fn shapes() -> Vec<Shape> {
    [
        ("jpeg", jpeg_records(STREAM_BYTES)),
        ("small", small_records(STREAM_BYTES)),
    ]
    .into_iter()
    .map(|(name, records)| {
        let plain = encode(&records, Compression::None);
        Shape {
            name,
            records,
            plain,
        }
    })
    .collect()
}

fn benches(c: &mut Criterion) {
    let shapes = shapes();
    reader_mem(c, &shapes);
    reader_disk(c, &shapes);
    writer(c, &shapes);
}

fn reader_mem(c: &mut Criterion, shapes: &[Shape]) {
    let mut group = c.benchmark_group("reader_mem");
    configure(&mut group);
    let options = ReaderOptions::default();
    for s in shapes {
        let expected = data_bytes(&s.records);
        group.throughput(Throughput::Bytes(s.plain.len() as u64));
        group.bench_function(s.name, |b| {
            b.iter(|| {
                let n = read_all(TfRecordReader::new(&s.plain[..], "mem", options));
                assert_eq!(n, expected);
            })
        });
        if s.name == "jpeg" {
            group.bench_function("jpeg_hold256", |b| {
                b.iter(|| {
                    let n =
                        read_all_holding(TfRecordReader::new(&s.plain[..], "mem", options), 256);
                    assert_eq!(n, expected);
                })
            });
        }
    }
    // GZIP: slower per iteration, so a flat sampling plan keeps the run short.
    group.sampling_mode(SamplingMode::Flat);
    for s in shapes {
        let expected = data_bytes(&s.records);
        // Compressed only if this benchmark runs (not filtered out).
        let gz = OnceCell::new();
        group.throughput(Throughput::Bytes(s.plain.len() as u64));
        group.bench_function(format!("{}_gzip", s.name), |b| {
            let gz = gz.get_or_init(|| encode(&s.records, Compression::Gzip));
            b.iter(|| {
                let n = read_all(TfRecordReader::new(&gz[..], "mem.gz", options));
                assert_eq!(n, expected);
            })
        });
    }
    group.finish();
}

fn reader_disk(c: &mut Criterion, shapes: &[Shape]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("reader_disk");
    configure(&mut group);
    let options = ReaderOptions::default();
    for s in shapes {
        let expected = data_bytes(&s.records);
        let path = dir.path().join(format!("{}.tfrecord", s.name));
        std::fs::write(&path, &s.plain).expect("write the file");
        // Warm the page cache.
        black_box(std::fs::read(&path).expect("read the file"));
        group.throughput(Throughput::Bytes(s.plain.len() as u64));
        group.bench_function(s.name, |b| {
            b.iter(|| {
                let n = read_all(TfRecordReader::open(&path, options).expect("open"));
                assert_eq!(n, expected);
            })
        });
    }
    group.finish();
}

fn remove_if_present(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("removing {}: {e}", path.display()),
    }
}

fn write_file(path: &Path, records: &[Vec<u8>]) {
    let mut w = TfRecordWriter::create(path, Compression::None).expect("create");
    for r in records {
        w.write_record(r).expect("write");
    }
    w.finish().expect("finish");
}

fn writer(c: &mut Criterion, shapes: &[Shape]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("writer");
    configure(&mut group);
    for s in shapes {
        let len = s.plain.len();
        group.throughput(Throughput::Bytes(len as u64));
        // One reserved, already touched buffer for all iterations: measures the writer, not
        // page faults of a fresh 64 MB allocation.
        let mut out = Vec::with_capacity(len);
        group.bench_function(format!("{}_vec", s.name), |b| {
            b.iter(|| {
                out.clear();
                let mut w = TfRecordWriter::new(&mut out, Compression::None).expect("writer");
                for r in &s.records {
                    w.write_record(r).expect("write");
                }
                w.finish().expect("finish");
                assert_eq!(out.len(), len);
            })
        });
        let path = dir.path().join(format!("{}.tfrecord", s.name));
        // The previous iteration's file is deleted untimed: truncating 64 MB of page cache
        // (and ext4's flush-on-close of a truncated file) would be timed otherwise.
        group.bench_function(format!("{}_file", s.name), |b| {
            b.iter_batched(
                || remove_if_present(&path),
                |()| write_file(&path, &s.records),
                BatchSize::PerIteration,
            )
        });
    }
    group.sampling_mode(SamplingMode::Flat);
    for s in shapes {
        // A prefix of the records: GZIP at the default level is two orders of magnitude
        // slower than the rest.
        let mut size = 0;
        let records: Vec<&[u8]> = s
            .records
            .iter()
            .take_while(|r| {
                size += HEADER_LEN + r.len() + FOOTER_LEN;
                size <= GZIP_WRITE_BYTES
            })
            .map(|r| &r[..])
            .collect();
        let len: usize = records
            .iter()
            .map(|r| HEADER_LEN + r.len() + FOOTER_LEN)
            .sum();
        group.throughput(Throughput::Bytes(len as u64));
        let mut out = Vec::with_capacity(len);
        group.bench_function(format!("{}_gzip_vec", s.name), |b| {
            b.iter(|| {
                out.clear();
                let mut w = TfRecordWriter::new(&mut out, Compression::Gzip).expect("writer");
                for r in &records {
                    w.write_record(r).expect("write");
                }
                w.finish().expect("finish");
            })
        });
    }
    group.finish();
}

criterion_group!(tfrecord, benches);
criterion_main!(tfrecord);
