//! The reader's read buffers ("chunks"), recycled.
//!
//! A [`TfRecordReader`](super::TfRecordReader) reads its input into a chunk, freezes it into
//! [`Bytes`] and hands out each record as a slice of it. A chunk lives as long as any record
//! read into it (a pipeline batches hundreds of records and parses them into slices that live
//! on), so a reader cannot reuse its own buffer: before chunks, each read took fresh memory
//! from the allocator, zero-filled it (safe code must initialize what it reads into), and the
//! allocator faulted pages in and trimmed them again as batches came and went: ~10 % of the
//! `parse` pipeline's time. A chunk instead goes back to a process-wide pool when its last
//! record is dropped, and the next read takes it from there, already initialized (its stale
//! bytes are overwritten by the read, never exposed): no zero-filling, no page faults, and the
//! most recently returned chunk first, whose memory is the likeliest to be in the cache.
//!
//! The pool keeps at most [`MAX_POOLED`] chunks and [`MAX_POOLED_BYTES`] bytes; chunks
//! smaller than [`MIN_POOLED`] bytes are not worth keeping.

use std::sync::Mutex;

use bytes::Bytes;

/// Smallest chunk worth recycling.
const MIN_POOLED: usize = 16 << 10;
/// Most chunks the pool keeps.
const MAX_POOLED: usize = 256;
/// Most bytes the pool keeps.
const MAX_POOLED_BYTES: usize = 64 << 20;

/// Chunks ready for reuse, each with `len() == capacity()` initialized bytes (stale data).
static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// An initialized buffer of at least `size` bytes (and at most twice that, so a small read
/// does not pin a huge buffer): a recycled one when the pool has one, else a zeroed one.
pub(crate) fn take(size: usize) -> Vec<u8> {
    if size >= MIN_POOLED {
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = pool
            .iter()
            .rposition(|v| v.len() >= size && v.len() <= size.saturating_mul(2))
        {
            return pool.remove(i);
        }
    }
    vec![0; size]
}

/// Keeps `v` (all of its `len()` bytes initialized) for a later [`take`], if it is worth it
/// and the pool has room.
fn give(mut v: Vec<u8>) {
    if v.len() < MIN_POOLED || v.len() > MAX_POOLED_BYTES {
        return;
    }
    // Every byte up to the capacity becomes usable (the spare capacity is initialized here
    // once, not at every read).
    v.resize(v.capacity(), 0);
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    let held: usize = pool.iter().map(Vec::len).sum();
    if pool.len() >= MAX_POOLED || held + v.len() > MAX_POOLED_BYTES {
        // Full: the oldest chunk (the coldest in the cache) makes room.
        if pool.is_empty() {
            return;
        }
        pool.remove(0);
        if pool.iter().map(Vec::len).sum::<usize>() + v.len() > MAX_POOLED_BYTES {
            return;
        }
    }
    pool.push(v);
}

/// The first `filled` bytes of `v` as [`Bytes`]; `v` goes back to the pool when the last
/// slice of it is dropped.
pub(crate) fn freeze(v: Vec<u8>, filled: usize) -> Bytes {
    debug_assert!(filled <= v.len());
    if v.len() >= MIN_POOLED {
        Bytes::from_owner(Chunk { buf: v, filled })
    } else {
        let mut v = v;
        v.truncate(filled);
        Bytes::from(v)
    }
}

/// A chunk whose first `filled` bytes are stream data; back to the pool on drop.
struct Chunk {
    buf: Vec<u8>,
    filled: usize,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.filled]
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_chunk_is_reused_with_its_stale_bytes_never_shown() {
        let size = MIN_POOLED * 3 + 7;
        let mut v = take(size);
        assert!(v.len() >= size);
        v[..4].copy_from_slice(b"abcd");
        let ptr = v.as_ptr();
        let bytes = freeze(v, 4);
        assert_eq!(&bytes[..], b"abcd");
        let slice = bytes.slice(1..3);
        drop(bytes);
        assert_eq!(&slice[..], b"bc", "a slice keeps its chunk alive");
        drop(slice);
        // Other tests may take chunks from the pool at the same time: look for ours among a few.
        let mut taken = Vec::new();
        let mut found = false;
        for _ in 0..MAX_POOLED {
            let again = take(size);
            assert!(again.len() >= size && again.len() <= 2 * size);
            if again.as_ptr() == ptr {
                found = true;
                break;
            }
            taken.push(again);
        }
        assert!(found, "the chunk came back to the pool");
        // A small buffer is not pooled, and a frozen one is just its bytes.
        let small = freeze(vec![1, 2, 3], 2);
        assert_eq!(&small[..], [1, 2]);
    }
}
