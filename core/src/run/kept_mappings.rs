//! Mapped files kept for the passes of a `repeat`.
//!
//! A local TFRecord file is read mapped into memory ([`sluice_storage::map_file`]). Setting a
//! mapping up and tearing it down costs the kernel work per page (entering the page cache's
//! pages into the process's page tables, then removing them): on the bench's `parse`
//! pipeline, five passes over the same files, a quarter of all CPU time. When the plan reads
//! its files again (a `repeat` of more than one pass, with no `cache` between it and the
//! files), the run keeps each file's mapping after its first pass and hands the same mapping
//! to every later pass, so the pages are entered once per run, not once per pass.
//!
//! Kept are at most [`KeptMappings::MAX_FILES`] files and, together, at most a quarter of the
//! run's `ram_budget` (a mapped page a pass has touched counts in the process's resident
//! memory while the mapping is kept, though the kernel may take it back as it takes back
//! any page-cache page); files past either limit are mapped and unmapped per pass, as
//! without a repeat. Everything kept is unmapped when the run ends. A file whose size or
//! modification time changed since it was mapped is mapped again.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;

use crate::plan::PlanNode;
use crate::stages::cache::CacheStage;
use crate::stages::repeat::RepeatSpec;
use crate::sync::LockExt;

/// The mappings a run keeps for the passes of its `repeat`.
#[derive(Debug)]
pub(crate) struct KeptMappings {
    /// Bytes of mappings kept at most.
    limit: u64,
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    bytes: u64,
    files: HashMap<String, (Stamp, Bytes)>,
}

/// What identifies a file's contents well enough to reuse its mapping: its size and
/// modification time (a rewrite in place changes the time; a replacement, both or the inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> io::Result<Stamp> {
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        })
    }
}

impl KeptMappings {
    /// Files kept at most (each takes one of the mapping guard's slots for the whole run).
    pub(crate) const MAX_FILES: usize = 256;

    /// Keeps up to `limit` bytes of mappings.
    pub(crate) fn new(limit: u64) -> Self {
        KeptMappings {
            limit,
            kept: Mutex::default(),
        }
    }

    /// Whether a run of `plan` keeps its mappings: some `repeat` of more than one pass reads
    /// its input again without a `cache` in between.
    pub(crate) fn wanted(plan: &PlanNode) -> bool {
        if let Some(repeat) = plan.stage_as::<RepeatSpec>()
            && repeat.count.is_none_or(|c| c > 1)
            && plan.inputs().iter().any(|i| reads_again(i))
        {
            return true;
        }
        plan.inputs().iter().any(|i| KeptMappings::wanted(i))
    }

    /// The whole of the local file at `path`, mapped (as [`sluice_storage::map_file`]):
    /// the mapping kept from an earlier pass if the file is unchanged, else a new one, kept
    /// for the next pass while the limits allow.
    pub(crate) fn map(&self, path: &str) -> io::Result<Option<Bytes>> {
        let stamp = Stamp::of(Path::new(path))?;
        {
            let mut kept = self.kept.locked();
            if let Some((s, data)) = kept.files.get(path)
                && *s == stamp
            {
                return Ok(Some(data.clone()));
            }
            // Changed since it was mapped (or never kept): forget any old mapping (records
            // still holding it keep it alive until they go).
            if let Some((_, old)) = kept.files.remove(path) {
                kept.bytes -= old.len() as u64;
            }
        }
        let Some(data) = sluice_storage::map_file(Path::new(path))? else {
            return Ok(None);
        };
        let mut kept = self.kept.locked();
        let len = data.len() as u64;
        if kept.files.len() < Self::MAX_FILES
            && kept.bytes + len <= self.limit
            && !kept.files.contains_key(path)
        {
            kept.bytes += len;
            kept.files.insert(path.to_string(), (stamp, data.clone()));
        }
        Ok(Some(data))
    }

    /// Bytes of mappings kept now.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.kept.locked().bytes
    }
}

/// Whether the records under `node` are read from their source on every pass (no `cache`
/// replays them).
fn reads_again(node: &PlanNode) -> bool {
    node.stage_as::<CacheStage>().is_none()
        && (node.inputs().is_empty() || node.inputs().iter().any(|i| reads_again(i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn a_file_is_mapped_once_and_its_mapping_handed_to_every_pass() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        std::fs::write(&path, b"hello").unwrap();
        let path = path.to_str().unwrap();
        let kept = KeptMappings::new(1 << 20);
        let first = kept.map(path).unwrap().unwrap();
        let second = kept.map(path).unwrap().unwrap();
        assert_eq!(&first[..], b"hello");
        assert_eq!(first.as_ptr(), second.as_ptr(), "the same mapping");
        assert_eq!(kept.bytes(), 5);
    }

    #[test]
    fn a_changed_file_is_mapped_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        std::fs::write(&path, b"hello").unwrap();
        let p = path.to_str().unwrap();
        let kept = KeptMappings::new(1 << 20);
        let first = kept.map(p).unwrap().unwrap();
        std::fs::write(&path, b"hello, world").unwrap();
        let second = kept.map(p).unwrap().unwrap();
        assert_eq!(&first[..], b"hello");
        assert_eq!(&second[..], b"hello, world");
        assert_eq!(kept.bytes(), 12);
    }

    #[test]
    fn files_past_the_limit_are_mapped_but_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.bin"), dir.path().join("b.bin"));
        std::fs::write(&a, [1u8; 6]).unwrap();
        std::fs::write(&b, [2u8; 6]).unwrap();
        let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
        let kept = KeptMappings::new(10);
        kept.map(a).unwrap().unwrap();
        let b1 = kept.map(b).unwrap().unwrap();
        assert_eq!(&b1[..], &[2u8; 6]);
        assert_eq!(kept.bytes(), 6, "only the first file fits");
        let a2 = kept.map(a).unwrap().unwrap();
        assert_eq!(&a2[..], &[1u8; 6]);
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let kept = KeptMappings::new(1 << 20);
        assert!(kept.map("/no/such/file.tfrecord").is_err());
    }

    fn files() -> Dataset {
        Dataset::range(0, 4)
    }

    #[test]
    fn only_a_repeat_reading_its_files_again_keeps_mappings() {
        let wanted = |d: Dataset| KeptMappings::wanted(d.plan());
        assert!(wanted(files().repeat(Some(2))));
        assert!(wanted(files().repeat(None)));
        assert!(wanted(files().batch(2).repeat(Some(3)).batch(4)));
        assert!(!wanted(files()));
        assert!(!wanted(files().repeat(Some(1))));
        assert!(!wanted(files().cache(CacheSpec::Memory).repeat(Some(3))));
    }
}
