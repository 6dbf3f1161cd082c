//! Inputs named by a path or an object-storage URL (`s3://`, `gs://`, `az://`,
//! `http(s)://`, `file://`), opened alike for `sluice cat` and `sluice verify`.

use std::fs::File;
use std::io::Read;

use anyhow::Result;

/// Whether `name` is a URL read through object storage.
pub(crate) fn is_url(name: &str) -> bool {
    sluice_storage::is_url(name)
}

/// The objects a URL pattern names (globs expand by listing), sorted.
pub(crate) fn expand_url(pattern: &str) -> Result<Vec<String>> {
    let found = sluice_storage::expand(pattern, &Default::default())?;
    Ok(found.iter().map(|l| l.display()).collect())
}

/// `name` opened from its start, with its size: a local file or an object. The error is
/// the message to report after the name.
pub(crate) fn open(name: &str) -> std::result::Result<(Box<dyn Read + Send>, u64), String> {
    if is_url(name) {
        let location = sluice_storage::Location::parse(name).map_err(|e| e.to_string())?;
        let sluice_storage::Location::Local(path) = location else {
            let reader = sluice_storage::RemoteReader::open(&location, &Default::default())
                .map_err(|e| e.to_string())?;
            let size = reader.size();
            return Ok((Box::new(reader), size));
        };
        return open_file(&path);
    }
    open_file(std::path::Path::new(name))
}

/// A local file and its size.
fn open_file(name: &std::path::Path) -> std::result::Result<(Box<dyn Read + Send>, u64), String> {
    let file = File::open(name).map_err(|e| format!("cannot open: {e}"))?;
    let size = file
        .metadata()
        .map_err(|e| format!("cannot open: {e}"))?
        .len();
    Ok((Box::new(file), size))
}
