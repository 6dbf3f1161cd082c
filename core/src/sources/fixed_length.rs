//! `fixed_length`: records of a fixed number of bytes (`tf.data.FixedLengthRecordDataset`).

use std::io::{BufRead, Read};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::sources::format::{FileFormat, OpenedFile, Opening, Record, RecordError, RecordReader};
use crate::sources::storage::StorageSpec;
use crate::tensor::Tensor;
use sluice_proto::tfrecord::Compression;

/// Reads files of fixed-length records, as `tf.data.FixedLengthRecordDataset` (CIFAR's
/// binary files, say): after `header_bytes`, every `record_bytes` bytes are a record (one
/// scalar byte string named `record`) until the last `footer_bytes`. A body that is not a
/// whole number of records is an error, as in TensorFlow (for an uncompressed file before
/// any record, since its size is known; for a compressed one at the partial record).
///
/// ```toml
/// [source]
/// format = "fixed_length"
/// files = ["data_batch_*.bin"]
/// record_bytes = 3073           # required
/// header_bytes = 0
/// footer_bytes = 0
/// compression_type = ""         # "" / none (default), gzip, zlib
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedLengthSpec {
    /// Bytes per record (at least 1).
    pub record_bytes: u64,
    /// Bytes to skip at the start of each file (default 0).
    #[serde(default)]
    pub header_bytes: u64,
    /// Bytes to skip at the end of each file (default 0).
    #[serde(default)]
    pub footer_bytes: u64,
    /// `""` / `none` (default), `gzip`, `zlib` or `auto`.
    #[serde(
        default,
        alias = "compression",
        with = "crate::sources::format::compression_type",
        skip_serializing_if = "crate::sources::format::is_none"
    )]
    pub compression_type: Compression,
    /// How URLs are reached and read; empty: the environment's settings.
    #[serde(default, skip_serializing_if = "StorageSpec::is_empty")]
    pub storage: StorageSpec,
    /// The feature each record is put in (default `record`).
    #[serde(default = "record_name")]
    pub name: String,
}

fn record_name() -> String {
    crate::element::RECORD.to_string()
}

impl FixedLengthSpec {
    /// Records of `record_bytes` bytes, no header or footer, uncompressed.
    pub fn new(record_bytes: u64) -> Self {
        FixedLengthSpec {
            record_bytes,
            header_bytes: 0,
            footer_bytes: 0,
            compression_type: Compression::None,
            storage: StorageSpec::default(),
            name: record_name(),
        }
    }
}

impl FileFormat for FixedLengthSpec {
    fn name(&self) -> &'static str {
        "fixed_length"
    }

    fn params(&self) -> Params {
        self.opening()
            .params()
            .with("record_bytes", self.record_bytes)
            .with("header_bytes", self.header_bytes)
            .with("footer_bytes", self.footer_bytes)
            .with("name", &self.name)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.record_bytes == 0 {
            return Err(Invalid::at(
                "record_bytes",
                "`record_bytes` must be at least 1",
            ));
        }
        if self.name.is_empty() {
            return Err(Invalid::at("name", "`name` must not be empty"));
        }
        Ok(())
    }

    fn opening(&self) -> Opening {
        Opening {
            compression_type: self.compression_type,
            storage: self.storage.clone(),
        }
    }

    fn records(&self, file: OpenedFile) -> Result<Box<dyn RecordReader>> {
        let misfit = file.size.and_then(|size| {
            let body = size.checked_sub(self.header_bytes + self.footer_bytes);
            match body {
                Some(body) if body % self.record_bytes == 0 => None,
                _ => Some(self.misfit_message(&file.path, size)),
            }
        });
        Ok(Box::new(FixedRecords {
            input: file.input,
            path: file.path,
            spec: self.clone(),
            name: Arc::from(self.name.as_str()),
            offset: 0,
            pending: Vec::new(),
            misfit,
            done: false,
        }))
    }
}

impl FixedLengthSpec {
    /// TensorFlow's message for a body that is not a whole number of records.
    fn misfit_message(&self, path: &str, size: u64) -> String {
        let body = size as i128 - self.header_bytes as i128 - self.footer_bytes as i128;
        format!(
            "Excluding the header ({} bytes) and footer ({} bytes), input file \"{path}\" has \
             body length {body} bytes, which is not an exact multiple of the record length \
             ({} bytes).",
            self.header_bytes, self.footer_bytes, self.record_bytes
        )
    }
}

struct FixedRecords {
    input: Box<dyn BufRead + Send>,
    path: String,
    spec: FixedLengthSpec,
    name: Arc<str>,
    /// Bytes consumed from the input so far.
    offset: u64,
    /// Bytes read ahead: the next record and the footer's length more (the footer is
    /// known only at the end of the stream).
    pending: Vec<u8>,
    /// The file's size is known not to fit (reported before any record).
    misfit: Option<String>,
    done: bool,
}

impl FixedRecords {
    fn error(&mut self, message: String) -> Option<std::result::Result<Record, RecordError>> {
        self.done = true;
        Some(Err(RecordError {
            offset: self.offset,
            feature: None,
            message,
            recoverable: false,
        }))
    }

    /// Reads until `pending` holds `want` bytes or the stream ends.
    fn fill(&mut self, want: usize) -> std::io::Result<()> {
        while self.pending.len() < want {
            let need = (want - self.pending.len()) as u64;
            let n = (&mut self.input)
                .take(need)
                .read_to_end(&mut self.pending)?;
            if n == 0 {
                break;
            }
        }
        Ok(())
    }
}

impl RecordReader for FixedRecords {
    fn next_record(&mut self) -> Option<std::result::Result<Record, RecordError>> {
        if self.done {
            return None;
        }
        if let Some(message) = self.misfit.take() {
            return self.error(message);
        }
        let io = |path: &str, e: std::io::Error| format!("{path}: cannot read: {e}");
        if self.offset == 0 && self.spec.header_bytes > 0 {
            let mut header = Vec::new();
            match (&mut self.input)
                .take(self.spec.header_bytes)
                .read_to_end(&mut header)
            {
                Ok(_) => self.offset = header.len() as u64,
                Err(e) => return self.error(io(&self.path, e)),
            }
            if self.offset < self.spec.header_bytes {
                let size = self.offset;
                return self.error(self.spec.misfit_message(&self.path, size));
            }
        }
        let record = self.spec.record_bytes as usize;
        let footer = self.spec.footer_bytes as usize;
        if let Err(e) = self.fill(record + footer) {
            return self.error(io(&self.path, e));
        }
        if self.pending.len() == record + footer {
            let data = Bytes::copy_from_slice(&self.pending[..record]);
            self.pending.drain(..record);
            let start = self.offset;
            self.offset += record as u64;
            return Some(Ok(Record {
                offset: start,
                features: vec![(Arc::clone(&self.name), Tensor::scalar_bytes(data))],
            }));
        }
        // The end: what is left must be the footer exactly.
        if self.pending.len() == footer {
            self.done = true;
            return None;
        }
        let size = self.offset + self.pending.len() as u64;
        let message = self.spec.misfit_message(&self.path, size);
        self.error(message)
    }
}
