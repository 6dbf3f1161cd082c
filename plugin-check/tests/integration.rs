//! The crate's integration tests in one test executable, one module per file beside this
//! one. Every test executable links the crate and all its dependencies (60 to 130 MB in a
//! debug build): one instead of one per file keeps a clean build's target directory
//! gigabytes smaller and links once. One file's tests:
//! `cargo test -p sluice-plugin-check --test integration plugin_check::`.

mod plugin_check;
mod polyglot;
