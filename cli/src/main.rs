//! `sluice`: inspect and verify TFRecord files (and, later, run Sluice pipelines).
//!
//! `main` only parses the command line and maps the outcome to an exit code; each
//! subcommand lives in its own module.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod adapt_cmd;
mod cat;
mod cat_source;
mod common;
mod convert;
mod demo;
mod r#gen;
mod image_records;
mod input;
mod plugin_cmd;
mod report;
mod run;
mod tfds_cmd;
mod verify;

/// Inspect and verify TFRecord files.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Sluice: inspect and verify TFRecord files written by TensorFlow or Sluice.",
    after_help = "\
Examples:
  sluice demo
  sluice cat train.tfrecord | head -3
  sluice cat --as raw data.tfrecord.gz
  sluice verify 'data/train.tfrecord-*'
  sluice run examples/pipelines/augment.toml --data data/
  sluice plugin check target/release/libsluice_example_noise.so
  sluice tfds list ~/tensorflow_datasets
  sluice adapt census.toml --out stats.json --mean-variance age --vocabulary city
  sluice run pipeline.toml --json > run.json && sluice report run.json -o report.html

Run `sluice help <COMMAND>` for the options of a command.

Environment: SLUICE_LOG filters the log on stderr (EnvFilter syntax; default
\"warn,sluice::plugin=info\": warnings, and what plugins print).

Exit status: 0 on success, 1 if a file is damaged or unreadable, 2 on a usage error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Demo(demo::DemoArgs),
    Cat(cat::CatArgs),
    Verify(verify::VerifyArgs),
    Gen(r#gen::GenArgs),
    Convert(convert::ConvertArgs),
    Run(run::RunArgs),
    Plugin(plugin_cmd::PluginArgs),
    Tfds(tfds_cmd::TfdsArgs),
    Adapt(adapt_cmd::AdaptArgs),
    Report(report::ReportArgs),
}

/// The log on stderr when `SLUICE_LOG` is unset: warnings and errors, and what plugins print
/// (Python's `print`, JavaScript's `console.log`: target `sluice::plugin`, `info`).
const DEFAULT_LOG: &str = "warn,sluice::plugin=info";

/// Prints the `tracing` log on stderr, filtered by `SLUICE_LOG` (`tracing-subscriber`'s
/// `EnvFilter` syntax, e.g. `off`, `info`, `warn,sluice::plugin=off`), else [`DEFAULT_LOG`].
fn init_log() {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("SLUICE_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            eprintln!(
                "sluice: SLUICE_LOG={spec:?} is not a log filter ({e}): using {DEFAULT_LOG:?}"
            );
            EnvFilter::new(DEFAULT_LOG)
        }),
        _ => EnvFilter::new(DEFAULT_LOG),
    };
    // `try_init`: nothing to do if a subscriber is already set.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_log();
    let outcome = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Cat(args) => cat::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Gen(args) => r#gen::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Plugin(args) => plugin_cmd::run(&args),
        Command::Tfds(args) => tfds_cmd::run(&args),
        Command::Adapt(args) => adapt_cmd::run(&args),
        Command::Report(args) => report::run(&args),
    };
    match outcome {
        Ok(code) => code,
        // `sluice cat f | head -1`: the reader of stdout is gone; that is not an error.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `err` is a write to a closed pipe (stdout writes are propagated unwrapped).
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}
