//! Expanding a pattern (a path or URL with glob characters) to the files or objects it
//! matches, sorted, as `glob` does for local paths.

use futures::TryStreamExt;
use glob::{MatchOptions, Pattern};
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::location::Location;
use crate::options::StorageOptions;
use crate::runtime::runtime;
use crate::store::store_for;

const GLOB_CHARS: &[char] = &['*', '?', '['];

/// The files or objects `pattern` matches, sorted: a local glob, or for a URL the objects
/// listed under the prefix before its first glob character whose keys match (`*` and `?`
/// do not cross `/`). A pattern without glob characters is itself, if it exists. Matching
/// nothing is [`Error::NoMatch`].
pub fn expand(pattern: &str, options: &StorageOptions) -> Result<Vec<Location>> {
    match Location::parse(pattern)? {
        Location::Local(path) => expand_local(&path.to_string_lossy(), pattern),
        Location::Remote(url) => {
            let (store, path) = store_for(&url, options)?;
            let (counters, store) = (store.counters, store.store);
            let key = path.as_ref().to_string();
            let glob_at = key.find(GLOB_CHARS);
            if glob_at.is_none() {
                // One object: it exists or the pattern matches nothing.
                let _request = counters.start();
                return match runtime().block_on(store.head(&path)) {
                    Ok(meta) => {
                        crate::listed::remember(url.as_str(), meta.size, meta.e_tag);
                        Ok(vec![Location::Remote(url)])
                    }
                    Err(object_store::Error::NotFound { .. }) => Err(Error::NoMatch {
                        pattern: pattern.to_string(),
                    }),
                    Err(e) => Err(Error::from_store(pattern, 0, 1, e)),
                };
            }
            let prefix = match glob_at {
                Some(i) => key[..i]
                    .rsplit_once('/')
                    .map(|(p, _)| p.to_string())
                    .unwrap_or_default(),
                None => key.clone(),
            };
            let matcher = match glob_at {
                Some(_) => Some(Pattern::new(&key).map_err(|e| Error::Pattern {
                    pattern: pattern.to_string(),
                    message: e.to_string(),
                })?),
                None => None,
            };
            let prefix_path = object_store::path::Path::from(prefix.as_str());
            let _request = counters.start();
            let listed: Vec<object_store::ObjectMeta> = runtime()
                .block_on(store.list(Some(&prefix_path)).try_collect())
                .map_err(|e| match Error::from_store(pattern, 0, 1, e) {
                    // object_store reports a listing's 404 as a generic error.
                    Error::Request { url, message, .. } if message.contains("NoSuchBucket") => {
                        Error::NotFound { url, message }
                    }
                    other => other,
                })?;
            let opts = MatchOptions {
                case_sensitive: true,
                require_literal_separator: true,
                require_literal_leading_dot: false,
            };
            let mut keys: Vec<String> = listed
                .into_iter()
                .map(|m| {
                    let key = m.location.as_ref().to_string();
                    let mut u = url.clone();
                    u.set_path(&format!("/{key}"));
                    crate::listed::remember(u.as_str(), m.size, m.e_tag);
                    key
                })
                .filter(|k| match &matcher {
                    Some(m) => m.matches_with(k, opts),
                    None => *k == key,
                })
                .collect();
            keys.sort();
            keys.dedup();
            if keys.is_empty() {
                return Err(Error::NoMatch {
                    pattern: pattern.to_string(),
                });
            }
            Ok(keys
                .into_iter()
                .map(|k| {
                    let mut u = url.clone();
                    u.set_path(&format!("/{k}"));
                    Location::Remote(u)
                })
                .collect())
        }
    }
}

fn expand_local(glob_pattern: &str, pattern: &str) -> Result<Vec<Location>> {
    let paths = glob::glob(glob_pattern).map_err(|e| Error::Pattern {
        pattern: pattern.to_string(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    for p in paths {
        let p = p.map_err(|e| Error::Io {
            path: e.path().to_path_buf(),
            error: std::io::Error::new(e.error().kind(), e.error().to_string()),
        })?;
        if p.is_file() {
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err(Error::NoMatch {
            pattern: pattern.to_string(),
        });
    }
    out.sort();
    out.dedup();
    Ok(out.into_iter().map(Location::Local).collect())
}
