//! `sluice report`: one self-contained HTML page of one run's statistics, or of two runs
//! compared (`sluice-report`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use sluice_report::Run;

/// Write an HTML report of one run, or of two runs compared.
#[derive(Debug, Args)]
#[command(
    long_about = "\
Write one self-contained HTML page (inline CSS and SVG: no script, nothing loaded from the \
network; open it anywhere, attach it to an issue) of a run's statistics, from the JSON that \
`sluice run --json` prints.

The page: the run (pipeline, file, when, Sluice version, CPUs, elements, wall time, \
elements/s, the record account); the bottleneck explained in words with its numbers (its share \
of all the waiting, its busy share, its time per element at p50 and p99, how long its \
consumer waited on it and it on its own input and output) and what to try; throughput over \
time with the epochs marked; each stage's busy, starved and blocked time; buffer occupancy and \
bytes buffered over time; the bottleneck of each interval; autotune's knob values and \
decisions; the per-stage table. See docs/observability.md.

With two files, run A and run B are compared: every plot shows both, and a table says which \
is faster and by how much, with each stage's busy share and times per element side by side.

JSON from before timelines renders too: the page says the plots over time are missing.

The exit status is 1 if a file cannot be read or is not the JSON of `sluice run --json` (the \
message names the file and the field).",
    after_help = "\
Examples:
  sluice run examples/pipelines/augment.toml --data data/ --json > run.json
  sluice report run.json                     # writes report.html
  sluice report before.json after.json -o compare.html"
)]
pub(crate) struct ReportArgs {
    /// The JSON of `sluice run --json` (run A when comparing).
    #[arg(value_name = "RUN.json")]
    run: PathBuf,

    /// A second run to compare with the first (run B).
    #[arg(value_name = "RUN2.json")]
    other: Option<PathBuf>,

    /// Where to write the page.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "report.html"
    )]
    output: PathBuf,
}

pub(crate) fn run(args: &ReportArgs) -> Result<ExitCode> {
    let mut runs = vec![Run::from_file(&args.run)?];
    if let Some(other) = &args.other {
        runs.push(Run::from_file(other)?);
    }
    let html = sluice_report::render(&runs);
    std::fs::write(&args.output, html)
        .with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!("sluice: wrote {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
