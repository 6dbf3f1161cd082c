//! Local files mapped into memory, so that readers hand out slices of the page cache instead of
//! copying every byte into buffers of their own.
//!
//! Reading a file with `read(2)` copies it from the page cache into the reader's buffer; for
//! the `parse` pipeline that copy was half of all CPU time. A mapped file is read where it
//! lies: a record is a [`Bytes`] slice of the mapping, which stays mapped until the last slice
//! is dropped.
//!
//! A mapping has one hazard a copy does not: if another process truncates the file while it
//! is mapped, touching a page past the new end raises `SIGBUS`, which kills the process. A
//! process-wide handler (installed with the first mapping, Linux only) guards against it: a
//! fault inside a live mapping of this module is answered by mapping a page of zeros over the
//! missing page, so the reader sees zeros where the data was, which a TFRecord reader's
//! checksums report as a corrupted record with its file and offset (bytes of records already
//! handed out may read as zeros too: a file must not change while it is read, mapped or not).
//! Faults anywhere else go on to the handler installed before ours, or to the default action.
//! [`zero_filled_pages`] counts the pages so replaced.
//!
//! ```
//! # fn main() -> std::io::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("a.bin");
//! std::fs::write(&path, b"hello")?;
//! let bytes = sluice_storage::map_file(&path)?;
//! # #[cfg(target_os = "linux")]
//! assert_eq!(bytes.as_deref(), Some(&b"hello"[..]));
//! # Ok(())
//! # }
//! ```

use std::fs::File;
use std::io;
use std::path::Path;

use bytes::Bytes;

/// The whole of the local file at `path`, read-only and without copying it: `None` where it
/// is not mapped (not a regular file, not Linux, the guard's table is full, or the system
/// refused the mapping), and the caller reads it as a stream instead.
pub fn map_file(path: &Path) -> io::Result<Option<Bytes>> {
    map_opened(&File::open(path)?)
}

/// Pages of mapped files replaced by zeros since the process started, because their file was
/// truncated while mapped.
pub fn zero_filled_pages() -> u64 {
    #[cfg(target_os = "linux")]
    {
        guard::ZERO_FILLED.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// [`map_file`] of an open file.
#[cfg(target_os = "linux")]
fn map_opened(file: &File) -> io::Result<Option<Bytes>> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        // A pipe, a device, a socket: no size to map, read as a stream.
        return Ok(None);
    }
    if meta.len() == 0 {
        return Ok(Some(Bytes::new()));
    }
    // SAFETY: `Mmap::map` is unsafe because the file may change while mapped. A change of
    // its bytes is what a concurrent writer could do to a `read(2)` too (the checksums catch
    // it); a truncation would raise SIGBUS, which the guard registered below answers with
    // zero pages (see the module docs) before any byte of the mapping is read.
    let Ok(map) = (unsafe { memmap2::Mmap::map(file) }) else {
        return Ok(None);
    };
    let Some(slot) = guard::register(map.as_ptr() as usize, map.len()) else {
        return Ok(None);
    };
    Ok(Some(Bytes::from_owner(Mapping { map, slot })))
}

#[cfg(not(target_os = "linux"))]
fn map_opened(_file: &File) -> io::Result<Option<Bytes>> {
    Ok(None)
}

/// A mapping registered with the guard; the registration ends before the mapping does.
#[cfg(target_os = "linux")]
struct Mapping {
    map: memmap2::Mmap,
    slot: usize,
}

#[cfg(target_os = "linux")]
impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

#[cfg(target_os = "linux")]
impl Drop for Mapping {
    fn drop(&mut self) {
        // Before `map` is unmapped (fields drop after this body): a later mapping at the same
        // addresses must not be taken for this one.
        guard::release(self.slot);
    }
}

/// The SIGBUS guard: a fixed table of live mappings (the handler may only read atomics) and
/// the handler.
#[cfg(target_os = "linux")]
mod guard {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    /// Mappings guarded at once; a file opened when all are taken is read instead.
    const SLOTS: usize = 1024;

    struct Slot {
        taken: AtomicBool,
        /// First address of the mapping; 0 while the slot holds none.
        start: AtomicUsize,
        /// One past the last address.
        end: AtomicUsize,
    }

    static TABLE: [Slot; SLOTS] = [const {
        Slot {
            taken: AtomicBool::new(false),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
        }
    }; SLOTS];

    pub(super) static ZERO_FILLED: AtomicU64 = AtomicU64::new(0);

    /// The handler installed before ours (`None` if installing failed: then nothing is
    /// mapped).
    static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    /// Guards `[start, start + len)`: the slot to [`release`], or `None` if the table is full
    /// or the handler could not be installed.
    pub(super) fn register(start: usize, len: usize) -> Option<usize> {
        PREVIOUS.get_or_init(install).as_ref()?;
        let i = TABLE.iter().position(|slot| {
            slot.taken
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        TABLE[i].end.store(start + len, Ordering::Release);
        TABLE[i].start.store(start, Ordering::Release);
        Some(i)
    }

    pub(super) fn release(i: usize) {
        TABLE[i].start.store(0, Ordering::Release);
        TABLE[i].end.store(0, Ordering::Release);
        TABLE[i].taken.store(false, Ordering::Release);
    }

    /// Installs the handler; the one it replaces, or `None` if it could not.
    fn install() -> Option<libc::sigaction> {
        // SAFETY: `sysconf` has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        // SAFETY: zeroed `sigaction` and `sigset_t` are valid values of these C structs; the
        // handler has the signature `SA_SIGINFO` calls for and only does async-signal-safe
        // work (atomics, `mmap`, calling or restoring the previous handler).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &action, &mut previous) != 0 {
                return None;
            }
            Some(previous)
        }
    }

    extern "C" fn on_sigbus(
        signal: libc::c_int,
        info: *mut libc::siginfo_t,
        context: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        for slot in &TABLE {
            let start = slot.start.load(Ordering::Acquire);
            if start == 0 || addr < start || addr >= slot.end.load(Ordering::Acquire) {
                continue;
            }
            let page = PAGE.load(Ordering::Relaxed);
            let at = addr & !(page - 1);
            // SAFETY: `at` is a page inside a live mapping of this module (its slot is
            // released before it is unmapped, and the faulting thread holds a reference to
            // it); a private anonymous page over it reads as zeros and is unmapped with the
            // rest of the mapping.
            let zeros = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                ZERO_FILLED.fetch_add(1, Ordering::Relaxed);
                return;
            }
            break;
        }
        chain(signal, info, context);
    }

    /// Hands a fault that is not ours to the handler installed before ours; with none, the
    /// default action is restored and the faulting instruction, run again, takes it.
    fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        let previous = PREVIOUS.get().copied().flatten();
        match previous {
            Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
                if p.sa_flags & libc::SA_SIGINFO != 0 {
                    // SAFETY: an `SA_SIGINFO` handler has this signature; it gets what the
                    // kernel gave us.
                    let handler: extern "C" fn(
                        libc::c_int,
                        *mut libc::siginfo_t,
                        *mut libc::c_void,
                    ) = unsafe { std::mem::transmute(p.sa_sigaction) };
                    handler(signal, info, context);
                } else {
                    // SAFETY: a handler without `SA_SIGINFO` takes the signal number only.
                    let handler: extern "C" fn(libc::c_int) =
                        unsafe { std::mem::transmute(p.sa_sigaction) };
                    handler(signal);
                }
            }
            _ => {
                // SAFETY: restoring the default disposition is async-signal-safe.
                unsafe {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_reads_as_its_bytes_and_an_empty_one_as_none_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mapped = map_file(&path).unwrap().expect("mapped on Linux");
        assert_eq!(&mapped[..], &data[..]);
        // Slices outlive the handle they came from.
        let tail = mapped.slice(90_000..);
        drop(mapped);
        assert_eq!(&tail[..], &data[90_000..]);

        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(map_file(&empty).unwrap().as_deref(), Some(&b""[..]));
        assert!(map_file(&dir.path().join("missing")).is_err());
        // Not a regular file: the caller reads it as a stream.
        assert_eq!(map_file(Path::new("/dev/null")).unwrap(), None);
        assert_eq!(map_file(dir.path()).ok().flatten(), None);
    }

    #[test]
    fn a_file_truncated_while_mapped_reads_as_zeros_past_its_new_end_instead_of_killing_the_process()
     {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let page = 4096;
        std::fs::write(&path, vec![0xAB; 8 * page]).unwrap();
        let mapped = map_file(&path).unwrap().expect("mapped on Linux");
        let before = zero_filled_pages();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(2 * page as u64)
            .unwrap();
        // Without the guard, touching the pages past the new end raises SIGBUS.
        assert!(mapped[..2 * page].iter().all(|&b| b == 0xAB));
        assert!(mapped[2 * page..].iter().all(|&b| b == 0));
        assert!(zero_filled_pages() >= before + 6);
    }

    #[test]
    fn the_guard_releases_its_slots() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"x").unwrap();
        // More mappings, one after another, than the table has slots.
        for _ in 0..3 * 1024 {
            let mapped = map_file(&path).unwrap();
            assert_eq!(mapped.as_deref(), Some(&b"x"[..]));
        }
    }
}
