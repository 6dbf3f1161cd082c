//! `text_vectorization`: Keras's `TextVectorization` layer with a given vocabulary.

use rustc_hash::FxHashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::lookup::Vocabulary;
use super::token_table::{Token, TokenTable};
use super::{FeatureLayer, LayerFn, check_input, one_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::parallelism::{NumParallel, check_num_parallel};
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// How text is standardized before it is split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Standardize {
    /// ASCII letters lowercased, then ASCII punctuation removed (the default).
    #[default]
    LowerAndStripPunctuation,
    /// ASCII letters lowercased (as `tf.strings.lower`: other letters are kept).
    Lower,
    /// ASCII punctuation removed.
    StripPunctuation,
    /// Left as it is (TOML cannot write `None`: this is Keras's `standardize=None`).
    None,
}

/// How text is split into tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TextSplit {
    /// At runs of ASCII white space (the default).
    #[default]
    Whitespace,
    /// Into Unicode characters.
    Character,
    /// Not split: each string is one token.
    None,
}

/// What the layer outputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TextOutput {
    /// Token indices, padded with 0 (the default).
    #[default]
    Int,
    /// One vector per text: 1 where it holds the token (index 0: any OOV token).
    MultiHot,
    /// One vector per text: how often it holds each token.
    Count,
    /// One `float32` vector per text: each token's count times its inverse document
    /// frequency (`idf_weights`, or learnt by `adapt` with `tf_idf`).
    #[serde(alias = "tf-idf")]
    TfIdf,
}

/// N-grams: up to `n`, or these widths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Ngrams {
    /// Widths 1 to `n`.
    UpTo(usize),
    /// These widths.
    Widths(Vec<usize>),
}

/// Turns text into token indices as `keras.layers.TextVectorization` with a vocabulary:
/// standardized (`lower_and_strip_punctuation` by default: ASCII letters lowercased, ASCII
/// punctuation removed), split (at ASCII white space, or into characters), n-grams
/// appended (width after width, joined by a space), then looked up (`""` is 0, an unknown
/// token `1`, the vocabulary from 2). `output_mode = "int"` pads with 0 or cuts to
/// `output_sequence_length` (without one, a batch pads to its longest text);
/// `"multi_hot"` and `"count"` give one vector per text over `[OOV] + vocabulary`;
/// `"tf_idf"` the counts times each token's inverse document frequency in `float32`: the
/// `idf_weights` given (one per vocabulary token; the OOV column weighs their average), or
/// with `vocabulary = { adapted = ... }` the ones Keras's `adapt` computes from the document
/// frequencies learnt (`sluice adapt --text-vocabulary F --tf-idf`):
/// `log(1 + documents / (1 + document_count))`, the OOV column weighing their mean. A
/// scalar is one text; a batch of texts is `[n]` or `[n, 1]`. Output: `int64` (`tf_idf`:
/// `float32`).
///
/// ```toml
/// [[stage]]
/// kind = "text_vectorization"
/// input = "review"
/// vocabulary = "vocab.txt"
/// output_sequence_length = 200
///
/// [[stage]]
/// kind = "text_vectorization"
/// input = "review"
/// vocabulary = { adapted = "stats.json" }   # sluice adapt ... --text-vocabulary review --tf-idf
/// output_mode = "tf_idf"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextVectorizationSpec {
    /// The feature read (strings).
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The vocabulary: tokens, or a file of one per line.
    pub vocabulary: Vocabulary<String>,
    /// How text is standardized (default `lower_and_strip_punctuation`; `"none"`, or
    /// `null` in JSON, as Keras's `None`).
    #[serde(default, deserialize_with = "null_is_none")]
    pub standardize: Standardize,
    /// How it is split (default `whitespace`; `"none"` or `null`: not split).
    #[serde(default, deserialize_with = "null_is_none")]
    pub split: TextSplit,
    /// N-grams to add (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ngrams: Option<Ngrams>,
    /// `int` (default), `multi_hot`, `count` or `tf_idf`.
    #[serde(default)]
    pub output_mode: TextOutput,
    /// `tf_idf` with a given vocabulary: each token's inverse document frequency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idf_weights: Option<Vec<f64>>,
    /// `int`: the length every sequence is padded or cut to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_sequence_length: Option<usize>,
    /// Threads vectorizing (batches) in parallel: sequential (default), a number, or
    /// `"auto"`; the output stays in order.
    #[serde(default)]
    pub num_parallel: NumParallel,
}

impl Spec for TextVectorizationSpec {
    const KIND: &'static str = "text_vectorization";
    const SUMMARY: &'static str =
        "text to padded token indices or bag-of-words vectors (Keras `TextVectorization`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        if let Some(Ngrams::UpTo(0)) = self.ngrams {
            return Err(Invalid::at(
                "ngrams",
                "text_vectorization: `ngrams` must be at least 1",
            ));
        }
        if let Some(Ngrams::Widths(w)) = &self.ngrams
            && w.contains(&0)
        {
            return Err(Invalid::at(
                "ngrams",
                "text_vectorization: an n-gram width of 0",
            ));
        }
        check_num_parallel(Self::KIND, self.num_parallel)?;
        let adapted = matches!(self.vocabulary, Vocabulary::Adapted { .. });
        match (self.output_mode, &self.idf_weights) {
            (TextOutput::TfIdf, None) if !adapted => {
                return Err(Invalid::at(
                    "idf_weights",
                    "text_vectorization: `output_mode = \"tf_idf\"` with a given vocabulary needs its `idf_weights` (or an adapted vocabulary, `{ adapted = ... }`)",
                ));
            }
            (TextOutput::TfIdf, Some(_)) if adapted => {
                return Err(Invalid::at(
                    "idf_weights",
                    "text_vectorization: an adapted vocabulary brings its own idf weights: drop `idf_weights`",
                ));
            }
            (TextOutput::TfIdf, Some(w)) => {
                if let Vocabulary::Tokens(t) = &self.vocabulary
                    && t.len() != w.len()
                {
                    return Err(Invalid::at(
                        "idf_weights",
                        format!(
                            "text_vectorization: {} idf weights for {} vocabulary tokens",
                            w.len(),
                            t.len()
                        ),
                    ));
                }
            }
            (_, Some(_)) => {
                return Err(Invalid::at(
                    "idf_weights",
                    "text_vectorization: `idf_weights` is for `output_mode = \"tf_idf\"`",
                ));
            }
            _ => {}
        }
        if self.output_sequence_length.is_some() && self.output_mode != TextOutput::Int {
            return Err(Invalid::at(
                "output_sequence_length",
                "text_vectorization: `output_sequence_length` is for `output_mode = \"int\"`",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

/// Keras's `None` (JSON `null`) as the enum's `None` variant.
fn null_is_none<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + NoneVariant,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_else(T::none))
}

/// An enum with a variant for Keras's `None`.
trait NoneVariant {
    fn none() -> Self;
}

impl NoneVariant for Standardize {
    fn none() -> Self {
        Standardize::None
    }
}

impl NoneVariant for TextSplit {
    fn none() -> Self {
        TextSplit::None
    }
}

/// A vectorizer ready to run (or, with an empty table, the tokenizer `adapt` uses).
pub(crate) struct Vectorizer {
    /// What standardizing makes of each byte (256: left out).
    bytes: [u16; 256],
    split: TextSplit,
    output_mode: TextOutput,
    output_sequence_length: Option<usize>,
    /// Token → index (from 2).
    table: TokenTable,
    widths: Vec<usize>,
    /// `tf_idf`: the weight of each column (OOV, then the vocabulary).
    idf: Vec<f32>,
}

/// What standardizing makes of each byte (256: it is left out).
fn byte_table(standardize: Standardize) -> [u16; 256] {
    let (lower, strip) = match standardize {
        Standardize::LowerAndStripPunctuation => (true, true),
        Standardize::Lower => (true, false),
        Standardize::StripPunctuation => (false, true),
        Standardize::None => (false, false),
    };
    let mut table = [0u16; 256];
    for (b, m) in (0..=255u8).zip(table.iter_mut()) {
        *m = if strip && b.is_ascii_punctuation() {
            256
        } else if lower {
            u16::from(b.to_ascii_lowercase())
        } else {
            u16::from(b)
        };
    }
    table
}

fn widths(ngrams: &Option<Ngrams>) -> Vec<usize> {
    match ngrams {
        None => Vec::new(),
        Some(Ngrams::UpTo(n)) => (1..=*n).collect(),
        Some(Ngrams::Widths(w)) => w.clone(),
    }
}

impl Vectorizer {
    /// Only the tokenizer: standardize, split, n-grams.
    pub(crate) fn tokenizer(
        standardize: Standardize,
        split: TextSplit,
        ngrams: Option<Ngrams>,
    ) -> Self {
        Vectorizer {
            bytes: byte_table(standardize),
            split,
            output_mode: TextOutput::Int,
            output_sequence_length: None,
            table: TokenTable::default(),
            widths: widths(&ngrams),
            idf: Vec::new(),
        }
    }

    fn standardize_into(&self, text: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.reserve(text.len());
        for &b in text {
            let m = self.bytes[usize::from(b)];
            if m < 256 {
                out.push(m as u8);
            }
        }
    }

    /// Calls `f` with each token of one text (n-grams included, after the words), in
    /// order. `buf` and `words` are scratch space, reused across texts.
    pub(crate) fn each_token(
        &self,
        text: &[u8],
        buf: &mut Vec<u8>,
        words: &mut Vec<(usize, usize)>,
        mut f: impl FnMut(&[u8]),
    ) -> Result<()> {
        self.standardize_into(text, buf);
        words.clear();
        match self.split {
            TextSplit::Whitespace => {
                let mut start = None;
                for (i, &b) in buf.iter().enumerate() {
                    // ASCII white space, as TensorFlow's `StringSplitV2` with no separator.
                    let space = b == b' ' || (b'\t'..=b'\r').contains(&b);
                    match (space, start) {
                        (true, Some(s)) => {
                            words.push((s, i));
                            start = None;
                        }
                        (false, None) => start = Some(i),
                        _ => {}
                    }
                }
                if let Some(s) = start {
                    words.push((s, buf.len()));
                }
            }
            TextSplit::Character => {
                let s = std::str::from_utf8(buf).map_err(|_| {
                    Error::invalid("a text that is not UTF-8 (split = \"character\")")
                })?;
                words.extend(s.char_indices().map(|(i, c)| (i, i + c.len_utf8())));
            }
            TextSplit::None => words.push((0, buf.len())),
        }
        if self.widths.is_empty() {
            for &(a, b) in words.iter() {
                f(&buf[a..b]);
            }
            return Ok(());
        }
        let mut gram = Vec::new();
        for &w in &self.widths {
            for span in words.windows(w) {
                gram.clear();
                for (k, &(a, b)) in span.iter().enumerate() {
                    if k > 0 {
                        gram.push(b' ');
                    }
                    gram.extend_from_slice(&buf[a..b]);
                }
                f(&gram);
            }
        }
        Ok(())
    }

    fn index(&self, token: &[u8]) -> i64 {
        if token.is_empty() {
            return 0;
        }
        self.table.get(token).unwrap_or(1)
    }

    /// Whitespace split without n-grams into at most `row.len()` indices, the rest of the
    /// row zeros (padding): one pass over the raw bytes that standardizes, splits and looks
    /// each token up as it ends, and stops when the row is full (the tokens after it are
    /// cut anyway). The same indices as [`Vectorizer::each_token`] with
    /// [`Vectorizer::index`].
    fn fill_row(&self, text: &[u8], row: &mut [i64], token: &mut Token) {
        let len = row.len();
        let mut k = 0;
        token.clear();
        for &b in text {
            let m = self.bytes[usize::from(b)];
            if m >= 256 {
                continue;
            }
            let c = m as u8;
            if c == b' ' || (b'\t'..=b'\r').contains(&c) {
                if !token.is_empty() {
                    row[k] = self.table.get_token(token).unwrap_or(1);
                    k += 1;
                    token.clear();
                    if k == len {
                        return;
                    }
                }
            } else {
                token.push(c);
            }
        }
        if !token.is_empty() && k < len {
            row[k] = self.table.get_token(token).unwrap_or(1);
            k += 1;
        }
        row[k..].fill(0);
    }

    fn call(&self, t: &Tensor) -> Result<Tensor> {
        let TensorData::Bytes(texts) = t.data() else {
            return Err(wrong_dtype(t, "strings"));
        };
        let shape = t.shape();
        let scalar = shape.is_empty();
        if shape.len() > 2 || (shape.len() == 2 && shape[1] != 1) {
            return Err(Error::invalid(format!(
                "shape {shape:?}: one text per sample (a scalar, [n] or [n, 1])"
            )));
        }
        let (mut buf, mut words) = (Vec::new(), Vec::new());
        if let (TextOutput::Int, Some(len)) = (self.output_mode, self.output_sequence_length) {
            // Indices written straight into the padded output (no row vectors).
            let n = texts.len();
            if self.split == TextSplit::Whitespace && self.widths.is_empty() && len > 0 {
                // A recycled buffer (no fresh pages per batch): every value is written.
                let mut out = crate::tensor::pool::take_filled::<i64>(n * len);
                let mut token = Token::default();
                for (text, row) in texts.iter().zip(out.chunks_exact_mut(len)) {
                    self.fill_row(text, row, &mut token);
                }
                let shape = if scalar { vec![len] } else { vec![n, len] };
                return Ok(Tensor::new(&shape, TensorData::I64(out.into()))?);
            }
            let mut out = vec![0i64; n * len];
            for (r, text) in texts.iter().enumerate() {
                let row = &mut out[r * len..(r + 1) * len];
                let mut k = 0;
                self.each_token(text, &mut buf, &mut words, |tok| {
                    if k < len {
                        row[k] = self.index(tok);
                        k += 1;
                    }
                })?;
            }
            let shape = if scalar { vec![len] } else { vec![n, len] };
            return Ok(Tensor::new(&shape, TensorData::I64(out.into()))?);
        }
        let rows: Vec<Vec<i64>> = texts
            .iter()
            .map(|text| {
                let mut row = Vec::new();
                self.each_token(text, &mut buf, &mut words, |tok| row.push(self.index(tok)))?;
                Ok(row)
            })
            .collect::<Result<_>>()?;
        let n = rows.len();
        match self.output_mode {
            TextOutput::Int => {
                let len = self
                    .output_sequence_length
                    .unwrap_or_else(|| rows.iter().map(Vec::len).max().unwrap_or(0));
                let mut out = vec![0i64; n * len];
                for (r, row) in rows.iter().enumerate() {
                    for (k, &i) in row.iter().take(len).enumerate() {
                        out[r * len + k] = i;
                    }
                }
                let shape = if scalar { vec![len] } else { vec![n, len] };
                Ok(Tensor::new(&shape, TensorData::I64(out.into()))?)
            }
            mode => {
                // Over [OOV] + vocabulary: index i of the lookup is column i - 1.
                let depth = self.table.len() + 1;
                let mut out = vec![0i64; n * depth];
                for (r, row) in rows.iter().enumerate() {
                    for &i in row {
                        if i >= 1 {
                            let cell = &mut out[r * depth + (i - 1) as usize];
                            *cell = if matches!(mode, TextOutput::Count | TextOutput::TfIdf) {
                                *cell + 1
                            } else {
                                1
                            };
                        }
                    }
                }
                let shape = if scalar { vec![depth] } else { vec![n, depth] };
                if mode == TextOutput::TfIdf {
                    let weighted: Vec<f32> = out
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| c as f32 * self.idf[i % depth])
                        .collect();
                    return Ok(Tensor::new(&shape, TensorData::F32(weighted.into()))?);
                }
                Ok(Tensor::new(&shape, TensorData::I64(out.into()))?)
            }
        }
    }
}

impl FeatureLayer for TextVectorizationSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn num_parallel(&self) -> NumParallel {
        self.num_parallel
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        let tokens = super::lookup::read_vocabulary(&self.vocabulary, &self.input)?;
        let idf = match (self.output_mode, &self.vocabulary) {
            (TextOutput::TfIdf, Vocabulary::Adapted { adapted }) => {
                super::adapt::Statistics::load(adapted)?.idf_weights(&self.input)?
            }
            (TextOutput::TfIdf, _) => {
                let w = self.idf_weights.as_deref().unwrap_or_default();
                if w.len() != tokens.len() {
                    return Err(Error::invalid(format!(
                        "{} idf weights for {} vocabulary tokens",
                        w.len(),
                        tokens.len()
                    )));
                }
                w.iter().map(|&x| x as f32).collect()
            }
            _ => Vec::new(),
        };
        let idf = match (self.output_mode, &self.vocabulary) {
            (TextOutput::TfIdf, Vocabulary::Adapted { .. }) => with_oov_weight(idf, None),
            (TextOutput::TfIdf, _) => with_oov_weight(idf, self.idf_weights.as_deref()),
            _ => idf,
        };
        let mut seen = FxHashMap::default();
        for (i, t) in tokens.iter().enumerate() {
            if t.is_empty() {
                return Err(Error::invalid(format!(
                    "the vocabulary holds the mask token \"\" (at {i})"
                )));
            }
            if seen.insert(t.as_bytes(), i).is_some() {
                return Err(Error::invalid(format!(
                    "the vocabulary holds {t:?} twice (again at {i})"
                )));
            }
        }
        let table = TokenTable::new(
            tokens
                .iter()
                .enumerate()
                .map(|(i, t)| (t.as_bytes().to_vec(), i as i64 + 2)),
        );
        let v = Vectorizer {
            bytes: byte_table(self.standardize),
            split: self.split,
            output_mode: self.output_mode,
            output_sequence_length: self.output_sequence_length,
            table,
            widths: widths(&self.ngrams),
            idf,
        };
        Ok(one_input(move |t| v.call(t)))
    }
}

/// The idf weights of the vocabulary's tokens with the OOV column's in front, as Keras pads
/// them: the average of the weights given (`np.average` of `given`, in float64), or for
/// adapted ones (`given` is `None`) TensorFlow's `reduce_mean` of the float32 weights.
pub(crate) fn with_oov_weight(idf: Vec<f32>, given: Option<&[f64]>) -> Vec<f32> {
    with_oov_weights(idf, given, 1)
}

/// [`with_oov_weight`] with `n` OOV columns.
pub(crate) fn with_oov_weights(idf: Vec<f32>, given: Option<&[f64]>, n: usize) -> Vec<f32> {
    let mean = match given {
        Some(w) => (w.iter().sum::<f64>() / w.len() as f64) as f32,
        None => super::eigen::sum_f32(&idf) / idf.len() as f32,
    };
    let mut out = vec![mean; n];
    out.extend(idf);
    out
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;
    use proptest::prelude::*;

    fn vectorizer(standardize: Standardize) -> Vectorizer {
        let mut v = Vectorizer::tokenizer(standardize, TextSplit::Whitespace, None);
        let words = [
            "ab",
            "a",
            "b\u{e9}",
            "x0",
            "longer-than-thirty-two-bytes-token!!",
        ];
        v.table = TokenTable::new(
            words
                .iter()
                .enumerate()
                .map(|(i, w)| (w.as_bytes().to_vec(), i as i64 + 2)),
        );
        v
    }

    proptest! {
        /// The one-pass row filler gives what standardize, split and look up give, cut to
        /// the row.
        #[test]
        fn fill_row_is_each_token_then_index(
            text in prop::collection::vec(prop::sample::select(
                b"aAbB x0\t\n\r\x0b\x0c.,!-\xc3\xa9\xc3".to_vec()), 0..80),
            len in 1usize..12,
            strip in any::<bool>(),
        ) {
            let standardize = if strip { Standardize::LowerAndStripPunctuation } else { Standardize::None };
            let v = vectorizer(standardize);
            let mut want = Vec::new();
            v.each_token(&text, &mut Vec::new(), &mut Vec::new(), |t| want.push(v.index(t))).unwrap();
            want.resize(len, 0);
            let mut row = vec![7i64; len];
            v.fill_row(&text, &mut row, &mut Token::default());
            prop_assert_eq!(row, want);
        }
    }
}
