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
use crate::store::store_for;

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
        Location::Remote(url) => {
            let (store, path) = store_for(url, options)?;
            let meta = runtime()
                .block_on(store.head(&path))
                .map_err(|e| Error::from_store(url.as_str(), 0, 1, e))?;
            Ok(meta.size)
        }
    }
}

/// An object read front to back (see the [module docs](self)).
pub struct RemoteReader {
    url: Arc<str>,
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    etag: Option<String>,
    options: ReadOptions,
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
        let Location::Remote(url) = location else {
            return Err(Error::InvalidUrl {
                url: location.display(),
                message: "not a URL".into(),
            });
        };
        let (store, path) = store_for(url, options)?;
        let meta = runtime()
            .block_on(store.head(&path))
            .map_err(|e| Error::from_store(url.as_str(), 0, 1, e))?;
        Ok(RemoteReader {
            url: url.as_str().into(),
            store,
            path,
            size: meta.size,
            etag: meta.e_tag,
            options: options.read,
            next_request: 0,
            pending: VecDeque::new(),
            current: Bytes::new(),
            pos: 0,
        })
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn request_ahead(&mut self) {
        while self.pending.len() < self.options.max_in_flight.max(1)
            && self.next_request < self.size
        {
            let start = self.next_request;
            let end = (start + self.options.block_size.max(1)).min(self.size);
            self.next_request = end;
            let job = Fetch {
                url: Arc::clone(&self.url),
                store: Arc::clone(&self.store),
                path: self.path.clone(),
                etag: self.etag.clone(),
                options: self.options,
            };
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
            let block = runtime()
                .block_on(job)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", self.url)))?
                .map_err(Error::into_io)?;
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
            let from = start + got.len() as u64;
            match self.attempt(from, end, &mut got).await {
                Ok(()) if start + got.len() as u64 == end => return Ok(got.freeze()),
                Ok(()) if start + got.len() as u64 > end => {
                    return Err(Error::Request {
                        url: self.url.to_string(),
                        offset: start,
                        attempts,
                        message: "the server sent more than the requested range".into(),
                    });
                }
                Ok(()) => {
                    // The body ended early: ask for the rest.
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
            got.extend_from_slice(&chunk?);
        }
        Ok(())
    }
}
