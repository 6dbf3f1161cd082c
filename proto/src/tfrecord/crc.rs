//! TFRecord's masked CRC32C.

/// TensorFlow's mask constant (`kMaskDelta` in `crc32c.h`).
const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC32C as TFRecord stores it: rotate right by 15, then add a constant.
///
/// CRCs of data that itself contains CRCs are weak, so TensorFlow stores this instead.
#[inline]
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
#[inline]
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The CRC32C (Castagnoli, iSCSI) of `data`.
///
/// `crc-fast` picks the fastest kernel the CPU has at run time (carry-less multiplication:
/// VPCLMULQDQ on AVX-512, PCLMULQDQ, ARM PMULL), ~2.5x the `crc32c` crate's SSE4.2 `crc32`
/// instruction on a record's 18 KB (64 vs 25 GB/s measured here): it was 15 % of parsing
/// TFRecords straight from the page cache.
#[inline]
fn crc32c(data: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// The masked CRC32C of `data` (hardware-accelerated where the CPU has it).
#[inline]
pub fn masked_crc32c(data: &[u8]) -> u32 {
    mask(crc32c(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    // The formula as TensorFlow spells it, not as `rotate_right`.
    #[allow(clippy::manual_rotate)]
    fn mask_matches_the_formula_in_tensorflow() {
        // ((crc >> 15) | (crc << 17)) + 0xa282ead8, wrapping.
        for crc in [0u32, 1, 0xffff_ffff, 0x8000_0000, 0x1234_5678] {
            let expected = ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8);
            assert_eq!(mask(crc), expected);
        }
    }

    #[test]
    fn crc32c_known_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        // A large buffer (the wide SIMD kernels) against the definition.
        let big: Vec<u8> = (0..300_007u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        assert_eq!(crc32c(&big), crc32c_bitwise(&big));
        // The header of an empty record: length 0 as 8 little-endian bytes.
        assert_eq!(masked_crc32c(&0u64.to_le_bytes()), mask(crc32c(&[0u8; 8])));
    }

    /// CRC32C bit by bit (reflected polynomial 0x82F63B78), the definition.
    fn crc32c_bitwise(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0x82f6_3b78 & (crc & 1).wrapping_neg());
            }
        }
        !crc
    }

    proptest! {
        #[test]
        fn unmask_inverts_mask(crc in any::<u32>()) {
            prop_assert_eq!(unmask(mask(crc)), crc);
        }

        #[test]
        fn crc32c_matches_the_definition_at_any_length_and_alignment(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            skip in 0usize..64,
        ) {
            let data = &data[skip.min(data.len())..];
            prop_assert_eq!(crc32c(data), crc32c_bitwise(data));
        }
    }
}
