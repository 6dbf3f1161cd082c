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

/// Compressed sinks buffer the records before the encoder too: flate2 zeroes the spare
/// capacity of its output buffer on every `write`, which for three small writes a record
/// cost a third of the time of compressing them.
enum Sink<W: Write> {
    Plain(BufWriter<W>),
    Gzip(BufWriter<GzEncoder<BufWriter<W>>>),
    Zlib(BufWriter<ZlibEncoder<BufWriter<W>>>),
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
        let file = File::create(path).map_err(|error| Error::Write {
            file: name.clone(),
            error,
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
            Compression::Gzip => Sink::Gzip(BufWriter::with_capacity(
                WRITE_BUFFER,
                GzEncoder::new(out, level),
            )),
            Compression::Zlib => Sink::Zlib(BufWriter::with_capacity(
                WRITE_BUFFER,
                ZlibEncoder::new(out, level),
            )),
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
            Sink::Gzip(w) => w
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|w| w.finish()),
            Sink::Zlib(w) => w
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|w| w.finish()),
        }
        .map_err(|source| self.write_error(source))?;
        out.into_inner()
            .map_err(|e| self.write_error(e.into_error()))
    }

    fn write_error(&self, error: io::Error) -> Error {
        Error::Write {
            file: self.name.clone(),
            error,
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
                Sink::Gzip(w) => w
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .and_then(|w| w.finish())
                    .and_then(|mut w| w.flush()),
                Sink::Zlib(w) => w
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .and_then(|w| w.finish())
                    .and_then(|mut w| w.flush()),
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::io::Read;
    use std::rc::Rc;

    use super::*;
    use crate::tfrecord::{ReaderOptions, TfRecordReader};

    /// A `Write` whose bytes stay visible while the writer owns it.
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn bytes(&self) -> Vec<u8> {
            self.0.borrow().clone()
        }
    }

    /// A `Write` that fails after `left` bytes.
    struct Failing {
        left: usize,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::Error::other("disk full"));
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Reads a whole stream, as `(records, error)`.
    fn read(bytes: &[u8], compression: Compression) -> (Vec<Vec<u8>>, Option<Error>) {
        let options = ReaderOptions::default().with_compression(compression);
        let mut records = Vec::new();
        for r in TfRecordReader::new(bytes, "t", options) {
            match r {
                Ok(r) => records.push(r.data.to_vec()),
                Err(e) => return (records, Some(e)),
            }
        }
        (records, None)
    }

    #[test]
    fn auto_compression_is_refused_for_writing() {
        let err = TfRecordWriter::new(Vec::new(), Compression::Auto).unwrap_err();
        assert!(matches!(err, Error::AutoCompressionForWriter));
        assert!(err.to_string().contains("only valid for reading"));
        // `create` refuses before creating the file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tfrecord");
        let err = TfRecordWriter::create(&path, Compression::Auto).unwrap_err();
        assert!(matches!(err, Error::AutoCompressionForWriter));
        assert!(!path.exists());
    }

    #[test]
    fn the_record_format_is_exact() {
        let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
        w.write_record(b"").unwrap();
        w.write_record(b"hi").unwrap();
        assert_eq!(w.records(), 2);
        let bytes = w.finish().unwrap();
        let mut want = Vec::new();
        for data in [&b""[..], b"hi"] {
            let len = (data.len() as u64).to_le_bytes();
            want.extend_from_slice(&len);
            want.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
            want.extend_from_slice(data);
            want.extend_from_slice(&masked_crc32c(data).to_le_bytes());
        }
        assert_eq!(bytes, want);
    }

    #[test]
    fn dropping_an_unfinished_writer_still_ends_the_stream() {
        let records: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 300]).collect();
        for compression in [Compression::None, Compression::Gzip, Compression::Zlib] {
            let out = Shared::default();
            {
                let mut w = TfRecordWriter::new(out.clone(), compression).unwrap();
                for r in &records {
                    w.write_record(r).unwrap();
                }
                // Dropped here without `finish`.
            }
            let bytes = out.bytes();
            let (got, err) = read(&bytes, compression);
            assert!(err.is_none(), "{compression}: {err:?}");
            assert_eq!(got, records, "{compression}");
            // The compressed trailer is there: an independent decoder accepts the stream.
            let mut plain = Vec::new();
            match compression {
                Compression::Gzip => {
                    flate2::read::GzDecoder::new(&bytes[..])
                        .read_to_end(&mut plain)
                        .unwrap();
                }
                Compression::Zlib => {
                    flate2::read::ZlibDecoder::new(&bytes[..])
                        .read_to_end(&mut plain)
                        .unwrap();
                }
                _ => plain = bytes.clone(),
            }
            assert_eq!(plain.len(), records.len() * (16 + 300));
        }
    }

    #[test]
    fn an_empty_compressed_stream_is_valid() {
        for compression in [Compression::Gzip, Compression::Zlib] {
            let bytes = TfRecordWriter::new(Vec::new(), compression)
                .unwrap()
                .finish()
                .unwrap();
            assert!(!bytes.is_empty(), "{compression}: header and trailer");
            for c in [compression, Compression::Auto] {
                let (got, err) = read(&bytes, c);
                assert!(got.is_empty() && err.is_none(), "{compression}: {err:?}");
            }
        }
    }

    #[test]
    fn flush_makes_the_records_so_far_readable_mid_stream() {
        for compression in [Compression::None, Compression::Gzip, Compression::Zlib] {
            let out = Shared::default();
            let mut w = TfRecordWriter::new(out.clone(), compression).unwrap();
            w.write_record(b"first").unwrap();
            w.write_record(b"second").unwrap();
            // Buffered: nothing (or only a GZIP header) has reached the output yet.
            assert!(out.bytes().len() < 12, "{compression}");
            w.flush().unwrap();
            let partial = out.bytes();
            let (got, err) = read(&partial, compression);
            assert_eq!(got, [&b"first"[..], b"second"], "{compression}");
            match compression {
                // A flushed stream is complete at a record boundary.
                Compression::None => assert!(err.is_none()),
                // A synced but unfinished compressed stream has no trailer yet.
                _ => assert!(
                    matches!(err, Some(Error::Decompress { offset: 43, .. })),
                    "{compression}: {err:?}"
                ),
            }
            // Writing goes on after a flush, and the finished stream holds everything.
            w.write_record(b"third").unwrap();
            w.flush().unwrap();
            w.flush().unwrap();
            let bytes = w.finish().unwrap().bytes();
            assert!(bytes.starts_with(&partial));
            let (got, err) = read(&bytes, Compression::Auto);
            assert!(err.is_none(), "{compression}: {err:?}");
            assert_eq!(got, [&b"first"[..], b"second", b"third"]);
        }
    }

    #[test]
    fn write_errors_name_the_stream() {
        for compression in [Compression::None, Compression::Gzip, Compression::Zlib] {
            let mut w = TfRecordWriter::new(Failing { left: 10 }, compression).unwrap();
            // Records larger than the output buffer are written through to the failing sink
            // (compressed ones as soon as the compressor's output exceeds the buffer).
            let big: Vec<u8> = (0..WRITE_BUFFER as u32 * 3)
                .map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[3])
                .collect();
            let err = w
                .write_record(&big)
                .and_then(|()| w.flush())
                .err()
                .or_else(|| w.finish().err())
                .expect("the sink fails");
            assert!(matches!(err, Error::Write { .. }), "{compression}: {err:?}");
            assert_eq!(err.file(), Some("<stream>"));
            assert!(err.to_string().contains("disk full"), "{err}");
        }
    }

    #[test]
    fn create_writes_a_file_named_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.tfrecord.zlib");
        let mut w = TfRecordWriter::create(&path, Compression::Zlib).unwrap();
        w.write_record(b"x").unwrap();
        assert!(format!("{w:?}").contains("out.tfrecord.zlib"));
        w.finish().unwrap();
        let (got, err) = read(&std::fs::read(&path).unwrap(), Compression::Auto);
        assert!(err.is_none());
        assert_eq!(got, [b"x"]);
        // A directory that does not exist: a write error naming the path.
        let missing = dir.path().join("no/such/dir/x.tfrecord");
        let err = TfRecordWriter::create(&missing, Compression::None).unwrap_err();
        assert!(matches!(err, Error::Write { .. }));
        assert_eq!(err.file(), Some(missing.display().to_string().as_str()));
    }
}
