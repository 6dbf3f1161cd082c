//! `sluice-report`: one self-contained HTML page of a run's statistics (what `sluice
//! report` writes), or of two runs compared, with the bottleneck explained in words.
//!
//! ```
//! use sluice_report::{Run, render};
//!
//! // The JSON `sluice run PIPELINE.toml --json` prints (older JSON without a timeline
//! // reads too: the page says what is missing).
//! let json = r#"{
//!     "pipeline": "demo", "elements": 640, "seconds": 2.0, "elements_per_s": 320.0,
//!     "cpus": 4, "bottleneck": "map",
//!     "stages": [
//!         {"index": 0, "name": "tfrecord", "busy_fraction": 0.1, "caused_wait_seconds": 0.2,
//!          "element_p50_seconds": 0.0001, "element_p99_seconds": 0.0004},
//!         {"index": 1, "name": "map", "workers": 4, "busy_fraction": 0.97,
//!          "caused_wait_seconds": 3.6, "consumer_wait_seconds": 1.9,
//!          "element_p50_seconds": 0.012, "element_p99_seconds": 0.02}
//!     ]
//! }"#;
//! let run = Run::from_json(json)?.with_label("before.json");
//! let explained = sluice_report::explain(&run);
//! assert_eq!(explained.stage.as_deref(), Some("map#1"));
//! assert_eq!(explained.finding, sluice_report::Finding::CpuBound);
//!
//! let html = render(&[run]);
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! assert!(html.contains("The bottleneck is map#1."));
//! # Ok::<(), sluice_report::Error>(())
//! ```
//!
//! The page has no script and loads nothing: inline CSS and inline SVG plots (throughput
//! over time with the epochs marked, each stage's busy / starved / blocked time, buffer
//! occupancy and bytes buffered over time, the bottleneck of each interval, autotune's
//! knobs and decisions), the per-stage table, and for two runs ([`render`] with A and B)
//! every plot with both and a table of the differences ([`compare`]).
//!
//! | module | holds |
//! |---|---|
//! | `run` | [`Run`]: the JSON read back tolerantly ([`Stage`], [`Decision`], [`Records`]) |
//! | `error` | [`Error`]: what was wrong, naming the file and field |
//! | `explain` | [`explain`]: the bottleneck's rules ([`Finding`]) and its [`Explanation`] |
//! | `compare` | [`compare`]: two runs' [`Comparison`] |
//! | `svg` | the plotting primitives: [`svg::LineChart`], [`svg::Bars`], [`svg::Strip`] |
//! | `format` | escaping and numbers as people read them |
//! | `rate` | elements/s over a moving window (outputs in bursts: batches) |
//! | `html` | [`render`]: the page |

mod compare;
mod error;
mod explain;
pub mod format;
mod html;
mod rate;
mod run;
pub mod svg;

pub use compare::{Comparison, DiffRow, compare};
pub use error::Error;
pub use explain::{Explanation, Finding, explain};
pub use html::render;
pub use run::{Decision, Records, Run, Stage, StageExt};
