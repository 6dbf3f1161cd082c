//! `adapt`: one pass over a pipeline that learns what the Keras stages need (the analyze
//! phase of TF Transform, Keras's `layer.adapt(data)`), saved as a small versioned JSON
//! file the stages load (`normalization`'s `adapted`, a vocabulary's `{ adapted = ... }`,
//! `discretization`'s `adapted`).
//!
//! What depends on how the data is cut into batches (Keras's `Discretization.adapt`
//! summarizes batch by batch) takes each element read as one batch, as Keras's `adapt` does
//! with a batched `tf.data.Dataset`: put the `batch` stage Keras would have before `adapt`
//! (or give the analyzer a `batch_size`).
//!
//! ```
//! # fn main() -> sluice_core::Result<()> {
//! use sluice_core::prelude::*;
//! use sluice_core::adapt::{Analyzer, AdaptSpec, adapt};
//!
//! let rows = Dataset::range(0, 5); // values 0..4 in the feature `value`
//! let spec = AdaptSpec::default().with("value", Analyzer::MeanVariance);
//! let stats = adapt(&rows, &spec)?;
//! assert_eq!(stats.mean_variance("value")?, (2.0, 2.0));
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use rustc_hash::FxHashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::quantiles::QuantileSummary;
use super::text_vectorization::{Ngrams, Standardize, TextSplit, Vectorizer};
pub use super::token_counts::TokenCounts;
use crate::dataset::Dataset;
use crate::element::Value;
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorData};

/// The format name and version a statistics file starts with.
pub const FORMAT: &str = "sluice-adapt";
/// The version this Sluice writes and reads.
pub const VERSION: u32 = 1;

/// What to learn of one feature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "analyzer", deny_unknown_fields)]
pub enum Analyzer {
    /// The mean and (population) variance of all its values, in `f64` (for
    /// `normalization`; Keras's `Normalization(axis=None).adapt`).
    MeanVariance,
    /// The mean and variance as Keras's `Normalization(axis=None).adapt` computes them
    /// over a batched `tf.data.Dataset`, bit for bit: each batch's `float32` mean and
    /// variance (TensorFlow's `reduce_mean` and `reduce_variance`, summed in Eigen's order
    /// on one thread), merged into the running ones in `float32` with the batch's weight.
    /// Each element read is one batch, or every `batch_size` elements are. For statistics
    /// as exact as `float64` allows, use `mean_variance`.
    BatchMeanVariance {
        /// Elements per batch (default: 1, each element a batch: batch the pipeline as
        /// Keras's dataset was).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch_size: Option<usize>,
    },
    /// Its distinct values (strings or integers), most frequent first, ties by value in
    /// decreasing byte order, without the mask and OOV tokens: `StringLookup.adapt`'s
    /// vocabulary. `max_tokens` counts the mask and OOV indices as Keras does (the
    /// vocabulary keeps `max_tokens - num_oov_indices - (1 if mask_token)` tokens).
    Vocabulary {
        /// The lookup's size, special indices included (default: no limit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<usize>,
        /// The lookup's OOV indices (default 1).
        #[serde(default = "one")]
        num_oov_indices: usize,
        /// The lookup's mask token (default: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mask_token: Option<String>,
        /// The lookup's OOV token (default `"[UNK]"`).
        #[serde(default = "unk")]
        oov_token: String,
        /// Learn document frequencies too, for `output_mode = "tf_idf"` (Keras's adapt
        /// with `output_mode="tf_idf"`): a tensor of rank 0 or 1 is one document, one of
        /// rank 2 one document per row (default false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        tf_idf: bool,
        /// Distinct tokens held at most while counting (default: every one, exact). Exact
        /// while the data has at most this many distinct tokens; past that the counts are
        /// approximate (Misra-Gries: low by at most `tokens seen / (capacity + 1)`, every
        /// more frequent token kept) and the statistics say `approximate`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capacity: Option<usize>,
    },
    /// The tokens of its texts, standardized and split as `text_vectorization` does:
    /// `TextVectorization.adapt`'s vocabulary (`max_tokens` counts its mask and OOV
    /// indices: `max_tokens - 2` tokens are kept).
    TextVocabulary {
        /// The layer's size, its 2 special indices included (default: no limit; with
        /// `tf_idf` Keras's layer has no mask index: `max_tokens - 1` tokens are kept).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<usize>,
        /// As `text_vectorization`'s.
        #[serde(default)]
        standardize: Standardize,
        /// As `text_vectorization`'s.
        #[serde(default)]
        split: TextSplit,
        /// As `text_vectorization`'s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ngrams: Option<Ngrams>,
        /// Learn document frequencies too (each text a document), for
        /// `output_mode = "tf_idf"` (default false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        tf_idf: bool,
        /// As `vocabulary`'s: distinct tokens held at most (default: every one, exact).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capacity: Option<usize>,
    },
    /// Quantile boundaries of its values for `discretization` (Keras's
    /// `Discretization(num_bins=, epsilon=).adapt`): Keras's approximate quantile summary,
    /// computed as Keras computes it, so that the boundaries are Keras's bit for bit for
    /// the same values in the same batches. Each element read is one batch (Keras's
    /// `adapt` of a batched `tf.data.Dataset`: one `update_state` per batch), or every
    /// `batch_size` elements are; values are cast to float32 first.
    Quantiles {
        /// Bins (boundaries: one fewer, or fewer when there are fewer distinct values).
        num_bins: usize,
        /// The summary's error tolerance (default 0.01, Keras's).
        #[serde(default = "epsilon")]
        epsilon: f64,
        /// Elements per batch summarized (default: 1, each element a batch: batch the
        /// pipeline as Keras's dataset was).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch_size: Option<usize>,
        /// Batches read at most (Keras's `steps`; default: all).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<u64>,
    },
}

fn epsilon() -> f64 {
    0.01
}

impl Analyzer {
    /// The quantiles analyzer with Keras's defaults (`epsilon` 0.01, each element a batch).
    pub fn quantiles(num_bins: usize) -> Self {
        Analyzer::Quantiles {
            num_bins,
            epsilon: epsilon(),
            batch_size: None,
            steps: None,
        }
    }

    /// Whether its parameters make sense: an error naming the first that does not.
    pub fn check(&self) -> Result<()> {
        match self {
            Analyzer::Quantiles {
                num_bins,
                epsilon,
                batch_size,
                ..
            } => {
                if *num_bins == 0 {
                    return Err(Error::invalid("quantiles: `num_bins` must be at least 1"));
                }
                if !(*epsilon > 0.0 && *epsilon <= 1.0) {
                    return Err(Error::invalid(format!(
                        "quantiles: `epsilon` must be in (0, 1], not {epsilon}"
                    )));
                }
                if *batch_size == Some(0) {
                    return Err(Error::invalid("quantiles: `batch_size` must be at least 1"));
                }
                Ok(())
            }
            Analyzer::BatchMeanVariance {
                batch_size: Some(0),
            } => Err(Error::invalid(
                "batch_mean_variance: `batch_size` must be at least 1",
            )),
            Analyzer::Vocabulary {
                tf_idf: true,
                capacity: Some(_),
                ..
            }
            | Analyzer::TextVocabulary {
                tf_idf: true,
                capacity: Some(_),
                ..
            } => Err(Error::invalid(
                "a vocabulary with `tf_idf` counts documents exactly: it takes no `capacity`",
            )),
            _ => Ok(()),
        }
    }
}

fn one() -> usize {
    1
}

fn unk() -> String {
    "[UNK]".to_string()
}

/// What to learn: an analyzer per feature.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdaptSpec {
    /// The features and what to learn of each.
    pub features: BTreeMap<String, Analyzer>,
}

impl AdaptSpec {
    /// This spec learning `analyzer` of `feature` too.
    pub fn with(mut self, feature: impl Into<String>, analyzer: Analyzer) -> Self {
        self.features.insert(feature.into(), analyzer);
        self
    }
}

/// What was learnt of one feature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", untagged)]
pub enum Learnt {
    /// `mean_variance`.
    MeanVariance {
        /// Values seen.
        count: u64,
        /// Their mean.
        mean: f64,
        /// Their population variance.
        variance: f64,
    },
    /// `vocabulary`, `text_vectorization`.
    Vocabulary {
        /// The tokens, most frequent first.
        tokens: Vec<String>,
        /// How often each was seen.
        counts: Vec<u64>,
        /// With `tf_idf`: in how many documents each was seen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        document_counts: Option<Vec<u64>>,
        /// With `tf_idf`: documents read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        documents: Option<u64>,
        /// Whether the counts are approximate (a `capacity` was exceeded).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        approximate: bool,
    },
    /// `quantiles`: `discretization`'s boundaries.
    Quantiles {
        /// The bin boundaries (float32 values), increasing.
        bin_boundaries: Vec<f64>,
        /// The bins asked for.
        num_bins: usize,
        /// The summary's tolerance.
        epsilon: f64,
        /// Values summarized.
        values: u64,
        /// Batches summarized.
        batches: u64,
    },
}

/// A statistics file: what `adapt` learnt, by feature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statistics {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// Elements read.
    pub elements: u64,
    /// By feature.
    pub features: BTreeMap<String, Learnt>,
}

impl Statistics {
    /// Writes the file (JSON), atomically and durably: a crash leaves the old file or the
    /// new one whole.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text =
            serde_json::to_string_pretty(self).map_err(|e| Error::internal(e.to_string()))?;
        sluice_storage::write_durably(path, (text + "\n").as_bytes()).map_err(|error| Error::Io {
            path: path.into(),
            error,
        })
    }

    /// Reads a file written by [`Statistics::save`], checking its format and version.
    pub fn load(path: impl AsRef<Path>) -> Result<Statistics> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
            path: path.into(),
            error,
        })?;
        let stats: Statistics = serde_json::from_str(&text).map_err(|e| {
            Error::data(format!(
                "{}: not a statistics file of `adapt`: {e}",
                path.display()
            ))
        })?;
        if stats.format != FORMAT || stats.version != VERSION {
            return Err(Error::data(format!(
                "{}: a statistics file of format {:?} version {}, where this Sluice reads {FORMAT:?} version {VERSION}",
                path.display(),
                stats.format,
                stats.version
            )));
        }
        Ok(stats)
    }

    fn get(&self, feature: &str) -> Result<&Learnt> {
        self.features.get(feature).ok_or_else(|| {
            Error::invalid(format!(
                "the statistics hold no feature `{feature}` (they hold {})",
                self.features
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    /// The mean and variance learnt of `feature`.
    pub fn mean_variance(&self, feature: &str) -> Result<(f64, f64)> {
        match self.get(feature)? {
            Learnt::MeanVariance { mean, variance, .. } => Ok((*mean, *variance)),
            other => Err(other.not_a(feature, "a mean and variance")),
        }
    }

    /// The vocabulary learnt of `feature`.
    pub fn vocabulary(&self, feature: &str) -> Result<&[String]> {
        match self.get(feature)? {
            Learnt::Vocabulary { tokens, .. } => Ok(tokens),
            other => Err(other.not_a(feature, "a vocabulary")),
        }
    }

    /// The bin boundaries learnt of `feature` (`quantiles`) and the bins asked for.
    pub fn bin_boundaries(&self, feature: &str) -> Result<(&[f64], usize)> {
        match self.get(feature)? {
            Learnt::Quantiles {
                bin_boundaries,
                num_bins,
                ..
            } => Ok((bin_boundaries, *num_bins)),
            other => Err(other.not_a(feature, "quantile boundaries")),
        }
    }

    /// The inverse document frequencies of the vocabulary learnt of `feature` with
    /// `tf_idf`, as Keras computes them: `log(1 + documents / (1 + document_count))` in
    /// float64 (TensorFlow's `log`), cast to float32, in the vocabulary's order.
    pub fn idf_weights(&self, feature: &str) -> Result<Vec<f32>> {
        match self.get(feature)? {
            Learnt::Vocabulary {
                document_counts: Some(counts),
                documents: Some(documents),
                ..
            } => {
                let d = *documents as f64;
                let x: Vec<f64> = counts.iter().map(|&c| 1.0 + d / (1.0 + c as f64)).collect();
                Ok(super::eigen::log_f64(&x)
                    .into_iter()
                    .map(|w| w as f32)
                    .collect())
            }
            Learnt::Vocabulary { .. } => Err(Error::invalid(format!(
                "the vocabulary of `{feature}` was learnt without document frequencies: \
                 adapt it with `tf_idf = true` (`sluice adapt --tf-idf`)"
            ))),
            other => Err(other.not_a(feature, "a vocabulary")),
        }
    }
}

impl Learnt {
    fn what(&self) -> &'static str {
        match self {
            Learnt::MeanVariance { .. } => "a mean and variance",
            Learnt::Vocabulary { .. } => "a vocabulary",
            Learnt::Quantiles { .. } => "quantile boundaries",
        }
    }

    fn not_a(&self, feature: &str, wanted: &str) -> Error {
        Error::invalid(format!(
            "the statistics of `{feature}` are {}, not {wanted}",
            self.what()
        ))
    }
}

/// One analyzer's running state.
enum State {
    /// Welford's running mean and sum of squared deviations.
    Moments {
        count: u64,
        mean: f64,
        m2: f64,
    },
    Tokens {
        counts: TokenCounts,
        /// Tokens kept at most.
        keep: Option<usize>,
        /// Tokens left out (the mask and OOV tokens).
        special: Vec<Vec<u8>>,
        text: Option<Box<Vectorizer>>,
        /// With `tf_idf`: document frequencies.
        docs: Option<Documents>,
    },
    Quantiles(Box<Quantiles>),
    BatchMoments(Box<BatchMoments>),
}

/// Appends `t`'s values to `out` as `float32` (Keras casts each batch to float32 before
/// summarizing it); strings are an error saying what `needs` numbers.
fn extend_f32(out: &mut Vec<f32>, t: &Tensor, name: &str, needs: &str) -> Result<()> {
    match t.data() {
        TensorData::F32(v) => out.extend_from_slice(v),
        TensorData::F64(v) => out.extend(v.iter().map(|&x| x as f32)),
        TensorData::I64(v) => out.extend(v.iter().map(|&x| x as f32)),
        TensorData::I32(v) => out.extend(v.iter().map(|&x| x as f32)),
        TensorData::U8(v) => out.extend(v.iter().map(|&x| f32::from(x))),
        TensorData::Bytes(_) => {
            return Err(Error::data_of(
                name,
                format!("adapt: `{name}` holds strings: {needs} numbers"),
            ));
        }
    }
    Ok(())
}

/// Keras's running `float32` mean and variance, batch by batch.
struct BatchMoments {
    mean: f32,
    variance: f32,
    count: u64,
    batch_size: usize,
    /// Values of the batch being gathered, and its elements.
    pending: Vec<f32>,
    pending_elements: usize,
}

impl BatchMoments {
    fn add(&mut self, t: &Tensor, name: &str) -> Result<()> {
        // Keras converts each batch to its compute dtype, float32.
        extend_f32(&mut self.pending, t, name, "a mean needs")?;
        self.pending_elements += 1;
        if self.pending_elements == self.batch_size {
            self.flush();
        }
        Ok(())
    }

    /// The gathered batch merged, as Keras's `Normalization.adapt` loop does.
    fn flush(&mut self) {
        let batch = std::mem::take(&mut self.pending);
        self.pending_elements = 0;
        if batch.is_empty() {
            return;
        }
        use super::eigen::sum_f32;
        let n = batch.len() as f32;
        // tf.reduce_mean: the sum over the count; tf.math.reduce_variance: the mean of the
        // squared deviations from that mean.
        let batch_mean = sum_f32(&batch) / n;
        let squares: Vec<f32> = batch
            .iter()
            .map(|&x| {
                let d = x - batch_mean;
                d * d
            })
            .collect();
        let batch_var = sum_f32(&squares) / n;
        self.count += batch.len() as u64;
        // Python floats, then float32 tensors where they meet the running statistics.
        let batch_weight = batch.len() as f64 / self.count as f64;
        let existing_weight = (1.0 - batch_weight) as f32;
        let batch_weight = batch_weight as f32;
        let new_mean = self.mean * existing_weight + batch_mean * batch_weight;
        let a = self.mean - new_mean;
        let b = batch_mean - new_mean;
        self.variance =
            (self.variance + a * a) * existing_weight + (batch_var + b * b) * batch_weight;
        self.mean = new_mean;
    }
}

/// Document frequencies: in how many documents each token was seen.
#[derive(Default)]
struct Documents {
    counts: FxHashMap<Vec<u8>, u64>,
    documents: u64,
    /// The distinct tokens of the document being read.
    current: rustc_hash::FxHashSet<Vec<u8>>,
}

impl Documents {
    fn see(&mut self, token: &[u8]) {
        if !self.current.contains(token) {
            self.current.insert(token.to_vec());
        }
    }

    /// The document being read is over.
    fn end(&mut self) {
        self.documents += 1;
        for t in self.current.drain() {
            *self.counts.entry(t).or_insert(0) += 1;
        }
    }
}

/// A quantile summary being learnt, batch by batch.
struct Quantiles {
    summary: QuantileSummary,
    num_bins: usize,
    epsilon: f64,
    batch_size: usize,
    steps: Option<u64>,
    /// Values of the batch being gathered, and its elements.
    pending: Vec<f32>,
    pending_elements: usize,
    batches: u64,
    values: u64,
}

impl Quantiles {
    fn add(&mut self, t: &Tensor, name: &str) -> Result<()> {
        if self.steps.is_some_and(|s| self.batches >= s) {
            return Ok(());
        }
        // Keras casts each batch to float32 (`np.array(data).astype("float32")`).
        extend_f32(&mut self.pending, t, name, "quantiles need")?;
        self.pending_elements += 1;
        if self.pending_elements == self.batch_size {
            self.flush();
        }
        Ok(())
    }

    /// The gathered batch summarized and merged (Keras's `update_state`).
    fn flush(&mut self) {
        if self.pending_elements == 0 || self.steps.is_some_and(|s| self.batches >= s) {
            return;
        }
        let batch = std::mem::take(&mut self.pending);
        self.values += batch.len() as u64;
        self.summary.update(batch, self.epsilon);
        self.batches += 1;
        self.pending_elements = 0;
    }
}

/// The flat `(start, end)` of each document of a value: the whole tensor for rank 0 or 1,
/// else each row.
fn documents(value: &Value) -> Vec<(usize, usize)> {
    match value {
        Value::Dense(t) if t.rank() <= 1 => vec![(0, t.len())],
        Value::Dense(t) => {
            let rows = t.shape()[0];
            let width = t.len().checked_div(rows).unwrap_or(0);
            (0..rows).map(|r| (r * width, (r + 1) * width)).collect()
        }
        Value::Ragged(r) => {
            let n = r.values.shape().first().copied().unwrap_or(0);
            let inner = r.values.len().checked_div(n).unwrap_or(0);
            r.row_splits
                .windows(2)
                .map(|w| (w[0] as usize * inner, w[1] as usize * inner))
                .collect()
        }
    }
}

/// Reads `dataset` once and learns what `spec` asks of its features.
pub fn adapt(dataset: &Dataset, spec: &AdaptSpec) -> Result<Statistics> {
    let mut states: Vec<(String, State)> = Vec::with_capacity(spec.features.len());
    for (name, a) in &spec.features {
        a.check()
            .map_err(|e| Error::invalid(format!("adapt: feature `{name}`: {e}")))?;
        let state = match a {
            Analyzer::MeanVariance => State::Moments {
                count: 0,
                mean: 0.0,
                m2: 0.0,
            },
            Analyzer::BatchMeanVariance { batch_size } => {
                State::BatchMoments(Box::new(BatchMoments {
                    mean: 0.0,
                    variance: 0.0,
                    count: 0,
                    batch_size: batch_size.unwrap_or(1),
                    pending: Vec::new(),
                    pending_elements: 0,
                }))
            }
            Analyzer::Vocabulary {
                max_tokens,
                num_oov_indices,
                mask_token,
                oov_token,
                tf_idf,
                capacity,
            } => {
                // Keras's lookups have a mask index only with `output_mode="int"`.
                let start = num_oov_indices + usize::from(mask_token.is_some() && !tf_idf);
                let mut special = vec![oov_token.clone().into_bytes()];
                special.extend(mask_token.iter().map(|m| m.clone().into_bytes()));
                State::Tokens {
                    counts: TokenCounts::new(*capacity),
                    keep: max_tokens.map(|m| m.saturating_sub(start)),
                    special,
                    text: None,
                    docs: tf_idf.then(Documents::default),
                }
            }
            Analyzer::TextVocabulary {
                max_tokens,
                standardize,
                split,
                ngrams,
                tf_idf,
                capacity,
            } => State::Tokens {
                counts: TokenCounts::new(*capacity),
                // Keras keeps `max_tokens - 2` tokens (the mask "" and OOV); with tf_idf
                // its lookup has no mask index (`max_tokens - 1`).
                keep: max_tokens.map(|m| m.saturating_sub(if *tf_idf { 1 } else { 2 })),
                special: vec![Vec::new(), b"[UNK]".to_vec()],
                text: Some(Box::new(Vectorizer::tokenizer(
                    *standardize,
                    *split,
                    ngrams.clone(),
                ))),
                docs: tf_idf.then(Documents::default),
            },
            Analyzer::Quantiles {
                num_bins,
                epsilon,
                batch_size,
                steps,
            } => State::Quantiles(Box::new(Quantiles {
                summary: QuantileSummary::new(),
                num_bins: *num_bins,
                epsilon: *epsilon,
                batch_size: batch_size.unwrap_or(1),
                steps: *steps,
                pending: Vec::new(),
                pending_elements: 0,
                batches: 0,
                values: 0,
            })),
        };
        states.push((name.clone(), state));
    }
    let mut elements = 0u64;
    let (mut buf, mut words) = (Vec::new(), Vec::new());
    for item in dataset.iter()? {
        let e = item?;
        elements += 1;
        for (name, state) in &mut states {
            let value = e.get(name).ok_or_else(|| {
                Error::data_of(
                    name,
                    format!("adapt: element {} has no feature `{name}`", e.id()),
                )
            })?;
            let t = match value {
                Value::Dense(t) => t.clone(),
                Value::Ragged(r) => r.values.clone(),
            };
            match state {
                State::Moments { count, mean, m2 } => {
                    let mut add = |x: f64| {
                        *count += 1;
                        let d = x - *mean;
                        *mean += d / *count as f64;
                        *m2 += d * (x - *mean);
                    };
                    match t.data() {
                        TensorData::F32(v) => v.iter().for_each(|&x| add(f64::from(x))),
                        TensorData::F64(v) => v.iter().for_each(|&x| add(x)),
                        TensorData::I64(v) => v.iter().for_each(|&x| add(x as f64)),
                        TensorData::I32(v) => v.iter().for_each(|&x| add(f64::from(x))),
                        TensorData::U8(v) => v.iter().for_each(|&x| add(f64::from(x))),
                        TensorData::Bytes(_) => {
                            return Err(Error::data_of(
                                name,
                                format!("adapt: `{name}` holds strings: a mean needs numbers"),
                            ));
                        }
                    }
                }
                State::Quantiles(q) => q.add(&t, name)?,
                State::BatchMoments(m) => m.add(&t, name)?,
                State::Tokens {
                    counts, text, docs, ..
                } => {
                    let mut see = |tok: &[u8], docs: &mut Option<Documents>| {
                        counts.add(tok);
                        if let Some(d) = docs {
                            d.see(tok);
                        }
                    };
                    match (t.data(), text) {
                        (TensorData::Bytes(v), Some(tokenizer)) => {
                            // Each text is a document.
                            for text in v.iter() {
                                tokenizer
                                    .each_token(text, &mut buf, &mut words, |tok| see(tok, docs))?;
                                if let Some(d) = docs {
                                    d.end();
                                }
                            }
                        }
                        (
                            data @ (TensorData::Bytes(_) | TensorData::I64(_) | TensorData::I32(_)),
                            None,
                        ) => {
                            let ranges = if docs.is_some() {
                                documents(value)
                            } else {
                                vec![(0, t.len())]
                            };
                            for (start, end) in ranges {
                                for i in start..end {
                                    match data {
                                        TensorData::Bytes(v) => see(&v[i], docs),
                                        TensorData::I64(v) => {
                                            see(v[i].to_string().as_bytes(), docs)
                                        }
                                        TensorData::I32(v) => {
                                            see(v[i].to_string().as_bytes(), docs)
                                        }
                                        _ => unreachable!("matched above"),
                                    }
                                }
                                if let Some(d) = docs {
                                    d.end();
                                }
                            }
                        }
                        _ => {
                            return Err(Error::data_of(
                                name,
                                format!(
                                    "adapt: `{name}` holds {}: a vocabulary is of strings (or integers)",
                                    t.dtype().tf_name()
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }
    let features = states
        .into_iter()
        .map(|(name, state)| {
            let learnt = match state {
                State::Moments { count, mean, m2 } => Learnt::MeanVariance {
                    count,
                    mean,
                    variance: if count > 0 { m2 / count as f64 } else { 0.0 },
                },
                State::BatchMoments(mut m) => {
                    m.flush();
                    Learnt::MeanVariance {
                        count: m.count,
                        mean: f64::from(m.mean),
                        variance: f64::from(m.variance),
                    }
                }
                State::Quantiles(mut q) => {
                    q.flush();
                    Learnt::Quantiles {
                        bin_boundaries: q
                            .summary
                            .bin_boundaries(q.num_bins)
                            .into_iter()
                            .map(f64::from)
                            .collect(),
                        num_bins: q.num_bins,
                        epsilon: q.epsilon,
                        values: q.values,
                        batches: q.batches,
                    }
                }
                State::Tokens {
                    counts,
                    keep,
                    special,
                    docs,
                    ..
                } => {
                    let approximate = counts.is_approximate();
                    let mut all = counts.into_counts();
                    // Without the special tokens; most frequent first, ties by token,
                    // greatest first (Keras's order: np.lexsort((tokens, counts))[::-1]).
                    all.retain(|(t, _)| !special.contains(t));
                    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
                    if let Some(k) = keep {
                        all.truncate(k);
                    }
                    let document_counts = docs.as_ref().map(|d| {
                        all.iter()
                            .map(|(t, _)| d.counts.get(t).copied().unwrap_or(0))
                            .collect()
                    });
                    let (tokens, counts) = all
                        .into_iter()
                        .map(|(t, c)| (String::from_utf8_lossy(&t).into_owned(), c))
                        .unzip();
                    Learnt::Vocabulary {
                        tokens,
                        counts,
                        document_counts,
                        documents: docs.map(|d| d.documents),
                        approximate,
                    }
                }
            };
            (name, learnt)
        })
        .collect();
    Ok(Statistics {
        format: FORMAT.to_string(),
        version: VERSION,
        elements,
        features,
    })
}
