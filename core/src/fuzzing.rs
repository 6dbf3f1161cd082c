//! Entry points for the fuzz targets in `fuzz/` (not a public API: hidden from the docs,
//! may change at any time). Each reaches a parser that the public API only reaches through
//! files or a running pipeline, so that a fuzzer can call it on bytes in memory.

/// Decodes the compact progress text of an elastic checkpoint (`ElasticCheckpoint::progress`,
/// deflated and base64-encoded), as a resume decodes it, and returns the decoded progress
/// encoded again. `Err` says what is wrong with the text. Decoding the returned text gives
/// the same progress (the fuzz target checks that re-encoding is a fixed point).
pub fn progress_round_trip(text: &str) -> Result<String, String> {
    let snapshot = crate::elastic::encoding::decode(text)?;
    Ok(crate::elastic::encoding::encode(&snapshot))
}

#[cfg(test)]
mod tests {
    use super::progress_round_trip;

    #[test]
    fn progress_round_trip_refuses_junk_and_keeps_a_fixed_point() {
        assert!(progress_round_trip("not base64!").is_err());
        assert!(progress_round_trip("").is_err());
        // A decoded progress re-encodes to a fixed point.
        let empty = crate::elastic::encoding::encode(&Default::default());
        let again = progress_round_trip(&empty).unwrap();
        assert_eq!(progress_round_trip(&again).unwrap(), again);
    }
}
