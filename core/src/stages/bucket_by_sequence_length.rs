//! `bucket_by_sequence_length`: batches of elements of similar length
//! (`tf.data.Dataset.bucket_by_sequence_length`): `group_by_window` keyed by length bucket.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::{Element, Value};
use crate::error::{Error, Result};
use crate::invalid::{Invalid, Key};
use crate::params::Params;
use crate::registry::{AppendContext, Batching, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::batch::combine_dense;
use crate::stages::group_by_window::{GroupStream, Grouping, feature_list, skip_groups};
use crate::stages::padded_batch::{
    PadDim, PadValue, PaddedBatchSpec, check_padded_shapes, pad_and_stack, pad_dims,
};
use crate::stream::BoxStream;

/// Batches elements of similar length together: an element whose `input` has `n` rows
/// (its first dimension) goes to the first bucket `i` with `bucket_boundaries[i-1] <= n <
/// bucket_boundaries[i]` (the first bucket from 0, the last unbounded), and each bucket's
/// batch of `bucket_batch_sizes[i]` elements is padded to its longest element
/// (`tf.data.Dataset.bucket_by_sequence_length` with `element_length_func =
/// tf.shape(input)[0]`). It is `group_by_window` keyed by bucket: a batch is yielded when
/// its bucket is full, and the buckets left at the end in bucket order (or left out with
/// `drop_remainder`).
///
/// `pad_to_bucket_boundary` pads to the bucket's boundary minus one rather than to the
/// batch's longest; an element of the last bucket (as long as the last boundary or longer)
/// is then an error when its batch is made, as in tf.data. tf.data pads so every
/// dimension its static shapes leave unknown; Sluice has no static shapes, so it pads so
/// the first dimension of every value (of rank ≥ 1) not listed in `padded_shapes` (a
/// variable length, as `tokens` and a `mask` beside it) and every `"max"` dimension of
/// `padded_shapes`: list a value of fixed length there with its size (`embedding = [8]`).
/// `no_padding` batches as `batch` does (different lengths make a ragged value, where
/// tf.data fails).
///
/// ```toml
/// [[stage]]
/// kind = "bucket_by_sequence_length"
/// input = "tokens"
/// bucket_boundaries = [16, 32, 64]
/// bucket_batch_sizes = [64, 32, 16, 8]
/// padding_values = { tokens = -1 }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BucketBySequenceLengthSpec {
    /// The feature whose first dimension is the element's length (rank ≥ 1).
    pub input: String,
    /// The buckets' upper length boundaries (each ≥ 1; not necessarily increasing, as in
    /// tf.data: an element goes to the first bucket its length fits).
    pub bucket_boundaries: Vec<u64>,
    /// Elements per batch of each bucket (each ≥ 1), one more than `bucket_boundaries`.
    pub bucket_batch_sizes: Vec<usize>,
    /// The padded shape per value name, sizes or `"max"` per dimension, as
    /// `padded_batch`'s (with `pad_to_bucket_boundary`, `"max"` is the boundary minus one,
    /// and so is the first dimension of every value not listed).
    #[serde(default, with = "pad_dims")]
    #[schemars(with = "BTreeMap<String, Vec<PadDim>>")]
    pub padded_shapes: BTreeMap<String, Vec<Option<usize>>>,
    /// The padding value per value name (default 0 or `""`).
    #[serde(default)]
    pub padding_values: BTreeMap<String, PadValue>,
    /// Pad the first dimension of the values not in `padded_shapes`, and its `"max"`
    /// dimensions, to the bucket's boundary minus one rather than to the batch's longest
    /// (default false).
    #[serde(default)]
    pub pad_to_bucket_boundary: bool,
    /// Batch without padding, as `batch` (default false).
    #[serde(default)]
    pub no_padding: bool,
    /// Leave out the buckets' batches left smaller than their batch size at the end
    /// (default false).
    #[serde(default)]
    pub drop_remainder: bool,
}

impl BucketBySequenceLengthSpec {
    /// Buckets of `input`'s length split at `bucket_boundaries`, batched by
    /// `bucket_batch_sizes` (one more), padded to each batch's longest.
    pub fn new(
        input: impl Into<String>,
        bucket_boundaries: Vec<u64>,
        bucket_batch_sizes: Vec<usize>,
    ) -> Self {
        BucketBySequenceLengthSpec {
            input: input.into(),
            bucket_boundaries,
            bucket_batch_sizes,
            padded_shapes: BTreeMap::new(),
            padding_values: BTreeMap::new(),
            pad_to_bucket_boundary: false,
            no_padding: false,
            drop_remainder: false,
        }
    }
}

impl Spec for BucketBySequenceLengthSpec {
    const KIND: &'static str = "bucket_by_sequence_length";
    const SUMMARY: &'static str =
        "batch elements of similar length, padded (`tf.data`'s `bucket_by_sequence_length`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        const KIND: &str = BucketBySequenceLengthSpec::KIND;
        if self.input.is_empty() {
            return Err(Invalid::at(
                "input",
                format!("{KIND}: `input` names no feature"),
            ));
        }
        if self.bucket_batch_sizes.len() != self.bucket_boundaries.len() + 1 {
            return Err(Invalid::at(
                "bucket_batch_sizes",
                format!(
                    "{KIND}: `bucket_batch_sizes` must have one more entry than \
                     `bucket_boundaries` ({} + 1), got {}",
                    self.bucket_boundaries.len(),
                    self.bucket_batch_sizes.len()
                ),
            ));
        }
        for (key, at) in [
            (
                "bucket_boundaries",
                self.bucket_boundaries.iter().position(|&b| b == 0),
            ),
            (
                "bucket_batch_sizes",
                self.bucket_batch_sizes.iter().position(|&b| b == 0),
            ),
        ] {
            if let Some(i) = at {
                return Err(Invalid::new(
                    vec![Key::name(key), Key::Index(i)],
                    format!("{KIND}: `{key}[{i}]` must be at least 1"),
                ));
            }
        }
        if self.no_padding {
            for (key, given) in [
                ("padded_shapes", !self.padded_shapes.is_empty()),
                ("padding_values", !self.padding_values.is_empty()),
                ("pad_to_bucket_boundary", self.pad_to_bucket_boundary),
            ] {
                if given {
                    return Err(Invalid::at(
                        key,
                        format!("{KIND}: `{key}` pads, and `no_padding` is true"),
                    ));
                }
            }
        }
        check_padded_shapes(KIND, &self.padded_shapes)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.bucket_by_sequence_length(self.clone()))
    }

    fn batching(&self) -> Batching {
        Batching::Batches
    }
}

impl BucketBySequenceLengthSpec {
    fn stream(&self, inputs: &[Input], ctx: &BuildContext) -> Result<GroupStream<Buckets>> {
        Ok(GroupStream::new(
            crate::stages::single_input(inputs, Self::KIND)?.open()?,
            Buckets { spec: self.clone() },
            self.drop_remainder,
            ctx,
        ))
    }
}

impl Stage for BucketBySequenceLengthSpec {
    fn name(&self) -> &'static str {
        Self::KIND
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(self.stream(inputs, ctx)?))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        skip_groups(self.stream(inputs, ctx)?, ctx, skip)
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }
}

/// `bucket_by_sequence_length`'s grouping: the key is the bucket's index.
struct Buckets {
    spec: BucketBySequenceLengthSpec,
}

impl Buckets {
    /// The length of `e`: the first dimension of `input`.
    fn length(&self, e: &Element) -> Result<u64> {
        let name = &self.spec.input;
        let kind = BucketBySequenceLengthSpec::KIND;
        match e.get(name) {
            Some(Value::Dense(t)) if t.rank() >= 1 => Ok(t.shape()[0] as u64),
            Some(Value::Dense(_)) => Err(Error::data_of(
                name,
                format!("{kind}: `{name}` is a scalar: its length is its first dimension"),
            )),
            Some(Value::Ragged(_)) => Err(Error::data_of(
                name,
                format!("{kind}: `{name}` is ragged (a batch): bucket elements before `batch`"),
            )),
            None => Err(Error::data_of(
                name,
                format!(
                    "{kind}: no feature `{name}` (the element has {})",
                    feature_list(e)
                ),
            )),
        }
    }
}

impl Grouping for Buckets {
    fn key(&self, e: &Element) -> Result<i64> {
        let n = self.length(e)?;
        let b = &self.spec.bucket_boundaries;
        // tf.data's rule: the first bucket i with lower(i) <= n < upper(i), the lower
        // bound of the first bucket and the upper bound of the last open.
        (0..=b.len())
            .find(|&i| (i == 0 || b[i - 1] <= n) && (i == b.len() || n < b[i]))
            .map(|i| i as i64)
            .ok_or_else(|| {
                Error::data_of(
                    &self.spec.input,
                    format!(
                        "{}: length {n} of `{}` fits no bucket of the boundaries {b:?}",
                        BucketBySequenceLengthSpec::KIND,
                        self.spec.input
                    ),
                )
            })
    }

    fn window_size(&self, key: i64) -> usize {
        self.spec.bucket_batch_sizes[key as usize]
    }

    fn combine(&self, key: i64, items: &[Element]) -> Result<Element> {
        let spec = &self.spec;
        if spec.no_padding {
            return combine_dense(items);
        }
        let mut padding = PaddedBatchSpec {
            batch_size: items.len(),
            drop_remainder: false,
            padded_shapes: spec.padded_shapes.clone(),
            padding_values: spec.padding_values.clone(),
        };
        if spec.pad_to_bucket_boundary {
            let bucket = key as usize;
            let Some(&boundary) = spec.bucket_boundaries.get(bucket) else {
                let last = spec.bucket_boundaries.last().copied().unwrap_or(0);
                return Err(Error::data_of(
                    &spec.input,
                    format!(
                        "{}: with `pad_to_bucket_boundary`, elements must be shorter than \
                         the last boundary ({last}); `{}` has length {} here",
                        BucketBySequenceLengthSpec::KIND,
                        spec.input,
                        self.length(&items[0])?
                    ),
                ));
            };
            let fill = (boundary - 1) as usize;
            for dims in padding.padded_shapes.values_mut() {
                for d in dims.iter_mut().filter(|d| d.is_none()) {
                    *d = Some(fill);
                }
            }
            // The values not listed: their first dimension, the length tf.data's static
            // shape leaves unknown, to the boundary too.
            for (name, value) in items[0].iter() {
                if let Value::Dense(t) = value
                    && t.rank() >= 1
                    && !spec.padded_shapes.contains_key(name)
                {
                    let mut dims = vec![None; t.rank()];
                    dims[0] = Some(fill);
                    padding.padded_shapes.insert(name.to_string(), dims);
                }
            }
        }
        pad_and_stack(items, &padding)
    }
}
