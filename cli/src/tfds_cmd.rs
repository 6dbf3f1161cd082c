//! `sluice tfds list DATA_DIR` and `sluice tfds info NAME`: the prepared TensorFlow Datasets
//! of a data dir, and one dataset's versions, splits, shards and features, read from its
//! `dataset_info.json` and `features.json` (no TensorFlow).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use sluice_core::tfds::{FeatureKind, TfdsInfo, default_data_dir, list_prepared};

/// TensorFlow Datasets data dirs.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  sluice tfds list ~/tensorflow_datasets
  sluice tfds info mnist:3.*.* --data-dir ~/tensorflow_datasets
  sluice cat --format tfds -o name=mnist -o 'split=train[:10]' -o as_supervised=true

The data dir defaults to $TFDS_DATA_DIR, else ~/tensorflow_datasets.")]
pub(crate) struct TfdsArgs {
    #[command(subcommand)]
    command: TfdsCommand,
}

#[derive(Debug, Subcommand)]
enum TfdsCommand {
    List(ListArgs),
    Info(InfoArgs),
}

/// List the prepared datasets of a data dir (NAME or NAME/CONFIG, and their versions).
#[derive(Debug, Args)]
struct ListArgs {
    /// The data dir (default: $TFDS_DATA_DIR, else ~/tensorflow_datasets).
    data_dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// A prepared dataset's version, file format, splits (examples, shards, bytes),
/// supervised keys and features.
#[derive(Debug, Args)]
struct InfoArgs {
    /// NAME, NAME:VERSION, NAME/CONFIG or NAME/CONFIG:VERSION (a version may use `*`).
    name: String,
    /// The data dir (default: $TFDS_DATA_DIR, else ~/tensorflow_datasets).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &TfdsArgs) -> Result<ExitCode> {
    match &args.command {
        TfdsCommand::List(a) => list(a),
        TfdsCommand::Info(a) => info(a),
    }
}

fn list(args: &ListArgs) -> Result<ExitCode> {
    let dir = default_data_dir(args.data_dir.as_deref());
    let found = list_prepared(&dir)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        eprintln!("no prepared datasets in {}", dir.display());
    }
    for d in &found {
        println!("{}  {}", d.name, d.versions.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}

fn info(args: &InfoArgs) -> Result<ExitCode> {
    let dir = default_data_dir(args.data_dir.as_deref());
    let info = TfdsInfo::find(&dir, &args.name)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(ExitCode::SUCCESS);
    }
    let name = match &info.config {
        Some(c) => format!("{}/{c}", info.name),
        None => info.name.clone(),
    };
    println!("{name} {}", info.version);
    println!("  dir: {}", info.dir.display());
    let readable = if info.file_format == "tfrecord" {
        ""
    } else {
        " (not read by Sluice: tfrecord only)"
    };
    println!("  file format: {}{readable}", info.file_format);
    if !info.description.is_empty() {
        println!(
            "  description: {}",
            info.description.lines().next().unwrap_or("")
        );
    }
    println!("  splits:");
    for s in &info.splits {
        println!(
            "    {}: {} examples in {} shard(s), {} bytes",
            s.name,
            s.num_examples(),
            s.shard_lengths.len(),
            s.num_bytes
        );
    }
    if let Some((x, y)) = &info.supervised_keys {
        println!("  supervised keys: ({x}, {y})");
    }
    println!("  features:");
    for f in &info.features {
        let shape: Vec<String> = f
            .shape
            .iter()
            .map(|d| d.map_or("None".to_string(), |d| d.to_string()))
            .collect();
        let mut line = format!(
            "    {}: {} {} [{}]",
            f.name,
            f.kind,
            f.dtype,
            shape.join(", ")
        );
        if f.kind == FeatureKind::ClassLabel {
            match (&f.names, f.num_classes) {
                (Some(names), _) => line.push_str(&format!(" names: {}", names.join(", "))),
                (None, Some(n)) => line.push_str(&format!(" {n} classes")),
                _ => {}
            }
        }
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
