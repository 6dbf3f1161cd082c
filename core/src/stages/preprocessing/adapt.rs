//! `adapt`: one pass over a pipeline that learns what the Keras stages need (the analyze
//! phase of TF Transform, Keras's `layer.adapt(data)`), saved as a small versioned JSON
//! file the stages load (`normalization`'s `adapted`, a vocabulary's `{ adapted = ... }`).
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

use super::text_vectorization::{Ngrams, Standardize, TextSplit, Vectorizer};
use crate::dataset::Dataset;
use crate::element::Value;
use crate::error::{Error, Result};
use crate::tensor::TensorData;

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
    },
    /// The tokens of its texts, standardized and split as `text_vectorization` does:
    /// `TextVectorization.adapt`'s vocabulary (`max_tokens` counts its mask and OOV
    /// indices: `max_tokens - 2` tokens are kept).
    TextVocabulary {
        /// The layer's size, its 2 special indices included (default: no limit).
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
    },
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
    /// Writes the file (JSON).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text =
            serde_json::to_string_pretty(self).map_err(|e| Error::internal(e.to_string()))?;
        std::fs::write(path, text + "\n").map_err(|error| Error::Io {
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
            Learnt::Vocabulary { .. } => Err(Error::invalid(format!(
                "the statistics of `{feature}` are a vocabulary, not a mean and variance"
            ))),
        }
    }

    /// The vocabulary learnt of `feature`.
    pub fn vocabulary(&self, feature: &str) -> Result<&[String]> {
        match self.get(feature)? {
            Learnt::Vocabulary { tokens, .. } => Ok(tokens),
            Learnt::MeanVariance { .. } => Err(Error::invalid(format!(
                "the statistics of `{feature}` are a mean and variance, not a vocabulary"
            ))),
        }
    }
}

/// One analyzer's running state.
enum State {
    /// Welford's running mean and sum of squared deviations.
    Moments { count: u64, mean: f64, m2: f64 },
    Tokens {
        counts: FxHashMap<Vec<u8>, u64>,
        /// Tokens kept at most.
        keep: Option<usize>,
        /// Tokens left out (the mask and OOV tokens).
        special: Vec<Vec<u8>>,
        text: Option<Box<Vectorizer>>,
    },
}

/// Reads `dataset` once and learns what `spec` asks of its features.
pub fn adapt(dataset: &Dataset, spec: &AdaptSpec) -> Result<Statistics> {
    let mut states: Vec<(String, State)> = spec
        .features
        .iter()
        .map(|(name, a)| {
            let state = match a {
                Analyzer::MeanVariance => State::Moments {
                    count: 0,
                    mean: 0.0,
                    m2: 0.0,
                },
                Analyzer::Vocabulary {
                    max_tokens,
                    num_oov_indices,
                    mask_token,
                    oov_token,
                } => {
                    let start = num_oov_indices + usize::from(mask_token.is_some());
                    let mut special = vec![oov_token.clone().into_bytes()];
                    special.extend(mask_token.iter().map(|m| m.clone().into_bytes()));
                    State::Tokens {
                        counts: FxHashMap::default(),
                        keep: max_tokens.map(|m| m.saturating_sub(start)),
                        special,
                        text: None,
                    }
                }
                Analyzer::TextVocabulary {
                    max_tokens,
                    standardize,
                    split,
                    ngrams,
                } => State::Tokens {
                    counts: FxHashMap::default(),
                    keep: max_tokens.map(|m| m.saturating_sub(2)),
                    special: vec![Vec::new(), b"[UNK]".to_vec()],
                    text: Some(Box::new(Vectorizer::tokenizer(
                        *standardize,
                        *split,
                        ngrams.clone(),
                    ))),
                },
            };
            (name.clone(), state)
        })
        .collect();
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
                State::Tokens { counts, text, .. } => {
                    let mut count = |tok: &[u8]| {
                        if let Some(c) = counts.get_mut(tok) {
                            *c += 1;
                        } else {
                            counts.insert(tok.to_vec(), 1);
                        }
                    };
                    match (t.data(), text) {
                        (TensorData::Bytes(v), Some(tokenizer)) => {
                            for text in v.iter() {
                                tokenizer.each_token(text, &mut buf, &mut words, &mut count)?;
                            }
                        }
                        (TensorData::Bytes(v), None) => v.iter().for_each(|b| count(b)),
                        (TensorData::I64(v), None) => {
                            v.iter().for_each(|x| count(x.to_string().as_bytes()))
                        }
                        (TensorData::I32(v), None) => {
                            v.iter().for_each(|x| count(x.to_string().as_bytes()))
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
                State::Tokens {
                    counts,
                    keep,
                    special,
                    ..
                } => {
                    let mut all: Vec<(Vec<u8>, u64)> = counts.into_iter().collect();
                    // Without the special tokens; most frequent first, ties by token,
                    // greatest first (Keras's order: np.lexsort((tokens, counts))[::-1]).
                    all.retain(|(t, _)| !special.contains(t));
                    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
                    if let Some(k) = keep {
                        all.truncate(k);
                    }
                    let (tokens, counts) = all
                        .into_iter()
                        .map(|(t, c)| (String::from_utf8_lossy(&t).into_owned(), c))
                        .unzip();
                    Learnt::Vocabulary { tokens, counts }
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
