//! The TFRecord writer.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use flate2::write::{GzEncoder, ZlibEncoder};

use super::compression::Compression;
use super::crc::masked_crc32c;
use crate::error::{Error, Result};

/// Size of the writer's output buffer.
const WRITE_BUFFER: usize = 256 << 10;

enum Sink<W: Write> {
    Plain(BufWriter<W>),
    Gzip(GzEncoder<BufWriter<W>>),
    Zlib(ZlibEncoder<BufWriter<W>>),
}

/// Writes TFRecord streams that TensorFlow reads: uncompressed, or whole-stream GZIP or ZLIB
/// at the default compression level, as `tf.io.TFRecordWriter` writes them.
///
/// Call [`finish`](Self::finish) to flush, end the compressed stream and see any error.
/// Dropping an unfinished writer also finishes it, but can only ignore errors.
///
/// ```
/// use sluice_proto::tfrecord::{Compression, TfRecordWriter};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("out.tfrecord.gz");
/// let mut writer = TfRecordWriter::create(&path, Compression::Gzip)?;
/// writer.write_record(b"payload")?;
/// writer.finish()?;
/// assert!(std::fs::metadata(&path)?.len() > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TfRecordWriter<W: Write> {
    sink: Option<Sink<W>>,
    name: String,
    records: u64,
}

impl TfRecordWriter<File> {
    /// Creates (or truncates) a file.
    pub fn create(path: impl AsRef<Path>, compression: Compression) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        if compression == Compression::Auto {
            return Err(Error::AutoCompressionForWriter);
        }
        let file = File::create(path).map_err(|source| Error::Write {
            file: name.clone(),
            source,
        })?;
        let mut writer = TfRecordWriter::new(file, compression)?;
        writer.name = name;
        Ok(writer)
    }
}

impl<W: Write> TfRecordWriter<W> {
    /// A writer over any [`Write`]. [`Compression::Auto`] is refused.
    pub fn new(output: W, compression: Compression) -> Result<Self> {
        let out = BufWriter::with_capacity(WRITE_BUFFER, output);
        let level = flate2::Compression::default();
        let sink = match compression {
            Compression::Auto => return Err(Error::AutoCompressionForWriter),
            Compression::None => Sink::Plain(out),
            Compression::Gzip => Sink::Gzip(GzEncoder::new(out, level)),
            Compression::Zlib => Sink::Zlib(ZlibEncoder::new(out, level)),
        };
        Ok(TfRecordWriter {
            sink: Some(sink),
            name: "<stream>".to_string(),
            records: 0,
        })
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Appends one record: length, masked CRC32C of the length, data, masked CRC32C of the data.
    pub fn write_record(&mut self, data: &[u8]) -> Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        let mut header = [0u8; 12];
        header[..8].copy_from_slice(&len);
        header[8..].copy_from_slice(&masked_crc32c(&len).to_le_bytes());
        let footer = masked_crc32c(data).to_le_bytes();
        let result = (|| -> io::Result<()> {
            let sink: &mut dyn Write = match self.sink.as_mut() {
                Some(Sink::Plain(w)) => w,
                Some(Sink::Gzip(w)) => w,
                Some(Sink::Zlib(w)) => w,
                None => unreachable!("the sink is only taken by finish, which consumes self"),
            };
            sink.write_all(&header)?;
            sink.write_all(data)?;
            sink.write_all(&footer)
        })();
        result.map_err(|source| self.write_error(source))?;
        self.records += 1;
        Ok(())
    }

    /// Flushes buffered records to the output (compressed streams are synced, not ended).
    pub fn flush(&mut self) -> Result<()> {
        let result = match self.sink.as_mut() {
            Some(Sink::Plain(w)) => w.flush(),
            Some(Sink::Gzip(w)) => w.flush(),
            Some(Sink::Zlib(w)) => w.flush(),
            None => Ok(()),
        };
        result.map_err(|source| self.write_error(source))
    }

    /// Ends the stream (writing the compressed trailer), flushes and returns the output.
    pub fn finish(mut self) -> Result<W> {
        let sink = self.sink.take().expect("finish consumes the writer");
        let out = match sink {
            Sink::Plain(w) => Ok(w),
            Sink::Gzip(w) => w.finish(),
            Sink::Zlib(w) => w.finish(),
        }
        .map_err(|source| self.write_error(source))?;
        out.into_inner()
            .map_err(|e| self.write_error(e.into_error()))
    }

    fn write_error(&self, source: io::Error) -> Error {
        Error::Write {
            file: self.name.clone(),
            source,
        }
    }
}

impl<W: Write> Drop for TfRecordWriter<W> {
    /// Finishes the stream if [`finish`](TfRecordWriter::finish) was not called. Errors
    /// cannot be reported from `drop`; call `finish` to see them.
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            let _ = match sink {
                Sink::Plain(mut w) => w.flush(),
                Sink::Gzip(w) => w.finish().and_then(|mut w| w.flush()),
                Sink::Zlib(w) => w.finish().and_then(|mut w| w.flush()),
            };
        }
    }
}

impl<W: Write> std::fmt::Debug for TfRecordWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TfRecordWriter")
            .field("name", &self.name)
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}
