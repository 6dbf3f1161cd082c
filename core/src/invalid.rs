//! Impossible parameter values, found before anything runs: each names the key it is
//! about, a path from the stage (or from a pipeline file's root), so a pipeline file can
//! point at its line and column and the Rust API can name the key.

use std::fmt;

/// One step of a key path: a key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A table key (a struct field).
    Name(String),
    /// An array index.
    Index(usize),
}

impl Key {
    /// A [`Key::Name`].
    pub fn name(k: &str) -> Key {
        Key::Name(k.to_string())
    }
}

/// An impossible value: where (a key path, e.g. `ops[2].height`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The path of the offending key (from the stage's parameters, or from the file's
    /// root once a pipeline file has prefixed it with `stage[i]`).
    pub path: Vec<Key>,
    /// What is wrong, worded for the user, naming keys as they are written.
    pub message: String,
}

impl Invalid {
    /// An impossible value at `path`.
    pub fn new(path: Vec<Key>, message: impl Into<String>) -> Invalid {
        Invalid {
            path,
            message: message.into(),
        }
    }

    /// An impossible value of the key `key` (a field of the stage).
    pub fn at(key: &str, message: impl Into<String>) -> Invalid {
        Invalid::new(vec![Key::name(key)], message)
    }

    /// This problem with `base` put in front of its path.
    pub fn under(mut self, base: &[Key]) -> Invalid {
        let mut path = base.to_vec();
        path.append(&mut self.path);
        self.path = path;
        self
    }

    /// The path as written: `stage[2].ops[0].height`.
    pub fn path_display(&self) -> PathDisplay<'_> {
        PathDisplay(&self.path)
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path_display(), self.message)
        }
    }
}

/// A key path as written: `stage[2].ops[0].height`.
pub struct PathDisplay<'a>(pub &'a [Key]);

impl fmt::Display for PathDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Key::Name(k) if i == 0 => write!(f, "{k}")?,
                Key::Name(k) => write!(f, ".{k}")?,
                Key::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A path under `base` (e.g. a stage's path) through the keys `rest`.
pub(crate) fn under(base: &[Key], rest: &[&str]) -> Vec<Key> {
    let mut p = base.to_vec();
    p.extend(rest.iter().map(|k| Key::name(k)));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_written() {
        let p = Invalid::at("height", "must be at least 1")
            .under(&[Key::name("ops"), Key::Index(2)])
            .under(&[Key::name("stage"), Key::Index(0)]);
        assert_eq!(p.path_display().to_string(), "stage[0].ops[2].height");
        assert_eq!(p.to_string(), "stage[0].ops[2].height: must be at least 1");
    }
}
