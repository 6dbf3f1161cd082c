//! The streaming TFRecord reader.

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::Path;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use flate2::read::{MultiGzDecoder, ZlibDecoder};

use super::chunks;
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
/// It reads the input in large blocks into a buffer (a chunk) and hands out each record as a
/// [`Bytes`] slice of it, so records are neither copied nor allocated one by one; a chunk is
/// recycled (by any reader of the process) once the records handed out from it are dropped. Both checksums of every record are
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
    /// Unconsumed bytes of the uncompressed stream, a slice of the current chunk; `buf[0]`
    /// is at stream offset `offset`.
    buf: Bytes,
    offset: u64,
    index: u64,
    eof: bool,
    /// An input error that came after the bytes `buf` ends with: reported when more bytes
    /// are needed (the records before it are returned first).
    failed: Option<Error>,
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
        let file = File::open(path).map_err(|error| Error::Io {
            file: name.clone(),
            offset: 0,
            error,
        })?;
        Ok(TfRecordReader::new(file, name, options))
    }
}

/// The reader of a whole file already in memory, as [`TfRecordReader::over_file`] makes it.
pub type BoxedTfRecordReader = TfRecordReader<Box<dyn Read + Send>>;

impl BoxedTfRecordReader {
    /// A reader of a whole file already in memory (a mapped file, say). The compression
    /// `options` name is resolved on `data`'s first bytes: records of an uncompressed file
    /// are slices of `data` ([`over_bytes`](Self::over_bytes)), a compressed file is read
    /// through its decoder.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use sluice_proto::tfrecord::{Compression, ReaderOptions, TfRecordReader, TfRecordWriter};
    ///
    /// let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
    /// w.write_record(b"hello").unwrap();
    /// let data = Bytes::from(w.finish().unwrap());
    /// let records: Vec<_> = TfRecordReader::over_file(data.clone(), "mem", ReaderOptions::default())
    ///     .collect::<Result<_, _>>()
    ///     .unwrap();
    /// assert_eq!(&records[0].data[..], b"hello");
    /// // A slice of the file's bytes, not a copy.
    /// assert_eq!(records[0].data.as_ptr(), data[12..].as_ptr());
    /// ```
    pub fn over_file(data: Bytes, name: impl Into<Arc<str>>, options: ReaderOptions) -> Self {
        Self::over_file_from(data, name, options, None)
    }

    /// [`over_file`](Self::over_file), entered at `start` = `(index, offset)` (a reader
    /// resuming the file part way: record `index` starts at byte `offset`) when the file is
    /// uncompressed; a compressed file cannot be entered part way and is read from its
    /// start. An offset past the end reads as the end, as a seek there would. Records and
    /// errors are numbered and placed as from the file's start.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use sluice_proto::tfrecord::{Compression, ReaderOptions, TfRecordReader, TfRecordWriter};
    ///
    /// let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
    /// w.write_record(b"one").unwrap();
    /// w.write_record(b"two").unwrap();
    /// let data = Bytes::from(w.finish().unwrap());
    /// // Record 1 starts after record 0's 12-byte header, 3 bytes and 4-byte footer.
    /// let mut r = TfRecordReader::over_file_from(data, "mem", ReaderOptions::default(), Some((1, 19)));
    /// let record = r.next().unwrap().unwrap();
    /// assert_eq!((&record.data[..], record.index, record.offset), (&b"two"[..], 1, 19));
    /// assert!(r.next().is_none());
    /// ```
    pub fn over_file_from(
        data: Bytes,
        name: impl Into<Arc<str>>,
        options: ReaderOptions,
        start: Option<(u64, u64)>,
    ) -> Self {
        if options.compression.resolve(&data) != Compression::None {
            return TfRecordReader::new(Box::new(data.reader()), name, options);
        }
        let rest: Box<dyn Read + Send> = Box::new(io::empty());
        match start {
            Some((index, offset)) => {
                let from = usize::try_from(offset).map_or(data.len(), |o| o.min(data.len()));
                TfRecordReader::over_bytes(data.slice(from..), rest, name, options)
                    .starting_at(offset, index)
            }
            None => TfRecordReader::over_bytes(data, rest, name, options),
        }
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
            buf: Bytes::new(),
            offset: 0,
            index: 0,
            eof: false,
            failed: None,
            done: false,
            records: 0,
            record_bytes: 0,
            skipped: 0,
            skipped_log: Vec::new(),
        }
    }

    /// A reader of an uncompressed stream that begins with `data`, bytes already in memory (a
    /// mapped file, say), and goes on with `rest` (usually empty): records inside `data` are
    /// slices of it, not copies. The configured compression is ignored (taken to be none);
    /// [`starting_at`](Self::starting_at) places `data` part way into a file.
    pub fn over_bytes(
        data: Bytes,
        rest: R,
        name: impl Into<Arc<str>>,
        options: ReaderOptions,
    ) -> Self {
        let mut reader = TfRecordReader::new(rest, name, options);
        reader.options.compression = Compression::None;
        reader.compression = Compression::None;
        reader.input = reader.raw.take().map(Input::Plain);
        reader.buf = data;
        reader
    }

    /// This reader over an uncompressed stream whose `input` starts at byte `offset` of the
    /// file, where record `index` starts (a reader resuming a file part way): records and
    /// errors are numbered and placed as from the file's start. Compression is taken to be
    /// none (a compressed stream cannot be entered part way).
    pub fn starting_at(mut self, offset: u64, index: u64) -> Self {
        self.options.compression = Compression::None;
        self.compression = Compression::None;
        self.offset = offset;
        self.index = index;
        self
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

    /// The index the next record gets: records returned and skipped before it (from the
    /// file's start, also for a reader [`starting_at`](Self::starting_at) a later record).
    pub fn next_index(&self) -> u64 {
        self.index
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
            self.buf = Bytes::new();
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
            let data = self.buf.slice(HEADER_LEN..HEADER_LEN + data_len);
            self.buf.advance(total);
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
                        Err(error) => {
                            return Err(Error::Io {
                                file: self.name.to_string(),
                                offset: 0,
                                error,
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
                self.buf = Bytes::from(prefix);
                Input::Plain(raw)
            }
        });
        Ok(())
    }

    /// Reads until `buf` holds at least `n` bytes or the input ends.
    ///
    /// Each round takes a chunk (see [`chunks`]), copies the unconsumed bytes to its start
    /// (at most one partial record, as `n` is at most one record's size) and reads into the
    /// rest: from a file until the chunk is full (one `read` call, usually), from a
    /// decompressor until it is full too (a GZIP/ZLIB decoder returns ~32 KiB a call, and a
    /// chunk a record pins should be full of records, not mostly empty), from other inputs
    /// (a pipe, a socket) until `n` bytes are there and a read returns less than it was
    /// offered (more may not come soon). The chunk is then frozen: the records are slices of it.
    fn fill(&mut self, n: usize) -> Result<()> {
        while self.buf.len() < n && !self.eof {
            if let Some(error) = self.failed.take() {
                return Err(error);
            }
            let len = self.buf.len();
            // Grow at most by doubling per round, so a header claiming a huge length
            // allocates only as its data actually arrives, never the claimed size up front.
            let size = len + (n - len).min(len).max(self.options.buffer_size).max(1);
            let mut chunk = chunks::take(size);
            chunk[..len].copy_from_slice(&self.buf);
            let compressed = !matches!(self.input, Some(Input::Plain(_)));
            let input = self.input.as_mut().expect("started");
            let mut filled = len;
            let result = loop {
                let offered = size - filled;
                match input.read(&mut chunk[filled..size]) {
                    Ok(0) => {
                        self.eof = true;
                        break Ok(());
                    }
                    Ok(k) => {
                        filled += k;
                        if filled == size || (filled >= n && k < offered && !compressed) {
                            break Ok(());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => break Err(error),
                }
            };
            self.buf = chunks::freeze(chunk, filled);
            if let Err(error) = result {
                let file = self.name.to_string();
                let offset = self.offset + filled as u64;
                self.failed = Some(match self.compression {
                    Compression::Gzip | Compression::Zlib => Error::Decompress {
                        file,
                        compression: self.compression.name(),
                        offset,
                        error,
                    },
                    _ => Error::Io {
                        file,
                        offset,
                        error,
                    },
                });
                // Reported now unless the bytes read before it are enough for now.
                if filled < n {
                    return Err(self.failed.take().expect("just set"));
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
    use std::io::{self, Read};

    use super::*;
    use crate::tfrecord::TfRecordWriter;

    /// An uncompressed stream of `records`.
    #[test]
    fn a_reader_starting_at_a_record_numbers_and_places_as_from_the_start() {
        let bytes = file(&[b"a", b"bb", b"ccc", b"dddd"]);
        let all: Vec<Record> = TfRecordReader::new(&bytes[..], "f", ReaderOptions::default())
            .collect::<Result<_>>()
            .unwrap();
        let third = &all[2];
        let at = third.offset as usize;
        let rest: Vec<Record> = TfRecordReader::new(&bytes[at..], "f", ReaderOptions::default())
            .starting_at(third.offset, third.index)
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(rest, all[2..]);
        let mut r = TfRecordReader::new(&bytes[at..], "f", ReaderOptions::default())
            .starting_at(third.offset, 2);
        r.read_record().unwrap();
        assert_eq!(r.next_index(), 3);
    }

    fn file(records: &[&[u8]]) -> Vec<u8> {
        let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
        for r in records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap()
    }

    /// A record header claiming `length` bytes, with a valid length checksum.
    fn header(length: u64) -> Vec<u8> {
        let len = length.to_le_bytes();
        let mut h = len.to_vec();
        h.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
        h
    }

    /// Reads `bytes` to the end: the records' data and the error that ended the stream.
    fn read_all(bytes: &[u8], options: ReaderOptions) -> (Vec<Bytes>, Option<Error>) {
        let mut reader = TfRecordReader::new(bytes, "t", options);
        let mut records = Vec::new();
        loop {
            match reader.read_record() {
                Ok(Some(r)) => records.push(r.data),
                Ok(None) => return (records, None),
                Err(e) => {
                    // Fused: nothing more after an error.
                    assert!(matches!(reader.read_record(), Ok(None)));
                    assert!(reader.next().is_none());
                    return (records, Some(e));
                }
            }
        }
    }

    fn plain() -> ReaderOptions {
        ReaderOptions::default().with_compression(Compression::None)
    }

    #[test]
    fn a_partial_header_is_a_truncated_record_at_its_start() {
        let good = file(&[b"abc"]);
        assert_eq!(good.len(), 19);
        for extra in 1..HEADER_LEN {
            // After a record: the record comes back, then the partial header is reported.
            let mut bytes = good.clone();
            bytes.extend(std::iter::repeat_n(0u8, extra));
            for options in [plain(), ReaderOptions::default()] {
                let (records, err) = read_all(&bytes, options);
                assert_eq!(records, [&b"abc"[..]]);
                match err {
                    Some(Error::TruncatedRecord {
                        offset: 19,
                        index: 1,
                        ..
                    }) => {}
                    other => panic!("{extra} trailing bytes: {other:?}"),
                }
            }
            // Alone: truncated at 0 (zero bytes are not detected as GZIP or ZLIB).
            let (records, err) = read_all(&bytes[19..], ReaderOptions::default());
            assert!(records.is_empty());
            assert!(matches!(
                err,
                Some(Error::TruncatedRecord {
                    offset: 0,
                    index: 0,
                    ..
                })
            ));
            assert_eq!(
                err.unwrap().tensorflow_message().unwrap(),
                "truncated record at 0"
            );
        }
    }

    #[test]
    fn truncated_data_or_footer_is_reported_at_the_record_start() {
        let bytes = file(&[b"first", b"second"]);
        let second = 12 + 5 + 4;
        for cut in second + HEADER_LEN..bytes.len() {
            let (records, err) = read_all(&bytes[..cut], plain());
            assert_eq!(records, [&b"first"[..]]);
            let err = err.expect("truncated");
            assert!(
                matches!(
                    err,
                    Error::TruncatedRecord {
                        offset: 21,
                        index: 1,
                        ..
                    }
                ),
                "cut at {cut}: {err:?}"
            );
            assert_eq!(err.to_string(), "t: truncated record at 21");
        }
    }

    #[test]
    fn a_bad_length_checksum_is_corrupted_at_the_record_start() {
        let mut bytes = file(&[b"one", b"two"]);
        // Damage the second record's length CRC (bytes 19+8..19+12).
        bytes[19 + 9] ^= 0x40;
        for policy in [CorruptionPolicy::Fail, CorruptionPolicy::SkipBadData] {
            let (records, err) = read_all(&bytes, plain().with_corruption_policy(policy));
            assert_eq!(records, [&b"one"[..]]);
            match err {
                Some(Error::CorruptedRecord {
                    offset: 19,
                    index: 1,
                    checksum: Checksum::Length,
                    ..
                }) => {}
                other => panic!("{other:?}"),
            }
        }
        // Damaging the length itself is the same error.
        let mut bytes = file(&[b"one"]);
        bytes[0] ^= 1;
        let (records, err) = read_all(&bytes, plain());
        assert!(records.is_empty());
        assert!(matches!(
            err,
            Some(Error::CorruptedRecord {
                offset: 0,
                checksum: Checksum::Length,
                ..
            })
        ));
    }

    #[test]
    fn a_bad_data_checksum_fails_at_start_plus_12_and_does_not_advance() {
        let mut bytes = file(&[b"one", b"two", b"three"]);
        bytes[19 + 12] ^= 0x80; // the second record's first data byte
        let mut reader = TfRecordReader::new(&bytes[..], "t", plain());
        assert_eq!(reader.read_record().unwrap().unwrap().data, &b"one"[..]);
        let err = reader.read_record().unwrap_err();
        assert!(matches!(
            err,
            Error::CorruptedRecord {
                offset: 31,
                index: 1,
                checksum: Checksum::Data,
                ..
            }
        ));
        assert_eq!(reader.stream_offset(), 19);
        assert_eq!(reader.records(), 1);
        assert_eq!(reader.skipped(), 0);
        assert!(reader.read_record().unwrap().is_none());
    }

    #[test]
    fn a_length_above_the_limit_is_refused_before_allocating() {
        let mut bytes = file(&[b"ok"]);
        bytes.extend_from_slice(&header(101));
        bytes.extend_from_slice(&[0; 105]); // even a complete record is refused
        let (records, err) = read_all(&bytes, plain().with_max_record_len(100));
        assert_eq!(records, [&b"ok"[..]]);
        match err {
            Some(e @ Error::RecordTooLarge { .. }) => {
                let Error::RecordTooLarge {
                    offset,
                    index,
                    length,
                    limit,
                    ..
                } = e
                else {
                    unreachable!()
                };
                assert_eq!((offset, index, length, limit), (18, 1, 101, 100));
                assert!(e.to_string().contains("claims 101 bytes"), "{e}");
                assert_eq!(e.tensorflow_message(), None);
            }
            other => panic!("{other:?}"),
        }
        // A record of exactly the limit is fine.
        let bytes = file(&[&[7; 100]]);
        let (records, err) = read_all(&bytes, plain().with_max_record_len(100));
        assert!(err.is_none());
        assert_eq!(records[0].len(), 100);
        // An absurd length under the default limit (1 GiB) allocates nothing.
        for length in [u64::MAX, 1 << 40, DEFAULT_MAX_RECORD_LEN + 1] {
            let (records, err) = read_all(&header(length), ReaderOptions::default());
            assert!(records.is_empty());
            assert!(
                matches!(err, Some(Error::RecordTooLarge { length: l, .. }) if l == length),
                "{length}"
            );
        }
    }

    #[test]
    fn an_absurd_length_without_a_limit_is_an_error_not_a_panic() {
        // `max_record_len: u64::MAX` switches the limit off; a header claiming (close to)
        // u64::MAX bytes must still be an error, never an arithmetic overflow.
        for length in [u64::MAX, u64::MAX - 15, u64::MAX - 16, isize::MAX as u64] {
            let (records, err) = read_all(&header(length), plain().with_max_record_len(u64::MAX));
            assert!(records.is_empty());
            assert!(
                matches!(err, Some(Error::RecordTooLarge { length: l, .. }) if l == length),
                "{length}: {err:?}"
            );
        }
    }

    #[test]
    fn the_skip_log_is_capped_but_every_skip_is_counted() {
        let n = SKIPPED_LOG_LIMIT + 5;
        let mut bytes = Vec::new();
        for _ in 0..n {
            // Empty records with a wrong data checksum.
            bytes.extend_from_slice(&header(0));
            bytes.extend_from_slice(&(masked_crc32c(b"") ^ 1).to_le_bytes());
        }
        bytes.extend_from_slice(&file(&[b"last"]));
        let options = plain().with_corruption_policy(CorruptionPolicy::SkipBadData);
        let mut reader = TfRecordReader::new(&bytes[..], "t", options);
        let records: Vec<_> = reader.by_ref().collect::<Result<_>>().unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].data, &b"last"[..]);
        assert_eq!(records[0].index, n as u64);
        assert_eq!(records[0].offset, 16 * n as u64);
        assert_eq!(reader.skipped(), n as u64);
        assert_eq!(reader.skipped_records().len(), SKIPPED_LOG_LIMIT);
        assert_eq!(
            reader.skipped_records()[7],
            SkippedRecord {
                offset: 7 * 16,
                index: 7,
                length: 0
            }
        );
        assert_eq!(reader.records(), 1);
        assert_eq!(reader.record_bytes(), 4);
        assert_eq!(reader.stream_offset(), bytes.len() as u64);
    }

    #[test]
    fn counters_and_detected_compression() {
        let mut gz = TfRecordWriter::new(Vec::new(), Compression::Gzip).unwrap();
        gz.write_record(b"ab").unwrap();
        gz.write_record(b"").unwrap();
        let gz = gz.finish().unwrap();
        let mut reader = TfRecordReader::new(&gz[..], "t", ReaderOptions::default());
        assert_eq!(reader.compression(), Compression::Auto);
        assert_eq!(reader.name(), "t");
        let records: Vec<_> = reader.by_ref().collect::<Result<_>>().unwrap();
        assert_eq!(reader.compression(), Compression::Gzip);
        assert_eq!((records[1].offset, records[1].index), (18, 1));
        assert_eq!(reader.records(), 2);
        assert_eq!(reader.record_bytes(), 2);
        assert_eq!(reader.stream_offset(), 18 + 16);
        assert!(format!("{reader:?}").contains("Gzip"));
    }

    #[test]
    fn any_buffer_size_including_zero_reads_the_same_records() {
        let records: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8; i * 7]).collect();
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let bytes = file(&refs);
        for buffer_size in [0, 1, 2, 11, 12, 13, 16, 100, 1 << 20] {
            let options = ReaderOptions {
                buffer_size,
                ..plain()
            };
            let (got, err) = read_all(&bytes, options);
            assert!(err.is_none());
            assert_eq!(got, records, "buffer_size {buffer_size}");
        }
    }

    /// A reader that hands out one byte at a time, interrupted before every byte, then
    /// fails with `fail` (or ends) when its data runs out.
    struct Stuttering {
        data: Vec<u8>,
        pos: usize,
        interrupt: bool,
        fail: Option<io::ErrorKind>,
    }

    impl Read for Stuttering {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            if self.pos == self.data.len() {
                return match self.fail {
                    Some(kind) => Err(io::Error::new(kind, "disk on fire")),
                    None => Ok(0),
                };
            }
            buf[0] = self.data[self.pos];
            self.pos += 1;
            Ok(1)
        }
    }

    #[test]
    fn interrupted_reads_are_retried_and_io_errors_are_reported_with_the_offset() {
        let bytes = file(&[b"x", b"yz"]);
        for compression in [Compression::Auto, Compression::None] {
            let input = Stuttering {
                data: bytes.clone(),
                pos: 0,
                interrupt: false,
                fail: None,
            };
            let options = ReaderOptions::default().with_compression(compression);
            let got: Vec<_> = TfRecordReader::new(input, "t", options)
                .map(|r| r.unwrap().data)
                .collect();
            assert_eq!(got, [&b"x"[..], &b"yz"[..]]);
        }
        // The input fails inside the second record: reported as I/O at the bytes read.
        let input = Stuttering {
            data: bytes[..25].to_vec(),
            pos: 0,
            interrupt: false,
            fail: Some(io::ErrorKind::BrokenPipe),
        };
        let (records, err) = {
            let mut reader = TfRecordReader::new(input, "t", plain());
            let first = reader.read_record().unwrap().unwrap();
            (first, reader.read_record().unwrap_err())
        };
        assert_eq!(records.data, &b"x"[..]);
        match err {
            Error::Io { offset, error, .. } => {
                assert_eq!(offset, 25);
                assert_eq!(error.kind(), io::ErrorKind::BrokenPipe);
            }
            other => panic!("{other:?}"),
        }
        // The same with auto-detection failing while reading the first bytes.
        let input = Stuttering {
            data: vec![],
            pos: 0,
            interrupt: false,
            fail: Some(io::ErrorKind::BrokenPipe),
        };
        let (_, err) = {
            let mut reader = TfRecordReader::new(input, "t", ReaderOptions::default());
            ((), reader.read_record().unwrap_err())
        };
        assert!(matches!(err, Error::Io { offset: 0, .. }), "{err:?}");
    }

    #[test]
    fn damaged_compressed_streams_are_decompress_errors() {
        for compression in [Compression::Gzip, Compression::Zlib] {
            let mut w = TfRecordWriter::new(Vec::new(), compression).unwrap();
            w.write_record(&[42; 1000]).unwrap();
            let mut bytes = w.finish().unwrap();
            // The last byte is in the GZIP (CRC32, size) or ZLIB (Adler-32) trailer.
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            let (records, err) = read_all(&bytes, ReaderOptions::default());
            // The record itself may come back (its own checksums are good), never other data.
            assert!(records.iter().all(|r| r[..] == [42; 1000]), "{compression}");
            assert!(records.len() <= 1);
            match err {
                Some(e @ Error::Decompress { .. }) => {
                    let prefix = format!("t: {compression} stream is damaged");
                    assert!(e.to_string().starts_with(&prefix), "{e}");
                }
                other => panic!("{compression}: {other:?}"),
            }
        }
    }

    /// Counts the `read` calls made on it.
    struct CountingReads<'a> {
        data: &'a [u8],
        reads: usize,
    }

    impl Read for CountingReads<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            self.data.read(buf)
        }
    }

    #[test]
    fn small_records_are_read_in_buffer_sized_reads_not_one_read_each() {
        let records: Vec<Vec<u8>> = (0..2000).map(|i| vec![i as u8; 100]).collect();
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let bytes = file(&refs);
        let mut input = CountingReads {
            data: &bytes,
            reads: 0,
        };
        let options = ReaderOptions {
            buffer_size: 64 << 10,
            ..plain()
        };
        let n = TfRecordReader::new(&mut input, "small", options).count();
        assert_eq!(n, 2000);
        // 232 KB in 64 KiB reads: a handful of calls, not one per record.
        assert!(input.reads <= 10, "{} reads", input.reads);
    }
}
