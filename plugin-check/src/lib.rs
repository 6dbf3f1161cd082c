//! `sluice-plugin-check`: the property checks behind `sluice plugin check`: any plugin,
//! native or WASM, against its own declared contract. What a plugin author runs before
//! shipping.
//!
//! Elements are generated from the plugin's declared inputs (names, dtypes, ranks; a
//! feature without a dtype gets `u8`, one without a rank gets rank 3; rank-3 features are
//! HWC images with 1 or 3 channels), in calls of 1 to 6 elements, by proptest with a fixed
//! seed; a failing case is shrunk to a minimal one and printed as Rust code. The checks:
//!
//! | check | passes when |
//! |---|---|
//! | `accepts_contract` | every call on contract-conforming elements succeeds (through the lent path where the plugin has one, as pipelines call it) |
//! | `deterministic` | the same elements and seeds give the same output bits, twice and on a fresh instance |
//! | `independent` | (not for `batch` plugins) an element's output is the same alone as among others |
//! | `output_contract` | outputs carry the declared output features (and a map gives one per input) |
//! | `time_limit` | no call takes longer than the limit |
//! | `lent_agrees_with_wire` | (native plugins of ABI version 2, `map` and `filter`) the lent path (`sluice_process_lent`) and the wire path (`sluice_process`) give the same output bits, or both fail |
//! | `malformed_input` | damaged batch buffers (truncated, wrong magic, seeds missing), and for the lent path damaged calls (a seed missing, a declared input missing or of another dtype), get an error status, never a success, trap or crash |
//! | `agrees_with_other` | (with `--other`) the other build (native vs WASM) gives the same bits |
//!
//! A native plugin shares the checker's process, so a crash on malformed input would end
//! it: `sluice plugin check` runs that check in a child process for native plugins.
//!
//! ```no_run
//! use sluice_plugin_check::{CheckOptions, check, render};
//!
//! # fn main() -> anyhow::Result<()> {
//! let report = check(
//!     "target/release/libsluice_example_noise.so".as_ref(),
//!     &CheckOptions { config: serde_json::json!({"sigma": 0.1}), ..CheckOptions::default() },
//! )?;
//! print!("{}", render(&report));
//! assert!(report.passed());
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]

mod cases;
mod check;
mod report;

pub use check::{CheckOptions, check, load};
pub use report::{CheckResult, Outcome, Report, render};
