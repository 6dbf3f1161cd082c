//! A record header that claims a huge length (with a valid length checksum) must not make
//! the reader allocate that much before the data arrives. Alone in its test binary: it
//! counts this process's peak heap with a counting allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use sluice_proto::Error;
use sluice_proto::tfrecord::{ReaderOptions, TfRecordReader, masked_crc32c};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method delegates to `System` with the caller's arguments unchanged; the
// counters are plain atomics and never affect what is allocated.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Relaxed) + layout.size();
        PEAK.fetch_max(now, Relaxed);
        // SAFETY: forwarded as received; `GlobalAlloc::alloc`'s contract is the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` was allocated by `alloc` above (i.e. by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_claimed_length_is_not_allocated_up_front() {
    // A header claiming 900 MiB (under the default 1 GiB cap), then 10 bytes of data.
    let len = (900u64 << 20).to_le_bytes();
    let mut stream = len.to_vec();
    stream.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    stream.extend_from_slice(&[7u8; 10]);

    let before = CURRENT.load(Relaxed);
    PEAK.store(before, Relaxed);
    let mut reader = TfRecordReader::new(&stream[..], "claims.tfrecord", ReaderOptions::default());
    let err = reader.next().unwrap().unwrap_err();
    assert!(
        matches!(err, Error::TruncatedRecord { offset: 0, .. }),
        "{err}"
    );
    let peak = PEAK.load(Relaxed) - before;
    assert!(
        peak < 8 << 20,
        "the reader allocated {peak} bytes for a 22-byte stream"
    );
}
