//! The crate's integration tests in one test executable, one module per file beside this
//! one. Every test executable links the crate and all its dependencies (60 to 130 MB in a
//! debug build): one instead of one per file keeps a clean build's target directory
//! gigabytes smaller and links once. One file's tests:
//! `cargo test -p sluice-plugin-native --test integration lent::`.
//!
//! `native_solarize.rs` stays an executable of its own (Cargo.toml): it links the solarize
//! example's library, and `native.rs` the noise example's, which export the same plugin ABI
//! symbols (`sluice_abi_version`, ...), so one executable cannot link both.

mod lent;
mod native;
mod zero_copy;
