//! Keras preprocessing layers as stages (issue 25): each stage is a Keras layer, named after
//! it in snake_case (`kind = "hashing"`), with the layer's parameter names, reading the
//! feature `input` and writing the feature `output` (default: `input`, replaced).
//!
//! A stage calls its layer on the feature's tensor as Keras calls the layer on it: before
//! `batch` on each element's value, after `batch` on the whole batch at once (one call per
//! batch, tf.data's "batch before map"). Outputs are TensorFlow's bit for bit: the tests
//! (`core/tests/preprocessing.rs`) compare with what Keras 3 on TensorFlow 2.21 returned
//! for the same inputs (`tests/fixtures/preprocessing/generate.py`).
//!
//! | kind | Keras layer | output |
//! |---|---|---|
//! | [`hashing`](HashingSpec) | `Hashing` | `int64` bins: FarmHash Fingerprint64, or SipHash with `salt` |
//! | [`string_lookup`](LookupSpec) | `StringLookup` | `int64` indices (`invert`: tokens) |
//! | [`integer_lookup`](LookupSpec) | `IntegerLookup` | `int64` indices (`invert`: values) |
//! | [`normalization`](NormalizationSpec) | `Normalization` | `float32` `(x - mean) / max(sqrt(variance), 1e-7)` |
//! | [`discretization`](DiscretizationSpec) | `Discretization` | `int32` bucket indices |
//! | [`category_encoding`](CategoryEncodingSpec) | `CategoryEncoding` | `float32` one-hot, multi-hot or counts |
//! | [`hashed_crossing`](HashedCrossingSpec) | `HashedCrossing` | `int64` bins of crossed features (or one-hot) |
//! | [`decode_raw`](DecodeRawSpec) | `tf.io.decode_raw` | the bytes as typed values |
//! | [`regex_replace`](RegexReplaceSpec) | `tf.strings.regex_replace` | the strings with the matches rewritten |
//! | [`text_vectorization`](TextVectorizationSpec) | `TextVectorization` | `int64` padded token indices, or multi-hot / count vectors (`tf_idf`: `float32`) |
//! | [`clip`](ClipSpec) | `tf.clip_by_value` | the numbers clipped, dtype kept |
//! | [`log1p`](Log1pSpec) | `tf.math.log1p` | `log(1 + x)`, float32 / float64 |

pub mod adapt;
mod category_encoding;
mod clip;
mod decode_raw;
mod discretization;
mod eigen;
mod hashed_crossing;
mod hashing;
mod log1p;
mod lookup;
mod normalization;
mod quantiles;
mod regex_replace;
mod text_vectorization;
mod token_counts;
mod token_table;

use std::sync::Arc;

pub use category_encoding::{CategoryEncodingSpec, EncodingMode};
pub use clip::ClipSpec;
pub use decode_raw::{DecodeRawSpec, RawType};
pub use discretization::DiscretizationSpec;
pub use hashed_crossing::{CrossingMode, HashedCrossingSpec, fingerprint_cat64};
pub use hashing::{
    HashingSpec, Salt, Token, fingerprint64, to_hash_bucket_fast, to_hash_bucket_strong,
};
pub use log1p::Log1pSpec;
pub use lookup::{
    IntegerLookupSpec, LookupOutput, LookupSpec, LookupToken, OovMethod, StringLookupSpec,
    Vocabulary,
};
pub use normalization::{NormalizationSpec, Stat};
pub use regex_replace::RegexReplaceSpec;
pub use text_vectorization::{Ngrams, Standardize, TextOutput, TextSplit, TextVectorizationSpec};

use crate::dataset::Dataset;
use crate::element::{Element, Value};
use crate::error::{Error, Result};
use crate::executor::parallel::WorkFn;
use crate::invalid::Invalid;
use crate::parallelism::NumParallel;
use crate::params::Params;
use crate::registry::Spec;
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::map::{MapSpec, run_elementwise};
use crate::stream::BoxStream;
use crate::tensor::Tensor;

/// A Keras preprocessing layer on one feature: what every stage of this module is.
pub trait FeatureLayer: Spec {
    /// The feature read (the first, when the layer reads several).
    fn input(&self) -> &str;

    /// The features read after [`input`](FeatureLayer::input), for layers of several
    /// (`hashed_crossing`). Default: none.
    fn more_inputs(&self) -> &[String] {
        &[]
    }

    /// The feature written (`None`: the input, replaced).
    fn output(&self) -> Option<&str>;

    /// Threads running the layer (default: sequential, on the consumer's thread); batches
    /// stay in order.
    fn num_parallel(&self) -> NumParallel {
        NumParallel::Sequential
    }

    /// The layer, ready to be called on a value (an element's, or a whole batch's): made
    /// once per run (a vocabulary file read, a table built), when the stage starts.
    fn layer(&self) -> Result<LayerFn>;
}

/// A layer ready to call: the values of its inputs in, the layer's output out.
pub type LayerFn = Arc<dyn Fn(&[&Tensor]) -> Result<Tensor> + Send + Sync>;

/// A [`LayerFn`] of a layer of one input.
pub fn one_input(f: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static) -> LayerFn {
    Arc::new(move |args: &[&Tensor]| f(args[0]))
}

impl Dataset {
    /// Runs the Keras preprocessing layer `layer` on every element (see
    /// [`crate::stages::preprocessing`]).
    pub fn preprocess<L: FeatureLayer>(&self, layer: L) -> Dataset {
        Dataset::from_stage(LayerStage(Arc::new(layer)), vec![self.clone()])
    }
}

/// The stage of a [`FeatureLayer`].
#[derive(Debug)]
pub(crate) struct LayerStage<L>(pub(crate) Arc<L>);

impl<L: FeatureLayer> Stage for LayerStage<L> {
    fn name(&self) -> &'static str {
        L::KIND
    }

    fn params(&self) -> Params {
        Params::of(self.0.as_ref())
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        self.0.validate()
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, L::KIND)?;
        let spec = Arc::clone(&self.0);
        let layer = spec
            .layer()
            .map_err(|e| ctx.stream_error(Error::invalid(format!("{}: {e}", L::KIND))))?;
        let drops = ctx.clone();
        let work: WorkFn = Arc::new(
            move |mut e: Element| match apply(spec.as_ref(), &layer, &e) {
                Ok(t) => {
                    let name = spec.output().unwrap_or(spec.input());
                    e.insert(name, Value::Dense(t));
                    Ok(Some(e))
                }
                Err(err) => {
                    // Under skip, the element's records are done (dropped), not lost.
                    if drops.error_policy() == crate::options::ErrorPolicy::Skip {
                        drops.skipped(e.units());
                    }
                    Err(err)
                }
            },
        );
        let run = MapSpec::parallel(self.0.num_parallel());
        Ok(run_elementwise(input.open()?, work, run, ctx))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // One output per input: skipped inputs are not run through the layer.
        crate::run::build_one_to_one(self, inputs, ctx, skip)
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn runs_inline(&self) -> bool {
        self.0.num_parallel() == NumParallel::Sequential
    }

    fn computes_in_parallel(&self) -> bool {
        self.0.num_parallel() != NumParallel::Sequential
    }
}

/// The layer's output for element `e`, or an error naming the feature.
fn apply<L: FeatureLayer>(spec: &L, layer: &LayerFn, e: &Element) -> Result<Tensor> {
    let mut args = Vec::with_capacity(1 + spec.more_inputs().len());
    for name in std::iter::once(spec.input()).chain(spec.more_inputs().iter().map(String::as_str)) {
        args.push(feature(e, name, L::KIND)?);
    }
    let name = spec.input();
    layer(&args)
        .map_err(|err| Error::data_of(name, format!("{}: feature `{name}`: {err}", L::KIND)))
}

/// The dense tensor of feature `name` of `e`, or an error naming it.
fn feature<'e>(e: &'e Element, name: &str, kind: &str) -> Result<&'e Tensor> {
    let value = e.get(name).ok_or_else(|| {
        Error::data_of(
            name,
            format!(
                "{kind}: no feature `{name}` (the element has {})",
                e.names()
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    match value {
        Value::Dense(t) => Ok(t),
        Value::Ragged(_) => Err(Error::data_of(
            name,
            format!(
                "{kind}: feature `{name}` is ragged (a batch of rows of different lengths): \
                 pad it first (`padded_batch`)"
            ),
        )),
    }
}

/// The `input` of a spec: a feature name that is not empty.
pub(crate) fn check_input(kind: &str, input: &str) -> std::result::Result<(), Invalid> {
    if input.is_empty() {
        return Err(Invalid::at(
            "input",
            format!("{kind}: `input` names no feature"),
        ));
    }
    Ok(())
}

/// An error for a feature of a dtype the layer does not take.
pub(crate) fn wrong_dtype(t: &Tensor, wants: &str) -> Error {
    Error::invalid(format!(
        "a {} tensor, where the layer takes {wants}",
        t.dtype().tf_name()
    ))
}
