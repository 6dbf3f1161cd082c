//! Compression of a TFRecord stream: none, whole-stream GZIP or ZLIB, or detected.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// How a TFRecord stream is compressed. TensorFlow compresses the whole stream, not records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Detect from the first bytes (reading only): a valid record header means none, then the
    /// GZIP magic `1f 8b`, then a ZLIB header. An empty stream is uncompressed.
    #[default]
    Auto,
    /// Uncompressed (`""` or `"NONE"` in TensorFlow).
    None,
    /// `"GZIP"`.
    Gzip,
    /// `"ZLIB"`.
    Zlib,
}

impl Compression {
    /// The lower-case name: `auto`, `none`, `gzip` or `zlib`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Auto => "auto",
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zlib => "zlib",
        }
    }

    /// This compression for a stream whose first bytes are `head`: `Auto` resolved with
    /// [`detect`](Self::detect) (which needs at most 12 bytes), any other kept as it is.
    pub fn resolve(self, head: &[u8]) -> Compression {
        match self {
            Compression::Auto => Compression::detect(&head[..head.len().min(12)]),
            c => c,
        }
    }

    /// Detects the compression from the first bytes of a stream (up to 12 are used; fewer
    /// only at the end of a stream). Never returns [`Compression::Auto`].
    pub fn detect(prefix: &[u8]) -> Compression {
        if prefix.len() >= 12 {
            let len = &prefix[..8];
            let crc = u32::from_le_bytes(prefix[8..12].try_into().expect("4 bytes"));
            if super::crc::masked_crc32c(len) == crc {
                return Compression::None;
            }
        }
        match prefix {
            [0x1f, 0x8b, ..] => Compression::Gzip,
            // RFC 1950: CM = 8 (deflate), CINFO <= 7, and the header is a multiple of 31.
            [cmf, flg, ..]
                if cmf & 0x0f == 8
                    && cmf >> 4 <= 7
                    && (u16::from(*cmf) * 256 + u16::from(*flg)) % 31 == 0 =>
            {
                Compression::Zlib
            }
            _ => Compression::None,
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = Error;

    /// Parses TensorFlow's names (`""`, `NONE`, `GZIP`, `ZLIB`) and `auto`, in any case.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Compression::Auto),
            "" | "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            "zlib" => Ok(Compression::Zlib),
            _ => Err(Error::UnknownCompression(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tensorflow_names_and_rejects_others() {
        assert_eq!("".parse::<Compression>().unwrap(), Compression::None);
        assert_eq!("NONE".parse::<Compression>().unwrap(), Compression::None);
        assert_eq!("GZIP".parse::<Compression>().unwrap(), Compression::Gzip);
        assert_eq!("zlib".parse::<Compression>().unwrap(), Compression::Zlib);
        assert_eq!("Auto".parse::<Compression>().unwrap(), Compression::Auto);
        let err = "lz4".parse::<Compression>().unwrap_err();
        assert!(matches!(err, Error::UnknownCompression(ref s) if s == "lz4"));
        assert!(err.to_string().contains("\"lz4\""));
    }

    #[test]
    fn detects_magic_bytes() {
        assert_eq!(Compression::detect(&[]), Compression::None);
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(Compression::detect(&[0x78, 0x9c]), Compression::Zlib);
        assert_eq!(Compression::detect(&[0x78, 0x01]), Compression::Zlib);
        assert_eq!(Compression::detect(&[0x78, 0xda]), Compression::Zlib);
        assert_eq!(Compression::detect(b"garbage!!!!!"), Compression::None);
    }

    #[test]
    fn a_valid_header_wins_over_a_zlib_lookalike() {
        // Length 0x9c78 starts with the bytes of a ZLIB header; its CRC makes it a record.
        let len = 0x9c78u64.to_le_bytes();
        let mut header = len.to_vec();
        header.extend_from_slice(&super::super::crc::masked_crc32c(&len).to_le_bytes());
        assert_eq!(Compression::detect(&header), Compression::None);
    }
}
