//! Durable local writes: a file that appears whole under its name or not at all, and stays
//! there after a crash or a power loss.
//!
//! The recipe is POSIX's: write a temporary file in the same directory, `fsync` it, rename
//! it over the final name (atomic on one file system), then `fsync` the directory so that
//! the rename itself is on disk. A process killed at any point leaves either the old file,
//! the new one whole, or (before the rename) a hidden temporary file that no reader looks
//! at and [`remove_stale_temporaries`] removes.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `dir/.name.partial-PID-N`: hidden, unique in this process, on the same file system.
pub(crate) fn temp_name(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.partial-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Writes `bytes` to `path` durably: a hidden temporary file beside it, synced, renamed
/// into place, the directory synced. Readers see the old contents or the new, never a
/// part. The parent directory is created as needed.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("checkpoint.json");
/// sluice_storage::write_durably(&path, b"{}").unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), b"{}");
/// assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1); // no temporary left
/// ```
pub fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = parent(path) {
        fs::create_dir_all(dir)?;
    }
    let temp = temp_name(path);
    let written = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    rename_durably(&temp, path).inspect_err(|_| {
        let _ = fs::remove_file(&temp);
    })
}

/// Renames `from` (a complete, synced file) to `to` in the same directory and syncs the
/// directory, so that the new name survives a power loss.
pub fn rename_durably(from: &Path, to: &Path) -> io::Result<()> {
    fs::rename(from, to)?;
    sync_dir(parent(to).unwrap_or(Path::new(".")))
}

/// Syncs a directory (its entries: files created, renamed or removed in it). A no-op where
/// directories cannot be opened for syncing (Windows).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Removes the temporary files that writers of `path` killed before their rename left
/// beside it (`.NAME.partial-PID-N` of a process no longer running); returns how many.
/// Those of running processes (another writer now) are left alone.
pub fn remove_stale_temporaries(path: &Path) -> io::Result<usize> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Ok(0);
    };
    let dir = parent(path).unwrap_or(Path::new("."));
    let prefix = format!(".{name}.partial-");
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !process_running(pid)) {
            fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Whether process `pid` runs (on Linux, by `/proc`; elsewhere every process is assumed
/// to, so nothing is removed).
fn process_running(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

fn parent(path: &Path) -> Option<&Path> {
    path.parent().filter(|d| !d.as_os_str().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part-0");
        // A pid above Linux's maximum (4194304) never runs.
        let dead = dir.path().join(".part-0.partial-4194305-0");
        let alive = dir
            .path()
            .join(format!(".part-0.partial-{}-7", std::process::id()));
        let other = dir.path().join(".part-1.partial-4194305-0");
        for p in [&dead, &alive, &other] {
            fs::write(p, b"x").unwrap();
        }
        assert_eq!(remove_stale_temporaries(&path).unwrap(), 1);
        assert!(!dead.exists());
        assert!(alive.exists() && other.exists());
    }

    #[test]
    fn a_durable_write_replaces_the_old_contents_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("f");
        write_durably(&path, b"old").unwrap();
        write_durably(&path, b"new contents").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new contents");
        assert_eq!(fs::read_dir(dir.path().join("sub")).unwrap().count(), 1);
    }
}
