//! Writing a file or object that appears whole under its final name, or not at all.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use object_store::buffered::BufWriter as ObjectBufWriter;
use tokio::io::AsyncWriteExt;

use crate::durable::{rename_durably, temp_name};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::options::StorageOptions;
use crate::runtime::runtime;
use crate::stats::Counters;
use crate::store::store_for;

/// Bytes gathered before a part is handed to the upload (S3's parts must be ≥ 5 MiB).
const PART_SIZE: usize = 10 << 20;

/// Uploads in flight per object.
const PARTS_IN_FLIGHT: usize = 4;

/// Creates the file or object at `location` for writing. Nothing appears under that name
/// until [`ObjectWriter::commit`] returns: a local file is written beside it under a hidden
/// temporary name and renamed into place; an object is uploaded in parts (multipart upload,
/// or one request when small) that the store makes visible only when the upload completes.
/// A local file is synced before its rename and its directory after, so a committed file
/// survives a power loss too.
/// A writer dropped without `commit` (an error, a panic) removes its temporary file or
/// aborts its upload; a killed process leaves no file under the final name either (an
/// unfinished multipart upload stays invisible; stores' lifecycle rules remove them).
///
/// Local parent directories are created as needed.
///
/// ```
/// use std::io::Write;
/// let dir = tempfile::tempdir().unwrap();
/// let at = sluice_storage::Location::parse(&dir.path().join("out.bin").display().to_string()).unwrap();
/// let mut w = sluice_storage::create(&at, &Default::default()).unwrap();
/// w.write_all(b"hello").unwrap();
/// assert!(!dir.path().join("out.bin").exists()); // not yet
/// assert_eq!(w.commit().unwrap(), 5);
/// assert_eq!(std::fs::read(dir.path().join("out.bin")).unwrap(), b"hello");
/// ```
pub fn create(location: &Location, options: &StorageOptions) -> Result<ObjectWriter> {
    match location {
        Location::Local(path) => {
            let io = |error| Error::Io {
                path: path.clone(),
                error,
            };
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            let temp = temp_name(path);
            let file = File::create(&temp).map_err(|error| Error::Io {
                path: temp.clone(),
                error,
            })?;
            Ok(ObjectWriter {
                name: location.display(),
                bytes: 0,
                inner: Inner::Local {
                    file: Some(BufWriter::with_capacity(1 << 20, file)),
                    temp,
                    path: path.clone(),
                },
            })
        }
        Location::Remote(url) => {
            let (store, path) = store_for(url, options)?;
            let upload = ObjectBufWriter::with_capacity(Arc::clone(&store.store), path, PART_SIZE)
                .with_max_concurrency(PARTS_IN_FLIGHT);
            Ok(ObjectWriter {
                name: url.to_string(),
                bytes: 0,
                inner: Inner::Remote {
                    upload: Some(upload),
                    buffer: Vec::with_capacity(PART_SIZE),
                    counters: store.counters,
                },
            })
        }
    }
}

/// A file or object being written (see [`create`]).
pub struct ObjectWriter {
    name: String,
    bytes: u64,
    inner: Inner,
}

enum Inner {
    Local {
        file: Option<BufWriter<File>>,
        temp: PathBuf,
        path: PathBuf,
    },
    Remote {
        upload: Option<ObjectBufWriter>,
        buffer: Vec<u8>,
        counters: Arc<Counters>,
    },
}

impl ObjectWriter {
    /// The path or URL being written.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Finishes the write: the file or object appears whole under its name. Returns the
    /// bytes written.
    pub fn commit(mut self) -> Result<u64> {
        let name = self.name.clone();
        match &mut self.inner {
            Inner::Local { file, temp, path } => {
                let Some(file) = file.take() else {
                    return Ok(self.bytes);
                };
                let io = |error| Error::Io {
                    path: path.clone(),
                    error,
                };
                let file = file.into_inner().map_err(|e| io(e.into_error()))?;
                file.sync_all().map_err(io)?;
                rename_durably(temp, path).map_err(io)?;
            }
            Inner::Remote {
                upload,
                buffer,
                counters,
            } => {
                let Some(mut up) = upload.take() else {
                    return Ok(self.bytes);
                };
                let rest = Bytes::from(std::mem::take(buffer));
                let sent = rest.len() as u64;
                runtime()
                    .block_on(async {
                        if !rest.is_empty() {
                            up.put(rest).await?;
                        }
                        up.shutdown()
                            .await
                            .map_err(|e| object_store::Error::Generic {
                                store: "upload",
                                source: Box::new(e),
                            })
                    })
                    .map_err(|e| Error::from_store(&name, self.bytes, 1, e))?;
                counters.written(sent);
            }
        }
        Ok(self.bytes)
    }

    fn upload_part(&mut self) -> std::io::Result<()> {
        let Inner::Remote {
            upload: Some(up),
            buffer,
            counters,
        } = &mut self.inner
        else {
            return Ok(());
        };
        let part = Bytes::from(std::mem::replace(buffer, Vec::with_capacity(PART_SIZE)));
        let sent = part.len() as u64;
        runtime()
            .block_on(up.put(part))
            .map_err(|e| Error::from_store(&self.name, self.bytes, 1, e).into_io())?;
        counters.written(sent);
        Ok(())
    }
}

impl Write for ObjectWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.inner {
            Inner::Local { file: Some(f), .. } => f.write(buf)?,
            Inner::Remote {
                upload: Some(_),
                buffer,
                ..
            } => {
                let n = buf.len().min(PART_SIZE - buffer.len());
                buffer.extend_from_slice(&buf[..n]);
                n
            }
            _ => {
                return Err(std::io::Error::other(format!(
                    "{}: already committed",
                    self.name
                )));
            }
        };
        self.bytes += n as u64;
        if let Inner::Remote { buffer, .. } = &self.inner
            && buffer.len() >= PART_SIZE
        {
            self.upload_part()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // Bytes become durable at `commit`; flushing a local file is still useful to report
        // errors early.
        match &mut self.inner {
            Inner::Local { file: Some(f), .. } => f.flush(),
            _ => Ok(()),
        }
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        match &mut self.inner {
            Inner::Local { file, temp, .. } => {
                if file.take().is_some() {
                    let _ = std::fs::remove_file(&*temp);
                }
            }
            Inner::Remote { upload, .. } => {
                if let Some(mut up) = upload.take() {
                    let _ = runtime().block_on(up.abort());
                }
            }
        }
    }
}

impl std::fmt::Debug for ObjectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectWriter")
            .field("name", &self.name)
            .field("bytes", &self.bytes)
            .finish()
    }
}
