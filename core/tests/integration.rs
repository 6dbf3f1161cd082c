//! The crate's integration tests in one test executable, one module per file beside this
//! one. Every test executable links the crate and all its dependencies (60 to 130 MB in a
//! debug build): one instead of one per file keeps a clean build's target directory
//! gigabytes smaller and links once. One file's tests:
//! `cargo test -p sluice-core --test integration adapt::`.
//!
//! `autotune.rs`, `row_threads.rs`, `shutdown.rs` and `object_storage.rs` stay executables of
//! their own (Cargo.toml): they count the process's threads or set its environment, which
//! tests running beside them would disturb.

mod adapt;
mod cache_batches;
mod checkpoint;
mod columnar;
mod crash_safety;
mod elastic;
mod enumerate;
mod filter;
mod flat_map_scan;
mod formats;
mod fuzz_findings;
mod global_shuffle;
mod grouping;
mod image_folder;
mod image_ops;
mod image_ops_batch;
mod map_chunks;
mod mapped_files;
mod memory_budget;
mod observe;
mod parse_example_fast;
mod parse_example_kinds;
mod parse_fixture;
mod parse_sequence_example;
mod pipeline_file;
mod pipeline_inputs;
mod preprocessing;
mod preprocessing_more;
mod read_batch_fusion;
mod record_accounting;
mod reference_doc;
mod rejection_resample;
mod runtime;
mod sharding;
mod sql;
mod stages;
mod stats;
mod tfds;
mod transformations;
mod tutorials;
