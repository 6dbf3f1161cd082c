//! TFRecord framing through every compression. The fuzzed bytes are an *uncompressed*
//! TFRecord stream (so the framing, not the compressed container, is what mutates); it is
//! compressed with GZIP and ZLIB (whole stream, one flush in the middle, as TensorFlow and
//! streaming writers do) and read back with `gzip`, `zlib` and `auto`. Checks: no panic;
//! the compressed stream reads exactly as the uncompressed one (records, offsets in the
//! uncompressed stream, indices, and the same error, under both corruption policies); and
//! the records read, written again with `TfRecordWriter` in each compression, read back
//! unchanged with no error (write then read is the identity).
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use sluice_proto::tfrecord::{
    Compression, CorruptionPolicy, ReaderOptions, Record, TfRecordReader, TfRecordWriter,
};

const MAX_RECORD_LEN: u64 = 1 << 16;

fn read(
    data: &[u8],
    compression: Compression,
    on_corruption: CorruptionPolicy,
) -> (Vec<Record>, Option<String>) {
    let options = ReaderOptions {
        compression,
        max_record_len: MAX_RECORD_LEN,
        on_corruption,
        buffer_size: 1 << 12,
    };
    let mut reader = TfRecordReader::new(data, "fuzz", options);
    let mut records = Vec::new();
    let mut error = None;
    for result in reader.by_ref() {
        match result {
            Ok(record) => records.push(record),
            Err(e) => error = Some(e.to_string()),
        }
    }
    (records, error)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let (a, b) = data.split_at(data.len() / 2);
    z.write_all(a).unwrap();
    z.flush().unwrap();
    z.write_all(b).unwrap();
    z.finish().unwrap()
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    let (a, b) = data.split_at(data.len() / 3);
    z.write_all(a).unwrap();
    z.flush().unwrap();
    z.write_all(b).unwrap();
    z.finish().unwrap()
}

fuzz_target!(|data: &[u8]| {
    let gz = gzip(data);
    let zl = zlib(data);
    for policy in [CorruptionPolicy::Fail, CorruptionPolicy::SkipBadData] {
        let (plain, plain_error) = read(data, Compression::None, policy);
        for (bytes, compression) in [
            (&gz, Compression::Gzip),
            (&gz, Compression::Auto),
            (&zl, Compression::Zlib),
        ] {
            let (records, error) = read(bytes, compression, policy);
            assert_eq!(records, plain, "{compression:?} reads as uncompressed");
            assert_eq!(
                error.is_some(),
                plain_error.is_some(),
                "{compression:?}: {error:?} vs {plain_error:?}"
            );
        }
        // Write what was read, in each compression, and read it back.
        for compression in [Compression::None, Compression::Gzip, Compression::Zlib] {
            let mut writer = TfRecordWriter::new(Vec::new(), compression).unwrap();
            for r in &plain {
                writer.write_record(&r.data).unwrap();
            }
            let written = writer.finish().unwrap();
            let (back, error) = read(&written, compression, CorruptionPolicy::Fail);
            assert_eq!(error, None, "{compression:?}: what was written reads");
            assert_eq!(back.len(), plain.len());
            for (b, p) in back.iter().zip(&plain) {
                assert_eq!(b.data, p.data);
            }
        }
    }
});
