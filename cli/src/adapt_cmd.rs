//! `sluice adapt PIPELINE.toml --out stats.json ...`: reads a pipeline once and learns what
//! the Keras stages load (means and variances, vocabularies), as Keras's `layer.adapt`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use sluice_core::adapt::{AdaptSpec, Analyzer, Learnt, adapt};
use sluice_core::pipeline_file::PipelineFile;

/// Learn means, variances and vocabularies from a pipeline's output, for the stages that
/// load them (`normalization` `adapted = FILE`, `vocabulary = { adapted = FILE }`).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  sluice adapt census.toml --out stats.json --mean-variance age --vocabulary workclass
  sluice adapt reviews.toml --out vocab.json --text-vocabulary review:20000

FEATURE:N keeps at most N tokens, counting the lookup's special indices as Keras's
max_tokens does (1 OOV index for --vocabulary; \"\" and [UNK] for --text-vocabulary).")]
pub(crate) struct AdaptArgs {
    /// The pipeline file whose output is read.
    pipeline: PathBuf,
    /// The statistics file to write.
    #[arg(long)]
    out: PathBuf,
    /// Features whose mean and variance are learnt.
    #[arg(long = "mean-variance", value_name = "FEATURE")]
    mean_variance: Vec<String>,
    /// Features whose values make a vocabulary (`string_lookup`, `integer_lookup`).
    #[arg(long, value_name = "FEATURE[:MAX_TOKENS]")]
    vocabulary: Vec<String>,
    /// Text features whose tokens make a vocabulary (`text_vectorization`'s defaults).
    #[arg(long = "text-vocabulary", value_name = "FEATURE[:MAX_TOKENS]")]
    text_vocabulary: Vec<String>,
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
    for arg in &args.vocabulary {
        let (name, max_tokens) = feature_and_max(arg)?;
        let analyzer = serde_json::from_value(serde_json::json!({
            "analyzer": "vocabulary", "max_tokens": max_tokens
        }))?;
        spec = spec.with(name, analyzer);
    }
    for arg in &args.text_vocabulary {
        let (name, max_tokens) = feature_and_max(arg)?;
        let analyzer = serde_json::from_value(serde_json::json!({
            "analyzer": "text_vocabulary", "max_tokens": max_tokens
        }))?;
        spec = spec.with(name, analyzer);
    }
    if spec.features.is_empty() {
        bail!("nothing to learn: give --mean-variance, --vocabulary or --text-vocabulary");
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
            Learnt::Vocabulary { tokens, .. } => eprintln!("{name}: {} tokens", tokens.len()),
        }
    }
    eprintln!(
        "{} elements read; wrote {}",
        stats.elements,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
