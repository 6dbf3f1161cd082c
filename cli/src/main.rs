//! `sluice`: inspect and verify TFRecord files (and, later, run Sluice pipelines).
//!
//! `main` only parses the command line and maps the outcome to an exit code; each
//! subcommand lives in its own module.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cat;
mod cat_source;
mod common;
mod convert;
mod demo;
mod r#gen;
mod image_records;
mod input;
mod plugin_cmd;
mod run;
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

Run `sluice help <COMMAND>` for the options of a command.

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Cat(args) => cat::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Gen(args) => r#gen::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Plugin(args) => plugin_cmd::run(&args),
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
