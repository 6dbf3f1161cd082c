//! Against a real S3-compatible server: moto's (`pip install 'moto[server]'`), started on
//! 127.0.0.1 on a free port for this test binary and stopped when it exits. The server is
//! found as `$SLUICE_MOTO_SERVER` or `moto_server` on the PATH; without it these tests fail
//! saying how to install it (`.ci/run` installs it).

use std::io::Read;

use sluice_storage::testing::s3_server;
use sluice_storage::{Error, Location, ReadOptions, StorageOptions, expand, open};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");

fn options() -> StorageOptions {
    s3_server().options()
}

fn bucket_with_fixtures(bucket: &str) {
    s3_server().upload_dir(bucket, std::path::Path::new(FIXTURES), "data");
}

#[test]
fn globs_expand_by_listing_and_objects_read_as_the_files() {
    bucket_with_fixtures("globs");
    let found = expand("s3://globs/data/images.tfrecord-*", &options()).unwrap();
    let names: Vec<String> = found.iter().map(|l| l.display()).collect();
    assert_eq!(
        names,
        (0..4)
            .map(|i| format!("s3://globs/data/images.tfrecord-0000{i}-of-00004"))
            .collect::<Vec<_>>()
    );
    // Small blocks: many ranged requests, several in flight, reassembled in order.
    let mut small = options();
    small.read = ReadOptions {
        block_size: 1000,
        max_in_flight: 3,
        ..ReadOptions::default()
    };
    for (location, opts) in found
        .iter()
        .zip([options(), small.clone(), small.clone(), options()])
    {
        let mut got = Vec::new();
        open(location, &opts)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        let name = location.display().rsplit('/').next().unwrap().to_string();
        assert_eq!(
            got,
            std::fs::read(format!("{FIXTURES}/{name}")).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn tfrecords_read_remotely_equal_the_local_ones_for_every_compression() {
    bucket_with_fixtures("compressions");
    let mut small = options();
    small.read.block_size = 4096;
    for name in [
        "examples.tfrecord",
        "examples.tfrecord.gz",
        "examples.tfrecord.zlib",
    ] {
        let url = format!("s3://compressions/data/{name}");
        let remote = open(&Location::parse(&url).unwrap(), &small).unwrap();
        let mut reader =
            sluice_proto::tfrecord::TfRecordReader::new(remote, url.as_str(), Default::default());
        let mut local = sluice_proto::tfrecord::TfRecordReader::open(
            format!("{FIXTURES}/{name}"),
            Default::default(),
        )
        .unwrap();
        let mut n = 0;
        loop {
            let (a, b) = (reader.read_record().unwrap(), local.read_record().unwrap());
            assert_eq!(
                a.as_ref().map(|r| r.data.clone()),
                b.as_ref().map(|r| r.data.clone()),
                "{name} #{n}"
            );
            if a.is_none() {
                break;
            }
            n += 1;
        }
        assert_eq!(n, 64, "{name}");
    }
}

#[test]
fn missing_things_are_clear_errors() {
    s3_server().create_bucket("errors");
    let o = options();
    let err = expand("s3://errors/nothing-*", &o).unwrap_err();
    assert!(matches!(err, Error::NoMatch { .. }), "{err}");
    assert_eq!(err.to_string(), "s3://errors/nothing-*: no file matches");
    let err = match open(
        &Location::parse("s3://errors/missing.tfrecord").unwrap(),
        &o,
    ) {
        Err(e) => e,
        Ok(_) => panic!("opened a missing object"),
    };
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("s3://errors/missing.tfrecord: not found"),
        "{err}"
    );
    let err = expand("s3://no-such-bucket/x-*", &o).unwrap_err();
    assert!(err.to_string().contains("s3://no-such-bucket/x-*"), "{err}");
    assert!(
        !err.to_string().contains("testing-secret"),
        "a secret in an error: {err}"
    );
    let err = Location::parse("ftp://host/x").unwrap_err();
    assert!(err.to_string().contains("unknown scheme `ftp`"), "{err}");
}

#[test]
fn an_object_changed_during_the_read_is_an_error() {
    s3_server().create_bucket("changing");
    s3_server().put("changing", "obj.bin", vec![1u8; 10_000]);
    let mut o = options();
    o.read = ReadOptions {
        block_size: 1000,
        max_in_flight: 1,
        max_retries: 2,
        ..ReadOptions::default()
    };
    let mut reader = open(&Location::parse("s3://changing/obj.bin").unwrap(), &o).unwrap();
    let mut first = [0u8; 500];
    reader.read_exact(&mut first).unwrap();
    s3_server().put("changing", "obj.bin", vec![2u8; 10_000]);
    let mut rest = Vec::new();
    let err = reader.read_to_end(&mut rest).unwrap_err();
    let inner = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<Error>())
        .expect("a storage error");
    assert!(matches!(inner, Error::Changed { .. }), "{inner}");
    assert!(
        rest.iter().all(|&b| b == 1),
        "no byte of the new object was returned"
    );
}

#[test]
fn an_object_replaced_after_its_listing_is_read_as_it_is_now() {
    s3_server().create_bucket("relisted");
    s3_server().put("relisted", "obj.bin", vec![1u8; 10_000]);
    // The listing's size and ETag spare the HEAD when the object is opened...
    let found = expand("s3://relisted/*.bin", &options()).unwrap();
    s3_server().put("relisted", "obj.bin", vec![2u8; 12_000]);
    // ... but an object replaced before its first byte was read is read in its new version
    // (looked up again), not reported as changed.
    let mut got = Vec::new();
    open(&found[0], &options())
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    assert_eq!(got, vec![2u8; 12_000]);
}

#[test]
fn open_ahead_looks_up_in_the_background_and_errors_at_the_first_read() {
    s3_server().create_bucket("ahead");
    let bytes: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    s3_server().put("ahead", "obj.bin", bytes.clone());
    let mut o = options();
    o.read = ReadOptions {
        block_size: 4096,
        max_in_flight: 3,
        ..ReadOptions::default()
    };
    // Never listed: the HEAD and the first requests go out without blocking the caller.
    let at = Location::parse("s3://ahead/obj.bin").unwrap();
    let mut got = Vec::new();
    sluice_storage::open_ahead(&at, &o)
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    assert_eq!(got, bytes);
    // A missing object opens, and its first read is the error.
    let missing = Location::parse("s3://ahead/missing.bin").unwrap();
    let mut reader = sluice_storage::open_ahead(&missing, &o).unwrap();
    let err = reader.read(&mut [0u8; 16]).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    let inner = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<Error>())
        .unwrap();
    assert!(matches!(inner, Error::NotFound { .. }), "{inner}");
    assert!(
        inner.to_string().starts_with("s3://ahead/missing.bin"),
        "{inner}"
    );
}
