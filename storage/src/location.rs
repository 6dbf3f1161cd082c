//! Locations: a local path or an object-store URL.

use std::path::PathBuf;

use url::Url;

use crate::error::{Error, Result};

/// Where data is: a local path, or an object in a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A file on this machine (`file://` URLs become this).
    Local(PathBuf),
    /// An object: the URL as written (`s3://bucket/key`).
    Remote(Url),
}

/// The URL schemes read from object storage.
const REMOTE: &[&str] = &[
    "s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure", "http", "https",
];

/// Whether `s` is a URL Sluice reads from object storage (or a `file://` URL), not a
/// plain path.
pub fn is_url(s: &str) -> bool {
    match s.split_once("://") {
        Some((scheme, _)) => {
            let scheme = scheme.to_ascii_lowercase();
            scheme == "file" || REMOTE.contains(&scheme.as_str())
        }
        None => false,
    }
}

impl Location {
    /// Reads `s`: a URL of a known scheme, a `file://` URL, or a local path.
    pub fn parse(s: &str) -> Result<Location> {
        if !s.contains("://") {
            return Ok(Location::Local(PathBuf::from(s)));
        }
        let url = Url::parse(s).map_err(|e| Error::InvalidUrl {
            url: s.to_string(),
            message: e.to_string(),
        })?;
        let scheme = url.scheme().to_ascii_lowercase();
        if scheme == "file" {
            let path = url.to_file_path().map_err(|()| Error::InvalidUrl {
                url: s.to_string(),
                message: "not a local path".into(),
            })?;
            return Ok(Location::Local(path));
        }
        if !REMOTE.contains(&scheme.as_str()) {
            return Err(Error::InvalidUrl {
                url: s.to_string(),
                message: format!(
                    "unknown scheme `{scheme}` (Sluice reads s3://, gs://, az://, http(s):// and file://)"
                ),
            });
        }
        Ok(Location::Remote(url))
    }

    /// The location as written (a path or a URL).
    pub fn display(&self) -> String {
        match self {
            Location::Local(p) => p.display().to_string(),
            Location::Remote(u) => u.to_string(),
        }
    }

    /// `name` inside this folder or prefix: a path joined, or the URL's path with `/name`
    /// appended.
    ///
    /// ```
    /// use sluice_storage::Location;
    /// let out = Location::parse("s3://bucket/prepared/").unwrap();
    /// assert_eq!(out.join("part-0").display(), "s3://bucket/prepared/part-0");
    /// let out = Location::parse("prepared").unwrap();
    /// assert_eq!(out.join("part-0").display(), "prepared/part-0");
    /// ```
    pub fn join(&self, name: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.join(name)),
            Location::Remote(u) => {
                let mut u = u.clone();
                let path = format!("{}/{name}", u.path().trim_end_matches('/'));
                u.set_path(&path);
                Location::Remote(u)
            }
        }
    }
}
