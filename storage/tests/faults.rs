//! Reads through a fault-injecting proxy in front of the S3 test server (moto's; see
//! `tests/s3.rs` for how it is found): error statuses, bodies cut short, connections reset
//! and latency on the ranged GETs. Reads either return exactly the bytes of the object, or
//! fail with an error naming the URL and byte offset; never a short read that looks like a
//! clean end of file. Each test has its own bucket, so its store's stats are its own.

use std::io::Read;
use std::time::{Duration, Instant};

use sluice_proto::tfrecord::TfRecordReader;
use sluice_storage::testing::{FaultProxy, s3_server};
use sluice_storage::{
    Error, Location, ReadOptions, RemoteObject, RemoteReader, StorageOptions, StoreStats, expand,
    open, size, stats,
};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");
const BLOCK: u64 = 4096;

/// The TFRecord fixtures (every compression, several writers' files) and their record
/// counts (MANIFEST.json).
const TFRECORDS: &[(&str, usize)] = &[
    ("examples.tfrecord", 64),
    ("examples.tfrecord.gz", 64),
    ("examples.tfrecord.zlib", 64),
    ("images.tfrecord-00000-of-00004", 8),
    ("images.tfrecord-00001-of-00004", 8),
    ("images.tfrecord-00002-of-00004", 8),
    ("images.tfrecord-00003-of-00004", 8),
    ("sequence_examples.tfrecord", 20),
    ("raw_records.tfrecord", 4),
    ("empty.tfrecord", 0),
];

/// `bucket` holding the fixtures under `data/`, a proxy in front of the server, and options
/// that read through it with small blocks, 3 in flight and fast retries.
fn setup(bucket: &str) -> (FaultProxy, StorageOptions) {
    s3_server().upload_dir(bucket, std::path::Path::new(FIXTURES), "data");
    let proxy = FaultProxy::start(&s3_server().endpoint);
    let mut options = proxy.options();
    options.read = ReadOptions {
        block_size: BLOCK,
        max_in_flight: 3,
        max_retries: 10,
        initial_backoff: Duration::from_millis(1),
    };
    (proxy, options)
}

fn store_stats(bucket: &str) -> StoreStats {
    stats()
        .get(&format!("s3://{bucket}"))
        .copied()
        .unwrap_or_default()
}

fn location(bucket: &str, name: &str) -> Location {
    Location::parse(&format!("s3://{bucket}/data/{name}")).unwrap()
}

fn local(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).unwrap()
}

/// What reading did, to check against the proxy's and the store's counters.
#[derive(Debug, Default)]
struct Reads {
    /// Objects opened (one HEAD each).
    opened: u64,
    /// Ranged GETs a fault-free read sends: one per block.
    blocks: u64,
    /// Bytes of the objects read.
    bytes: u64,
}

impl Reads {
    fn object(&mut self, len: u64) {
        self.opened += 1;
        self.blocks += len.div_ceil(BLOCK);
        self.bytes += len;
    }
}

/// Reads every TFRecord fixture through `open` (comparing the bytes with the local file)
/// and through a `TfRecordReader` (comparing the records), in `bucket`.
fn read_fixtures(bucket: &str, options: &StorageOptions, files: &[(&str, usize)]) -> Reads {
    let mut reads = Reads::default();
    for &(name, records) in files {
        let expected = local(name);
        let mut got = Vec::new();
        open(&location(bucket, name), options)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got.len(), expected.len(), "{name}: length");
        assert!(got == expected, "{name}: the bytes differ from the file");
        reads.object(expected.len() as u64);

        let url = format!("s3://{bucket}/data/{name}");
        let remote = open(&location(bucket, name), options).unwrap();
        let remote: Vec<Vec<u8>> = TfRecordReader::new(remote, url.as_str(), Default::default())
            .map(|r| r.unwrap().data.to_vec())
            .collect();
        let local: Vec<Vec<u8>> =
            TfRecordReader::open(format!("{FIXTURES}/{name}"), Default::default())
                .unwrap()
                .map(|r| r.unwrap().data.to_vec())
                .collect();
        assert_eq!(remote.len(), records, "{name}: records");
        assert!(
            remote == local,
            "{name}: the records differ from the file's"
        );
        reads.object(expected.len() as u64);
    }
    reads
}

/// Every attempt went through the proxy and is in the stats: one retry, one failure and
/// one extra ranged GET per fault, and every byte received once.
fn assert_accounted(bucket: &str, proxy: &FaultProxy, reads: &Reads) {
    let s = store_stats(bucket);
    let faults = proxy.faults_injected();
    assert_eq!(
        s.retries, faults,
        "retries vs faults injected: {s:?} {proxy:?}"
    );
    assert_eq!(
        s.failures, faults,
        "failures vs faults injected: {s:?} {proxy:?}"
    );
    assert_eq!(
        proxy.range_gets(),
        reads.blocks + faults,
        "{reads:?} {proxy:?}"
    );
    assert_eq!(
        proxy.requests(),
        reads.opened + reads.blocks + faults,
        "{reads:?} {proxy:?}"
    );
    assert_eq!(s.requests, proxy.requests(), "{s:?} {proxy:?}");
    assert_eq!(
        s.bytes_read, reads.bytes,
        "bytes read twice or lost: {s:?} {reads:?}"
    );
}

/// The storage error inside an `io::Error` from a reader.
fn storage_error(e: &std::io::Error) -> &Error {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Error>())
        .unwrap_or_else(|| panic!("not a storage error: {e}"))
}

#[test]
fn slow_down_and_server_errors_are_retried_and_the_data_is_exact() {
    let bucket = "faults-slowdown";
    let (proxy, options) = setup(bucket);
    proxy.fail_next(7, 503);
    let mut reads = read_fixtures(bucket, &options, TFRECORDS);
    assert_eq!(proxy.faults_injected(), 7);
    assert_eq!(store_stats(bucket).retries, 7);
    assert_accounted(bucket, &proxy, &reads);

    proxy.fail_next(4, 500);
    let more = read_fixtures(bucket, &options, &TFRECORDS[..3]);
    reads.opened += more.opened;
    reads.blocks += more.blocks;
    reads.bytes += more.bytes;
    assert_eq!(proxy.faults_injected(), 11);
    assert_eq!(store_stats(bucket).retries, 11);
    assert_accounted(bucket, &proxy, &reads);
}

#[test]
fn bodies_cut_midway_are_resumed_at_the_byte_reached() {
    let bucket = "faults-cut";
    let (proxy, options) = setup(bucket);
    // Every block but the last of a file is 4096 bytes: cut after 1000, the retry asks for
    // the other 3096 (and may be cut again).
    proxy.cut_next(9, 1000);
    let reads = read_fixtures(bucket, &options, TFRECORDS);
    assert_eq!(proxy.faults_injected(), 9, "{proxy:?}");
    assert_eq!(store_stats(bucket).retries, 9);
    // bytes_read == the objects' sizes: the 1000 bytes before each cut were kept, not
    // fetched again.
    assert_accounted(bucket, &proxy, &reads);
}

#[test]
fn connection_resets_are_retried() {
    let bucket = "faults-reset";
    let (proxy, options) = setup(bucket);
    proxy.reset_next(6);
    let reads = read_fixtures(bucket, &options, TFRECORDS);
    assert_eq!(proxy.faults_injected(), 6);
    assert_eq!(store_stats(bucket).retries, 6);
    assert_accounted(bucket, &proxy, &reads);
}

#[test]
fn every_fault_at_once_with_latency() {
    let bucket = "faults-mixed";
    let (proxy, options) = setup(bucket);
    proxy.latency(Duration::from_millis(5));
    proxy.reset_next(3);
    proxy.fail_next(3, 503);
    proxy.cut_next(3, 500);
    let reads = read_fixtures(bucket, &options, TFRECORDS);
    assert_eq!(proxy.faults_injected(), 9, "{proxy:?}");
    assert_eq!(store_stats(bucket).retries, 9);
    assert_accounted(bucket, &proxy, &reads);
}

#[test]
fn latency_is_hidden_by_the_requests_in_flight() {
    let bucket = "faults-latency";
    let (proxy, mut options) = setup(bucket);
    proxy.latency(Duration::from_millis(20));
    let reads = read_fixtures(bucket, &options, &TFRECORDS[..3]);
    assert_eq!(proxy.faults_injected(), 0);
    assert_accounted(bucket, &proxy, &reads);
    let s = store_stats(bucket);
    assert_eq!(s.retries, 0);
    assert!(
        s.mean_request_time >= Duration::from_millis(20),
        "every request waited for the latency: {s:?}"
    );
    assert!(s.max_in_flight >= 2, "blocks requested ahead: {s:?}");

    // 4 blocks, all in flight at once: one round trip for the HEAD and about one for the
    // data, where one request at a time would take five.
    let latency = Duration::from_millis(100);
    proxy.latency(latency);
    options.read.max_in_flight = 4;
    let started = Instant::now();
    let mut got = Vec::new();
    open(&location(bucket, "examples.tfrecord"), &options)
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    let took = started.elapsed();
    assert!(got == local("examples.tfrecord"));
    assert!(took >= 2 * latency, "the latency was not added: {took:?}");
    assert!(
        took < 4 * latency,
        "the blocks were not requested concurrently: {took:?}"
    );
}

#[test]
fn a_fault_beyond_the_retry_budget_is_an_error_naming_the_url_and_offset() {
    let bucket = "faults-persistent";
    let (proxy, mut options) = setup(bucket);
    options.read.max_retries = 3;
    let name = "examples.tfrecord";
    let url = format!("s3://{bucket}/data/{name}");

    // From the first byte: the reader's first read fails (no bytes, no EOF).
    proxy.fail_always(503);
    let mut reader = open(&location(bucket, name), &options).unwrap();
    let mut got = Vec::new();
    let err = reader.read_to_end(&mut got).unwrap_err();
    assert!(got.is_empty(), "{} bytes before the error", got.len());
    let inner = storage_error(&err);
    assert!(
        matches!(
            inner,
            Error::Request {
                offset: 0,
                attempts: 4,
                ..
            }
        ),
        "{inner:?}"
    );
    let shown = inner.to_string();
    assert!(
        shown.contains(&url) && shown.contains("at byte 0"),
        "{shown}"
    );
    assert!(err.to_string().contains(&url), "{err}");
    assert!(store_stats(bucket).retries >= 3);
    drop(reader);

    // Each part below has its own proxy: requests of the blocks the reader above had in
    // flight may still arrive at the first one.
    let fresh = || {
        let proxy = FaultProxy::start(&s3_server().endpoint);
        let mut o = proxy.options();
        o.read = options.read;
        (proxy, o)
    };

    // Midway through a block: 1000 bytes arrive, then every retry fails; the error is at
    // the byte reached, after the retry budget.
    let (proxy, options) = fresh();
    proxy.cut_next(1, 1000);
    proxy.fail_always(500);
    let object = RemoteObject::open(&location(bucket, name), &options).unwrap();
    let err = object.read_range(5000, 9000).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Request {
                offset: 6000,
                attempts: 4,
                ..
            }
        ),
        "{err:?}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains(&url) && shown.contains("at byte 6000"),
        "{shown}"
    );
    assert_eq!(proxy.faults_injected(), 4);

    // The same through a reader, one block at a time: an error, not 1000 bytes and an EOF.
    let (proxy, mut options) = fresh();
    options.read.max_in_flight = 1;
    proxy.cut_next(1, 1000);
    proxy.fail_always(503);
    let mut got = Vec::new();
    let err = open(&location(bucket, name), &options)
        .unwrap()
        .read_to_end(&mut got)
        .unwrap_err();
    assert!(got.is_empty(), "{} bytes before the error", got.len());
    let shown = storage_error(&err).to_string();
    assert!(
        shown.contains(&url) && shown.contains("at byte 1000"),
        "{shown}"
    );
    assert_eq!(proxy.faults_injected(), 4);

    // A TFRecord reader over an object that fails partway: records, then an error, never
    // a clean end with fewer records. The latency keeps the next block's request waiting in
    // the proxy while the fault is switched on.
    let (proxy, mut options) = fresh();
    options.read.max_in_flight = 1;
    options.read.max_retries = 2;
    proxy.latency(Duration::from_millis(200));
    let remote = open(&location(bucket, name), &options).unwrap();
    let mut records = TfRecordReader::new(remote, url.as_str(), Default::default());
    assert!(records.read_record().unwrap().is_some());
    proxy.fail_always(503);
    let mut n = 1;
    let err = loop {
        match records.read_record() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("a clean end after {n} of 64 records"),
            Err(e) => break e,
        }
    };
    assert!(n < 64, "{n}");
    let shown = err.to_string();
    assert!(
        shown.contains(&url) && shown.contains("at byte 4096"),
        "{shown}"
    );
    assert_eq!(proxy.faults_injected(), 3);
}

#[test]
fn permanent_errors_are_not_retried() {
    let bucket = "faults-permanent";
    let (proxy, mut options) = setup(bucket);
    // One request at a time: none is left in flight when a read fails.
    options.read.max_in_flight = 1;
    let name = "examples.tfrecord";
    let read = |status: u16| {
        proxy.fail_always(status);
        let mut got = Vec::new();
        let err = open(&location(bucket, name), &options)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap_err();
        assert!(got.is_empty());
        err
    };

    // Moto takes any credentials: a 403 from the proxy stands in for a refused key.
    let err = read(403);
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    assert!(
        matches!(storage_error(&err), Error::Unauthenticated { url, .. } if url.ends_with(name)),
        "{err}"
    );
    let err = read(404);
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    assert!(
        matches!(storage_error(&err), Error::NotFound { .. }),
        "{err}"
    );
    let err = read(412);
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    assert!(
        matches!(storage_error(&err), Error::Changed { offset: 0, .. }),
        "{err}"
    );
    let s = store_stats(bucket);
    assert_eq!(proxy.faults_injected(), 3);
    assert_eq!(proxy.range_gets(), 3);
    assert_eq!(s.retries, 0, "a permanent error was retried: {s:?}");
    assert_eq!(s.failures, proxy.faults_injected(), "{s:?} {proxy:?}");
}

#[test]
fn missing_buckets_keys_and_matches_are_clear_errors_through_the_proxy() {
    let bucket = "faults-missing";
    let (proxy, options) = setup(bucket);
    // Slow, and failing every ranged GET: none of these gets that far, and nothing is
    // retried.
    proxy.latency(Duration::from_millis(5));
    proxy.fail_always(503);

    // A missing key: its size, its object, a reader of it.
    let missing = location(bucket, "missing.tfrecord");
    let url = format!("s3://{bucket}/data/missing.tfrecord");
    for err in [
        size(&missing, &options).unwrap_err(),
        RemoteObject::open(&missing, &options).unwrap_err(),
        open(&missing, &options).map(|_| ()).unwrap_err(),
    ] {
        assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
        assert!(
            err.to_string().starts_with(&format!("{url}: not found")),
            "{err}"
        );
    }
    // A missing key named without glob characters matches nothing.
    let err = expand(&url, &options).unwrap_err();
    assert!(matches!(err, Error::NoMatch { .. }), "{err:?}");

    // A missing bucket: the object is not found; a listing of it fails naming the pattern.
    let in_missing_bucket = "s3://faults-no-such-bucket/data/examples.tfrecord";
    let err =
        RemoteObject::open(&Location::parse(in_missing_bucket).unwrap(), &options).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    assert!(err.to_string().starts_with(in_missing_bucket), "{err}");
    let pattern = "s3://faults-no-such-bucket/data/*.tfrecord";
    let err = expand(pattern, &options).unwrap_err();
    assert!(err.to_string().starts_with(pattern), "{err}");
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("NoSuchBucket"), "{err}");
    assert!(!err.to_string().contains("testing-secret"), "{err}");

    // A glob matching nothing in a bucket that has objects (only non-matching ones).
    let pattern = format!("s3://{bucket}/data/*.parquet");
    let err = expand(&pattern, &options).unwrap_err();
    assert!(matches!(err, Error::NoMatch { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("{pattern}: no file matches"));
    // ... while a matching glob through the same proxy lists what is there.
    let found = expand(&format!("s3://{bucket}/data/images.tfrecord-*"), &options).unwrap();
    assert_eq!(found.len(), 4);

    assert_eq!(proxy.range_gets(), 0);
    assert_eq!(proxy.faults_injected(), 0);
    let s = store_stats(bucket);
    assert_eq!(s.retries, 0, "{s:?}");
    // The HEAD and the listing of the missing bucket are counted under its name.
    assert_eq!(s.requests, proxy.requests() - 2, "{s:?} {proxy:?}");
    assert_eq!(store_stats("faults-no-such-bucket").requests, 2);
}

/// Reading on after a read failed must not skip the failed block: either the error
/// repeats, or the read resumes at the byte the error was at (the reader drops the blocks
/// requested after the failed one and starts again there). A regression test: the reader
/// once popped the following block, giving the object minus its first block, then EOF.
#[test]
fn reading_on_after_an_error_never_skips_the_failed_block() {
    let bucket = "faults-after-error";
    let (proxy, mut options) = setup(bucket);
    options.read.max_retries = 1;
    options.read.max_in_flight = 1;
    let name = "examples.tfrecord";
    // The lookup first, then the faults, then the reader (whose first request goes out as
    // it is made: set up after it, the faults could miss it).
    let object = RemoteObject::open(&location(bucket, name), &options).unwrap();
    // Both attempts of the first block fail; the blocks after it would succeed.
    proxy.fail_next(2, 503);
    let mut reader = RemoteReader::new(object);
    let mut buf = [0u8; 100];
    let err = reader.read(&mut buf).unwrap_err();
    assert!(
        storage_error(&err).to_string().contains("at byte 0"),
        "{err}"
    );
    let mut rest = Vec::new();
    match reader.read_to_end(&mut rest) {
        Err(_) => assert!(rest.is_empty(), "{} bytes, then an error", rest.len()),
        Ok(_) => assert!(
            rest == local(name),
            "{} bytes after the error, not the object from byte 0 (the object from byte \
             4096: {})",
            rest.len(),
            rest == local(name)[4096..]
        ),
    }
}
