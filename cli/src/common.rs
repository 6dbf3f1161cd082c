//! Pieces shared by the subcommands.

use clap::ValueEnum;
use sluice_proto::Error;
use sluice_proto::tfrecord::Compression;

/// `--compression`: how the input files are compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum CompressionArg {
    /// Detect from the first bytes of each file.
    #[default]
    Auto,
    /// Uncompressed.
    None,
    /// The whole file is GZIP-compressed (TensorFlow's "GZIP").
    Gzip,
    /// The whole file is ZLIB-compressed (TensorFlow's "ZLIB").
    Zlib,
}

impl From<CompressionArg> for Compression {
    fn from(arg: CompressionArg) -> Self {
        match arg {
            CompressionArg::Auto => Compression::Auto,
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Zlib => Compression::Zlib,
        }
    }
}

/// What went wrong, without the file name in front: TensorFlow's own message where it has
/// one (`corrupted record at 268`), otherwise Sluice's message.
pub(crate) fn message_without_file(err: &Error) -> String {
    if let Some(message) = err.tensorflow_message() {
        return message;
    }
    let message = err.to_string();
    match err.file() {
        Some(file) => message
            .strip_prefix(file)
            .and_then(|rest| rest.strip_prefix(": "))
            .map_or_else(|| message.clone(), str::to_string),
        None => message,
    }
}

/// Where in the (uncompressed) stream an error is, as the error itself reports it.
pub(crate) fn error_offset(err: &Error) -> Option<u64> {
    match err {
        Error::CorruptedRecord { offset, .. }
        | Error::TruncatedRecord { offset, .. }
        | Error::RecordTooLarge { offset, .. }
        | Error::Io { offset, .. }
        | Error::Decompress { offset, .. }
        | Error::Decode { offset, .. } => Some(*offset),
        _ => None,
    }
}

/// What was asked of one object store during the command (`"storage"` in `--json`).
#[derive(Debug, serde::Serialize)]
pub(crate) struct StorageSummary {
    requests: u64,
    retries: u64,
    failures: u64,
    bytes_read: u64,
    bytes_written: u64,
    mean_request_ms: f64,
    max_request_ms: f64,
    max_in_flight: u64,
}

/// The stats of every object store used so far, by store (`s3://bucket`, ...).
pub(crate) fn storage_summary() -> std::collections::BTreeMap<String, StorageSummary> {
    sluice_storage::stats()
        .into_iter()
        .map(|(store, s)| {
            (
                store,
                StorageSummary {
                    requests: s.requests,
                    retries: s.retries,
                    failures: s.failures,
                    bytes_read: s.bytes_read,
                    bytes_written: s.bytes_written,
                    mean_request_ms: s.mean_request_time.as_secs_f64() * 1e3,
                    max_request_ms: s.max_request_time.as_secs_f64() * 1e3,
                    max_in_flight: s.max_in_flight,
                },
            )
        })
        .collect()
}

/// One line per object store used: `storage s3://bucket: 12 requests (1 retry, 1 failed),
/// 3.2 MB read, 0 MB written, mean 4.1 ms, max 20.3 ms, up to 8 in flight`.
pub(crate) fn print_storage(out: &mut impl std::io::Write) -> std::io::Result<()> {
    for (store, s) in storage_summary() {
        writeln!(
            out,
            "storage {store}: {} requests ({} retr{}, {} failed), {:.1} MB read, {:.1} MB \
             written, mean {:.1} ms, max {:.1} ms, up to {} in flight",
            s.requests,
            s.retries,
            if s.retries == 1 { "y" } else { "ies" },
            s.failures,
            s.bytes_read as f64 / 1e6,
            s.bytes_written as f64 / 1e6,
            s.mean_request_ms,
            s.max_request_ms,
            s.max_in_flight
        )?;
    }
    Ok(())
}
