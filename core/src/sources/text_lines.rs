//! `text_lines`: one element per line of text files (`tf.data.TextLineDataset`).

use std::io::BufRead;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::element::Value;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::sources::format::{
    Chunk, ChunkReader, ChunkRecords, FileFormat, OpenedFile, Opening, RecordError, RecordReader,
};
use crate::sources::storage::StorageSpec;
use crate::tensor::{Tensor, TensorData};
use sluice_proto::tfrecord::Compression;

/// Reads text files line by line, as `tf.data.TextLineDataset`: each line is an element
/// holding one scalar byte string (named `line`), without its `\n` or `\r\n`; a last line
/// without a newline is a line; an empty file has none.
///
/// ```toml
/// [source]
/// format = "text_lines"
/// files = ["corpus-*.txt.gz"]
/// compression_type = "gzip"     # "" / none (default), gzip, zlib, auto
/// utf8 = true                   # refuse lines that are not UTF-8 (default: any bytes)
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TextLinesSpec {
    /// `""` / `none` (default), `gzip`, `zlib` or `auto`.
    #[serde(
        alias = "compression",
        with = "crate::sources::format::compression_type",
        skip_serializing_if = "crate::sources::format::is_none"
    )]
    pub compression_type: Compression,
    /// How URLs are reached and read; empty: the environment's settings.
    #[serde(skip_serializing_if = "StorageSpec::is_empty")]
    pub storage: StorageSpec,
    /// Check that every line is UTF-8, and make one that is not an error naming its line
    /// (default false: lines are bytes, as in TensorFlow).
    pub utf8: bool,
    /// The feature each line is put in (default `line`).
    pub name: String,
}

impl Default for TextLinesSpec {
    fn default() -> Self {
        TextLinesSpec {
            compression_type: Compression::None,
            storage: StorageSpec::default(),
            utf8: false,
            name: "line".to_string(),
        }
    }
}

impl FileFormat for TextLinesSpec {
    fn name(&self) -> &'static str {
        "text_lines"
    }

    fn params(&self) -> Params {
        self.opening()
            .params()
            .with("utf8", self.utf8)
            .with("name", &self.name)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
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
        Ok(Box::new(ChunkRecords::new(self.lines(file), 64)))
    }

    fn reads_chunks(&self) -> bool {
        true
    }

    fn open_chunks(&self, path: &str) -> Result<Box<dyn ChunkReader>> {
        Ok(Box::new(self.lines(self.opening().open(path)?)))
    }
}

impl TextLinesSpec {
    fn lines(&self, file: OpenedFile) -> Lines {
        Lines {
            input: file.input,
            name: Arc::from(self.name.as_str()),
            utf8: self.utf8,
            offset: 0,
            line: 0,
            buf: Vec::new(),
            done: false,
            pending: None,
        }
    }
}

/// The lines of one file, read in chunks (each chunk's lines one column of byte strings,
/// slices of one buffer).
struct Lines {
    input: Box<dyn BufRead + Send>,
    name: Arc<str>,
    utf8: bool,
    /// Bytes read so far: where the next line starts.
    offset: u64,
    /// Lines read so far.
    line: u64,
    buf: Vec<u8>,
    done: bool,
    /// A bad line met after the last chunk's: the next call's.
    pending: Option<RecordError>,
}

impl ChunkReader for Lines {
    fn next_chunk(&mut self, max: usize) -> Option<std::result::Result<Chunk, RecordError>> {
        if let Some(bad) = self.pending.take() {
            return Some(Err(bad));
        }
        if self.done {
            return None;
        }
        let (mut spans, mut offsets) = (Vec::new(), Vec::new());
        self.buf.clear();
        while offsets.len() < max.max(1) {
            let at = self.buf.len();
            let start = self.offset;
            let n = match self.input.read_until(b'\n', &mut self.buf) {
                Ok(n) => n,
                Err(e) => {
                    self.done = true;
                    self.buf.truncate(at);
                    self.pending = Some(RecordError {
                        offset: start,
                        feature: None,
                        message: format!("line {}: cannot read: {e}", self.line + 1),
                        recoverable: false,
                    });
                    break;
                }
            };
            if n == 0 {
                self.done = true;
                break;
            }
            self.offset += n as u64;
            self.line += 1;
            let mut end = self.buf.len();
            if self.buf[end - 1] == b'\n' {
                end -= 1;
                if end > at && self.buf[end - 1] == b'\r' {
                    end -= 1;
                }
            }
            if self.utf8
                && let Err(e) = std::str::from_utf8(&self.buf[at..end])
            {
                self.buf.truncate(at);
                self.pending = Some(RecordError {
                    offset: start,
                    feature: Some(self.name.to_string()),
                    message: format!(
                        "line {} is not UTF-8: invalid byte at column {}",
                        self.line,
                        e.valid_up_to() + 1
                    ),
                    recoverable: true,
                });
                break;
            }
            spans.push((at, end));
            offsets.push(start);
        }
        if offsets.is_empty() {
            return self.pending.take().map(Err);
        }
        let data = Bytes::from(std::mem::take(&mut self.buf));
        let lines: Vec<Bytes> = spans.iter().map(|&(a, b)| data.slice(a..b)).collect();
        let column = Tensor::new(&[lines.len()], TensorData::Bytes(lines.into()))
            .expect("one value per line");
        Some(Ok(Chunk {
            offsets,
            columns: vec![(Arc::clone(&self.name), Value::Dense(column))],
        }))
    }
}
