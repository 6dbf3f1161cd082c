//! `sluice run`: run a pipeline file, with a progress bar, per-stage statistics, a JSON
//! summary, and optionally its output written as TFRecord shards of `tf.train.Example`.

use std::fs;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use sluice_core::checkpoint::element_digest;
use sluice_core::observe::{
    Observe, TensorBoardWriter, Timeline, TimelineConfig, TraceConfig, Tracer,
};
use sluice_core::pipeline_file::PipelineFile;
use sluice_core::{
    Checkpoint, Dataset, Element, PipelineIter, PipelineStats, RecordAccount, StageStats,
};
use sluice_proto::tfrecord::{Compression, TfRecordWriter};
use sluice_proto::{Example, TfMessage};
use sluice_storage::{Location, ObjectWriter};

/// Run a pipeline file and report its throughput and per-stage statistics.
#[derive(Debug, Args)]
#[command(
    long_about = "\
Run a pipeline file (TOML: a source, stages and options; the format is described in \
docs/pipeline-format.md) and report what it did.

The file is checked before anything runs: an unknown key, a wrong type or an impossible \
value is reported with its line and column (and, for a misspelt key, the closest valid one), \
and the exit status is 1. Plugin stages (kind = \"plugin\") are loaded before anything runs \
too: a missing plugin file or a config the plugin refuses is reported with the stage, the file \
and the plugin's own message. --plugin-dir DIR looks every plugin up in DIR by its file name \
(e.g. --plugin-dir target/debug for a debug build of a plugin the file names in target/release).

While it runs, a progress bar on stderr shows the elements per second (only when stderr is a \
terminal). At the end, a per-stage table: elements in and out, worker threads, busy %, time \
waiting on upstream and on downstream, buffer occupancy, and the bottleneck (the stage the \
pipeline waited on most). With several epochs the table sums them.

Records: every record the sources read is accounted for: `records: R read = D delivered + \
S skipped + F filtered + X dropped` (+ U unfinished when the run stopped before the end of \
an epoch). Delivered counts rows through the batch dimension; skipped are records that \
failed under error_policy = \"skip\" (corrupt records a reader skipped, elements a stage \
failed on); filtered are left out by filter stages, filter plugins and functions that \
return nothing; dropped by a stage's own rule (drop_remainder, incomplete windows). Not \
shown when records cannot be followed (take, skip, repeat or cache in the file: iterate \
epochs instead).

Counting: when the pipeline's output is batched (its last batch / padded_batch / unbatch \
stage is a batch), `elements` counts rows through the batch dimension and `batches` counts \
the batches; otherwise `elements` counts the pipeline's elements and `batches` is 0.

--output DIR --shards N writes the output as N TFRecord files \
DIR/part.tfrecord-00000-of-0000N ... of tf.train.Example, rows dealt round-robin: one Example \
per element, or per row of a batch. Each value becomes a feature of the same name, flattened \
in row-major order: byte strings a bytes_list, integers (u8, i32, i64) an int64_list, \
floats (f32, f64) a float_list. Shapes are not stored: parse them back with a fixed_len \
feature of the known shape. --compression gzip|zlib compresses each shard as TensorFlow's \
TFRecordWriter does (readers detect it).",
    after_help = "\
Examples:
  sluice run examples/pipelines/augment.toml --data data/
  sluice run pipeline.toml --epochs 3 --json
  sluice run preprocess.toml --output prepared/ --shards 8
  sluice run preprocess.toml --output s3://bucket/prepared/ --shards 8 --compression gzip
  sluice run pipeline.toml --take 100
  sluice run pipeline.toml --explain
  sluice run examples/pipelines/plugin_noise.toml --plugin-dir target/debug"
)]
pub(crate) struct RunArgs {
    /// The pipeline file.
    #[arg(value_name = "PIPELINE.toml")]
    pipeline: PathBuf,

    /// Passes over the data (each reshuffled where the pipeline shuffles).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,

    /// Stop after N pipeline elements in all (batches, when the pipeline batches).
    #[arg(long, value_name = "N")]
    take: Option<u64>,

    /// Print one JSON object with the results (and nothing else) on stdout.
    #[arg(long)]
    json: bool,

    /// Write the pipeline's output to DIR (a folder, or a URL prefix such as
    /// s3://bucket/prepared/) as TFRecord shards of tf.train.Example. Each shard appears
    /// whole under its name when the run ends, or not at all.
    #[arg(long, value_name = "DIR|URL")]
    output: Option<String>,

    /// Number of shards written by --output.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "output",
          value_parser = clap::value_parser!(u32).range(1..=99_999))]
    shards: u32,

    /// How --output compresses its shards: none, gzip or zlib (TFRecordWriter's
    /// compression_type; readers, Sluice's and TensorFlow's, detect it or are told).
    #[arg(long, value_name = "TYPE", default_value = "none", requires = "output",
          value_parser = output_compression)]
    compression: Compression,

    /// Read the source's files from DIR instead of the file's `dir`.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,

    /// Look every plugin up in DIR (by its file name) instead of at the file's `path`.
    #[arg(long, value_name = "DIR")]
    plugin_dir: Option<PathBuf>,

    /// Use this seed instead of the file's.
    #[arg(long, value_name = "SEED")]
    seed: Option<u64>,

    /// Write a checkpoint of the run to FILE every --checkpoint-every seconds, at the end
    /// of each epoch, and on Ctrl-C (then stop with exit status 130).
    #[arg(long, value_name = "FILE", conflicts_with = "output")]
    checkpoint: Option<PathBuf>,

    /// Seconds between periodic checkpoints.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30.0,
        requires = "checkpoint"
    )]
    checkpoint_every: f64,

    /// Continue the run a checkpoint was written for (with the same pipeline file and
    /// options): the elements that follow are exactly those the run would have produced.
    /// On several hosts, give every host's checkpoint (repeat the flag, or list them after
    /// it): each host of this run, whatever their number now (its `shard` stage), reads
    /// its share of what the epoch has left, every record once.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with = "output")]
    resume: Vec<PathBuf>,

    /// Write a SHA-256 of every pipeline element (its id and values' bytes) to FILE, one
    /// line each, to compare runs; appended to when resuming.
    #[arg(long, value_name = "FILE")]
    digests: Option<PathBuf>,

    /// Print the plan as written, the optimizer's rewrites and the plan that runs (with
    /// the stage numbers stats and errors use), check it, and exit without running.
    #[arg(long)]
    explain: bool,

    /// Write a trace of the run to FILE in the Chrome trace event format: a track per
    /// thread, a span per element or chunk of each stage (sampled: see the file's
    /// otherData.sampling), queue depths and bytes buffered as counters, autotune's
    /// decisions and storage retries as instant events, plugin calls as spans. Open it in
    /// https://ui.perfetto.dev or chrome://tracing.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,

    /// Write TensorBoard scalars of the run to DIR as it goes (elements/s and MB/s per
    /// stage, busy and waited-on fractions, buffer fill, autotune's values, the
    /// bottleneck): `tensorboard --logdir DIR` shows them.
    #[arg(long, value_name = "DIR")]
    tensorboard: Option<PathBuf>,

    /// Testing: stop as on Ctrl-C after N elements.
    #[arg(long, value_name = "N", hide = true)]
    stop_after: Option<u64>,
}

/// The final JSON object of `--json` (also part of `sluice demo --json`).
#[derive(Debug, Serialize)]
pub(crate) struct Summary<'a> {
    pipeline: Option<&'a str>,
    file: String,
    epochs: u64,
    elements: u64,
    batches: u64,
    seconds: f64,
    elements_per_s: f64,
    skipped: u64,
    /// Every record read, accounted for (`null` when the pipeline's records are not
    /// followed: see `sluice_core::RecordAccount`).
    records: Option<RecordAccount>,
    bottleneck: Option<String>,
    stages: &'a [StageStats],
    output: Option<OutputSummary>,
    /// Object stores read or written (requests, retries, bytes, request times), when any
    /// was.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    storage: std::collections::BTreeMap<String, crate::common::StorageSummary>,
    /// What autotune changed or tried (see `sluice_core::autotune`).
    autotune: &'a [sluice_core::autotune::Decision],
    /// Set when Ctrl-C stopped the run after this many pipeline elements (a checkpoint was
    /// written).
    interrupted: Option<u64>,
    /// The run's statistics over time (`sluice report` plots them; see
    /// `sluice_core::observe::Timeline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) timeline: Option<sluice_core::observe::TimelineData>,
    /// The Sluice that ran, and the machine's CPUs (what `sluice report` shows beside the
    /// figures).
    sluice_version: &'static str,
    cpus: usize,
    /// When the run started (seconds since the Unix epoch).
    started_unix: f64,
}

#[derive(Debug, Serialize)]
struct OutputSummary {
    dir: String,
    shards: u32,
    records: u64,
    compression: &'static str,
}

/// `--compression`: what a writer can do (`auto` is for readers).
fn output_compression(s: &str) -> std::result::Result<Compression, String> {
    match s.parse::<Compression>() {
        Ok(Compression::Auto) | Err(_) => Err(format!(
            "{s:?} is not a compression to write: expected none, gzip or zlib"
        )),
        Ok(c) => Ok(c),
    }
}

impl<'a> Summary<'a> {
    /// The summary of `ran`, a run of the pipeline named `pipeline` read from `file`.
    pub(crate) fn new(pipeline: Option<&'a str>, file: String, ran: &'a Ran) -> Self {
        Summary {
            pipeline,
            file,
            epochs: ran.epochs,
            elements: ran.elements,
            batches: ran.batches,
            seconds: ran.seconds,
            elements_per_s: ran.elements_per_s(),
            skipped: ran.stats.skipped,
            records: ran.stats.records,
            bottleneck: ran.stats.bottleneck().map(|s| s.name.clone()),
            stages: &ran.stats.stages,
            output: None,
            storage: crate::common::storage_summary(),
            autotune: &ran.stats.autotune,
            interrupted: None,
            timeline: None,
            sluice_version: env!("CARGO_PKG_VERSION"),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            started_unix: ran.started_unix,
        }
    }
}

/// What running a pipeline for some epochs gave.
pub(crate) struct Ran {
    /// Epochs run (fewer than asked when `take` stopped the run).
    pub(crate) epochs: u64,
    /// Rows through the batch dimension when the output is batched, else elements.
    pub(crate) elements: u64,
    /// Batches (0 when the output is not batched).
    pub(crate) batches: u64,
    /// Wall time of the epochs.
    pub(crate) seconds: f64,
    /// The statistics of every epoch together ([`PipelineStats::merge`]).
    pub(crate) stats: PipelineStats,
    /// Stopped early (Ctrl-C) after this many elements of the run, a checkpoint written.
    pub(crate) interrupted: Option<u64>,
    /// `elements` counted by this process (a resumed run counts the checkpoint's too).
    pub(crate) elements_here: u64,
    /// When the run started (seconds since the Unix epoch).
    pub(crate) started_unix: f64,
}

impl Ran {
    pub(crate) fn elements_per_s(&self) -> f64 {
        self.elements_here as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `dataset` for `epochs` epochs, or until `take` pipeline elements in all, with a
/// progress bar on stderr (on a terminal), handing every element to `each`. `batched`: the
/// elements are batches, counted by their rows.
pub(crate) fn run_epochs(
    dataset: &Dataset,
    batched: bool,
    epochs: u64,
    take: Option<u64>,
    each: impl FnMut(&Element) -> Result<()>,
) -> Result<Ran> {
    run_epochs_with(
        dataset,
        batched,
        epochs,
        take,
        &Checkpointing::default(),
        each,
    )
}

/// `sluice run`'s checkpointing: where to write checkpoints and how often, what to resume
/// from, and when to stop early.
#[derive(Debug, Default)]
pub(crate) struct Checkpointing {
    /// Write checkpoints here (`--checkpoint`).
    pub(crate) path: Option<PathBuf>,
    /// How often.
    pub(crate) every: Duration,
    /// Continue this run (`--resume`).
    pub(crate) resume: Option<Resume>,
    /// Set by Ctrl-C: write a checkpoint and stop.
    pub(crate) interrupted: Arc<AtomicBool>,
    /// Stop as if interrupted after this many elements of this process (tests).
    pub(crate) stop_after: Option<u64>,
    /// Write a digest of every element here, one line each (`--digests`).
    pub(crate) digests: Option<PathBuf>,
}

/// What `sluice run --checkpoint` writes: where the run is (epoch of the run, elements
/// taken so far) and the pipeline's own [`Checkpoint`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunCheckpoint {
    /// The epoch of the run (0-based) the checkpoint is in; `epochs` when the run ended.
    pub(crate) epoch_index: u64,
    /// Pipeline elements yielded so far in the run (what `--take` counts).
    pub(crate) taken: u64,
    /// Rows (or elements) so far.
    pub(crate) elements: u64,
    /// Batches so far.
    pub(crate) batches: u64,
    /// The pipeline's position.
    pub(crate) checkpoint: Checkpoint,
    /// At the start of an epoch: the end of the one before (everything this host read of
    /// it), which hosts still in that epoch need to resume on another number of hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ended: Option<Checkpoint>,
    /// The length of the `--digests` file when the checkpoint was written: a resumed run
    /// writing the same file cuts it there (lines a killed run wrote after its last
    /// checkpoint are written again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) digests_len: Option<u64>,
    /// That `--digests` file (absolute): another file, e.g. another host's after an
    /// elastic resume, is not cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) digests_path: Option<PathBuf>,
}

impl RunCheckpoint {
    /// Writes the checkpoint atomically and durably (a hidden temporary file beside it,
    /// synced, renamed, the directory synced): a run killed at any point leaves the previous
    /// checkpoint or this one, whole.
    fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        sluice_storage::write_durably(path, text.as_bytes())
            .with_context(|| format!("cannot write the checkpoint {}", path.display()))
    }

    pub(crate) fn load(path: &Path) -> Result<RunCheckpoint> {
        let text = fs::read_to_string(path)
            .with_context(|| format!("cannot read the checkpoint {}", path.display()))?;
        let cp: RunCheckpoint = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a sluice run checkpoint", path.display()))?;
        // The pipeline's part is checked by its own reader (version).
        Checkpoint::from_json(&cp.checkpoint.to_json())
            .with_context(|| format!("{}", path.display()))?;
        Ok(cp)
    }
}

/// What `--resume` continues: the checkpoints of every host of a run (one when the run had
/// one host, or when this host continues its own), the epoch of the run they are in, and
/// the counts so far (this host's own when it continues its own checkpoint, else 0).
#[derive(Debug, Clone)]
pub(crate) struct Resume {
    pub(crate) epoch_index: u64,
    pub(crate) taken: u64,
    pub(crate) elements: u64,
    pub(crate) batches: u64,
    pub(crate) checkpoints: Vec<Checkpoint>,
    /// Where this host's `--digests` file stood at the checkpoint, and which file it was
    /// (own checkpoint only).
    pub(crate) digests: Option<(PathBuf, u64)>,
}

impl Resume {
    /// The checkpoints written by `sluice run --checkpoint` at `paths`.
    pub(crate) fn load(paths: &[PathBuf]) -> Result<Option<Resume>> {
        let runs = paths
            .iter()
            .map(|p| RunCheckpoint::load(p))
            .collect::<Result<Vec<_>>>()?;
        let Some(first) = runs.first() else {
            return Ok(None);
        };
        let own = runs.len() == 1;
        // Hosts that finished the epoch others are still in wrote the next epoch's start:
        // their end of that epoch stands for them.
        let epoch_index = runs.iter().map(|r| r.epoch_index).min().unwrap_or(0);
        let mut checkpoints = Vec::with_capacity(runs.len());
        for (i, r) in runs.iter().enumerate() {
            match (&r.ended, r.epoch_index) {
                (_, e) if e == epoch_index => checkpoints.push(r.checkpoint.clone()),
                (Some(ended), e) if e == epoch_index + 1 => checkpoints.push(ended.clone()),
                (_, e) => anyhow::bail!(
                    "{} is in epoch {} of its run, {} in epoch {}: give the checkpoints every host wrote at one step",
                    paths[i].display(),
                    e + 1,
                    paths[0].display(),
                    first.epoch_index + 1
                ),
            }
        }
        Ok(Some(Resume {
            epoch_index,
            taken: if own { first.taken } else { 0 },
            elements: if own { first.elements } else { 0 },
            batches: if own { first.batches } else { 0 },
            checkpoints,
            digests: match (own, &first.digests_path, first.digests_len) {
                (true, Some(path), Some(len)) => Some((path.clone(), len)),
                _ => None,
            },
        }))
    }

    /// The rest of the epoch: this host's own checkpoint resumed exactly, or every host's
    /// dealt to this run's hosts ([`Dataset::resume_elastic`]).
    fn open(&self, dataset: &Dataset) -> sluice_core::Result<PipelineIter> {
        match self.checkpoints.as_slice() {
            [one] if one.elastic.is_none() => dataset.resume(one),
            all => dataset.resume_elastic(all),
        }
    }
}

/// [`run_epochs`] with checkpointing.
pub(crate) fn run_epochs_with(
    dataset: &Dataset,
    batched: bool,
    epochs: u64,
    take: Option<u64>,
    ckpt: &Checkpointing,
    mut each: impl FnMut(&Element) -> Result<()>,
) -> Result<Ran> {
    let bar = progress_bar();
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let resume = ckpt.resume.clone();
    let (first_epoch, mut elements, mut batches, mut taken) = match &resume {
        Some(r) => (r.epoch_index, r.elements, r.batches, r.taken),
        None => (0, 0, 0, 0),
    };
    let mut digests = match &ckpt.digests {
        Some(path) => {
            let file = fs::OpenOptions::new()
                .create(true)
                .append(resume.is_some())
                .write(true)
                .truncate(resume.is_none())
                .open(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            // Lines written after the checkpoint by the run that was stopped are written
            // again by this one: the file that run wrote is cut back to the checkpoint
            // (never lengthened; another host's file is left alone).
            if let Some((written, len)) = resume.as_ref().and_then(|r| r.digests.as_ref())
                && fs::canonicalize(path).ok().as_ref() == Some(written)
                && file.metadata().is_ok_and(|m| m.len() > *len)
            {
                file.set_len(*len)
                    .with_context(|| format!("cannot cut {} to the checkpoint", path.display()))?;
            }
            Some(BufWriter::new(file))
        }
        None => None,
    };
    let digests_path = ckpt.digests.as_ref().and_then(|p| fs::canonicalize(p).ok());
    let mut stats = Vec::new();
    let limit = take.unwrap_or(u64::MAX);
    let mut last_save = Instant::now();
    let mut interrupted = None;
    let mut this_process = 0u64;
    'epochs: for epoch in first_epoch..epochs {
        if taken >= limit {
            break;
        }
        let opened = match &resume {
            Some(r) if epoch == first_epoch => r.open(dataset),
            _ => dataset.iter(),
        };
        let mut iter = match opened {
            Ok(iter) => iter,
            Err(e) => {
                bar.finish_and_clear();
                return Err(e.into());
            }
        };
        let save = |iter: &PipelineIter, taken, elements, batches, digests_len| -> Result<()> {
            if let Some(path) = &ckpt.path {
                RunCheckpoint {
                    epoch_index: epoch,
                    taken,
                    elements,
                    batches,
                    checkpoint: iter.checkpoint()?,
                    ended: None,
                    digests_len,
                    digests_path: digests_path.clone(),
                }
                .save(path)?;
            }
            Ok(())
        };
        let mut failure = None;
        while let Some(item) = iter.next() {
            let handled =
                item.map_err(|e| anyhow::Error::new(e).context(format!("epoch {}", epoch + 1)));
            let handled = handled.and_then(|element| {
                let rows = if batched {
                    sluice_core::example::batch_rows(&element)?
                } else {
                    1
                };
                each(&element)?;
                if let Some(out) = digests.as_mut() {
                    writeln!(out, "{}", element_digest(&element))?;
                }
                Ok(rows)
            });
            match handled {
                Ok(rows) => {
                    if batched {
                        batches += 1;
                    }
                    elements += rows;
                    bar.inc(rows);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            taken += 1;
            this_process += 1;
            let stop = ckpt.interrupted.load(Ordering::Relaxed)
                || ckpt.stop_after.is_some_and(|n| this_process >= n);
            if stop || (ckpt.path.is_some() && last_save.elapsed() >= ckpt.every) {
                let digests_len = digests_flushed(digests.as_mut())?;
                if let Err(e) = save(&iter, taken, elements, batches, digests_len) {
                    bar.finish_and_clear();
                    return Err(e);
                }
                last_save = Instant::now();
            }
            if stop {
                interrupted = Some(taken);
                stats.push(iter.stats());
                break 'epochs;
            }
            if taken >= limit {
                break;
            }
        }
        stats.push(iter.stats());
        if failure.is_none() {
            // The end of an epoch: a checkpoint at the start of the next.
            if let Some(path) = &ckpt.path {
                let ended = iter.checkpoint()?;
                let next = ended.next_epoch();
                let end_of_take = taken >= limit;
                let digests_len = digests_flushed(digests.as_mut())?;
                RunCheckpoint {
                    epoch_index: if end_of_take { epochs } else { epoch + 1 },
                    taken,
                    elements,
                    batches,
                    checkpoint: next,
                    ended: Some(ended),
                    digests_len,
                    digests_path: digests_path.clone(),
                }
                .save(path)?;
                last_save = Instant::now();
            }
        }
        drop(iter);
        if let Some(e) = failure {
            bar.finish_and_clear();
            return Err(e);
        }
    }
    if let Some(out) = digests.as_mut() {
        out.flush()?;
    }
    bar.finish_and_clear();
    Ok(Ran {
        epochs: stats.len() as u64,
        elements,
        batches,
        seconds: started.elapsed().as_secs_f64(),
        stats: PipelineStats::merge(&stats),
        interrupted,
        elements_here: elements - resume.as_ref().map_or(0, |r| r.elements),
        started_unix,
    })
}

/// Flushes the `--digests` file (when there is one) and returns its length: where a run
/// resumed from the checkpoint about to be written continues it.
fn digests_flushed(digests: Option<&mut BufWriter<fs::File>>) -> Result<Option<u64>> {
    let Some(out) = digests else {
        return Ok(None);
    };
    out.flush()?;
    out.get_ref().sync_data()?;
    Ok(Some(out.get_ref().metadata()?.len()))
}

/// Runs `sluice run`.
pub(crate) fn run(args: &RunArgs) -> Result<ExitCode> {
    let mut pipeline = PipelineFile::load(&args.pipeline)?;
    if let Some(dir) = &args.data {
        pipeline = pipeline.with_data_dir(dir);
    }
    if let Some(dir) = &args.plugin_dir {
        pipeline = pipeline.with_plugin_dir(dir);
    }
    if let Some(seed) = args.seed {
        pipeline.options.seed = Some(seed);
    }
    let batched = pipeline.output_is_batched();
    let dataset = pipeline.build_with(&sluice_plugins::Loader::default())?;
    if args.explain {
        let mut out = io::stdout().lock();
        write!(out, "{}", dataset.explain()?)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let observed = Observed::start(&dataset, args.trace.as_deref(), args.tensorboard.as_deref())?;
    let mut output = match &args.output {
        Some(dir) => Some(Shards::create(
            &sluice_storage::Location::parse(dir)?,
            args.shards,
            args.compression,
        )?),
        None => None,
    };
    let ckpt = Checkpointing {
        path: args.checkpoint.clone(),
        every: Duration::from_secs_f64(args.checkpoint_every.max(0.0)),
        resume: Resume::load(&args.resume)?,
        interrupted: Arc::default(),
        stop_after: args.stop_after,
        digests: args.digests.clone(),
    };
    if let Some(path) = &args.checkpoint {
        // What a run killed while writing its checkpoint left beside it.
        sluice_storage::remove_stale_temporaries(path)
            .with_context(|| format!("cannot clean up beside {}", path.display()))?;
        let flag = Arc::clone(&ckpt.interrupted);
        ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
            .context("cannot handle Ctrl-C")?;
    }
    let ran = run_epochs_with(
        &dataset,
        batched,
        args.epochs,
        args.take,
        &ckpt,
        |element| match output.as_mut() {
            Some(out) => out.write(element, batched),
            None => Ok(()),
        },
    )?;
    let records = match output.take() {
        Some(out) => Some(out.finish()?),
        None => None,
    };
    let mut summary = Summary::new(
        pipeline.name.as_deref(),
        args.pipeline.display().to_string(),
        &ran,
    );
    summary.output = records.map(|records| OutputSummary {
        dir: args.output.clone().unwrap_or_default(),
        shards: args.shards,
        records,
        compression: args.compression.name(),
    });
    summary.interrupted = ran.interrupted;
    summary.timeline = Some(observed.finish(!args.json)?);
    let mut out = io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&summary)?)?;
    } else {
        print_report(&mut out, &summary, &ran.stats)?;
    }
    out.flush()?;
    if ran.interrupted.is_some() {
        if let Some(path) = &args.checkpoint {
            eprintln!(
                "sluice run: interrupted; checkpoint written to {p}; continue with: sluice run {} --resume {p}",
                args.pipeline.display(),
                p = path.display()
            );
        }
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// The per-stage table with the bottleneck, then the totals (and what `--output` wrote).
pub(crate) fn print_report(
    out: &mut impl Write,
    s: &Summary<'_>,
    stats: &PipelineStats,
) -> io::Result<()> {
    let name = s.pipeline.map(|n| format!("{n} ({})", s.file));
    writeln!(
        out,
        "pipeline {}: {} epoch{}",
        name.as_deref().unwrap_or(&s.file),
        s.epochs,
        if s.epochs == 1 { "" } else { "s" }
    )?;
    writeln!(out, "{}", stats.report())?;
    let batches = if s.batches > 0 {
        format!(
            " in {} batch{}",
            s.batches,
            if s.batches == 1 { "" } else { "es" }
        )
    } else {
        String::new()
    };
    write!(
        out,
        "total: {} elements{batches}, {:.3}s, {:.1} elements/s",
        s.elements, s.seconds, s.elements_per_s
    )?;
    if s.skipped > 0 {
        write!(out, ", {} skipped", s.skipped)?;
    }
    writeln!(out)?;
    if let Some(r) = &s.records {
        write!(
            out,
            "records: {} read = {} delivered + {} skipped + {} filtered + {} dropped",
            r.read, r.delivered, r.skipped, r.filtered, r.dropped
        )?;
        if r.unfinished > 0 {
            write!(out, " + {} unfinished", r.unfinished)?;
        }
        writeln!(out)?;
    }
    if let Some(o) = &s.output {
        writeln!(
            out,
            "wrote {} records to {} in {} shard{}",
            o.records,
            o.dir,
            o.shards,
            if o.shards == 1 { "" } else { "s" }
        )?;
    }
    crate::common::print_storage(out)?;
    Ok(())
}

/// A spinner with the element count and rate on stderr, or a hidden bar when stderr is not
/// a terminal.
fn progress_bar() -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {elapsed_precise} {human_pos} elements, {per_sec}")
    {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// The `--output` shards, written round-robin; each appears under its name only when
/// [`Shards::finish`] commits it (an interrupted run leaves none).
struct Shards {
    writers: Vec<(String, TfRecordWriter<ObjectWriter>)>,
    next: usize,
    records: u64,
}

impl Shards {
    fn create(dir: &Location, shards: u32, compression: Compression) -> Result<Shards> {
        let writers = (0..shards)
            .map(|i| {
                let at = dir.join(&format!("part.tfrecord-{i:05}-of-{shards:05}"));
                // What a run killed before its commit left beside the shard.
                if let Location::Local(path) = &at {
                    sluice_storage::remove_stale_temporaries(path)
                        .with_context(|| format!("cannot clean up beside {}", path.display()))?;
                }
                let file = sluice_storage::create(&at, &Default::default())?;
                Ok((at.display(), TfRecordWriter::new(file, compression)?))
            })
            .collect::<Result<_>>()?;
        Ok(Shards {
            writers,
            next: 0,
            records: 0,
        })
    }

    /// Writes one Example per row of a batch, or one for the element.
    fn write(&mut self, element: &Element, batched: bool) -> Result<()> {
        for example in sluice_core::example::to_examples(element, batched)? {
            self.write_example(&example)?;
        }
        Ok(())
    }

    fn write_example(&mut self, example: &Example) -> Result<()> {
        let (name, writer) = &mut self.writers[self.next];
        writer
            .write_record(&example.to_bytes())
            .with_context(|| format!("cannot write {name}"))?;
        self.next = (self.next + 1) % self.writers.len();
        self.records += 1;
        Ok(())
    }

    /// Finishes every file; returns the number of records written.
    fn finish(self) -> Result<u64> {
        for (name, writer) in self.writers {
            writer
                .finish()
                .with_context(|| format!("cannot finish {name}"))?
                .commit()
                .with_context(|| format!("cannot write {name}"))?;
        }
        Ok(self.records)
    }
}

/// What `sluice run` observes of a run: always its timeline (for `--json` and `sluice
/// report`), with `--trace` a trace, with `--tensorboard` event files.
struct Observed {
    timeline: Timeline,
    trace: Option<(Tracer, PathBuf)>,
    tensorboard: Option<PathBuf>,
}

impl Observed {
    fn start(
        dataset: &Dataset,
        trace: Option<&Path>,
        tensorboard: Option<&Path>,
    ) -> Result<Observed> {
        let timeline = Timeline::new(TimelineConfig::default());
        let mut observe = Observe::new().timeline(timeline.clone());
        let mut board = None;
        if let Some(dir) = tensorboard {
            let writer = TensorBoardWriter::create(dir)
                .with_context(|| format!("cannot write TensorBoard events to {}", dir.display()))?;
            board = Some(writer.path().to_path_buf());
            timeline.add_sink(Box::new(writer));
        }
        let trace = trace.map(|path| (Tracer::new(TraceConfig::default()), path.to_path_buf()));
        if let Some((tracer, _)) = &trace {
            observe = observe.trace(tracer.clone());
        }
        dataset.observe(observe);
        Ok(Observed {
            timeline,
            trace,
            tensorboard: board,
        })
    }

    /// Writes the trace; returns the timeline. `tell`: say on stderr where they went.
    fn finish(self, tell: bool) -> Result<sluice_core::observe::TimelineData> {
        if let Some((tracer, path)) = &self.trace {
            tracer
                .write_to(path)
                .with_context(|| format!("cannot write the trace {}", path.display()))?;
            if tell {
                eprintln!(
                    "trace: {} ({} events): open it in https://ui.perfetto.dev or chrome://tracing",
                    path.display(),
                    tracer.events()
                );
            }
        }
        if let (Some(path), true) = (&self.tensorboard, tell) {
            eprintln!(
                "tensorboard: {} (tensorboard --logdir {})",
                path.display(),
                path.parent()
                    .map_or_else(|| ".".into(), |p| p.display().to_string())
            );
        }
        Ok(self.timeline.data())
    }
}
