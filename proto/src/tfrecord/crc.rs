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

/// The masked CRC32C of `data` (hardware-accelerated where the CPU has it).
#[inline]
pub fn masked_crc32c(data: &[u8]) -> u32 {
    mask(crc32c::crc32c(data))
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
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
        // The header of an empty record: length 0 as 8 little-endian bytes.
        assert_eq!(
            masked_crc32c(&0u64.to_le_bytes()),
            mask(crc32c::crc32c(&[0u8; 8]))
        );
    }

    proptest! {
        #[test]
        fn unmask_inverts_mask(crc in any::<u32>()) {
            prop_assert_eq!(unmask(mask(crc)), crc);
        }
    }
}
