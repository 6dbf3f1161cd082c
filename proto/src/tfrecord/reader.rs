//! The streaming TFRecord reader.

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::Path;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use flate2::read::{MultiGzDecoder, ZlibDecoder};

use super::compression::Compression;
use super::crc::masked_crc32c;
use crate::error::{Checksum, Error, Result};

/// Bytes of a record header: u64 length + masked CRC32C of the length.
pub const HEADER_LEN: usize = 12;
/// Bytes of a record footer: masked CRC32C of the data.
pub const FOOTER_LEN: usize = 4;
/// Default [`ReaderOptions::max_record_len`]: 1 GiB.
pub const DEFAULT_MAX_RECORD_LEN: u64 = 1 << 30;
/// Default [`ReaderOptions::buffer_size`]: 256 KiB.
pub const DEFAULT_BUFFER_SIZE: usize = 256 << 10;
/// How many skipped records a reader remembers individually (all are counted).
pub const SKIPPED_LOG_LIMIT: usize = 1024;

/// What to do with a record whose data checksum is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorruptionPolicy {
    /// Stop with [`Error::CorruptedRecord`], as TensorFlow does.
    #[default]
    Fail,
    /// Skip the record (its length checksum was good, so the next record is found exactly),
    /// count it in [`TfRecordReader::skipped`], and go on. A bad *length* checksum, a
    /// truncated record or an oversized length still ends the stream with an error: the
    /// reader never guesses where the next record might start.
    SkipBadData,
}

/// Options of a [`TfRecordReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Compression of the stream; [`Compression::Auto`] (the default) detects it.
    pub compression: Compression,
    /// Largest record length accepted; a header claiming more is an
    /// [`Error::RecordTooLarge`] and nothing is allocated for it. Default 1 GiB.
    pub max_record_len: u64,
    /// What a bad data checksum does. Default: fail.
    pub on_corruption: CorruptionPolicy,
    /// How many bytes to read from the input at a time. Default 256 KiB.
    pub buffer_size: usize,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            compression: Compression::Auto,
            max_record_len: DEFAULT_MAX_RECORD_LEN,
            on_corruption: CorruptionPolicy::Fail,
            buffer_size: DEFAULT_BUFFER_SIZE,
        }
    }
}

impl ReaderOptions {
    /// These options with `compression`.
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// These options with `on_corruption`.
    pub fn with_corruption_policy(mut self, policy: CorruptionPolicy) -> Self {
        self.on_corruption = policy;
        self
    }

    /// These options with `max_record_len`.
    pub fn with_max_record_len(mut self, max: u64) -> Self {
        self.max_record_len = max;
        self
    }
}

/// One record read from a TFRecord stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's bytes: a slice of the reader's shared buffer (cloning it is cheap and
    /// slicing it copies nothing).
    pub data: Bytes,
    /// Offset of the record's header in the uncompressed stream.
    pub offset: u64,
    /// Index of the record in the stream, counting skipped records.
    pub index: u64,
}

/// A record skipped under [`CorruptionPolicy::SkipBadData`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkippedRecord {
    /// Offset of the record's header in the uncompressed stream.
    pub offset: u64,
    /// Index of the record in the stream.
    pub index: u64,
    /// The record's length, from its (valid) header.
    pub length: u64,
}

/// The decompressing source of a reader.
enum Input<R: Read> {
    Plain(R),
    Gzip(MultiGzDecoder<io::Chain<Cursor<Vec<u8>>, R>>),
    Zlib(ZlibDecoder<io::Chain<Cursor<Vec<u8>>, R>>),
}

impl<R: Read> Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Plain(r) => r.read(buf),
            Input::Gzip(r) => r.read(buf),
            Input::Zlib(r) => r.read(buf),
        }
    }
}

/// A streaming reader of TFRecord files, byte-compatible with TensorFlow's `RecordReader`.
///
/// It reads the input in large blocks into a shared buffer and hands out each record as a
/// [`Bytes`] slice of it, so records are neither copied nor allocated one by one; the buffer
/// is reused once the records handed out are dropped. Both checksums of every record are
/// verified. It is an [`Iterator`] of `Result<Record>` that ends after the first error (or at
/// the clean end of the stream: zero bytes left at a record boundary).
///
/// ```
/// use sluice_proto::tfrecord::{Compression, ReaderOptions, TfRecordReader, TfRecordWriter};
///
/// let mut file = Vec::new();
/// let mut writer = TfRecordWriter::new(&mut file, Compression::Gzip)?;
/// writer.write_record(b"first")?;
/// writer.write_record(b"second")?;
/// writer.finish()?;
///
/// // `ReaderOptions::default()` detects the compression.
/// let reader = TfRecordReader::new(&file[..], "in-memory", ReaderOptions::default());
/// let records = reader.map(|r| r.map(|r| r.data)).collect::<Result<Vec<_>, _>>()?;
/// assert_eq!(records, [&b"first"[..], &b"second"[..]]);
/// # Ok::<(), sluice_proto::Error>(())
/// ```
pub struct TfRecordReader<R: Read> {
    input: Option<Input<R>>,
    raw: Option<R>,
    name: Arc<str>,
    options: ReaderOptions,
    compression: Compression,
    /// Unconsumed bytes of the uncompressed stream; `buf[0]` is at stream offset `offset`.
    buf: BytesMut,
    offset: u64,
    index: u64,
    eof: bool,
    done: bool,
    records: u64,
    record_bytes: u64,
    skipped: u64,
    skipped_log: Vec<SkippedRecord>,
}

impl TfRecordReader<File> {
    /// Opens a file. Its path (as given) names it in errors.
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|source| Error::Io {
            file: name.clone(),
            offset: 0,
            source,
        })?;
        Ok(TfRecordReader::new(file, name, options))
    }
}

impl<R: Read> TfRecordReader<R> {
    /// A reader over any [`Read`]; `name` identifies the stream in errors.
    pub fn new(input: R, name: impl Into<Arc<str>>, options: ReaderOptions) -> Self {
        TfRecordReader {
            input: None,
            raw: Some(input),
            name: name.into(),
            options,
            compression: options.compression,
            buf: BytesMut::new(),
            offset: 0,
            index: 0,
            eof: false,
            done: false,
            records: 0,
            record_bytes: 0,
            skipped: 0,
            skipped_log: Vec::new(),
        }
    }

    /// The stream's name, as used in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compression in use: the configured one, or what `auto` detected once the first
    /// record has been asked for (`Auto` before that).
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Records returned so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Data bytes of the records returned so far (without headers and footers).
    pub fn record_bytes(&self) -> u64 {
        self.record_bytes
    }

    /// Bytes of the uncompressed stream consumed so far (headers, data and footers of
    /// returned and skipped records).
    pub fn stream_offset(&self) -> u64 {
        self.offset
    }

    /// Records skipped under [`CorruptionPolicy::SkipBadData`].
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The first [`SKIPPED_LOG_LIMIT`] skipped records, in order.
    pub fn skipped_records(&self) -> &[SkippedRecord] {
        &self.skipped_log
    }

    /// Reads the next record: `Ok(None)` at the clean end of the stream. After an error,
    /// every later call returns `Ok(None)`.
    pub fn read_record(&mut self) -> Result<Option<Record>> {
        if self.done {
            return Ok(None);
        }
        let result = self.read_record_inner();
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
            // Release the buffer: a finished reader holds no memory.
            self.buf = BytesMut::new();
        }
        result
    }

    fn read_record_inner(&mut self) -> Result<Option<Record>> {
        if self.input.is_none() {
            self.start()?;
        }
        loop {
            let start = self.offset;
            self.fill(HEADER_LEN)?;
            if self.buf.is_empty() {
                return Ok(None);
            }
            if self.buf.len() < HEADER_LEN {
                // TensorFlow treats a partial header as the end of the file and drops those
                // bytes silently; Sluice reports them (nothing is ever dropped silently).
                return Err(self.truncated(start));
            }
            let length = u64::from_le_bytes(self.buf[..8].try_into().expect("8 bytes"));
            let length_crc = u32::from_le_bytes(self.buf[8..12].try_into().expect("4 bytes"));
            if masked_crc32c(&self.buf[..8]) != length_crc {
                return Err(self.corrupted(start, Checksum::Length));
            }
            if length > self.options.max_record_len {
                return Err(Error::RecordTooLarge {
                    file: self.name.to_string(),
                    offset: start,
                    index: self.index,
                    length,
                    limit: self.options.max_record_len,
                });
            }
            // `length <= max_record_len`, which the caller chose to be allocatable. Even with
            // no limit (`u64::MAX`), the whole record must fit in one buffer: no larger
            // allocation is possible and `HEADER_LEN + length + FOOTER_LEN` must not overflow.
            const MAX_DATA_LEN: usize = isize::MAX as usize - HEADER_LEN - FOOTER_LEN;
            let data_len = usize::try_from(length)
                .ok()
                .filter(|&n| n <= MAX_DATA_LEN)
                .ok_or_else(|| Error::RecordTooLarge {
                    file: self.name.to_string(),
                    offset: start,
                    index: self.index,
                    length,
                    limit: MAX_DATA_LEN as u64,
                })?;
            let total = HEADER_LEN + data_len + FOOTER_LEN;
            self.fill(total)?;
            if self.buf.len() < total {
                // TensorFlow reports a short data read at the record's start.
                return Err(self.truncated(start));
            }
            let data = &self.buf[HEADER_LEN..HEADER_LEN + data_len];
            let data_crc = u32::from_le_bytes(
                self.buf[HEADER_LEN + data_len..total]
                    .try_into()
                    .expect("4 bytes"),
            );
            let index = self.index;
            self.index += 1;
            self.offset += total as u64;
            if masked_crc32c(data) != data_crc {
                match self.options.on_corruption {
                    CorruptionPolicy::Fail => {
                        self.index -= 1;
                        self.offset = start;
                        return Err(self.corrupted(start + HEADER_LEN as u64, Checksum::Data));
                    }
                    CorruptionPolicy::SkipBadData => {
                        self.buf.advance(total);
                        self.skipped += 1;
                        if self.skipped_log.len() < SKIPPED_LOG_LIMIT {
                            self.skipped_log.push(SkippedRecord {
                                offset: start,
                                index,
                                length,
                            });
                        }
                        continue;
                    }
                }
            }
            let data = self
                .buf
                .split_to(total)
                .freeze()
                .slice(HEADER_LEN..HEADER_LEN + data_len);
            self.records += 1;
            self.record_bytes += length;
            return Ok(Some(Record {
                data,
                offset: start,
                index,
            }));
        }
    }

    /// Detects the compression if asked to, and sets up the decoder.
    fn start(&mut self) -> Result<()> {
        let mut raw = self.raw.take().expect("start runs once");
        let mut prefix = Vec::new();
        let compression = match self.options.compression {
            Compression::Auto => {
                // Read up to 12 raw bytes (fewer only at the end of the stream).
                let mut head = [0u8; HEADER_LEN];
                let mut got = 0;
                while got < HEADER_LEN {
                    match raw.read(&mut head[got..]) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(source) => {
                            return Err(Error::Io {
                                file: self.name.to_string(),
                                offset: 0,
                                source,
                            });
                        }
                    }
                }
                prefix.extend_from_slice(&head[..got]);
                Compression::detect(&prefix)
            }
            c => c,
        };
        self.compression = compression;
        self.input = Some(match compression {
            Compression::Gzip => {
                Input::Gzip(MultiGzDecoder::new(Read::chain(Cursor::new(prefix), raw)))
            }
            Compression::Zlib => {
                Input::Zlib(ZlibDecoder::new(Read::chain(Cursor::new(prefix), raw)))
            }
            Compression::None | Compression::Auto => {
                // The prefix is already part of the uncompressed stream.
                self.buf.extend_from_slice(&prefix);
                Input::Plain(raw)
            }
        });
        Ok(())
    }

    /// Reads until `buf` holds at least `n` bytes or the input ends.
    fn fill(&mut self, n: usize) -> Result<()> {
        while self.buf.len() < n && !self.eof {
            let len = self.buf.len();
            self.buf.reserve((n - len).max(self.options.buffer_size));
            // Read into the whole spare capacity. `reserve` reclaims the allocation when the
            // records handed out from it have been dropped, so steady-state reading does not
            // allocate.
            let cap = self.buf.capacity();
            self.buf.resize(cap, 0);
            let input = self.input.as_mut().expect("started");
            match input.read(&mut self.buf[len..]) {
                Ok(0) => {
                    self.buf.truncate(len);
                    self.eof = true;
                }
                Ok(k) => self.buf.truncate(len + k),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.buf.truncate(len),
                Err(source) => {
                    self.buf.truncate(len);
                    let file = self.name.to_string();
                    let offset = self.offset + len as u64;
                    return Err(match self.compression {
                        Compression::Gzip | Compression::Zlib => Error::Decompress {
                            file,
                            compression: self.compression.name(),
                            offset,
                            source,
                        },
                        _ => Error::Io {
                            file,
                            offset,
                            source,
                        },
                    });
                }
            }
        }
        Ok(())
    }

    fn corrupted(&self, offset: u64, checksum: Checksum) -> Error {
        Error::CorruptedRecord {
            file: self.name.to_string(),
            offset,
            index: self.index,
            checksum,
        }
    }

    fn truncated(&self, offset: u64) -> Error {
        Error::TruncatedRecord {
            file: self.name.to_string(),
            offset,
            index: self.index,
        }
    }
}

impl<R: Read> Iterator for TfRecordReader<R> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_record().transpose()
    }
}

impl<R: Read> std::iter::FusedIterator for TfRecordReader<R> {}

impl<R: Read> std::fmt::Debug for TfRecordReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TfRecordReader")
            .field("name", &self.name)
            .field("compression", &self.compression)
            .field("offset", &self.offset)
            .field("index", &self.index)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record header claiming `length` bytes, with a valid length checksum.
    fn header(length: u64) -> Vec<u8> {
        let len = length.to_le_bytes();
        let mut h = len.to_vec();
        h.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
        h
    }

    #[test]
    fn an_absurd_length_without_a_limit_is_an_error_not_a_panic() {
        // `max_record_len: u64::MAX` switches the limit off; a header claiming (close to)
        // u64::MAX bytes must still be an error, never an arithmetic overflow.
        for length in [u64::MAX, u64::MAX - 15, u64::MAX - 16, isize::MAX as u64] {
            let options = ReaderOptions::default()
                .with_compression(Compression::None)
                .with_max_record_len(u64::MAX);
            let bytes = header(length);
            let mut reader = TfRecordReader::new(&bytes[..], "t", options);
            let err = reader.read_record().unwrap_err();
            assert!(
                matches!(err, Error::RecordTooLarge { length: l, .. } if l == length),
                "{length}: {err:?}"
            );
        }
    }
}
