//! Shared helpers for Sluice's integration tests (in `tests/tests/`).
#![forbid(unsafe_code)]

use std::path::PathBuf;

/// The TensorFlow-written fixtures in `tests/fixtures/tfrecord/` (see `tests/fixtures/README.md`).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/tfrecord")
}

/// Path of one fixture file.
pub fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

/// The parsed `MANIFEST.json` of the fixtures.
pub fn manifest() -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(fixture("MANIFEST.json"))?;
    Ok(serde_json::from_str(&text)?)
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(data);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
