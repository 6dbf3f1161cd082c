//! `sluice demo`: a synthetic JPEG dataset in a temporary directory, the augmentation
//! pipeline run on it with the progress bar and the per-stage statistics of `sluice run`,
//! then a one-line summary.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use sluice_core::pipeline_file::PipelineFile;

use crate::r#gen::{self, GenArgs};
use crate::image_records::plural;
use crate::run::{self, Summary};

/// The pipeline the demo runs: `examples/pipelines/wasm_augment.toml`, built in.
const PIPELINE: &str = include_str!("../../examples/pipelines/wasm_augment.toml");
/// Where [`PIPELINE`] comes from, for reports and errors.
const PIPELINE_FILE: &str = "examples/pipelines/wasm_augment.toml";
/// The pipeline without the WASM augmentation (`--no-wasm`).
const PLAIN_PIPELINE: &str = include_str!("../../examples/pipelines/gen_augment.toml");
/// Where [`PLAIN_PIPELINE`] comes from.
const PLAIN_PIPELINE_FILE: &str = "examples/pipelines/gen_augment.toml";
/// The demo's WASM augmentation: `examples/plugins/solarize` (crate
/// `sluice-example-solarize`) compiled for wasm32 by the build script (`build.rs`); empty
/// when this binary was built without it.
const GUEST_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/demo_guest.wasm"));
/// Why [`GUEST_WASM`] is empty (empty when it is not).
const GUEST_MISSING: &str = include_str!(concat!(env!("OUT_DIR"), "/demo_guest.missing"));
/// The module's file name beside the data, as `wasm_augment.toml` names it (so
/// `--plugin-dir DIR` finds it).
const GUEST_FILE: &str = "sluice_example_solarize.wasm";
/// Height and width of the generated images.
const SIZE: u32 = 256;
/// Shards of the generated dataset (fewer when there are fewer images).
const SHARDS: u32 = 4;
/// The start of the generated shards' names, as `gen_augment.toml` expects them.
const NAME: &str = "train";

/// Generate a small dataset and run the augmentation pipeline on it.
#[derive(Debug, Args)]
#[command(
    long_about = "\
A first look at Sluice, with nothing to download: generate a small synthetic dataset and \
run the default augmentation pipeline on it.

1. Writes --images synthetic 256x256 JPEGs in 10 classes as 4 TFRecord shards (what \
`sluice gen` writes) to a new temporary directory, or to --keep DIR.
2. Writes the WASM augmentation beside the data: the example plugin gray_solarize, compiled \
for wasm32 when this binary was built and carried inside it. A binary built without the \
wasm32-unknown-unknown target says how to add it and runs the pipeline without the plugin, \
as --no-wasm does.
3. Runs the pipeline of examples/pipelines/wasm_augment.toml (built into the binary) on them \
for --epochs passes: interleave (4 files, parallel reads) -> parse_example -> image_ops \
(decode, random crop 224x224, random flip) -> gray_solarize (WASM, sandboxed: no imports, \
256 MiB, 2 s per call) -> image_ops (brightness, contrast, normalize) -> batch 64 -> \
prefetch. --no-wasm runs examples/pipelines/gen_augment.toml instead (the same built-in ops \
without the plugin). A progress bar shows on stderr on a terminal.
4. Prints what `sluice run` prints: the per-stage table (elements, threads, busy %, time \
waiting on upstream and downstream, buffer) with the bottleneck, and the totals; then one \
line with the images per second.
5. Deletes the temporary directory (--keep DIR: keeps the data and the module, which `sluice \
run examples/pipelines/wasm_augment.toml --data DIR --plugin-dir DIR` reads again).

--json prints one JSON object instead (and nothing else on stdout): the fields of `sluice \
run --json`, plus `data` (dir, kept, images, size, shards, bytes).",
    after_help = "\
Examples:
  sluice demo
  sluice demo --images 2048 --epochs 1
  sluice demo --no-wasm
  sluice demo --keep data && sluice run examples/pipelines/wasm_augment.toml --data data --plugin-dir data
  sluice demo --images 64 --epochs 1 --json"
)]
pub(crate) struct DemoArgs {
    /// Number of images generated.
    #[arg(long, value_name = "N", default_value_t = 512,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    images: u64,

    /// Passes over the data.
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    epochs: u64,

    /// Write the dataset to DIR (created if needed) and keep it, instead of a temporary
    /// directory deleted at the end.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,

    /// Print one JSON object with the results (and nothing else) on stdout.
    #[arg(long)]
    json: bool,

    /// Run the pipeline without the WASM augmentation.
    #[arg(long)]
    no_wasm: bool,
}

/// The generated dataset, in `--json`.
#[derive(Debug, Serialize)]
struct DataSummary {
    dir: String,
    kept: bool,
    images: u64,
    size: u32,
    shards: u32,
    bytes: u64,
}

/// The `--json` object: `sluice run --json`'s fields and `data`.
#[derive(Debug, Serialize)]
struct DemoSummary<'a> {
    data: DataSummary,
    #[serde(flatten)]
    run: Summary<'a>,
}

/// Runs `sluice demo`.
pub(crate) fn run(args: &DemoArgs) -> Result<ExitCode> {
    let mut out = io::stdout().lock();
    // Progress lines, not with --json (whose stdout is the JSON object alone).
    let say = |out: &mut io::StdoutLock<'_>, line: String| -> io::Result<()> {
        if !args.json {
            writeln!(out, "{line}")?;
            out.flush()?;
        }
        Ok(())
    };

    // Dropping `temp` (also on an error) deletes the directory.
    let temp = match &args.keep {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("sluice-demo-")
                .tempdir()
                .context("cannot create a temporary directory")?,
        ),
    };
    let dir: &Path = match (&args.keep, &temp) {
        (Some(dir), _) => dir,
        (None, Some(t)) => t.path(),
        (None, None) => unreachable!("a temporary directory without --keep"),
    };

    let shards = SHARDS.min(u32::try_from(args.images).unwrap_or(SHARDS));
    say(
        &mut out,
        format!(
            "sluice demo: writing {} synthetic {SIZE}x{SIZE} JPEG{} in {shards} TFRecord shard{} to {}",
            args.images,
            plural(args.images),
            plural(shards.into()),
            dir.display()
        ),
    )?;
    let started = Instant::now();
    let written = r#gen::generate(&GenArgs::new(dir.to_path_buf(), args.images, SIZE, shards))?;
    say(
        &mut out,
        format!(
            "  wrote {written} in {:.2}s",
            started.elapsed().as_secs_f64()
        ),
    )?;

    let wasm = !args.no_wasm && !GUEST_WASM.is_empty();
    if !args.no_wasm && !wasm {
        // On stderr: with --json, stdout is the JSON object alone.
        eprintln!(
            "sluice demo: this sluice was built without the demo's WASM augmentation ({}); to \
             include it, add the target with `rustup target add wasm32-unknown-unknown` and \
             rebuild (`cargo run --release -- demo`). Running the same pipeline without the \
             plugin ({PLAIN_PIPELINE_FILE}, as --no-wasm does).",
            GUEST_MISSING.lines().next().unwrap_or("no module")
        );
    }
    let (text, file) = if wasm {
        (PIPELINE, PIPELINE_FILE)
    } else {
        (PLAIN_PIPELINE, PLAIN_PIPELINE_FILE)
    };
    let mut pipeline = PipelineFile::from_toml_named(text, file)?.with_data_dir(dir);
    // Exactly the shards just written, not others a --keep DIR may already hold.
    pipeline.source.files = vec![format!("{NAME}.tfrecord-*-of-{shards:05}")];
    if wasm {
        let module = dir.join(GUEST_FILE);
        std::fs::write(&module, GUEST_WASM)
            .with_context(|| format!("cannot write {}", module.display()))?;
        say(
            &mut out,
            format!(
                "sluice demo: wrote the WASM augmentation (gray_solarize, built into this binary, \
                 {} KiB) to {}",
                GUEST_WASM.len().div_ceil(1024),
                module.display()
            ),
        )?;
        pipeline = pipeline.with_plugin_dir(dir);
    }
    let stages: Vec<&str> = pipeline.stages.iter().map(|s| s.kind()).collect();
    say(
        &mut out,
        format!(
            "sluice demo: running {} ({}) for {} epoch{}: {}",
            pipeline.name.as_deref().unwrap_or("the pipeline"),
            file,
            args.epochs,
            plural(args.epochs),
            stages.join(" -> ")
        ),
    )?;
    let batched = pipeline.output_is_batched();
    let dataset = pipeline.build_with(&sluice_plugins::Loader::default())?;
    let ran = run::run_epochs(&dataset, batched, args.epochs, None, |_| Ok(()))?;
    let summary = Summary::new(pipeline.name.as_deref(), file.to_string(), &ran);

    let data = DataSummary {
        dir: dir.display().to_string(),
        kept: args.keep.is_some(),
        images: written.records,
        size: SIZE,
        shards: written.files,
        bytes: written.bytes,
    };
    if let Some(t) = temp {
        t.close()
            .with_context(|| format!("cannot delete {}", data.dir))?;
    }

    if args.json {
        let demo = DemoSummary { data, run: summary };
        writeln!(out, "{}", serde_json::to_string(&demo)?)?;
    } else {
        writeln!(out)?;
        run::print_report(&mut out, &summary, &ran.stats)?;
        writeln!(out)?;
        let bottleneck = ran
            .stats
            .bottleneck()
            .map_or(String::new(), |b| format!(", bottleneck: {}", b.name));
        writeln!(
            out,
            "sluice demo: {:.0} images/s ({} images augmented and batched in {:.2}s, {} epoch{} of {}{bottleneck})",
            ran.elements_per_s(),
            ran.elements,
            ran.seconds,
            ran.epochs,
            plural(ran.epochs),
            data.images,
        )?;
        if data.kept {
            let plugin_dir = if wasm {
                format!(" --plugin-dir {}", data.dir)
            } else {
                String::new()
            };
            writeln!(
                out,
                "sluice demo: kept the data in {} ({NAME}.tfrecord-*-of-{:05}); run the pipeline on it again with: sluice run {file} --data {}{plugin_dir}",
                data.dir, data.shards, data.dir
            )?;
        } else {
            writeln!(out, "sluice demo: deleted {}", data.dir)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
