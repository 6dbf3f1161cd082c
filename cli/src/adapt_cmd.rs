//! `sluice adapt PIPELINE.toml --out stats.json ...`: reads a pipeline once and learns what
//! the Keras stages load (means and variances, vocabularies with document frequencies,
//! quantile boundaries), as Keras's `layer.adapt`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use sluice_core::adapt::{AdaptSpec, Analyzer, Learnt, adapt};
use sluice_core::pipeline_file::PipelineFile;

/// Learn means, variances, vocabularies and quantile boundaries from a pipeline's output,
/// for the stages that load them (`normalization` `adapted = FILE`, `vocabulary = {
/// adapted = FILE }`, `discretization` `adapted = FILE`).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  sluice adapt census.toml --out stats.json --mean-variance age --vocabulary workclass
  sluice adapt reviews.toml --out vocab.json --text-vocabulary review:20000 --tf-idf
  sluice adapt census.toml --out bins.json --quantiles age:10 --batch-size 32

FEATURE:N keeps at most N tokens, counting the lookup's special indices as Keras's
max_tokens does (1 OOV index for --vocabulary; \"\" and [UNK] for --text-vocabulary;
with --tf-idf, Keras's layers have no mask index).
--quantiles and --batch-mean-variance go batch by batch as Keras's Discretization.adapt and
Normalization.adapt do: each element of the pipeline is one batch (end the pipeline with the
`batch` Keras's dataset had), or every --batch-size elements are. --mean-variance is exact
(float64) whatever the batches.")]
pub(crate) struct AdaptArgs {
    /// The pipeline file whose output is read.
    pipeline: PathBuf,
    /// The statistics file to write.
    #[arg(long)]
    out: PathBuf,
    /// Features whose mean and variance are learnt.
    #[arg(long = "mean-variance", value_name = "FEATURE")]
    mean_variance: Vec<String>,
    /// Features whose mean and variance are learnt as Keras's `Normalization.adapt` does,
    /// batch by batch in float32 (bit for bit Keras's; see --batch-size).
    #[arg(long = "batch-mean-variance", value_name = "FEATURE")]
    batch_mean_variance: Vec<String>,
    /// Features whose values make a vocabulary (`string_lookup`, `integer_lookup`).
    #[arg(long, value_name = "FEATURE[:MAX_TOKENS]")]
    vocabulary: Vec<String>,
    /// Text features whose tokens make a vocabulary (`text_vectorization`'s defaults).
    #[arg(long = "text-vocabulary", value_name = "FEATURE[:MAX_TOKENS]")]
    text_vocabulary: Vec<String>,
    /// Numeric features whose quantile boundaries are learnt, for `discretization`
    /// (Keras's `Discretization(num_bins=N).adapt`).
    #[arg(long, value_name = "FEATURE:NUM_BINS")]
    quantiles: Vec<String>,
    /// The quantile summary's error tolerance (Keras's `epsilon`).
    #[arg(long, default_value_t = 0.01)]
    epsilon: f64,
    /// Quantiles and batch means: elements summarized together as one batch (default 1:
    /// each element is a batch).
    #[arg(long = "batch-size", value_name = "N")]
    batch_size: Option<usize>,
    /// Quantiles: batches read at most (Keras's `steps`).
    #[arg(long, value_name = "N")]
    steps: Option<u64>,
    /// Vocabularies learn document frequencies too, for `output_mode = "tf_idf"`.
    #[arg(long = "tf-idf")]
    tf_idf: bool,
    /// Vocabularies hold at most N distinct tokens while counting (bounded memory: exact
    /// while the data has at most N, else approximate, Misra-Gries).
    #[arg(long, value_name = "N")]
    capacity: Option<usize>,
    /// Read the source's files from DIR (as `sluice run --data`).
    #[arg(long)]
    data: Option<PathBuf>,
}

/// `FEATURE[:N]`.
fn feature_and_max(arg: &str) -> Result<(String, Option<usize>)> {
    match arg.rsplit_once(':') {
        Some((name, n)) if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => Ok((
            name.to_string(),
            Some(
                n.parse()
                    .with_context(|| format!("{arg}: not a number of tokens"))?,
            ),
        )),
        _ => Ok((arg.to_string(), None)),
    }
}

pub(crate) fn run(args: &AdaptArgs) -> Result<ExitCode> {
    let mut spec = AdaptSpec::default();
    for f in &args.mean_variance {
        spec = spec.with(f.clone(), Analyzer::MeanVariance);
    }
    for f in &args.batch_mean_variance {
        let analyzer = Analyzer::BatchMeanVariance {
            batch_size: args.batch_size,
        };
        analyzer
            .check()
            .with_context(|| format!("--batch-mean-variance {f}"))?;
        spec = spec.with(f.clone(), analyzer);
    }
    for arg in &args.vocabulary {
        let (name, max_tokens) = feature_and_max(arg)?;
        let analyzer = serde_json::from_value(serde_json::json!({
            "analyzer": "vocabulary", "max_tokens": max_tokens, "tf_idf": args.tf_idf,
            "capacity": args.capacity
        }))?;
        spec = spec.with(name, analyzer);
    }
    for arg in &args.text_vocabulary {
        let (name, max_tokens) = feature_and_max(arg)?;
        let analyzer = serde_json::from_value(serde_json::json!({
            "analyzer": "text_vocabulary", "max_tokens": max_tokens, "tf_idf": args.tf_idf,
            "capacity": args.capacity
        }))?;
        spec = spec.with(name, analyzer);
    }
    for arg in &args.quantiles {
        let (name, Some(num_bins)) = feature_and_max(arg)? else {
            bail!("--quantiles {arg}: give FEATURE:NUM_BINS (e.g. age:10)");
        };
        let analyzer = Analyzer::Quantiles {
            num_bins,
            epsilon: args.epsilon,
            batch_size: args.batch_size,
            steps: args.steps,
        };
        analyzer
            .check()
            .with_context(|| format!("--quantiles {arg}"))?;
        spec = spec.with(name, analyzer);
    }
    if spec.features.is_empty() {
        bail!(
            "nothing to learn: give --mean-variance, --batch-mean-variance, --vocabulary, \
             --text-vocabulary or --quantiles"
        );
    }
    let mut pipeline = PipelineFile::load(&args.pipeline)?;
    if let Some(dir) = &args.data {
        pipeline = pipeline.with_data_dir(dir);
    }
    let dataset = pipeline.build_with(&sluice_plugins::Loader::default())?;
    let stats = adapt(&dataset, &spec)?;
    stats.save(&args.out)?;
    for (name, learnt) in &stats.features {
        match learnt {
            Learnt::MeanVariance {
                count,
                mean,
                variance,
            } => eprintln!("{name}: mean {mean}, variance {variance} ({count} values)"),
            Learnt::Vocabulary {
                tokens,
                approximate,
                ..
            } => eprintln!(
                "{name}: {} tokens{}",
                tokens.len(),
                if *approximate {
                    " (approximate counts: more distinct tokens than --capacity)"
                } else {
                    ""
                }
            ),
            Learnt::Quantiles {
                bin_boundaries,
                values,
                batches,
                ..
            } => eprintln!(
                "{name}: {} bin boundaries ({values} values in {batches} batches)",
                bin_boundaries.len()
            ),
        }
    }
    eprintln!(
        "{} elements read; wrote {}",
        stats.elements,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
