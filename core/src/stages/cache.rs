//! `cache`: keep the first complete pass, in memory or in a directory, and serve later
//! passes from it.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sluice_proto::tfrecord::{Compression, ReaderOptions, TfRecordReader, TfRecordWriter};

use crate::codec;
use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream, IterStream};
use crate::sync::LockExt;

/// Where a cache lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "CacheEntry", into = "CacheEntry")]
pub enum CacheSpec {
    /// In memory, for the life of the dataset (counted against the RAM budget).
    Memory,
    /// In a directory, across runs. The file is named by a fingerprint of the pipeline
    /// definition above the cache and the seed, so a different pipeline never reads another's
    /// cache. It is written under a temporary name and renamed into place only after a
    /// complete pass; a second writer on the same cache gets [`Error::Cache`].
    Directory(PathBuf),
}

/// `cache` as written: `directory = "cache/"` caches on disk across runs; without it the
/// cache is in memory (counted against the RAM budget).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CacheEntry {
    /// The cache directory (relative to the current directory); default: in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    directory: Option<PathBuf>,
}

impl From<CacheEntry> for CacheSpec {
    fn from(e: CacheEntry) -> Self {
        match e.directory {
            Some(d) => CacheSpec::Directory(d),
            None => CacheSpec::Memory,
        }
    }
}

impl From<CacheSpec> for CacheEntry {
    fn from(s: CacheSpec) -> Self {
        CacheEntry {
            directory: match s {
                CacheSpec::Directory(d) => Some(d),
                CacheSpec::Memory => None,
            },
        }
    }
}

impl JsonSchema for CacheSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CacheSpec".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = CacheEntry::json_schema(generator);
        schema.insert(
            "description".into(),
            "Keeps the first complete pass and serves later passes from it: in memory \
             (counted against the RAM budget), or with `directory` on disk across runs, in a \
             file named by a fingerprint of the pipeline above the cache and the seed, so a \
             different pipeline never reads another's cache. A `batch` right after a              memory cache runs before it (the `batch_before_cache` rule): the cache keeps              the batches, the same bits, and later passes hand them out without copying              every element into a batch again (their values are shared by every pass, so              Python arrays of them are read-only)."
                .into(),
        );
        schema
    }
}

impl Spec for CacheSpec {
    const KIND: &'static str = "cache";
    const SUMMARY: &'static str = "keep the first pass in memory or in a directory";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if let CacheSpec::Directory(d) = self
            && d.as_os_str().is_empty()
        {
            return Err(Invalid::at(
                "directory",
                "cache: `directory` must not be empty (leave it out to cache in memory)",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.cache(self.clone()))
    }
}

/// The running definition: the spec plus the in-memory contents once a pass completed.
#[derive(Debug)]
pub(crate) struct CacheStage {
    spec: CacheSpec,
    memory: Arc<Mutex<Option<Arc<Vec<Element>>>>>,
}

impl CacheStage {
    /// A cache stage.
    pub(crate) fn new(spec: CacheSpec) -> Self {
        CacheStage {
            spec,
            memory: Arc::default(),
        }
    }

    /// Where it caches.
    pub(crate) fn spec(&self) -> &CacheSpec {
        &self.spec
    }
}

impl Stage for CacheStage {
    fn name(&self) -> &'static str {
        "cache"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "`cache` after the unit points keeps each host's own records, which another number of hosts cannot use; put it right after the source",
        ))
    }

    fn params(&self) -> Params {
        Params::of(&self.spec)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(&self.spec)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, "cache")?;
        match &self.spec {
            CacheSpec::Memory => {
                if let Some(done) = self.memory.locked().clone() {
                    // The cache's bytes are in the run's ledger while it is read.
                    let account = ctx.account();
                    account.force(done.iter().map(|e| e.nbytes() as u64).sum());
                    let n = done.len();
                    return Ok(Box::new(IterStream((0..n).map(move |i| {
                        let _held = &account;
                        Ok(done[i].clone())
                    }))));
                }
                Ok(Box::new(MemoryFill {
                    upstream: input.open()?,
                    collected: Some(Vec::new()),
                    account: ctx.account(),
                    slot: Arc::clone(&self.memory),
                }))
            }
            CacheSpec::Directory(dir) => {
                let fp = input.fingerprint();
                let name = format!("sluice-cache-{}-seed{}.tfrecord", &fp[..24], ctx.seed());
                let path = dir.join(name);
                if path.is_file() {
                    match complete_count(&path) {
                        Ok(Some(count)) => return read_cache(&path, count),
                        // Killed before its end was written (or damaged since): not a
                        // cache; built again below, replacing it.
                        Ok(None) => tracing::warn!(
                            path = %path.display(),
                            "cache file without its end marker ignored; building it again"
                        ),
                        Err(error) => {
                            return Err(Error::Io {
                                path: path.clone(),
                                error,
                            });
                        }
                    }
                }
                fs::create_dir_all(dir).map_err(|error| Error::Io {
                    path: dir.clone(),
                    error,
                })?;
                DiskFill::start(input.open()?, &path, &fp).map(|s| Box::new(s) as BoxStream)
            }
        }
    }
}

struct MemoryFill {
    upstream: BoxStream,
    collected: Option<Vec<Element>>,
    /// The bytes collected, in the run's byte ledger; the cache alone may not hold more
    /// than the RAM budget (it fills on its consumer's thread: it cannot wait).
    account: Arc<crate::run::ledger::Account>,
    slot: Arc<Mutex<Option<Arc<Vec<Element>>>>>,
}

impl ElementStream for MemoryFill {
    fn next(&mut self) -> Option<Result<Element>> {
        match self.upstream.next() {
            Some(Ok(e)) => {
                if let Some(c) = self.collected.as_mut() {
                    self.account.force(e.nbytes() as u64);
                    if self.account.held() > self.account.budget() {
                        self.collected = None;
                        self.account.release_all();
                        return Some(Err(Error::ram_budget(format!(
                            "the in-memory cache needs more than the RAM budget of {} bytes; \
                             cache to a directory, cache smaller elements, or raise `ram_budget`",
                            self.account.budget()
                        ))));
                    }
                    c.push(e.clone());
                }
                Some(Ok(e))
            }
            Some(Err(e)) => {
                // A pass with an error is not complete: never cached.
                self.collected = None;
                self.account.release_all();
                Some(Err(e))
            }
            None => {
                if let Some(c) = self.collected.take() {
                    let mut slot = self.slot.locked();
                    if slot.is_none() {
                        *slot = Some(Arc::new(c));
                    }
                }
                None
            }
        }
    }
}

/// The number of elements of the cache file at `path` when it is complete: its last
/// record is the end marker `DiskFill` writes after the pass (an intact TFRecord frame of
/// [`END_MAGIC`] and the count). `None` for a file without it (a writer killed on the way,
/// a file cut short).
fn complete_count(path: &Path) -> std::io::Result<Option<u64>> {
    use sluice_proto::tfrecord::masked_crc32c;
    use std::io::{Read, Seek, SeekFrom};
    const DATA: usize = END_MAGIC.len() + 8;
    const FRAME: usize = 8 + 4 + DATA + 4;
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len < FRAME as u64 {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(len - FRAME as u64))?;
    let mut frame = [0u8; FRAME];
    file.read_exact(&mut frame)?;
    let word = |at: usize| u32::from_le_bytes(frame[at..at + 4].try_into().expect("4 bytes"));
    let data = &frame[12..12 + DATA];
    let intact = frame[..8] == (DATA as u64).to_le_bytes()
        && word(8) == masked_crc32c(&frame[..8])
        && word(12 + DATA) == masked_crc32c(data)
        && data.starts_with(END_MAGIC);
    Ok(intact.then(|| u64::from_le_bytes(data[END_MAGIC.len()..].try_into().expect("8 bytes"))))
}

/// The `count` elements of a complete cache file.
fn read_cache(path: &Path, count: u64) -> Result<BoxStream> {
    let reader = TfRecordReader::open(
        path,
        ReaderOptions::default().with_compression(Compression::None),
    )?;
    let mut records = reader.map(|r| r.map_err(Error::from));
    // The first record is the header written by `DiskFill`.
    match records.next() {
        Some(Ok(h)) if h.data.starts_with(HEADER_MAGIC) => {}
        Some(Err(e)) => return Err(e),
        _ => {
            return Err(Error::Cache {
                path: path.to_path_buf(),
                message: "not a Sluice cache file (bad header); delete it".into(),
            });
        }
    }
    Ok(Box::new(IterStream(
        records
            .take(usize::try_from(count).unwrap_or(usize::MAX))
            .map(|r| r.and_then(|r| codec::decode(r.data))),
    )))
}

/// The first record of a cache file (then the pipeline's fingerprint).
const HEADER_MAGIC: &[u8] = b"sluice-cache-v1\n";

/// The last record of a complete cache file (then the element count, u64 little-endian):
/// a file without it is not a cache.
const END_MAGIC: &[u8] = b"sluice-cache-end";

struct DiskFill {
    upstream: BoxStream,
    writer: Option<TfRecordWriter<File>>,
    tmp: PathBuf,
    path: PathBuf,
    lock: Option<File>,
    buf: BytesMut,
    /// Elements written.
    count: u64,
}

impl DiskFill {
    fn start(upstream: BoxStream, path: &Path, fingerprint: &str) -> Result<DiskFill> {
        let lock_path = path.with_extension("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|error| Error::Io {
                path: lock_path.clone(),
                error,
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(Error::Cache {
                    path: path.to_path_buf(),
                    message: "another pipeline is writing this cache now; wait for it to finish, \
                              or use another cache directory"
                        .into(),
                });
            }
            Err(fs::TryLockError::Error(error)) => {
                return Err(Error::Io {
                    path: lock_path,
                    error,
                });
            }
        }
        // Another writer may have finished between our check and the lock. Holding the lock,
        // any temporary file of this cache is a killed writer's: removed.
        remove_temporaries(path);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let mut writer = TfRecordWriter::create(&tmp, Compression::None)?;
        let mut header = HEADER_MAGIC.to_vec();
        header.extend_from_slice(fingerprint.as_bytes());
        writer.write_record(&header)?;
        Ok(DiskFill {
            upstream,
            writer: Some(writer),
            tmp,
            path: path.to_path_buf(),
            lock: Some(lock),
            buf: BytesMut::new(),
            count: 0,
        })
    }

    fn abandon(&mut self) {
        if self.writer.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
        self.lock = None;
    }
}

impl ElementStream for DiskFill {
    fn next(&mut self) -> Option<Result<Element>> {
        match self.upstream.next() {
            Some(Ok(e)) => {
                if let Some(w) = self.writer.as_mut() {
                    self.buf.clear();
                    codec::encode(&e, &mut self.buf);
                    if let Err(err) = w.write_record(&self.buf) {
                        self.abandon();
                        return Some(Err(err.into()));
                    }
                    self.count += 1;
                }
                Some(Ok(e))
            }
            Some(Err(e)) => {
                self.abandon();
                Some(Err(e))
            }
            None => {
                if let Some(mut w) = self.writer.take() {
                    let mut end = END_MAGIC.to_vec();
                    end.extend_from_slice(&self.count.to_le_bytes());
                    let done = w
                        .write_record(&end)
                        .and_then(|()| w.finish())
                        .map_err(Error::from)
                        .and_then(|f| {
                            f.sync_all().map_err(|error| Error::Io {
                                path: self.tmp.clone(),
                                error,
                            })
                        })
                        .and_then(|_| {
                            sluice_storage::rename_durably(&self.tmp, &self.path).map_err(|error| {
                                Error::Io {
                                    path: self.path.clone(),
                                    error,
                                }
                            })
                        });
                    self.lock = None;
                    if let Err(e) = done {
                        let _ = fs::remove_file(&self.tmp);
                        return Some(Err(e));
                    }
                }
                None
            }
        }
    }
}

impl Drop for DiskFill {
    fn drop(&mut self) {
        // A partial pass never becomes a cache.
        self.abandon();
    }
}

/// Removes the temporary files of the cache file `path` (`NAME.tmp-PID`) that writers killed
/// before their rename left; called with the cache's lock held, so none is being written.
fn remove_temporaries(path: &Path) {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return;
    };
    let prefix = format!("{}.tmp-", stem.to_string_lossy());
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = fs::remove_file(entry.path());
        }
    }
}
