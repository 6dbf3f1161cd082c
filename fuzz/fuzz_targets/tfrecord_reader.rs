//! Arbitrary bytes as a TFRecord stream, read with every compression setting, a small
//! record-length limit, both corruption policies and a tiny buffer. The reader must never
//! panic, never return a record over the limit, and must not depend on its buffer size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_proto::tfrecord::{
    Compression, CorruptionPolicy, ReaderOptions, Record, TfRecordReader,
};

/// Small, so a header claiming a huge length is refused instead of allocated.
const MAX_RECORD_LEN: u64 = 1 << 16;

/// The "large" buffer: smaller than the 256 KiB default, which the reader zero-fills on
/// each refill and which made every run several times slower, but larger than most inputs.
const BUFFER_SIZE: usize = 1 << 12;

/// Reads the whole stream: the records, and the error's message if one ended it.
fn read(data: &[u8], options: ReaderOptions) -> (Vec<Record>, Option<String>) {
    let mut reader = TfRecordReader::new(data, "fuzz", options);
    let mut records = Vec::new();
    let mut error = None;
    let mut next_index = 0;
    for result in reader.by_ref() {
        match result {
            Ok(record) => {
                assert!(record.data.len() as u64 <= options.max_record_len);
                assert!(record.index >= next_index, "indices increase");
                next_index = record.index + 1;
                records.push(record);
            }
            Err(e) => error = Some(e.to_string()),
        }
    }
    // Fused after the end or an error.
    assert!(matches!(reader.read_record(), Ok(None)));
    if options.on_corruption == CorruptionPolicy::Fail {
        assert_eq!(reader.skipped(), 0);
    }
    assert_eq!(reader.records(), records.len() as u64);
    (records, error)
}

fuzz_target!(|data: &[u8]| {
    for compression in [
        Compression::Auto,
        Compression::None,
        Compression::Gzip,
        Compression::Zlib,
    ] {
        for on_corruption in [CorruptionPolicy::Fail, CorruptionPolicy::SkipBadData] {
            let options = ReaderOptions {
                compression,
                max_record_len: MAX_RECORD_LEN,
                on_corruption,
                buffer_size: BUFFER_SIZE,
            };
            let (records, error) = read(data, options);
            // A tiny buffer (many refills) reads the same. (A decompression error may come
            // earlier or later with another buffer size, so compressed streams are only
            // compared when they decode without error.)
            let tiny = ReaderOptions {
                buffer_size: 1 + data.len() % 23,
                ..options
            };
            let (tiny_records, tiny_error) = read(data, tiny);
            let uncompressed = compression == Compression::None;
            if uncompressed || (error.is_none() && tiny_error.is_none()) {
                assert_eq!(records, tiny_records);
                assert_eq!(error, tiny_error);
            }
        }
    }
});
