//! `tfrecord_global_shuffle`: every record of every shard exactly once per epoch, in a
//! seeded global permutation, without loading the data.
//!
//! `shuffle(buffer_size)` only mixes records within a window of the stream, so its first
//! outputs all come from the first files read. Global shuffle draws each position from all
//! `N` records of all shards:
//!
//! 1. Each shard's [record index](super::record_index) (where each record starts; 8 bytes
//!    per record in memory) is read from its index file, or built by scanning the shard
//!    once, checking both CRCs of every record, and written for the next run. Indexes are
//!    built in parallel on the first `next()`, not when the pipeline is built; later epochs
//!    of the same dataset reuse them while the shard's size and mtime are unchanged.
//! 2. Position `p` of the epoch is record `π(p)` of the concatenated shards, where `π` is a
//!    [`Permutation`] of `[0, N)` (a Feistel network with cycle walking: O(1) memory)
//!    keyed by the seed, the epoch and the stage. A fixed seed gives the same order every
//!    run; each epoch (a new `iter()`, or each pass of `repeat`) gets another.
//! 3. Each record is read with one positioned read (`pread` on Unix; seek and read
//!    elsewhere) of its header, data and footer, whose CRCs are checked again, and becomes
//!    exactly the element the sequential reader gives: id (file index, record index),
//!    provenance (file, offset of its header), one scalar byte string `record`. Damage
//!    gives the sequential reader's error, naming the same id, file and offset.
//! 4. With `num_parallel` readers (default `auto`: the CPU budget, at most 4), reader `w`
//!    reads chunks `w, w + T, w + 2T, ...` of 16 positions ahead into its own channel of
//!    two chunks; the consumer takes the chunks in turn, so the order does not depend on
//!    the threads and at most `3 · T · 16` records are held.
//!
//! Memory: the indexes (8 bytes per record, 8 per shard), a prefix sum of record counts (8
//! bytes per shard), one open descriptor per shard (up to [`MAX_OPEN_FILES`] shards; with
//! more, each read opens its shard), and the read-ahead window. The cost against
//! `shuffle(buffer)` is one small random read per record instead of large sequential ones:
//! on page-cached files it is close; on a disk that seeks, it is not.
//!
//! GZIP and ZLIB shards cannot be read at an offset: they are refused with
//! [`Error::CompressedShard`].
//!
//! ```
//! use sluice_core::prelude::*;
//!
//! # fn main() -> sluice_core::Result<()> {
//! let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");
//! let indexes = tempfile::tempdir().unwrap(); // not beside the fixtures: they stay as copied
//! let spec = GlobalShuffleSpec::default().index_dir(indexes.path());
//! let dataset = Dataset::tfrecord_global_shuffle([format!("{fixtures}/images.tfrecord-*")], spec)?
//!     .with_options(Options::default().with_seed(7));
//! let ids: Vec<ElementId> = dataset.collect()?.iter().map(|e| e.id()).collect();
//! assert_eq!(ids.len(), 32); // 4 shards of 8, each record once
//! let mut sorted = ids.clone();
//! sorted.sort();
//! assert_eq!(sorted[0], ElementId::new(0, 0));
//! assert_ne!(ids, sorted);
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use bytes::Bytes;
use crossbeam_channel::{Receiver, bounded, select};
use serde::{Deserialize, Serialize};
use sluice_proto::Checksum;
use sluice_proto::tfrecord::{FOOTER_LEN, HEADER_LEN, masked_crc32c};

use crate::dataset::Dataset;
use crate::elastic::{Unit, Units};
use crate::element::{Element, ElementId, Provenance};
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::options::ErrorPolicy;
use crate::parallelism::NumParallel;
use crate::parallelism::check_num_parallel;
use crate::params::Params;
use crate::rng::combine;
use crate::run::{BuildContext, Input};
use crate::sources::files::filename_of;
use crate::sources::permutation::Permutation;
use crate::sources::record_index::{self, FileStamp, IndexOptions, RecordIndex};
use crate::sources::tfrecord::TfRecordSpec;
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};
use crate::sync::LockExt;
use sluice_storage::RemoteObject;

/// Positions a reader thread reads and hands over at a time.
const CHUNK: u64 = 16;
/// Records per chunk when shards are remote: read concurrently, they hide the store's
/// latency.
const REMOTE_CHUNK: u64 = 64;
/// Requests in flight per reader thread when shards are remote.
const REMOTE_IN_FLIGHT: usize = 32;
/// Chunks buffered per reader thread.
const CHUNKS_AHEAD: usize = 2;
/// Readers `auto` starts at most (reads of page-cached records need few threads).
const AUTO_READERS: usize = 4;
/// Shards kept open at once; with more, each read opens its shard.
pub(crate) const MAX_OPEN_FILES: usize = 256;

/// How global shuffle keeps its indexes and reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GlobalShuffleSpec {
    /// Keep record indexes in this directory only. Default: beside each shard
    /// (`.sluice-index/<file>.sluice-index` in its directory), or in the cache directory
    /// when the shard's directory is not writable (`$SLUICE_INDEX_DIR`, else
    /// `$XDG_CACHE_HOME/sluice/index`, else `$HOME/.cache/sluice/index`, else
    /// `<temp dir>/sluice-index`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_dir: Option<PathBuf>,
    /// Reader threads: a number, or `auto` (default: the CPU budget, at most 4). Also the
    /// threads that build indexes.
    pub num_parallel: NumParallel,
    /// A seed for the permutation; default: the pipeline's seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// A new permutation each epoch (default true); false repeats the first epoch's.
    pub reshuffle_each_epoch: bool,
}

impl Default for GlobalShuffleSpec {
    fn default() -> Self {
        GlobalShuffleSpec {
            index_dir: None,
            num_parallel: NumParallel::Auto,
            seed: None,
            reshuffle_each_epoch: true,
        }
    }
}

impl GlobalShuffleSpec {
    /// This spec with indexes kept in `dir`.
    pub fn index_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.index_dir = Some(dir.into());
        self
    }

    /// This spec with `num_parallel` readers (`NumParallel::Sequential`: read on the
    /// consumer's thread).
    pub fn num_parallel(mut self, n: impl Into<NumParallel>) -> Self {
        self.num_parallel = n.into();
        self
    }

    /// This spec with its own seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
}

/// Indexes kept across the epochs of one dataset, with the stamp of the shard they index.
#[derive(Default)]
struct IndexCache(Mutex<HashMap<String, (FileStamp, Arc<RecordIndex>)>>);

impl fmt::Debug for IndexCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexCache")
    }
}

/// The running definition: a global shuffle over the TFRecord files of a file list.
#[derive(Debug)]
pub(crate) struct GlobalShuffleStage {
    /// How to shuffle.
    pub spec: GlobalShuffleSpec,
    /// How each file is read (compression must be `auto` or `none`).
    pub reader: TfRecordSpec,
    cache: Arc<IndexCache>,
    /// `(num_shards, index)` when a `shard` above was folded in (see
    /// [`ShardPushdown`](crate::optimize::ShardPushdown)): this shard reads positions
    /// `index`, `index + num_shards`, ... of the one global permutation.
    pub(crate) shard: Option<(u64, u64)>,
}

impl GlobalShuffleStage {
    /// A global shuffle reading files with `reader`.
    pub(crate) fn new(spec: GlobalShuffleSpec, reader: TfRecordSpec) -> Self {
        GlobalShuffleStage {
            spec,
            reader,
            cache: Arc::default(),
            shard: None,
        }
    }

    /// This global shuffle reading only shard `index` of `num_shards` of its permutation's
    /// positions (sharing the index cache).
    pub(crate) fn sharded(&self, num_shards: u64, index: u64) -> Self {
        GlobalShuffleStage {
            spec: self.spec.clone(),
            reader: self.reader.clone(),
            cache: Arc::clone(&self.cache),
            shard: Some((num_shards, index)),
        }
    }
}

/// Global shuffle sources.
impl Dataset {
    /// The records of the TFRecord files matching `patterns`, each exactly once per epoch,
    /// in a seeded global permutation (a [`Permutation`](crate::Permutation)). The files must be
    /// uncompressed.
    pub fn tfrecord_global_shuffle<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        spec: GlobalShuffleSpec,
    ) -> Result<Dataset> {
        Ok(Dataset::files(patterns)?.read_tfrecord_global_shuffle(TfRecordSpec::default(), spec))
    }

    /// Reads the TFRecord files named by this file-list dataset in a global permutation.
    pub fn read_tfrecord_global_shuffle(
        &self,
        reader: TfRecordSpec,
        spec: GlobalShuffleSpec,
    ) -> Dataset {
        Dataset::from_stage(GlobalShuffleStage::new(spec, reader), vec![self.clone()])
    }
}

impl GlobalShuffleStage {
    /// The stream of one epoch, not started.
    fn stream(&self, inputs: &[Input], ctx: &BuildContext) -> Result<GlobalShuffleStream> {
        let input = crate::stages::single_input(inputs, "global_shuffle")?;
        ctx.metrics().set_counts_own_inputs();
        let budget = ctx.options().cpu_budget;
        let threads = match self.spec.num_parallel {
            NumParallel::Auto => budget.clamp(1, AUTO_READERS),
            n => n.workers(budget),
        };
        if threads > 0 {
            ctx.metrics().set_workers(threads);
        }
        let epoch = if self.spec.reshuffle_each_epoch {
            ctx.epoch()
        } else {
            0
        };
        let key = combine(&[
            self.spec.seed.unwrap_or(ctx.seed()),
            epoch,
            ctx.index() as u64,
            0x610b_a15f,
        ]);
        let options = IndexOptions {
            index_dir: self.spec.index_dir.clone(),
            compression: self.reader.compression,
            max_record_len: self.reader.max_record_len,
            skip_bad_data: ctx.error_policy() == ErrorPolicy::Skip,
            storage: self.reader.storage.to_options(),
        };
        Ok(GlobalShuffleStream {
            state: State::Start(input.open()?),
            options,
            threads,
            key,
            cache: Arc::clone(&self.cache),
            ctx: ctx.clone(),
            start_at: 0,
            total: 0,
            shard: self.shard,
        })
    }
}

impl Stage for GlobalShuffleStage {
    fn name(&self) -> &'static str {
        "global_shuffle"
    }

    fn params(&self) -> Params {
        let params =
            Params::of(&self.spec).with("reader", self.reader.redacted_params().to_value());
        match self.shard {
            Some((n, i)) => params.with("shard", format!("{i}/{n}")),
            None => params,
        }
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_num_parallel("global_shuffle", self.spec.num_parallel)?;
        self.reader.validate()
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(self.stream(inputs, ctx)?))
    }

    /// Under the fail policy every position of the permutation is one element: a resume
    /// indexes the shards and starts reading at the position, reading nothing before it.
    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        let mut stream = self.stream(inputs, ctx)?;
        if ctx.error_policy() != ErrorPolicy::Fail {
            let mut stream: BoxStream = Box::new(stream);
            let skipped = crate::run::discard(&mut stream, skip)?;
            return Ok((stream, skipped));
        }
        stream.start_at = skip;
        let State::Start(files) = std::mem::replace(&mut stream.state, State::Done) else {
            unreachable!("a new stream has not started")
        };
        stream.start(files)?;
        let skipped = skip.min(stream.total);
        Ok((Box::new(stream), skipped))
    }

    fn check_inputs(
        &self,
        inputs: &[Arc<crate::plan::PlanNode>],
    ) -> std::result::Result<(), String> {
        crate::plan::check_file_list_input("global_shuffle", inputs)
    }

    fn shards_by_input(&self) -> bool {
        // Never by files: a shard of a global shuffle takes every n-th position of the one
        // global permutation (`ShardPushdown` folds the shard in), so the order is global.
        false
    }

    fn runs_inline(&self) -> bool {
        self.spec.num_parallel == NumParallel::Sequential
    }
}

/// One shard being read.
struct Shard {
    path: Arc<str>,
    file_index: u64,
    index: Arc<RecordIndex>,
    /// The open file, when shards are kept open.
    file: Option<Mutex<Option<Arc<File>>>>,
    /// The object, when the shard is a URL (its reads pinned to the ETag it was indexed at).
    remote: Option<RemoteObject>,
}

/// The shards of an epoch, and where each one's records start in the permutation's domain.
struct Shards {
    shards: Vec<Shard>,
    /// `starts[s]`: records in the shards before `s`; then the total.
    starts: Vec<u64>,
}

impl Shards {
    fn len(&self) -> u64 {
        *self.starts.last().expect("starts has the total")
    }

    /// Shard and record of global record number `g`.
    fn locate(&self, g: u64) -> (usize, u64) {
        let s = self.starts.partition_point(|&x| x <= g) - 1;
        (s, g - self.starts[s])
    }

    /// Reads record `r` of shard `s` as the sequential reader would give it.
    fn read(&self, s: usize, r: u64, ctx: &BuildContext) -> Result<Element> {
        let shard = &self.shards[s];
        let (offset, length) = shard.index.record(r);
        let id = ElementId::new(shard.file_index, r);
        let provenance = Provenance {
            file: Arc::clone(&shard.path),
            offset,
        };
        let wrap = |e: Error| Error::Stage {
            stage: ctx.stage_label(),
            element: Some(id),
            provenance: Some(provenance.clone()),
            error: Box::new(e),
        };
        let data = read_record(shard, offset, length, r).map_err(wrap)?;
        ctx.metrics().add_in(1);
        Ok(Element::record(id, data, Some(provenance)))
    }

    /// Whether any shard is remote (reads then go out many at once, see [`read_many`]).
    fn any_remote(&self) -> bool {
        self.shards.iter().any(|s| s.remote.is_some())
    }

    /// Global records `g` as [`read`](Shards::read) gives them, remote ones fetched
    /// concurrently (up to [`REMOTE_IN_FLIGHT`] requests at once per reader) so the store's
    /// latency is paid once per chunk rather than once per record.
    fn read_many(&self, globals: &[u64], ctx: &BuildContext) -> Vec<Result<Element>> {
        let located: Vec<(usize, u64)> = globals.iter().map(|&g| self.locate(g)).collect();
        let reads: Vec<(&RemoteObject, u64, u64)> = located
            .iter()
            .filter_map(|&(s, r)| {
                let shard = &self.shards[s];
                let (offset, length) = shard.index.record(r);
                let end = offset + (HEADER_LEN + FOOTER_LEN) as u64 + length;
                shard.remote.as_ref().map(|o| (o, offset, end))
            })
            .collect();
        let mut fetched = RemoteObject::read_ranges(&reads, REMOTE_IN_FLIGHT).into_iter();
        located
            .into_iter()
            .map(|(s, r)| {
                let shard = &self.shards[s];
                if shard.remote.is_none() {
                    return self.read(s, r, ctx);
                }
                let (offset, length) = shard.index.record(r);
                let id = ElementId::new(shard.file_index, r);
                let provenance = Provenance {
                    file: Arc::clone(&shard.path),
                    offset,
                };
                let bytes = fetched
                    .next()
                    .unwrap_or_else(|| {
                        Err(sluice_storage::Error::NoMatch {
                            pattern: shard.path.to_string(),
                        })
                    })
                    .map_err(Error::from)
                    .and_then(|b| check_record(&shard.path, b, offset, length, r));
                match bytes {
                    Ok(data) => {
                        ctx.metrics().add_in(1);
                        Ok(Element::record(id, data, Some(provenance)))
                    }
                    Err(e) => Err(Error::Stage {
                        stage: ctx.stage_label(),
                        element: Some(id),
                        provenance: Some(provenance),
                        error: Box::new(e),
                    }),
                }
            })
            .collect()
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Elsewhere: seek and read through `&File`, whose cursor is shared, so callers hold the
/// shard's lock (see `read_record`).
#[cfg(not(unix))]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(buf)
}

/// One positioned read of a record's header, data and footer, both CRCs checked.
fn read_record(shard: &Shard, offset: u64, length: u64, index: u64) -> Result<Bytes> {
    let file_name = || shard.path.to_string();
    let io_error = |error: io::Error| -> Error {
        if error.kind() == io::ErrorKind::UnexpectedEof {
            sluice_proto::Error::TruncatedRecord {
                file: file_name(),
                offset,
                index,
            }
            .into()
        } else {
            sluice_proto::Error::Io {
                file: file_name(),
                offset,
                error,
            }
            .into()
        }
    };
    let data_len = usize::try_from(length).map_err(|_| Error::StaleIndex {
        file: file_name(),
        offset,
        indexed: length,
        found: length,
    })?;
    if let Some(object) = &shard.remote {
        let end = offset + (HEADER_LEN + FOOTER_LEN) as u64 + length;
        let bytes = object.read_range(offset, end)?;
        return check_record(&shard.path, bytes, offset, length, index);
    }
    let mut buf = vec![0u8; HEADER_LEN + data_len + FOOTER_LEN];
    match &shard.file {
        Some(slot) => {
            let mut guard = slot.locked();
            if guard.is_none() {
                *guard = Some(Arc::new(File::open(&*shard.path).map_err(io_error)?));
            }
            let file = Arc::clone(guard.as_ref().expect("opened"));
            // With `pread` the cursor is not shared: read without the lock.
            #[cfg(unix)]
            drop(guard);
            read_exact_at(&file, &mut buf, offset).map_err(io_error)?;
        }
        None => {
            let file = File::open(&*shard.path).map_err(io_error)?;
            read_exact_at(&file, &mut buf, offset).map_err(io_error)?;
        }
    }
    check_record(&shard.path, Bytes::from(buf), offset, length, index)
}

/// A record's bytes as read at `offset` (header, data, footer): both CRCs checked, and the
/// length the index gave; the data.
fn check_record(path: &str, buf: Bytes, offset: u64, length: u64, index: u64) -> Result<Bytes> {
    let file_name = || path.to_string();
    let data_len = usize::try_from(length).unwrap_or(usize::MAX);
    if buf.len()
        != HEADER_LEN
            .saturating_add(data_len)
            .saturating_add(FOOTER_LEN)
    {
        return Err(sluice_proto::Error::TruncatedRecord {
            file: file_name(),
            offset,
            index,
        }
        .into());
    }
    let found = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    if masked_crc32c(&buf[..8]) != u32::from_le_bytes(buf[8..12].try_into().expect("4 bytes")) {
        return Err(sluice_proto::Error::CorruptedRecord {
            file: file_name(),
            offset,
            index,
            checksum: Checksum::Length,
        }
        .into());
    }
    if found != length {
        return Err(Error::StaleIndex {
            file: file_name(),
            offset,
            indexed: length,
            found,
        });
    }
    let end = HEADER_LEN + data_len;
    let crc = u32::from_le_bytes(buf[end..].try_into().expect("4 bytes"));
    if masked_crc32c(&buf[HEADER_LEN..end]) != crc {
        return Err(sluice_proto::Error::CorruptedRecord {
            file: file_name(),
            offset: offset + HEADER_LEN as u64,
            index,
            checksum: Checksum::Data,
        }
        .into());
    }
    Ok(buf.slice(HEADER_LEN..end))
}

type Chunk = Vec<Result<Element>>;

enum State {
    /// Not started: the file list, still to be indexed.
    Start(BoxStream),
    /// Reading on the consumer's thread.
    Inline {
        shards: Arc<Shards>,
        perm: Order,
        next: u64,
    },
    /// Reading ahead on threads.
    Threaded(Threaded),
    Done,
}

struct Threaded {
    /// One channel per reader thread; chunk `c` comes from `rxs[c % T]`.
    rxs: Vec<Receiver<Chunk>>,
    next_chunk: u64,
    chunks: u64,
    current: VecDeque<Result<Element>>,
    handles: Vec<JoinHandle<()>>,
}

impl Drop for Threaded {
    fn drop(&mut self) {
        // Disconnect the channels (a blocked reader's send fails), then join.
        self.rxs.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

struct GlobalShuffleStream {
    state: State,
    options: IndexOptions,
    threads: usize,
    key: u64,
    cache: Arc<IndexCache>,
    ctx: BuildContext,
    /// The first position of the permutation to read (a resume's fast-forward).
    start_at: u64,
    /// Records in the epoch (of this shard), once indexed.
    total: u64,
    /// `(num_shards, index)`: read only positions `index`, `index + num_shards`, ... of
    /// the global permutation.
    shard: Option<(u64, u64)>,
}

/// The order an epoch reads records in: the global permutation, or one shard's positions
/// of it (`index`, `index + num_shards`, ...), the same permutation on every shard, or the
/// positions an elastic resume dealt to this host.
#[derive(Debug, Clone)]
struct Order {
    perm: Permutation,
    shard: Option<(u64, u64)>,
    /// The positions of the permutation to read, in order (an elastic resume).
    positions: Option<Arc<Vec<u64>>>,
    /// Positions this order has.
    len: u64,
    /// The unit space records are counted in (elastic checkpoints), by their position.
    space: Option<u16>,
}

impl Order {
    fn new(perm: Permutation, total: u64, shard: Option<(u64, u64)>) -> Order {
        let len = match shard {
            Some((n, i)) if total > i => (total - i).div_ceil(n),
            Some(_) => 0,
            None => total,
        };
        Order {
            perm,
            shard,
            positions: None,
            len,
            space: None,
        }
    }

    /// The order reading exactly `positions` of the permutation.
    fn of_positions(perm: Permutation, positions: Vec<u64>) -> Order {
        Order {
            perm,
            shard: None,
            len: positions.len() as u64,
            positions: Some(Arc::new(positions)),
            space: None,
        }
    }

    /// The position in the permutation of this order's position `q`.
    fn position(&self, q: u64) -> u64 {
        match (&self.positions, self.shard) {
            (Some(list), _) => list[q as usize],
            (None, Some((n, i))) => i + q * n,
            (None, None) => q,
        }
    }

    /// The global record number at this order's position `q`.
    fn apply(&self, q: u64) -> u64 {
        self.perm.apply(self.position(q))
    }

    /// Marks `e`, read at this order's position `q`, with its record.
    fn mark(&self, q: u64, mut e: Element, ctx: &BuildContext) -> Element {
        if let Some(space) = self.space {
            ctx.records_read(1);
            e.set_units(Units::one(Unit::whole(space, 0, self.position(q))));
        }
        e
    }
}

impl GlobalShuffleStream {
    /// Collects the file list and indexes every shard. `Err`: an error to yield (the
    /// stream then ends).
    fn index(&mut self, mut files: BoxStream) -> Result<Shards> {
        let mut list: Vec<(String, u64)> = Vec::new();
        while let Some(file) = files.next() {
            let file = file?;
            match filename_of(&file) {
                Ok(p) => list.push((p, file.id().source)),
                Err(e) => {
                    if let Some(e) = self.ctx.on_error(self.ctx.element_error(&file, e)) {
                        return Err(e);
                    }
                }
            }
        }
        let results: Vec<Result<(Arc<RecordIndex>, Option<RemoteObject>)>> = self.index_all(&list);
        let keep_open = list.len() <= MAX_OPEN_FILES;
        let mut shards = Vec::with_capacity(list.len());
        let mut starts = vec![0u64];
        for ((path, file_index), result) in list.into_iter().zip(results) {
            let (index, remote) = match result {
                Ok(found) => found,
                Err(e) => match self.ctx.on_error(e) {
                    Some(e) => return Err(e),
                    None => continue,
                },
            };
            starts.push(starts.last().expect("total") + index.len());
            shards.push(Shard {
                path: Arc::from(path),
                file_index,
                index,
                file: (keep_open && remote.is_none()).then(|| Mutex::new(None)),
                remote,
            });
        }
        Ok(Shards { shards, starts })
    }

    /// Every shard's index, in parallel; errors carry the stage's context.
    fn index_all(
        &self,
        list: &[(String, u64)],
    ) -> Vec<Result<(Arc<RecordIndex>, Option<RemoteObject>)>> {
        let threads = self.threads.clamp(1, list.len().max(1));
        let (ctx, options, cache) = (&self.ctx, &self.options, &*self.cache);
        let one = |i: usize| index_one(ctx, options, cache, &list[i].0, list[i].1);
        if threads == 1 {
            return (0..list.len()).map(one).collect();
        }
        #[allow(clippy::type_complexity)]
        let mut out: Vec<Option<Result<(Arc<RecordIndex>, Option<RemoteObject>)>>> =
            (0..list.len()).map(|_| None).collect();
        let share = |w: usize| -> Vec<usize> { (w..list.len()).step_by(threads).collect() };
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|w| {
                    let one = &one;
                    let mine = share(w);
                    let spawned = std::thread::Builder::new()
                        .name(format!("sluice-{}-index{w}", ctx.stage_label()))
                        .spawn_scoped(scope, move || {
                            mine.into_iter().map(|i| (i, one(i))).collect::<Vec<_>>()
                        });
                    (w, spawned)
                })
                .collect();
            for (w, handle) in handles {
                let done = match handle {
                    // A thread that could not be started: its share is indexed here.
                    Err(_) => share(w).into_iter().map(|i| (i, one(i))).collect(),
                    Ok(h) => h.join().unwrap_or_else(|panic| {
                        let message = crate::executor::parallel::panic_message(&*panic);
                        share(w)
                            .into_iter()
                            .map(|i| {
                                let e = Error::Panic {
                                    stage: ctx.stage_label(),
                                    message: message.clone(),
                                };
                                (i, Err(e))
                            })
                            .collect()
                    }),
                };
                for (i, r) in done {
                    out[i] = Some(r);
                }
            }
        });
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::internal("a shard was not indexed"))))
            .collect()
    }

    fn start(&mut self, files: BoxStream) -> Result<()> {
        let t = Instant::now();
        let shards = Arc::new(self.index(files)?);
        let permutation = Permutation::new(shards.len(), self.key);
        let mut perm = match self.ctx.unit_point() {
            Some(point) if point.resumed() => {
                Order::of_positions(permutation, point.positions(shards.len()))
            }
            _ => Order::new(permutation, shards.len(), self.shard),
        };
        if let Some(point) = self.ctx.unit_point() {
            perm.space = Some(point.space);
            self.ctx.unit_point_ended(shards.len());
        }
        self.total = perm.len;
        let first = self.start_at.min(self.total);
        if self.threads == 0 {
            self.state = State::Inline {
                shards,
                perm,
                next: first,
            };
            return Ok(());
        }
        self.ctx.metrics().add_busy(t.elapsed());
        let n = perm.len;
        let remote = shards.any_remote();
        let chunk_len = if remote { REMOTE_CHUNK } else { CHUNK };
        let chunks = (n - first).div_ceil(chunk_len);
        let threads = self.threads.min(chunks.max(1) as usize);
        let mut rxs = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for w in 0..threads {
            let (tx, rx) = bounded::<Chunk>(CHUNKS_AHEAD);
            rxs.push(rx);
            let shards = Arc::clone(&shards);
            let ctx = self.ctx.clone();
            let perm = perm.clone();
            let handle = std::thread::Builder::new()
                .name(format!("sluice-{}-read{w}", ctx.stage_label()))
                .spawn(move || {
                    let shutdown = ctx.shutdown().clone();
                    for c in (w as u64..chunks).step_by(threads) {
                        let t = Instant::now();
                        let mut chunk = Vec::with_capacity(chunk_len as usize);
                        let range = first + c * chunk_len..(first + (c + 1) * chunk_len).min(n);
                        if remote {
                            let globals: Vec<u64> = range.clone().map(|p| perm.apply(p)).collect();
                            for (q, read) in range.zip(shards.read_many(&globals, &ctx)) {
                                match read {
                                    Ok(e) => chunk.push(Ok(perm.mark(q, e, &ctx))),
                                    Err(e) => chunk.extend(ctx.on_error(e).map(Err)),
                                }
                            }
                        } else {
                            for p in range {
                                let (s, r) = shards.locate(perm.apply(p));
                                match shards.read(s, r, &ctx) {
                                    Ok(e) => chunk.push(Ok(perm.mark(p, e, &ctx))),
                                    Err(e) => chunk.extend(ctx.on_error(e).map(Err)),
                                }
                            }
                        }
                        ctx.metrics().add_busy(t.elapsed());
                        let t = Instant::now();
                        select! {
                            send(tx, chunk) -> r => if r.is_err() { return },
                            recv(shutdown.channel()) -> _ => return,
                        }
                        ctx.metrics().add_wait_downstream(t.elapsed());
                    }
                })
                .map_err(|e| {
                    Error::internal(format!("global_shuffle: cannot start a reader thread: {e}"))
                })?;
            handles.push(handle);
        }
        self.state = State::Threaded(Threaded {
            rxs,
            next_chunk: 0,
            chunks,
            current: VecDeque::new(),
            handles,
        });
        Ok(())
    }
}

/// One shard's index: from the cache while the shard is unchanged, else loaded or built.
/// Damage is reported here with the stage's context (and skipped under the skip policy).
fn index_one(
    ctx: &BuildContext,
    options: &IndexOptions,
    cache: &IndexCache,
    path: &str,
    file_index: u64,
) -> Result<(Arc<RecordIndex>, Option<RemoteObject>)> {
    let p = Path::new(path);
    let file_error = |e: Error| Error::Stage {
        stage: ctx.stage_label(),
        element: Some(ElementId::new(file_index, 0)),
        provenance: None,
        error: Box::new(e),
    };
    // A URL: the object as it is now (size, ETag); its index is cached in memory for as
    // long as the object keeps that ETag.
    let remote = match sluice_storage::Location::parse(path) {
        Ok(location @ sluice_storage::Location::Remote(_)) => Some(
            RemoteObject::open(&location, &options.storage).map_err(|e| file_error(e.into()))?,
        ),
        _ => None,
    };
    let stamp = match &remote {
        Some(object) => Ok(FileStamp::of_object(object)),
        None => FileStamp::of(p),
    };
    if let Ok(stamp) = stamp
        && let Some((s, index)) = cache.0.locked().get(path)
        && *s == stamp
    {
        return Ok((Arc::clone(index), remote));
    }
    let indexed = match &remote {
        Some(object) => record_index::load_or_build_remote(object, options),
        None => record_index::load_or_build(p, options),
    }
    .map_err(file_error)?;
    if let Some(d) = indexed.damage {
        let err = Error::Stage {
            stage: ctx.stage_label(),
            element: Some(ElementId::new(file_index, d.index)),
            provenance: Some(Provenance {
                file: Arc::from(path),
                offset: d.offset,
            }),
            error: Box::new(d.error.into()),
        };
        // Under the skip policy the rest of the shard is one skip; the records before
        // the damage are read.
        if let Some(err) = ctx.on_error(err) {
            return Err(err);
        }
    } else if indexed.bad_data == 0 {
        cache.0.locked().insert(
            path.to_string(),
            (indexed.stamp, Arc::clone(&indexed.index)),
        );
    }
    Ok((indexed.index, remote))
}

impl ElementStream for GlobalShuffleStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            match &mut self.state {
                State::Start(_) => {
                    let State::Start(files) = std::mem::replace(&mut self.state, State::Done)
                    else {
                        unreachable!()
                    };
                    if let Err(e) = self.start(files) {
                        self.state = State::Done;
                        return Some(Err(e));
                    }
                }
                State::Inline { shards, perm, next } => {
                    if *next >= perm.len {
                        self.state = State::Done;
                        return None;
                    }
                    let q = *next;
                    let (s, r) = shards.locate(perm.apply(q));
                    *next += 1;
                    match shards.read(s, r, &self.ctx) {
                        Ok(e) => return Some(Ok(perm.mark(q, e, &self.ctx))),
                        Err(e) => {
                            if let Some(e) = self.ctx.on_error(e) {
                                return Some(Err(e));
                            }
                        }
                    }
                }
                State::Threaded(t) => {
                    if let Some(item) = t.current.pop_front() {
                        return Some(item);
                    }
                    if t.next_chunk >= t.chunks {
                        self.state = State::Done;
                        return None;
                    }
                    let rx = &t.rxs[(t.next_chunk % t.rxs.len() as u64) as usize];
                    match rx.recv() {
                        Ok(chunk) => {
                            t.current.extend(chunk);
                            t.next_chunk += 1;
                        }
                        // The reader stopped: the pipeline is shutting down, or (a bug) the
                        // thread panicked, which must not pass for the end of the epoch.
                        Err(_) => {
                            self.state = State::Done;
                            if self.ctx.shutdown().is_set() {
                                return None;
                            }
                            return Some(Err(Error::Panic {
                                stage: self.ctx.stage_label(),
                                message: "a reader thread stopped before the end of the epoch"
                                    .to_string(),
                            }));
                        }
                    }
                }
                State::Done => return None,
            }
        }
    }
}
