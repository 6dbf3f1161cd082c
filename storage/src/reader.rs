//! Reading an object as a stream of bytes: ranged requests kept in flight ahead of the
//! reader, each pinned to the object's ETag, retried and resumed at the byte reached.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::location::Location;
use crate::options::{ReadOptions, StorageOptions};
use crate::runtime::runtime;
use crate::stats::Counters;
use crate::store::{Store, store_for};

/// Opens `location` for reading from its start: a local file, or a [`RemoteReader`].
pub fn open(location: &Location, options: &StorageOptions) -> Result<Box<dyn Read + Send>> {
    match location {
        Location::Local(path) => {
            let file = File::open(path).map_err(|error| Error::Io {
                path: path.clone(),
                error,
            })?;
            Ok(Box::new(file))
        }
        Location::Remote(_) => Ok(Box::new(RemoteReader::open(location, options)?)),
    }
}

/// Opens `location` for reading without waiting for the store: an object's lookup (size and
/// ETag, unless a recent listing gave them) and its first requests go out in the background,
/// so that opening the next files while others are read costs no round trip. Errors (a
/// missing object, access denied) come at the first read, as `io::Error`s wrapping
/// [`Error`]. A local file is opened now, as by [`open`].
pub fn open_ahead(location: &Location, options: &StorageOptions) -> Result<Box<dyn Read + Send>> {
    open_ahead_at(location, options, 0)
}

/// [`open_ahead`] reading from byte `offset` on (a resumed reader continuing a file): the
/// first requests start there.
pub fn open_ahead_at(
    location: &Location,
    options: &StorageOptions,
    offset: u64,
) -> Result<Box<dyn Read + Send>> {
    match location {
        Location::Local(path) => {
            let mut file = File::open(path).map_err(|error| Error::Io {
                path: path.clone(),
                error,
            })?;
            if offset > 0 {
                use std::io::{Seek, SeekFrom};
                file.seek(SeekFrom::Start(offset))
                    .map_err(|error| Error::Io {
                        path: path.clone(),
                        error,
                    })?;
            }
            Ok(Box::new(file))
        }
        Location::Remote(url) => {
            if crate::listed::recall(url.as_str()).is_some() {
                let mut reader = RemoteReader::idle(RemoteObject::open(location, options)?);
                reader.start_at(offset);
                reader.request_ahead();
                return Ok(Box::new(reader));
            }
            let mut object = RemoteObject::not_looked_up(url, options)?;
            let lookup = runtime().spawn(async move {
                object.look_up_async().await?;
                let mut reader = RemoteReader::idle(object);
                reader.start_at(offset);
                reader.request_ahead();
                Ok(reader)
            });
            Ok(Box::new(LookingUp {
                lookup: Some(lookup),
                reader: None,
            }))
        }
    }
}

/// A [`RemoteReader`] whose object is being looked up.
struct LookingUp {
    lookup: Option<JoinHandle<Result<RemoteReader>>>,
    reader: Option<RemoteReader>,
}

impl Read for LookingUp {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(lookup) = self.lookup.take() {
            let reader = runtime()
                .block_on(lookup)
                .map_err(std::io::Error::other)?
                .map_err(Error::into_io)?;
            self.reader = Some(reader);
        }
        match self.reader.as_mut() {
            Some(reader) => reader.read(buf),
            None => Err(std::io::Error::other("the object's lookup failed earlier")),
        }
    }
}

impl Drop for LookingUp {
    fn drop(&mut self) {
        if let Some(lookup) = &self.lookup {
            lookup.abort();
        }
    }
}

/// The size in bytes of the file or object at `location`.
pub fn size(location: &Location, options: &StorageOptions) -> Result<u64> {
    match location {
        Location::Local(path) => {
            std::fs::metadata(path)
                .map(|m| m.len())
                .map_err(|error| Error::Io {
                    path: path.clone(),
                    error,
                })
        }
        Location::Remote(_) => Ok(RemoteObject::open(location, options)?.size()),
    }
}

/// One remote object as it was when opened: its size and ETag, which every read of it is
/// pinned to (a change is [`Error::Changed`]). Cheap to clone; reads from several threads at
/// once are fine.
#[derive(Clone)]
pub struct RemoteObject {
    url: Arc<str>,
    store: Store,
    path: Path,
    size: u64,
    etag: Option<String>,
    options: ReadOptions,
    /// The size and ETag came from a recent listing, not from a HEAD of this object.
    from_listing: bool,
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteObject")
            .field("url", &self.url)
            .field("size", &self.size)
            .field("etag", &self.etag)
            .finish()
    }
}

impl RemoteObject {
    /// Looks the object at `location` (a URL) up: its size and ETag.
    pub fn open(location: &Location, options: &StorageOptions) -> Result<RemoteObject> {
        let Location::Remote(url) = location else {
            return Err(Error::InvalidUrl {
                url: location.display(),
                message: "not a URL".into(),
            });
        };
        let mut object = RemoteObject::not_looked_up(url, options)?;
        // Just listed: the listing's size and ETag (the reads are pinned to that ETag).
        if let Some((size, etag)) = crate::listed::recall(url.as_str()) {
            object.size = size;
            object.etag = etag;
            object.from_listing = true;
            return Ok(object);
        }
        object.look_up()?;
        Ok(object)
    }

    /// The object at `url`, its size and ETag not known yet.
    fn not_looked_up(url: &url::Url, options: &StorageOptions) -> Result<RemoteObject> {
        let (store, path) = store_for(url, options)?;
        Ok(RemoteObject {
            url: url.as_str().into(),
            store,
            path,
            size: 0,
            etag: None,
            options: options.read,
            from_listing: false,
        })
    }

    /// Asks the store for the object's size and ETag now (a HEAD request).
    fn look_up(&mut self) -> Result<()> {
        runtime().block_on(self.look_up_async())
    }

    /// [`look_up`](Self::look_up) on the runtime.
    async fn look_up_async(&mut self) -> Result<()> {
        let meta = {
            let _request = self.store.counters.start();
            self.store
                .store
                .head(&self.path)
                .await
                .map_err(|e| Error::from_store(&self.url, 0, 1, e))?
        };
        self.size = meta.size;
        self.etag = meta.e_tag;
        self.from_listing = false;
        Ok(())
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The object's ETag, when the store gives one.
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Bytes `[start, end)` of the object (blocking), retried and resumed as the reader's
    /// blocks are.
    pub fn read_range(&self, start: u64, end: u64) -> Result<Bytes> {
        let end = end.min(self.size);
        if start >= end {
            return Ok(Bytes::new());
        }
        let fetch = self.fetch();
        runtime().block_on(async move { fetch.range(start, end).await })
    }

    /// Several ranges, of this or other objects, read concurrently (at most `in_flight`
    /// requests at once); the results in the order asked. This is how random access hides
    /// the store's latency: one reader keeps many small reads in flight.
    pub fn read_ranges(
        reads: &[(&RemoteObject, u64, u64)],
        in_flight: usize,
    ) -> Vec<Result<Bytes>> {
        let jobs: Vec<_> = reads
            .iter()
            .map(|(object, start, end)| {
                let end = (*end).min(object.size);
                let (fetch, start) = (object.fetch(), *start);
                async move {
                    if start >= end {
                        Ok(Bytes::new())
                    } else {
                        fetch.range(start, end).await
                    }
                }
            })
            .collect();
        runtime().block_on(
            futures::stream::iter(jobs)
                .buffered(in_flight.max(1))
                .collect::<Vec<_>>(),
        )
    }

    fn fetch(&self) -> Fetch {
        Fetch {
            url: Arc::clone(&self.url),
            store: Arc::clone(&self.store.data),
            counters: Arc::clone(&self.store.counters),
            path: self.path.clone(),
            etag: self.etag.clone(),
            options: self.options,
        }
    }
}

/// An object read front to back: ranged requests kept in flight ahead of the reader, each
/// pinned to the ETag, retried and resumed at the byte reached. After an error, the next
/// read starts again at the failed block.
pub struct RemoteReader {
    object: RemoteObject,
    /// Where the next block to request starts.
    next_request: u64,
    /// Requests in flight, in order.
    pending: VecDeque<JoinHandle<Result<Bytes>>>,
    /// The block being read, from `pos`.
    current: Bytes,
    /// Offset of `current[0]` in the object.
    pos: u64,
}

impl RemoteReader {
    /// Opens the object at `location` (a URL): looks up its size and ETag, which every
    /// later request is pinned to.
    pub fn open(location: &Location, options: &StorageOptions) -> Result<RemoteReader> {
        Ok(RemoteReader::new(RemoteObject::open(location, options)?))
    }

    /// Reads `object` from its start; the first requests go out now.
    pub fn new(object: RemoteObject) -> RemoteReader {
        let mut reader = RemoteReader::idle(object);
        reader.request_ahead();
        reader
    }

    /// A reader of `object` with nothing requested yet.
    fn idle(object: RemoteObject) -> RemoteReader {
        RemoteReader {
            object,
            next_request: 0,
            pending: VecDeque::new(),
            current: Bytes::new(),
            pos: 0,
        }
    }

    /// Reads from byte `offset` on (before any request).
    fn start_at(&mut self, offset: u64) {
        let offset = offset.min(self.object.size);
        self.next_request = offset;
        self.pos = offset;
    }

    /// Drops the requests in flight; the next read asks again from `pos`.
    fn forget_pending(&mut self) {
        for job in self.pending.drain(..) {
            job.abort();
        }
        self.next_request = self.pos;
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.object.size
    }

    fn request_ahead(&mut self) {
        let options = self.object.options;
        let block = options.block_size.max(1);
        while self.pending.len() < options.max_in_flight.max(1)
            && self.next_request < self.object.size
        {
            let start = self.next_request;
            let end = (start + block).min(self.object.size);
            self.next_request = end;
            let job = self.object.fetch();
            self.pending
                .push_back(runtime().spawn(async move { job.range(start, end).await }));
        }
    }
}

impl Drop for RemoteReader {
    fn drop(&mut self) {
        for job in &self.pending {
            job.abort();
        }
    }
}

impl Read for RemoteReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.current.is_empty() {
            self.request_ahead();
            let Some(job) = self.pending.pop_front() else {
                return Ok(0);
            };
            let outcome = runtime()
                .block_on(job)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", self.object.url)))
                .and_then(|block| block.map_err(Error::into_io));
            let block = match outcome {
                Ok(block) => block,
                Err(e) => {
                    // Forget the blocks after the failed one: a later read starts again at
                    // the failed block (with a fresh retry budget) instead of skipping it.
                    self.forget_pending();
                    let changed = e
                        .get_ref()
                        .and_then(|e| e.downcast_ref::<Error>())
                        .is_some_and(|e| matches!(e, Error::Changed { .. }));
                    if changed && self.pos == 0 && self.object.from_listing {
                        // Replaced between the listing and this first read: nothing was
                        // returned yet, so read the object as it is now.
                        self.object.look_up().map_err(Error::into_io)?;
                        return self.read(buf);
                    }
                    return Err(e);
                }
            };
            self.current = block;
            // Keep the pipe full while this block is consumed.
            self.request_ahead();
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        self.pos += n as u64;
        Ok(n)
    }
}

/// One block's request.
struct Fetch {
    url: Arc<str>,
    store: Arc<dyn ObjectStore>,
    counters: Arc<Counters>,
    path: Path,
    etag: Option<String>,
    options: ReadOptions,
}

impl Fetch {
    /// Bytes `[start, end)`, retried on failures, each retry asking only for what is still
    /// missing (the bytes already received are kept).
    async fn range(&self, start: u64, end: u64) -> Result<Bytes> {
        let mut got = BytesMut::with_capacity((end - start) as usize);
        let mut attempts = 0u32;
        let mut backoff = self.options.initial_backoff;
        loop {
            attempts += 1;
            if attempts > 1 {
                self.counters.retry();
            }
            let from = start + got.len() as u64;
            let outcome = {
                let _request = self.counters.start();
                self.attempt(from, end, &mut got).await
            };
            match outcome {
                Ok(()) if start + got.len() as u64 == end => return Ok(got.freeze()),
                Ok(()) if start + got.len() as u64 > end => {
                    self.counters.failure();
                    return Err(Error::Request {
                        url: self.url.to_string(),
                        offset: start,
                        attempts,
                        message: "the server sent more than the requested range".into(),
                    });
                }
                Ok(()) => {
                    // The body ended early: ask for the rest.
                    self.counters.failure();
                    if attempts > self.options.max_retries {
                        return Err(Error::Request {
                            url: self.url.to_string(),
                            offset: start + got.len() as u64,
                            attempts,
                            message: "the response ended before the range did".into(),
                        });
                    }
                }
                Err(e) => {
                    self.counters.failure();
                    let permanent = matches!(
                        e,
                        object_store::Error::NotFound { .. }
                            | object_store::Error::Precondition { .. }
                            | object_store::Error::Unauthenticated { .. }
                            | object_store::Error::PermissionDenied { .. }
                    );
                    if permanent || attempts > self.options.max_retries {
                        return Err(Error::from_store(
                            &self.url,
                            start + got.len() as u64,
                            attempts,
                            e,
                        ));
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn attempt(&self, from: u64, end: u64, got: &mut BytesMut) -> object_store::Result<()> {
        let options = GetOptions {
            range: Some(GetRange::Bounded(from..end)),
            if_match: self.etag.clone(),
            ..GetOptions::default()
        };
        let result = self.store.get_opts(&self.path, options).await?;
        let mut body = result.into_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            self.counters.read(chunk.len() as u64);
            got.extend_from_slice(&chunk);
        }
        Ok(())
    }
}
