//! Record indexes of TFRecord shards: where each record starts, found by scanning the
//! framing once and checking both CRCs, then kept on disk for the next run.
//!
//! An index holds the `N + 1` boundaries of a shard's `N` records (the start of each record,
//! then the end of the last, which is the file's size): record `i` is at `bounds[i]` and its
//! data is `bounds[i + 1] - bounds[i] - 16` bytes long. In memory that is **8 bytes per
//! record** (a `Vec<u64>`), plus 8 per shard.
//!
//! # Where indexes are kept
//!
//! Beside the data, as `.sluice-index/<file>.sluice-index` in the data's directory, when
//! that directory is writable. (A subdirectory, not `<file>.sluice-index` next to the
//! file, so that a pattern such as `train.tfrecord-*` still matches only the data, in
//! Sluice and in TensorFlow: file patterns keep files, not directories.) Otherwise in a
//! cache directory, as `<hash of the file's absolute path>-<file
//! name>.sluice-index`. The cache directory is `$SLUICE_INDEX_DIR`, else
//! `$XDG_CACHE_HOME/sluice/index`, else `$HOME/.cache/sluice/index`, else
//! `<temp dir>/sluice-index`. An explicit `index_dir` replaces both places: indexes are then
//! read from and written to that directory only. Files are written to a temporary name and
//! renamed, so a reader never sees half an index. When nothing is writable the index is
//! built in memory each run (with a warning in the log).
//!
//! # Format (version 1), little-endian
//!
//! ```text
//! offset  size        field
//! 0       8           magic "SLUICEIX"
//! 8       4           version (1)
//! 12      4           flags (0)
//! 16      8           size of the data file, bytes
//! 24      8           mtime of the data file, ns since the Unix epoch (0 if unknown)
//! 32      8           N, the number of records
//! 40      8 * (N+1)   record boundaries: start of each record, then the file's size
//! end-4   4           masked CRC32C of every byte before it
//! ```
//!
//! An index is used only if all of it checks out: magic, version, the data file's current
//! size and mtime, a length that matches `N`, the checksum, and boundaries that start at 0,
//! grow by at least 16 bytes (an empty record's framing) and end at the file's size.
//! Anything else (a changed data file, a damaged or foreign index) means it is rebuilt,
//! never trusted. Only clean scans are written: a shard with a damaged record is scanned
//! again each run, so its error is reported each time.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use sha2::Digest;
use sluice_proto::Checksum;
use sluice_proto::tfrecord::{Compression, FOOTER_LEN, HEADER_LEN, masked_crc32c};

use crate::error::{Error, Result};

/// The suffix of an index file.
pub(crate) const INDEX_SUFFIX: &str = ".sluice-index";
/// The subdirectory of a data directory that holds the indexes of its files.
pub(crate) const BESIDE_DIR: &str = ".sluice-index";
/// The first 8 bytes of an index file.
pub(crate) const MAGIC: [u8; 8] = *b"SLUICEIX";
/// The format version this build reads and writes.
pub(crate) const VERSION: u32 = 1;
/// Bytes of the fixed header (before the boundaries).
pub(crate) const HEADER_BYTES: usize = 40;
/// Bytes of framing per record (header and footer).
const FRAMING: u64 = (HEADER_LEN + FOOTER_LEN) as u64;
/// Read buffer of a scan.
const SCAN_BUFFER: usize = 1 << 20;

/// The records of one shard: `N + 1` boundaries (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordIndex {
    bounds: Vec<u64>,
}

/// What identifies a version of a data file: its size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch (0 if unknown).
    pub mtime_ns: u64,
}

impl FileStamp {
    /// The stamp of a remote object: its size, and its ETag (hashed) in place of the
    /// modification time, so another version of the object has another stamp.
    pub(crate) fn of_object(object: &sluice_storage::RemoteObject) -> FileStamp {
        FileStamp {
            size: object.size(),
            mtime_ns: object.etag().map_or(0, |etag| {
                let hash = sha2::Sha256::digest(etag.as_bytes());
                u64::from_le_bytes(hash[..8].try_into().expect("8 bytes"))
            }),
        }
    }

    /// The stamp of the file at `path` now.
    pub(crate) fn of(path: &Path) -> io::Result<FileStamp> {
        let meta = fs::metadata(path)?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Ok(FileStamp {
            size: meta.len(),
            mtime_ns,
        })
    }
}

impl RecordIndex {
    /// An index from record boundaries (`N + 1` values; see the [module docs](self)).
    /// `None` if they are not boundaries of a TFRecord file of `size` bytes.
    pub(crate) fn from_bounds(bounds: Vec<u64>, size: u64) -> Option<RecordIndex> {
        let ok = bounds.first() == Some(&0)
            && bounds.last() == Some(&size)
            && bounds
                .windows(2)
                .all(|w| w[1] > w[0] && w[1] - w[0] >= FRAMING);
        ok.then_some(RecordIndex { bounds })
    }

    /// The number of records.
    pub(crate) fn len(&self) -> u64 {
        self.bounds.len() as u64 - 1
    }

    /// Record `i`: the offset of its header and the length of its data.
    ///
    /// # Panics
    /// If `i >= len()`.
    #[inline]
    pub(crate) fn record(&self, i: u64) -> (u64, u64) {
        let i = i as usize;
        let start = self.bounds[i];
        (start, self.bounds[i + 1] - start - FRAMING)
    }

    /// The index file's bytes for a data file with `stamp`.
    pub(crate) fn encode(&self, stamp: FileStamp) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + 8 * self.bounds.len() + 4);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&stamp.size.to_le_bytes());
        out.extend_from_slice(&stamp.mtime_ns.to_le_bytes());
        out.extend_from_slice(&self.len().to_le_bytes());
        for b in &self.bounds {
            out.extend_from_slice(&b.to_le_bytes());
        }
        let crc = masked_crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads an index file's bytes, for the data file as it is now (`stamp`). The error
    /// says why the index cannot be used (it is then rebuilt).
    pub(crate) fn decode(bytes: &[u8], stamp: FileStamp) -> Result<RecordIndex, &'static str> {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        if bytes.len() < HEADER_BYTES + 8 + 4 || bytes[..8] != MAGIC {
            return Err("not a Sluice record index");
        }
        if u32::from_le_bytes(bytes[8..12].try_into().expect("4")) != VERSION {
            return Err("another version of the index format");
        }
        if u64_at(16) != stamp.size || u64_at(24) != stamp.mtime_ns {
            return Err("stale: the data file changed since it was indexed");
        }
        let n = u64_at(32);
        let expected = n
            .checked_add(1)
            .and_then(|b| b.checked_mul(8))
            .and_then(|b| b.checked_add(HEADER_BYTES as u64 + 4));
        if expected != Some(bytes.len() as u64) {
            return Err("damaged: its length does not match its record count");
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if masked_crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4")) {
            return Err("damaged: bad checksum");
        }
        let bounds = body[HEADER_BYTES..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
            .collect();
        RecordIndex::from_bounds(bounds, stamp.size)
            .ok_or("damaged: its boundaries do not describe the data file")
    }
}

/// How to find, build and keep indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexOptions {
    /// Keep indexes in this directory only (see the [module docs](self)). Default: beside
    /// the data, else the cache directory.
    pub index_dir: Option<PathBuf>,
    /// The shards' compression: `auto` detects it; GZIP and ZLIB are refused.
    pub compression: Compression,
    /// Largest record accepted (a longer one is damage, as for the reader).
    pub max_record_len: u64,
    /// Scan past records whose *data* checksum is bad (their framing is intact, so they
    /// stay in the index and fail again when read); otherwise the scan stops at them.
    pub skip_bad_data: bool,
    /// How remote shards are reached and read.
    pub storage: sluice_storage::StorageOptions,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            index_dir: None,
            compression: Compression::Auto,
            max_record_len: sluice_proto::tfrecord::DEFAULT_MAX_RECORD_LEN,
            skip_bad_data: false,
            storage: sluice_storage::StorageOptions::default(),
        }
    }
}

/// A record that could not be read while scanning: which, where, and the reader's error
/// (TensorFlow's wording, naming the file and offset).
#[derive(Debug)]
pub(crate) struct Damage {
    /// The record's index in the shard.
    pub index: u64,
    /// The offset of the record's header.
    pub offset: u64,
    /// The error, as the streaming reader reports it.
    pub error: sluice_proto::Error,
}

/// Where an index came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IndexOrigin {
    /// Read from this index file.
    Loaded(PathBuf),
    /// Built by scanning the shard; written to this file (`None`: not written, because the
    /// shard is damaged or no place was writable).
    Built(Option<PathBuf>),
}

/// A shard's index, as [`load_or_build`] gives it.
#[derive(Debug)]
pub(crate) struct IndexedFile {
    /// The records that can be located. With damage, those before it.
    pub index: Arc<RecordIndex>,
    /// Where the index came from.
    #[cfg_attr(not(test), expect(dead_code, reason = "read by unit tests only"))]
    pub origin: IndexOrigin,
    /// The stamp of the data file when it was indexed.
    pub stamp: FileStamp,
    /// Records kept in the index although their data checksum is bad (only with
    /// [`IndexOptions::skip_bad_data`]).
    pub bad_data: u64,
    /// Damage that ended the scan: records from here on are not in the index.
    pub damage: Option<Damage>,
}

/// The index file of `data` in `dir` (the cache layout: a hash of the absolute path, then
/// the file name).
pub(crate) fn cached_index_path(dir: &Path, data: &Path) -> PathBuf {
    let absolute = fs::canonicalize(data).unwrap_or_else(|_| data.to_path_buf());
    let hash = sha2::Sha256::digest(absolute.to_string_lossy().as_bytes());
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name = data
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!("{hex}-{name}{INDEX_SUFFIX}"))
}

/// The default cache directory for indexes of read-only data (see the [module docs](self)).
pub(crate) fn default_cache_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("SLUICE_INDEX_DIR") {
        return d;
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return d.join("sluice").join("index");
    }
    if let Some(d) = var("HOME") {
        return d.join(".cache").join("sluice").join("index");
    }
    std::env::temp_dir().join("sluice-index")
}

/// Where the index of `data` may be, in the order they are tried.
pub(crate) fn index_locations(data: &Path, index_dir: Option<&Path>) -> Vec<PathBuf> {
    match index_dir {
        Some(dir) => vec![cached_index_path(dir, data)],
        None => {
            let dir = data.parent().unwrap_or(Path::new(""));
            let mut name = data.file_name().unwrap_or_default().to_owned();
            name.push(INDEX_SUFFIX);
            vec![
                dir.join(BESIDE_DIR).join(name),
                cached_index_path(&default_cache_dir(), data),
            ]
        }
    }
}

/// The index of the shard at `path`: read from an index file that checks out, else built
/// by scanning the shard (checking both CRCs of every record) and written for next time.
///
/// A GZIP or ZLIB shard is refused ([`Error::CompressedShard`]): a compressed stream cannot
/// be read at an offset. A damaged record is not an error here: it is
/// [`IndexedFile::damage`], for the caller to report with its context.
pub(crate) fn load_or_build(path: &Path, options: &IndexOptions) -> Result<IndexedFile> {
    let name = path.display().to_string();
    let io_err = |error: io::Error| Error::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut file = File::open(path).map_err(io_err)?;
    check_uncompressed(&mut file, path, options.compression)?;
    let stamp = FileStamp::of(path).map_err(io_err)?;
    let locations = index_locations(path, options.index_dir.as_deref());
    if let Some(loaded) = load(&locations, stamp) {
        return Ok(loaded);
    }
    let file = File::open(path).map_err(io_err)?;
    let scan = scan(file, &name, options)?;
    let unchanged = FileStamp::of(path).ok() == Some(stamp);
    Ok(keep(scan, stamp, &locations, unchanged, &name))
}

/// The index of a remote shard (an object-store URL): from the cache directory (or
/// `index_dir`) when an index there was built from this version of the object (same size
/// and ETag), else built by reading the object once front to back and written there. The
/// object's reads are pinned to its ETag, so an index always describes the bytes later
/// read by offset.
pub(crate) fn load_or_build_remote(
    object: &sluice_storage::RemoteObject,
    options: &IndexOptions,
) -> Result<IndexedFile> {
    let name = object.url().to_string();
    let stamp = FileStamp::of_object(object);
    let dir = options.index_dir.clone().unwrap_or_else(default_cache_dir);
    let locations = vec![cached_index_path(&dir, Path::new(&name))];
    // An index of this version exists only if it was found uncompressed when built.
    if let Some(loaded) = load(&locations, stamp) {
        return Ok(loaded);
    }
    let head = object.read_range(0, HEADER_LEN as u64)?;
    check_compression(&head, &name, options.compression)?;
    let input = sluice_storage::RemoteReader::new(object.clone());
    let scan = scan(input, &name, options)?;
    Ok(keep(scan, stamp, &locations, true, &name))
}

/// The first index among `locations` that describes the shard of `stamp`.
fn load(locations: &[PathBuf], stamp: FileStamp) -> Option<IndexedFile> {
    for location in locations {
        let Ok(bytes) = fs::read(location) else {
            continue;
        };
        match RecordIndex::decode(&bytes, stamp) {
            Ok(index) => {
                return Some(IndexedFile {
                    index: Arc::new(index),
                    origin: IndexOrigin::Loaded(location.clone()),
                    stamp,
                    bad_data: 0,
                    damage: None,
                });
            }
            Err(why) => {
                tracing::info!(index = %location.display(), why, "rebuilding a record index");
            }
        }
    }
    None
}

/// The scanned index, written to the first writable location when the shard was whole and
/// did not change during the scan.
fn keep(
    scan: Scan,
    stamp: FileStamp,
    locations: &[PathBuf],
    unchanged: bool,
    name: &str,
) -> IndexedFile {
    let index = RecordIndex {
        bounds: scan.bounds,
    };
    let mut written = None;
    if scan.damage.is_none() && scan.bad_data == 0 && unchanged {
        let bytes = index.encode(stamp);
        for location in locations {
            match write_atomically(location, &bytes) {
                Ok(()) => {
                    written = Some(location.clone());
                    break;
                }
                Err(e) => {
                    tracing::debug!(index = %location.display(), error = %e, "cannot write a record index here");
                }
            }
        }
        if written.is_none() {
            tracing::warn!(file = %name, "no writable place for the record index; it is kept in memory only");
        }
    }
    IndexedFile {
        index: Arc::new(index),
        origin: IndexOrigin::Built(written),
        stamp,
        bad_data: scan.bad_data,
        damage: scan.damage,
    }
}

/// Refuses GZIP and ZLIB shards (named or detected).
fn check_uncompressed(file: &mut File, path: &Path, compression: Compression) -> Result<()> {
    let mut head = [0u8; HEADER_LEN];
    let n = match compression {
        Compression::Auto => read_full(file, &mut head).map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })?,
        _ => 0,
    };
    check_compression(&head[..n], &path.display().to_string(), compression)
}

/// Refuses GZIP and ZLIB shards, named or detected from the shard's first bytes `head`.
fn check_compression(head: &[u8], name: &str, compression: Compression) -> Result<()> {
    let found = match compression {
        Compression::Auto => Compression::detect(head),
        other => other,
    };
    match found {
        Compression::Gzip | Compression::Zlib => Err(Error::CompressedShard {
            file: name.to_string(),
            compression: found.name(),
        }),
        _ => Ok(()),
    }
}

/// Writes an index file durably (temporary name, synced, renamed, directory synced): a
/// reader finds a whole index or none (and the checks of its magic, length and checksum
/// refuse anything else).
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    sluice_storage::write_durably(path, bytes)
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

struct Scan {
    bounds: Vec<u64>,
    bad_data: u64,
    damage: Option<Damage>,
}

/// Scans a shard's framing, checking both CRCs of every record.
fn scan(input: impl Read, name: &str, options: &IndexOptions) -> Result<Scan> {
    let mut input = io::BufReader::with_capacity(SCAN_BUFFER, input);
    let mut bounds = vec![0u64];
    let mut bad_data = 0;
    let mut data = Vec::new();
    let mut start = 0u64;
    let mut index = 0u64;
    let damage = |index: u64, offset: u64, error: sluice_proto::Error| Damage {
        index,
        offset,
        error,
    };
    let io = |offset: u64, error: io::Error| sluice_proto::Error::Io {
        file: name.to_string(),
        offset,
        error,
    };
    let truncated = |index: u64, offset: u64| sluice_proto::Error::TruncatedRecord {
        file: name.to_string(),
        offset,
        index,
    };
    let corrupted = |index: u64, offset: u64, checksum| sluice_proto::Error::CorruptedRecord {
        file: name.to_string(),
        offset,
        index,
        checksum,
    };
    let stop = loop {
        let mut header = [0u8; HEADER_LEN];
        let got = match read_full(&mut input, &mut header) {
            Ok(n) => n,
            Err(e) => break Some(damage(index, start, io(start, e))),
        };
        if got == 0 {
            break None;
        }
        if got < HEADER_LEN {
            break Some(damage(index, start, truncated(index, start)));
        }
        let length = u64::from_le_bytes(header[..8].try_into().expect("8"));
        if masked_crc32c(&header[..8]) != u32::from_le_bytes(header[8..].try_into().expect("4")) {
            break Some(damage(
                index,
                start,
                corrupted(index, start, Checksum::Length),
            ));
        }
        if length > options.max_record_len || usize::try_from(length).is_err() {
            let error = sluice_proto::Error::RecordTooLarge {
                file: name.to_string(),
                offset: start,
                index,
                length,
                limit: options.max_record_len,
            };
            break Some(damage(index, start, error));
        }
        // Grow as the data arrives, never to a claimed length up front.
        data.clear();
        let want = length as usize + FOOTER_LEN;
        match (&mut input).take(want as u64).read_to_end(&mut data) {
            Ok(n) if n < want => break Some(damage(index, start, truncated(index, start))),
            Ok(_) => {}
            Err(e) => break Some(damage(index, start, io(start + HEADER_LEN as u64, e))),
        }
        let (body, crc) = data.split_at(length as usize);
        if masked_crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4")) {
            let error = corrupted(index, start + HEADER_LEN as u64, Checksum::Data);
            if !options.skip_bad_data {
                break Some(damage(index, start, error));
            }
            bad_data += 1;
        }
        start += FRAMING + length;
        bounds.push(start);
        index += 1;
    };
    Ok(Scan {
        bounds,
        bad_data,
        damage: stop,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::tfrecord::TfRecordWriter;

    fn shard(records: &[&[u8]]) -> Vec<u8> {
        let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
        for r in records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap()
    }

    fn stamp(size: u64) -> FileStamp {
        FileStamp {
            size,
            mtime_ns: 12345,
        }
    }

    #[test]
    fn encode_decode_round_trip_and_every_damage_is_refused() {
        let index = RecordIndex::from_bounds(vec![0, 16, 19 + 16, 100], 100).unwrap();
        assert_eq!(index.len(), 3);
        assert_eq!(index.record(0), (0, 0));
        assert_eq!(index.record(1), (16, 3));
        assert_eq!(index.record(2), (35, 49));
        let bytes = index.encode(stamp(100));
        assert_eq!(bytes.len(), HEADER_BYTES + 4 * 8 + 4);
        assert_eq!(RecordIndex::decode(&bytes, stamp(100)), Ok(index.clone()));
        // Stale: another size or mtime.
        assert!(RecordIndex::decode(&bytes, stamp(101)).is_err());
        let touched = FileStamp {
            mtime_ns: 1,
            ..stamp(100)
        };
        assert!(RecordIndex::decode(&bytes, touched).is_err());
        // Any flipped bit, and any truncation, is refused.
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(RecordIndex::decode(&b, stamp(100)).is_err(), "byte {i}");
        }
        for n in 0..bytes.len() {
            assert!(RecordIndex::decode(&bytes[..n], stamp(100)).is_err(), "{n}");
        }
    }

    #[test]
    fn index_locations_beside_then_cache_or_only_the_given_dir() {
        let data = Path::new("/data/train-0");
        let l = index_locations(data, None);
        assert_eq!(l[0], Path::new("/data/.sluice-index/train-0.sluice-index"));
        assert!(l[1].starts_with(default_cache_dir()));
        let name = l[1].file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.ends_with("-train-0.sluice-index") && name.len() == 16 + 1 + 20,
            "{name}"
        );
        let l = index_locations(data, Some(Path::new("/idx")));
        assert_eq!(l, [cached_index_path(Path::new("/idx"), data)]);
        // Files of the same name in different directories do not share a cache entry.
        assert_ne!(
            cached_index_path(Path::new("/idx"), Path::new("/a/x")),
            cached_index_path(Path::new("/idx"), Path::new("/b/x"))
        );
    }

    #[test]
    fn bounds_must_describe_the_file() {
        assert!(RecordIndex::from_bounds(vec![0], 0).is_some());
        assert!(RecordIndex::from_bounds(vec![], 0).is_none());
        assert!(RecordIndex::from_bounds(vec![1, 20], 20).is_none());
        assert!(RecordIndex::from_bounds(vec![0, 15], 15).is_none());
        assert!(RecordIndex::from_bounds(vec![0, 16], 17).is_none());
        assert!(RecordIndex::from_bounds(vec![0, 20, 20], 20).is_none());
    }

    fn scan_bytes(bytes: &[u8], skip: bool) -> Scan {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        fs::write(&p, bytes).unwrap();
        let options = IndexOptions {
            skip_bad_data: skip,
            ..Default::default()
        };
        scan(File::open(&p).unwrap(), "s", &options).unwrap()
    }

    #[test]
    fn scan_finds_every_record_including_empty_ones() {
        let bytes = shard(&[b"", b"abc", b"", b"hello"]);
        let s = scan_bytes(&bytes, false);
        assert!(s.damage.is_none());
        assert_eq!(s.bounds, [0, 16, 35, 51, 72]);
        assert_eq!(*s.bounds.last().unwrap(), bytes.len() as u64);
        assert_eq!(scan_bytes(&[], false).bounds, [0]);
    }

    #[test]
    fn scan_reports_damage_as_the_reader_does() {
        let mut bytes = shard(&[b"one", b"two", b"three"]);
        bytes[19 + 12] ^= 1; // second record's data
        let s = scan_bytes(&bytes, false);
        let d = s.damage.unwrap();
        assert_eq!((d.index, d.offset), (1, 19));
        assert_eq!(d.error.to_string(), "s: corrupted record at 31");
        assert_eq!(s.bounds, [0, 19]);
        // Skipping bad data keeps the framing: every record is indexed.
        let s = scan_bytes(&bytes, true);
        assert!(s.damage.is_none());
        assert_eq!((s.bounds.len(), s.bad_data), (4, 1));
        // A bad length CRC and a truncation end the scan, skipping or not.
        let mut bytes = shard(&[b"one", b"two"]);
        bytes[19 + 9] ^= 1;
        let d = scan_bytes(&bytes, true).damage.unwrap();
        assert_eq!(d.error.to_string(), "s: corrupted record at 19");
        let bytes = shard(&[b"one", b"two"]);
        for cut in 20..bytes.len() {
            let d = scan_bytes(&bytes[..cut], true).damage.unwrap();
            assert_eq!(d.error.to_string(), "s: truncated record at 19", "{cut}");
        }
    }
}
