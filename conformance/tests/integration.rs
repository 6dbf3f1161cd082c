//! The crate's integration tests in one test executable, one module per file beside this
//! one. Every test executable links the crate and all its dependencies (60 to 130 MB in a
//! debug build): one instead of one per file keeps a clean build's target directory
//! gigabytes smaller and links once. One file's tests:
//! `cargo test -p sluice-conformance --test integration builtin_stages::`.
//!
//! `shutdown.rs` stays an executable of its own (Cargo.toml): it counts the process's threads,
//! which tests running beside it would change.

mod builtin_stages;
mod checks_catch;
mod errors_in_order;
mod file_stages;
