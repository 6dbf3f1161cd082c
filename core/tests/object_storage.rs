//! Pipelines over object storage read exactly what they read from local files: the
//! fixtures uploaded to a real S3-compatible server (moto, on 127.0.0.1; see
//! `sluice_storage::testing`), read through `s3://` URLs configured the way users configure
//! S3-compatible stores (`AWS_ENDPOINT_URL` and the credentials in the environment).
//!
//! One test in this binary: it sets the environment before any thread reads it.
#![allow(unsafe_code)]

use sluice_core::prelude::*;
use sluice_storage::testing::s3_server;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");

fn digests(dataset: &Dataset) -> Vec<String> {
    dataset
        .collect()
        .unwrap()
        .iter()
        .map(sluice_core::checkpoint::element_digest)
        .collect()
}

#[test]
fn s3_pipelines_equal_local_ones() {
    let server = s3_server();
    for (k, v) in server.env() {
        // SAFETY: the only test of this binary, before any thread of it reads the
        // environment (the storage runtime starts below).
        unsafe { std::env::set_var(k, v) };
    }
    server.upload_dir("pipelines", std::path::Path::new(FIXTURES), "data");

    let pipeline = |pattern: &str| {
        Dataset::tfrecord([pattern])
            .unwrap()
            .interleave(InterleaveSpec::new(2).num_parallel(2))
            .parse_example(ParseExampleSpec::new([
                ("image", FeatureSpec::scalar(FeatureType::String)),
                ("label", FeatureSpec::scalar(FeatureType::Int64)),
            ]))
            .batch(5)
            .with_options(Options::default().with_seed(3))
    };
    let local = digests(&pipeline(&format!("{FIXTURES}/images.tfrecord-*")));
    let remote = digests(&pipeline("s3://pipelines/data/images.tfrecord-*"));
    assert_eq!(local.len(), 7);
    assert_eq!(remote, local);

    // Every compression, read record by record.
    for name in [
        "examples.tfrecord",
        "examples.tfrecord.gz",
        "examples.tfrecord.zlib",
    ] {
        let local = digests(&Dataset::tfrecord([format!("{FIXTURES}/{name}")]).unwrap());
        let remote = digests(&Dataset::tfrecord([format!("s3://pipelines/data/{name}")]).unwrap());
        assert_eq!(remote.len(), 64, "{name}");
        assert_eq!(remote, local, "{name}");
    }

    // Global shuffle over remote shards: records read by offset (ranged requests), in the
    // same global order as over the local files; indexes built once and cached by URL (and
    // checked against the object's size and ETag).
    let indexes = tempfile::tempdir().unwrap();
    let shuffled = |pattern: &str| {
        let spec = GlobalShuffleSpec::default()
            .index_dir(indexes.path())
            .seed(11);
        digests(&Dataset::tfrecord_global_shuffle([pattern], spec).unwrap())
    };
    let local = shuffled(&format!("{FIXTURES}/images.tfrecord-*"));
    let remote = shuffled("s3://pipelines/data/images.tfrecord-*");
    assert_eq!(local.len(), 32);
    assert_eq!(remote, local);
    let cached = std::fs::read_dir(indexes.path()).unwrap().count();
    assert_eq!(cached, 8, "4 local and 4 remote indexes");
    let read_before = sluice_storage::stats()["s3://pipelines"].bytes_read;
    assert_eq!(shuffled("s3://pipelines/data/images.tfrecord-*"), local);
    let read = sluice_storage::stats()["s3://pipelines"].bytes_read - read_before;
    let size: u64 = (0..4)
        .map(|i| {
            std::fs::metadata(format!("{FIXTURES}/images.tfrecord-0000{i}-of-00004"))
                .unwrap()
                .len()
        })
        .sum();
    // The second run reads each record once, and no shard front to back again.
    assert_eq!(read, size, "cached indexes: each byte read once");

    // The disk cache holds a remote dataset's records locally: the second run reads
    // nothing from the store.
    let cache_dir = tempfile::tempdir().unwrap();
    let cached = || {
        Dataset::tfrecord(["s3://pipelines/data/images.tfrecord-*"])
            .unwrap()
            .cache(CacheSpec::Directory(cache_dir.path().to_path_buf()))
            .with_options(Options::default().with_seed(1))
    };
    let first = digests(&cached());
    let read_before = sluice_storage::stats()["s3://pipelines"].bytes_read;
    let second = digests(&cached());
    assert_eq!(second, first);
    assert_eq!(first.len(), 32);
    assert_eq!(
        sluice_storage::stats()["s3://pipelines"].bytes_read,
        read_before,
        "served from the local cache"
    );

    // `[source.storage]` reaches the store and sets how it is read: 1000-byte blocks are
    // one request per 1000 bytes (counted in the store's stats).
    server.upload_dir("configured", std::path::Path::new(FIXTURES), "data");
    let toml = format!(
        "[source]\nfiles = \"s3://configured/data/examples.tfrecord\"\n\
         [source.storage]\naws_endpoint = \"{}\"\naws_allow_http = true\n\
         aws_access_key_id = \"testing\"\naws_secret_access_key = \"storage-secret-42\"\n\
         block_size = 1000\nmax_in_flight = 2\n\
         [[stage]]\nkind = \"take\"\ncount = 64\n",
        server.endpoint
    );
    let file = sluice_core::pipeline_file::PipelineFile::from_toml(&toml).unwrap();
    let built = file.build().unwrap();
    // The secret reaches the store but never `explain` (nor stats, which show the same
    // parameters).
    let explained = built.explain().unwrap();
    assert!(explained.contains("<set>"), "{explained}");
    assert!(!explained.contains("storage-secret-42"), "{explained}");
    let remote = digests(&built);
    let local = digests(&Dataset::tfrecord([format!("{FIXTURES}/examples.tfrecord")]).unwrap());
    assert_eq!(remote, local);
    let size = std::fs::metadata(format!("{FIXTURES}/examples.tfrecord"))
        .unwrap()
        .len();
    let stats = sluice_storage::stats()["s3://configured"];
    assert!(stats.requests > size / 1000, "{stats:?}, {size} bytes");
    assert_eq!(stats.bytes_read, size, "{stats:?}");
    // A misspelt key is refused with its place in the file.
    let err = sluice_core::pipeline_file::PipelineFile::from_toml(
        "[source]\nfiles = \"s3://configured/x\"\n[source.storage]\naws_endpiont = \"x\"\n",
    )
    .and_then(|f| f.build().map(|_| ()))
    .unwrap_err();
    assert!(err.to_string().contains("aws_endpiont"), "{err}");

    // An elastic resume over object storage: one host reads 600 of the 1,000 records of
    // one object and stops; two hosts resume from its checkpoint, each starting its ranged
    // reads at record 576 (the start of the 64-record block holding the first record not
    // done), not at the object's start; together they read every record once.
    let big = tempfile::tempdir().unwrap();
    {
        let path = big.path().join("big.tfrecord");
        let mut w = sluice_core::proto::tfrecord::TfRecordWriter::create(
            &path,
            sluice_core::proto::tfrecord::Compression::None,
        )
        .unwrap();
        for j in 0..1000 {
            w.write_record(format!("r{j}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    server.upload_dir("elastic", big.path(), "data");
    let make = |hosts: u64, rank: u64| {
        Dataset::tfrecord(["s3://elastic/data/big.tfrecord"])
            .unwrap()
            .shard(hosts, rank)
            .batch(10)
            .with_options(Options::default().with_seed(2))
    };
    let texts = |b: &sluice_core::Element| -> Vec<String> {
        b.tensor("record")
            .unwrap()
            .as_bytes_list()
            .unwrap()
            .iter()
            .map(|r| String::from_utf8(r.to_vec()).unwrap())
            .collect()
    };
    let mut it = make(1, 0).iter().unwrap();
    let mut got: Vec<String> = it
        .by_ref()
        .take(60)
        .flat_map(|b| texts(&b.unwrap()))
        .collect();
    let cps = vec![it.checkpoint().unwrap()];
    drop(it);
    for rank in 0..2 {
        let mut it = make(2, rank).resume_elastic(&cps).unwrap();
        got.extend(it.by_ref().flat_map(|b| texts(&b.unwrap())));
        let read = it
            .stats()
            .stages
            .iter()
            .find(|s| s.name == "tfrecord")
            .unwrap()
            .elements_in;
        assert_eq!(read, 1000 - 576, "host {rank} starts at record 576");
    }
    got.sort();
    let mut want: Vec<String> = (0..1000).map(|j| format!("r{j}")).collect();
    want.sort();
    assert_eq!(got, want);

    // Errors name the URL; a glob that matches nothing is NotFound.
    let err = Dataset::tfrecord(["s3://pipelines/data/nothing-*"]).unwrap_err();
    assert_eq!(err.kind(), sluice_core::ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string().contains("s3://pipelines/data/nothing-*"),
        "{err}"
    );
    let err = Dataset::tfrecord(["s3://pipelines/data/corrupt_data_crc.tfrecord"])
        .unwrap()
        .collect()
        .unwrap_err();
    assert_eq!(err.kind(), sluice_core::ErrorKind::DataLoss, "{err}");
    assert_eq!(
        err.file(),
        Some("s3://pipelines/data/corrupt_data_crc.tfrecord")
    );
    assert_eq!(err.offset(), Some(268));
}
