//! `string_lookup` and `integer_lookup`: Keras's `StringLookup` and `IntegerLookup`.

use rustc_hash::FxHashMap as HashMap;
use std::hash::Hash;

use bytes::Bytes;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::hashing::{Salt, to_hash_bucket_fast, to_hash_bucket_strong};

use super::{FeatureLayer, LayerFn, check_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// A vocabulary: the tokens in order, or a file of one token per line (as TensorFlow's
/// `TextFileInitializer` reads it: lines split at `\n`, a `\r` before it dropped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Vocabulary<T> {
    /// The tokens.
    Tokens(Vec<T>),
    /// A file of tokens, one per line.
    File(String),
    /// The vocabulary learnt of the stage's `input` by `adapt`: `{ adapted = "stats.json" }`.
    Adapted {
        /// The statistics file of `sluice adapt`.
        adapted: String,
    },
}

/// The tokens of `vocabulary`, read from its file when it is one (lines split at `\n`, a
/// `\r` before it dropped, a last empty line ignored).
pub(crate) fn read_vocabulary<T: LookupToken>(
    vocabulary: &Vocabulary<T>,
    feature: &str,
) -> Result<Vec<T>> {
    match vocabulary {
        Vocabulary::Tokens(t) => Ok(t.clone()),
        Vocabulary::Adapted { adapted } => super::adapt::Statistics::load(adapted)?
            .vocabulary(feature)?
            .iter()
            .map(|t| {
                T::parse_line(t.as_bytes())
                    .map_err(|m| Error::data(format!("{adapted}: `{feature}`: {m}")))
            })
            .collect(),
        Vocabulary::File(path) => {
            let bytes = std::fs::read(path).map_err(|error| Error::Io {
                path: path.into(),
                error,
            })?;
            let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
            if lines.last().is_some_and(|l| l.is_empty()) {
                lines.pop();
            }
            lines
                .into_iter()
                .enumerate()
                .map(|(i, l)| {
                    let l = l.strip_suffix(b"\r").unwrap_or(l);
                    T::parse_line(l)
                        .map_err(|m| Error::data(format!("{path}: line {}: {m}", i + 1)))
                })
                .collect()
        }
    }
}

/// What a lookup outputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LookupOutput {
    /// Indices (the default).
    #[default]
    Int,
    /// One `float32` vector per sample (the last axis): each index's count times its
    /// inverse document frequency.
    #[serde(alias = "tf-idf")]
    TfIdf,
    /// The indices one-hot encoded, over the lookup's size (OOV indices and vocabulary):
    /// `category_encoding`'s `one_hot` of the indices, shapes included.
    #[serde(alias = "one-hot")]
    OneHot,
    /// One vector per sample, 1 where it holds an index (`category_encoding`'s `multi_hot`).
    #[serde(alias = "multi-hot")]
    MultiHot,
    /// One vector per sample, how often it holds each index (`category_encoding`'s `count`).
    Count,
}

impl LookupOutput {
    /// The encoding of the indices, for the modes that are `category_encoding`'s.
    fn encoding(self) -> Option<super::EncodingMode> {
        match self {
            LookupOutput::OneHot => Some(super::EncodingMode::OneHot),
            LookupOutput::MultiHot => Some(super::EncodingMode::MultiHot),
            LookupOutput::Count => Some(super::EncodingMode::Count),
            LookupOutput::Int | LookupOutput::TfIdf => None,
        }
    }
}

/// How integer out-of-vocabulary values are spread over several OOV indices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OovMethod {
    /// `value mod num_oov_indices` (Keras's default for integers).
    #[default]
    Floormod,
    /// FarmHash (or SipHash with `salt`) of the value's decimal string.
    Farmhash,
}

/// A lookup's tokens: strings or integers.
pub trait LookupToken:
    Clone
    + Eq
    + Hash
    + std::fmt::Debug
    + Serialize
    + DeserializeOwned
    + JsonSchema
    + Send
    + Sync
    + 'static
{
    /// The layer kind (`string_lookup`, `integer_lookup`).
    const KIND: &'static str;
    /// The Keras default of `oov_token`.
    fn default_oov() -> Self;
    /// A token of a vocabulary file's line.
    fn parse_line(line: &[u8]) -> std::result::Result<Self, String>;
}

impl LookupToken for String {
    const KIND: &'static str = "string_lookup";
    fn default_oov() -> Self {
        "[UNK]".to_string()
    }
    fn parse_line(line: &[u8]) -> std::result::Result<Self, String> {
        String::from_utf8(line.to_vec()).map_err(|_| "not UTF-8".to_string())
    }
}

impl LookupToken for i64 {
    const KIND: &'static str = "integer_lookup";
    fn default_oov() -> Self {
        -1
    }
    fn parse_line(line: &[u8]) -> std::result::Result<Self, String> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("not an integer: {:?}", String::from_utf8_lossy(line)))
    }
}

/// Maps tokens to indices (or back, with `invert`), as `keras.layers.StringLookup` and
/// `IntegerLookup` with `output_mode="int"`: the mask token (when given) is index 0, then
/// `num_oov_indices` indices for tokens not in the vocabulary, then the vocabulary in
/// order. With several OOV indices, an unknown string goes to the one its FarmHash
/// Fingerprint64 (SipHash with `salt`) picks, an unknown integer to `value mod
/// num_oov_indices` (or its hash with `oov_method = "farmhash"`); with none, an unknown
/// token is an error. Output: `int64` indices (`invert`: the tokens), the input's shape.
///
/// `output_mode = "one_hot"`, `"multi_hot"` or `"count"` (Keras's, without a mask token)
/// encode the indices as `category_encoding` does, over the lookup's size (the OOV indices
/// and the vocabulary: Keras's `vocabulary_size()`), so a vocabulary learnt by `adapt`
/// brings its own depth.
///
/// `output_mode = "tf_idf"` (Keras's, without a mask token): one `float32` vector per sample
/// (a scalar or `[k]` is one sample, `[n, k]` is `n`) over the OOV indices then the
/// vocabulary, each index's count times its inverse document frequency: the `idf_weights`
/// given (one per vocabulary token; the OOV indices weigh their average), or with
/// `vocabulary = { adapted = ... }` the ones learnt by `adapt` with `tf_idf` (Keras's
/// `log(1 + documents / (1 + document_count))`, the OOV indices weighing their mean).
///
/// ```toml
/// [[stage]]
/// kind = "string_lookup"
/// input = "city"
/// vocabulary = ["paris", "tokyo", "lima"]   # or a file: "cities.txt"
/// num_oov_indices = 2
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(bound = "T: LookupToken")]
#[serde(bound = "T: LookupToken")]
pub struct LookupSpec<T> {
    /// The feature read.
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The vocabulary: tokens, or a file of one per line.
    pub vocabulary: Vocabulary<T>,
    /// Indices for tokens not in the vocabulary (default 1).
    #[serde(default = "one")]
    pub num_oov_indices: usize,
    /// A token that maps to index 0 (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_token: Option<T>,
    /// What `invert` gives for an OOV index (default `"[UNK]"`, or -1 for integers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oov_token: Option<T>,
    /// Indices to tokens instead (default false).
    #[serde(default)]
    pub invert: bool,
    /// SipHash's key for hashing OOV tokens (default: FarmHash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salt: Option<Salt>,
    /// Integers: how OOV values pick their index (default `floormod`).
    #[serde(default)]
    pub oov_method: OovMethod,
    /// `int` (default) or `tf_idf`.
    #[serde(default)]
    pub output_mode: LookupOutput,
    /// `tf_idf` with a given vocabulary: each token's inverse document frequency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idf_weights: Option<Vec<f64>>,
}

/// `StringLookup`.
pub type StringLookupSpec = LookupSpec<String>;
/// `IntegerLookup`.
pub type IntegerLookupSpec = LookupSpec<i64>;

fn one() -> usize {
    1
}

impl<T: LookupToken> LookupSpec<T> {
    /// A lookup of `input` in `vocabulary`, Keras's defaults otherwise.
    pub fn new(input: impl Into<String>, vocabulary: Vec<T>) -> Self {
        LookupSpec {
            input: input.into(),
            output: None,
            vocabulary: Vocabulary::Tokens(vocabulary),
            num_oov_indices: 1,
            mask_token: None,
            oov_token: None,
            invert: false,
            salt: None,
            oov_method: OovMethod::Floormod,
            output_mode: LookupOutput::Int,
            idf_weights: None,
        }
    }

    fn oov_start(&self) -> i64 {
        i64::from(self.mask_token.is_some())
    }

    fn token_start(&self) -> i64 {
        self.oov_start() + self.num_oov_indices as i64
    }

    /// The vocabulary's tokens (read from its file when it is one).
    fn tokens(&self) -> Result<Vec<T>> {
        read_vocabulary(&self.vocabulary, &self.input)
    }

    /// Token → index, checked (no duplicates, no special token inside).
    fn table(&self) -> Result<HashMap<T, i64>> {
        let start = self.token_start();
        let mut table = HashMap::default();
        for (i, t) in self.tokens()?.into_iter().enumerate() {
            if self.mask_token.as_ref() == Some(&t) {
                return Err(Error::invalid(format!(
                    "the vocabulary holds the mask token {t:?} (at {i})"
                )));
            }
            if table.insert(t.clone(), start + i as i64).is_some() {
                return Err(Error::invalid(format!(
                    "the vocabulary holds {t:?} twice (again at {i})"
                )));
            }
        }
        Ok(table)
    }
}

impl<T: LookupToken> Spec for LookupSpec<T>
where
    LookupSpec<T>: FeatureLayer,
{
    const KIND: &'static str = T::KIND;
    const SUMMARY: &'static str = "tokens to vocabulary indices, with hashed OOV indices (Keras `StringLookup` / `IntegerLookup`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(T::KIND, &self.input)?;
        let adapted = matches!(self.vocabulary, Vocabulary::Adapted { .. });
        let why = match (self.output_mode, &self.idf_weights) {
            (LookupOutput::Int, Some(_)) => Some("`idf_weights` is for `output_mode = \"tf_idf\"`"),
            (mode, Some(_)) if mode.encoding().is_some() => {
                Some("`idf_weights` is for `output_mode = \"tf_idf\"`")
            }
            (mode, _) if mode.encoding().is_some() && self.invert => {
                Some("`one_hot`, `multi_hot` and `count` encode indices; they do not `invert`")
            }
            (mode, _) if mode.encoding().is_some() && self.mask_token.is_some() => {
                Some("`one_hot`, `multi_hot` and `count` are supported without a `mask_token`")
            }
            (LookupOutput::TfIdf, _) if self.invert => {
                Some("`output_mode = \"tf_idf\"` does not `invert`")
            }
            (LookupOutput::TfIdf, _) if self.mask_token.is_some() => {
                Some("`output_mode = \"tf_idf\"` is supported without a `mask_token`")
            }
            (LookupOutput::TfIdf, None) if !adapted => Some(
                "`output_mode = \"tf_idf\"` with a given vocabulary needs its `idf_weights` (or an adapted vocabulary)",
            ),
            (LookupOutput::TfIdf, Some(_)) if adapted => {
                Some("an adapted vocabulary brings its own idf weights: drop `idf_weights`")
            }
            _ => None,
        };
        if let Some(why) = why {
            return Err(Invalid::at("output_mode", format!("{}: {why}", T::KIND)));
        }
        // An inline vocabulary is checked here; a file when the stage starts.
        if matches!(self.vocabulary, Vocabulary::Tokens(_))
            && let Err(e) = self.table()
        {
            return Err(Invalid::at("vocabulary", format!("{}: {e}", T::KIND)));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

/// A lookup ready to run: the spec and its table.
struct Lookup<T> {
    spec: LookupSpec<T>,
    table: HashMap<T, i64>,
    inverse: HashMap<i64, T>,
}

impl<T: LookupToken> Lookup<T> {
    fn new(spec: &LookupSpec<T>) -> Result<Lookup<T>> {
        let table = spec.table()?;
        let inverse = table.iter().map(|(k, &v)| (v, k.clone())).collect();
        Ok(Lookup {
            spec: spec.clone(),
            table,
            inverse,
        })
    }

    /// The index of a token not in the vocabulary (and not the mask): `as_int`, an
    /// integer's value; `bytes`, what is hashed.
    fn oov(&self, shown: &dyn std::fmt::Debug, as_int: Option<i64>, bytes: &[u8]) -> Result<i64> {
        let s = &self.spec;
        let n = s.num_oov_indices as u64;
        match n {
            0 => Err(Error::invalid(format!(
                "{shown:?} is not in the vocabulary and `num_oov_indices` is 0"
            ))),
            1 => Ok(s.oov_start()),
            _ => {
                let k = match (as_int, s.oov_method) {
                    (Some(x), OovMethod::Floormod) => x.rem_euclid(n as i64) as u64,
                    _ => match s.salt {
                        Some(salt) => to_hash_bucket_strong(bytes, salt.key(), n),
                        None => to_hash_bucket_fast(bytes, n),
                    },
                };
                Ok(s.oov_start() + k as i64)
            }
        }
    }

    /// The token of index `i` (`invert`): the mask token at 0 (when there is one), the
    /// vocabulary's, and `oov_token` for any other index.
    fn token(&self, i: i64) -> T {
        let s = &self.spec;
        if i == 0
            && let Some(mask) = &s.mask_token
        {
            return mask.clone();
        }
        self.inverse
            .get(&i)
            .cloned()
            .unwrap_or_else(|| s.oov_token.clone().unwrap_or_else(T::default_oov))
    }
}

fn indices(t: &Tensor) -> Option<Vec<i64>> {
    Some(match t.data() {
        TensorData::I64(v) => v.to_vec(),
        TensorData::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        TensorData::U8(v) => v.iter().map(|&x| i64::from(x)).collect(),
        _ => return None,
    })
}

impl Lookup<String> {
    fn call(&self, t: &Tensor) -> Result<Tensor> {
        if self.spec.invert {
            let out: Vec<Bytes> = indices(t)
                .ok_or_else(|| wrong_dtype(t, "integer indices (`invert`)"))?
                .into_iter()
                .map(|i| Bytes::from(self.token(i).into_bytes()))
                .collect();
            return Ok(Tensor::new(t.shape(), TensorData::Bytes(out.into()))?);
        }
        let TensorData::Bytes(v) = t.data() else {
            return Err(wrong_dtype(t, "strings"));
        };
        let mask = self.spec.mask_token.as_deref();
        let out = v
            .iter()
            .map(|b| match std::str::from_utf8(b) {
                Ok(s) if mask == Some(s) => Ok(0),
                Ok(s) => match self.table.get(s) {
                    Some(&i) => Ok(i),
                    None => self.oov(&s, None, b),
                },
                // Not UTF-8: in no vocabulary.
                Err(_) => self.oov(b, None, b),
            })
            .collect::<Result<Vec<i64>>>()?;
        Ok(Tensor::new(t.shape(), TensorData::I64(out.into()))?)
    }
}

impl Lookup<i64> {
    fn call(&self, t: &Tensor) -> Result<Tensor> {
        let values = indices(t).ok_or_else(|| wrong_dtype(t, "integers"))?;
        let out: Vec<i64> = if self.spec.invert {
            values.into_iter().map(|i| self.token(i)).collect()
        } else {
            let mask = self.spec.mask_token;
            values
                .into_iter()
                .map(|x| {
                    if mask == Some(x) {
                        return Ok(0);
                    }
                    match self.table.get(&x) {
                        Some(&i) => Ok(i),
                        None => self.oov(&x, Some(x), x.to_string().as_bytes()),
                    }
                })
                .collect::<Result<_>>()?
        };
        Ok(Tensor::new(t.shape(), TensorData::I64(out.into()))?)
    }
}

macro_rules! lookup_layer {
    ($t:ty) => {
        impl FeatureLayer for LookupSpec<$t> {
            fn input(&self) -> &str {
                &self.input
            }

            fn output(&self) -> Option<&str> {
                self.output.as_deref()
            }

            fn layer(&self) -> Result<LayerFn> {
                let lookup = Lookup::<$t>::new(self)?;
                if self.output_mode == LookupOutput::TfIdf {
                    let idf = self.idf()?;
                    return Ok(super::one_input(move |t| tf_idf(&lookup.call(t)?, &idf)));
                }
                if let Some(mode) = self.output_mode.encoding() {
                    // Keras's depth: the vocabulary size, OOV indices included.
                    let depth = self.num_oov_indices + lookup.table.len();
                    return Ok(super::one_input(move |t| {
                        super::category_encoding::encode(&lookup.call(t)?, depth, mode)
                    }));
                }
                Ok(super::one_input(move |t| lookup.call(t)))
            }
        }
    };
}

impl<T: LookupToken> LookupSpec<T> {
    /// `tf_idf`: the weight of each output column (the OOV indices, then the vocabulary).
    fn idf(&self) -> Result<Vec<f32>> {
        use super::text_vectorization::with_oov_weights;
        let n = self.num_oov_indices;
        match &self.vocabulary {
            Vocabulary::Adapted { adapted } => {
                let idf = super::adapt::Statistics::load(adapted)?.idf_weights(&self.input)?;
                Ok(with_oov_weights(idf, None, n))
            }
            _ => {
                let w = self.idf_weights.as_deref().unwrap_or_default();
                let tokens = self.tokens()?.len();
                if w.len() != tokens {
                    return Err(Error::invalid(format!(
                        "{} idf weights for {tokens} vocabulary tokens",
                        w.len()
                    )));
                }
                Ok(with_oov_weights(
                    w.iter().map(|&x| x as f32).collect(),
                    Some(w),
                    n,
                ))
            }
        }
    }
}

/// Keras's `tf_idf` of lookup indices: per sample (the last axis; a scalar or `[k]` is one
/// sample) the count of each index times its weight, `float32` `[..., depth]`.
fn tf_idf(indices: &Tensor, idf: &[f32]) -> Result<Tensor> {
    let TensorData::I64(v) = indices.data() else {
        return Err(wrong_dtype(indices, "indices"));
    };
    let depth = idf.len();
    let shape = indices.shape();
    if shape.len() > 2 {
        return Err(Error::invalid(format!(
            "shape {shape:?}: `tf_idf` takes a scalar, `[k]` or `[n, k]`"
        )));
    }
    let (rows, width) = match shape {
        [] => (1, 1),
        [k] => (1, *k),
        [n, k] => (*n, *k),
        _ => unreachable!("rank checked"),
    };
    let mut counts = vec![0i64; rows * depth];
    for r in 0..rows {
        for &i in &v[r * width..(r + 1) * width] {
            if i >= 0 && (i as usize) < depth {
                counts[r * depth + i as usize] += 1;
            }
        }
    }
    let out: Vec<f32> = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| c as f32 * idf[i % depth])
        .collect();
    let out_shape = if shape.len() == 2 {
        vec![rows, depth]
    } else {
        vec![depth]
    };
    Ok(Tensor::new(&out_shape, TensorData::F32(out.into()))?)
}

lookup_layer!(String);
lookup_layer!(i64);
