//! Copies of computed values into a large output buffer with non-temporal ("streaming")
//! stores.
//!
//! The point chain writes each image's `f32` values into a batch buffer of tens of MB that
//! no cache holds. With ordinary stores every cache line written is first read from memory
//! (a read for ownership) and the core waits on those reads; a streaming store writes whole
//! lines through the write-combining buffers without reading them. The values are computed
//! a chunk at a time into a small buffer that stays in L1, then streamed out: the bytes
//! written are the same.

/// Bytes of output from which streaming can pay: below it, the output likely stays in the
/// cache for whoever reads it next.
const STREAM_FROM_BYTES: usize = 256 << 10;

/// Whether an output of `bytes` is written with streaming stores: at least
/// [`STREAM_FROM_BYTES`], on a CPU where streaming was measured faster (BENCHMARKS.md,
/// "Streaming stores"): Intel's (the `augment` pipeline +9 %), not AMD's (slower there).
/// `SLUICE_STREAM_STORES=1` or `0` in the environment decides instead, for measuring.
pub(crate) fn pays(bytes: usize) -> bool {
    bytes >= STREAM_FROM_BYTES && *STREAMING.get_or_init(streaming)
}

static STREAMING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// The choice [`pays`] makes for large outputs, once per process.
fn streaming() -> bool {
    match std::env::var("SLUICE_STREAM_STORES").as_deref() {
        Ok("1") => return true,
        Ok("0") => return false,
        _ => {}
    }
    intel()
}

/// Whether the CPU is Intel's (CPUID vendor "GenuineIntel").
fn intel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID leaf 0: the vendor string, on every x86-64 CPU.
        let id = std::arch::x86_64::__cpuid(0);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&id.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&id.edx.to_le_bytes());
        vendor[8..].copy_from_slice(&id.ecx.to_le_bytes());
        &vendor == b"GenuineIntel"
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Copies `src` into `dst` (same length), with streaming stores where the CPU has them
/// (x86-64: SSE2 everywhere, 32-byte stores with AVX, 64-byte with AVX-512F), ordinary
/// ones elsewhere and for the unaligned ends. Call [`fence`] after the last copy of an
/// output, before another thread may read it.
#[inline]
pub(crate) fn copy(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "stream_store::copy: lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            #[allow(unsafe_code)]
            // SAFETY: `copy_avx512` needs AVX-512F, which the line above checked.
            unsafe {
                copy_avx512(dst, src)
            };
            return;
        }
        #[allow(unsafe_code)]
        // SAFETY: `copy_sse2` needs SSE2, which every x86-64 CPU has.
        unsafe {
            copy_sse2(dst, src)
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Orders the streaming stores before any later store (x86-64 `sfence`): after it, another
/// thread that is handed the buffer sees every value.
#[inline]
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: `sfence` (SSE) is on every x86-64 CPU and only orders stores.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// How the point chain writes each block of values it computed (in registers): with
/// ordinary stores ([`Plain`]) or, into a large output whose blocks line up with the
/// vector width, straight from the registers with streaming stores ([`Stream512`],
/// [`Stream256`]). Streaming from the registers, the stores drain to memory while the next
/// values are computed; computed into an L1 buffer first and then streamed ([`copy`]), the
/// two take turns. The values written are the same.
pub(crate) trait BlockStore: Copy {
    /// Whether `d` starts where this store streams (aligned for its streaming stores;
    /// `false` for [`Plain`]): then [`put_aligned`](Self::put_aligned) may write it.
    fn aligned(self, d: &[f32]) -> bool;

    /// Writes `v` into `d`, the whole registers streamed (ordinary stores for [`Plain`]).
    ///
    /// # Safety
    /// [`aligned`](Self::aligned) must hold for `d`.
    #[allow(unsafe_code)]
    unsafe fn put_aligned<const N: usize>(self, d: &mut [f32; N], v: &[f32; N]);

    /// Writes `v` into `d`: streamed where `d` is aligned for it, ordinary stores otherwise
    /// (what the point chain does per block; kept for the tests of each store).
    #[cfg(test)]
    fn put<const N: usize>(self, d: &mut [f32; N], v: &[f32; N]) {
        if self.aligned(d) {
            #[allow(unsafe_code)]
            // SAFETY: `d` is aligned, checked on the line above.
            unsafe {
                self.put_aligned(d, v)
            };
        } else {
            *d = *v;
        }
    }

    /// Whether this store streams blocks of `block` values from the start of `dst`: it
    /// has streaming stores and those blocks are aligned for them (`false` for [`Plain`]).
    fn streams(self, dst: &[f32], block: usize) -> bool;
}

/// Ordinary stores.
#[derive(Clone, Copy)]
pub(crate) struct Plain;

impl BlockStore for Plain {
    #[inline(always)]
    fn aligned(self, _d: &[f32]) -> bool {
        false
    }

    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn put_aligned<const N: usize>(self, d: &mut [f32; N], v: &[f32; N]) {
        *d = *v;
    }

    fn streams(self, _dst: &[f32], _block: usize) -> bool {
        false
    }
}

/// Streaming stores from registers of `$lanes` values (`$align` bytes), for code built
/// with `$feature`; a block that is not aligned, and a block's last values short of a
/// whole register, get ordinary stores.
macro_rules! block_store_for {
    ($name:ident, $put:ident, $feature:literal, $lanes:literal, $align:literal, $load:ident, $store:ident) => {
        /// Streaming stores of whole registers (see [`BlockStore`]); only made where the CPU
        /// has the instructions.
        #[derive(Clone, Copy)]
        pub(crate) struct $name(());

        impl $name {
            /// # Safety
            /// The CPU must have the target feature this store's instructions need (the
            /// macro's `$feature`): call it only from code that checked it or is built for it.
            #[allow(unsafe_code)]
            pub(crate) unsafe fn new() -> Self {
                $name(())
            }
        }

        impl BlockStore for $name {
            #[inline(always)]
            fn aligned(self, d: &[f32]) -> bool {
                (d.as_ptr() as usize).is_multiple_of($align)
            }

            #[inline(always)]
            #[allow(unsafe_code)]
            unsafe fn put_aligned<const N: usize>(self, d: &mut [f32; N], v: &[f32; N]) {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: a value of this type exists only where the CPU has the feature
                // (`new`'s contract); `d` is aligned (this function's contract).
                unsafe {
                    $put(d, v)
                };
                #[cfg(not(target_arch = "x86_64"))]
                {
                    *d = *v;
                }
            }

            fn streams(self, dst: &[f32], block: usize) -> bool {
                self.aligned(dst) && (block * 4).is_multiple_of($align)
            }
        }

        /// `d = v` with streaming stores for the whole registers.
        ///
        /// # Safety
        /// The CPU must have the target feature; `d` must be `$align`-byte aligned.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        #[inline]
        #[allow(unsafe_code)]
        unsafe fn $put<const N: usize>(d: &mut [f32; N], v: &[f32; N]) {
            use std::arch::x86_64::*;
            let whole = N / $lanes * $lanes;
            let (dp, vp) = (d.as_mut_ptr(), v.as_ptr());
            let mut i = 0;
            while i < whole {
                // SAFETY: `i + $lanes <= N`, so both accesses are in bounds; `dp` is
                // `$align`-byte aligned (the caller's contract) and `i` a multiple of
                // `$lanes` values of 4 bytes, so `dp.add(i)` is too; the load is unaligned.
                unsafe { $store(dp.add(i), $load(vp.add(i))) };
                i += $lanes;
            }
            d[whole..].copy_from_slice(&v[whole..]);
        }
    };
}
block_store_for!(
    Stream512,
    put_stream512,
    "avx512f",
    16,
    64,
    _mm512_loadu_ps,
    _mm512_stream_ps
);
block_store_for!(
    Stream256,
    put_stream256,
    "avx",
    8,
    32,
    _mm256_loadu_ps,
    _mm256_stream_ps
);

/// The prefix of `dst` to copy with ordinary stores before its first `align`-byte
/// boundary (at most `dst.len()` values).
fn head(dst: &[f32], align: usize) -> usize {
    let misaligned = (dst.as_ptr() as usize) % align;
    if misaligned == 0 {
        0
    } else {
        ((align - misaligned) / 4).min(dst.len())
    }
}

/// Streams `src` into `dst` with `$store` of `$lanes` values at `$align`-byte boundaries.
macro_rules! copy_for {
    ($name:ident, $feature:literal, $lanes:literal, $align:literal, $load:ident, $store:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        #[allow(unsafe_code)]
        unsafe fn $name(dst: &mut [f32], src: &[f32]) {
            use std::arch::x86_64::*;
            let h = head(dst, $align);
            dst[..h].copy_from_slice(&src[..h]);
            let (dst, src) = (&mut dst[h..], &src[h..]);
            let body = dst.len() / $lanes * $lanes;
            let d = dst.as_mut_ptr();
            let s = src.as_ptr();
            let mut i = 0;
            while i < body {
                // SAFETY: `i + $lanes <= body <= dst.len() == src.len()`, so both accesses
                // are in bounds; `d.add(i)` is `$align`-byte aligned (`head` made `d`
                // aligned and `i` is a multiple of `$lanes` values of 4 bytes), as the
                // streaming store requires; the load is unaligned.
                unsafe { $store(d.add(i), $load(s.add(i))) };
                i += $lanes;
            }
            dst[body..].copy_from_slice(&src[body..]);
        }
    };
}
copy_for!(
    copy_avx512,
    "avx512f",
    16,
    64,
    _mm512_loadu_ps,
    _mm512_stream_ps
);
copy_for!(copy_sse2, "sse2", 4, 16, _mm_loadu_ps, _mm_stream_ps);

#[cfg(test)]
mod tests {
    use super::*;

    /// `put` of a block of `N` values at each offset from a 64-byte boundary: the block's
    /// values, nothing around it.
    fn puts_blocks<S: BlockStore, const N: usize>(sink: S) {
        let v: [f32; N] = std::array::from_fn(|i| i as f32 * 0.25 - 3.0);
        let mut backing = vec![f32::NAN; N + 40];
        let base = backing.as_ptr().align_offset(64);
        for offset in 0..17 {
            backing.iter_mut().for_each(|x| *x = f32::NAN);
            let at = base + offset;
            let d: &mut [f32; N] = (&mut backing[at..at + N]).try_into().unwrap();
            sink.put(d, &v);
            fence();
            assert_eq!(&backing[at..at + N], &v[..], "offset {offset}");
            assert!(
                backing[..at]
                    .iter()
                    .chain(&backing[at + N..])
                    .all(|x| x.is_nan())
            );
        }
    }

    #[test]
    fn block_stores_write_the_block() {
        puts_blocks::<_, 48>(Plain);
        puts_blocks::<_, 20>(Plain);
        assert!(!Plain.streams(&[0.0; 64], 48));
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                #[allow(unsafe_code)]
                // SAFETY: the CPU has AVX-512F, checked on the line above.
                let sink = unsafe { Stream512::new() };
                puts_blocks::<_, 48>(sink);
                puts_blocks::<_, 20>(sink);
                let v = vec![0.0f32; 64 + 16];
                let at = v.as_ptr().align_offset(64);
                assert!(sink.streams(&v[at..], 48));
                assert!(!sink.streams(&v[at + 1..], 48));
                assert!(!sink.streams(&v[at..], 20));
            }
            if std::arch::is_x86_feature_detected!("avx") {
                #[allow(unsafe_code)]
                // SAFETY: the CPU has AVX, checked on the line above.
                let sink = unsafe { Stream256::new() };
                puts_blocks::<_, 48>(sink);
                puts_blocks::<_, 20>(sink);
                let v = vec![0.0f32; 64 + 16];
                let at = v.as_ptr().align_offset(64);
                assert!(sink.streams(&v[at + 8..], 48));
                assert!(!sink.streams(&v[at + 4..], 48));
            }
        }
    }

    #[test]
    fn copies_every_value_at_every_alignment_and_length() {
        let src: Vec<f32> = (0..300).map(|i| i as f32 * 0.5 - 7.0).collect();
        let mut backing = vec![0.0f32; 340];
        for offset in 0..20 {
            for len in [0, 1, 3, 4, 15, 16, 17, 63, 64, 65, 200, 300] {
                backing.iter_mut().for_each(|v| *v = f32::NAN);
                copy(&mut backing[offset..offset + len], &src[..len]);
                fence();
                assert_eq!(
                    &backing[offset..offset + len],
                    &src[..len],
                    "offset {offset} len {len}"
                );
                assert!(
                    backing[..offset].iter().all(|v| v.is_nan()),
                    "before, offset {offset}"
                );
                assert!(
                    backing[offset + len..].iter().all(|v| v.is_nan()),
                    "after, offset {offset} len {len}"
                );
            }
        }
    }
}
