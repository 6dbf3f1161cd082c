//! `category_encoding`: Keras's `CategoryEncoding` layer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeatureLayer, LayerFn, check_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// What `category_encoding` makes of integer categories.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EncodingMode {
    /// One vector per value (an index outside `0..num_tokens`: all zeros).
    OneHot,
    /// One vector per sample, 1 where the sample holds the index (the default).
    #[default]
    MultiHot,
    /// One vector per sample, how often it holds each index.
    Count,
}

/// Encodes integer categories in `0..num_tokens` as `keras.layers.CategoryEncoding`, shapes
/// included: a scalar is one sample; a vector is one sample of several values
/// (`multi_hot`, `count`) or several values (`one_hot`: `[n, num_tokens]`); a matrix is
/// one sample per row. `one_hot` of a scalar is `[1, num_tokens]`, and a trailing axis of 1
/// is dropped first, as Keras does. Indices ≥ `num_tokens` are left out; a negative one is
/// an error (except in `one_hot`, where it is all zeros). Output: `float32`.
///
/// ```toml
/// [[stage]]
/// kind = "category_encoding"
/// input = "weekday"
/// num_tokens = 7
/// output_mode = "one_hot"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CategoryEncodingSpec {
    /// The feature read.
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Categories (≥ 1): the output's last axis.
    pub num_tokens: usize,
    /// `one_hot`, `multi_hot` (default) or `count`.
    #[serde(default)]
    pub output_mode: EncodingMode,
}

impl Spec for CategoryEncodingSpec {
    const KIND: &'static str = "category_encoding";
    const SUMMARY: &'static str =
        "integer categories as one-hot, multi-hot or count vectors (Keras `CategoryEncoding`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        if self.num_tokens == 0 {
            return Err(Invalid::at(
                "num_tokens",
                "category_encoding: `num_tokens` must be at least 1",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

impl FeatureLayer for CategoryEncodingSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        let (depth, mode) = (self.num_tokens, self.output_mode);
        Ok(super::one_input(move |t: &Tensor| encode(t, depth, mode)))
    }
}

pub(crate) fn encode(t: &Tensor, depth: usize, mode: EncodingMode) -> Result<Tensor> {
    let values: Vec<i64> = match t.data() {
        TensorData::I64(v) => v.to_vec(),
        TensorData::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        TensorData::U8(v) => v.iter().map(|&x| i64::from(x)).collect(),
        _ => return Err(wrong_dtype(t, "integer categories")),
    };
    let mut shape = t.shape().to_vec();
    if mode == EncodingMode::OneHot {
        // A scalar is one sample: [1]; a trailing axis of 1 is dropped.
        if shape.is_empty() {
            shape = vec![1];
        } else if shape.len() > 1 && shape.last() == Some(&1) {
            shape.pop();
        }
        let mut out = vec![0f32; values.len() * depth];
        for (i, &x) in values.iter().enumerate() {
            if (0..depth as i64).contains(&x) {
                out[i * depth + x as usize] = 1.0;
            }
        }
        shape.push(depth);
        return Ok(Tensor::new(&shape, TensorData::F32(out.into()))?);
    }
    if let Some(&x) = values.iter().find(|&&x| x < 0) {
        return Err(Error::invalid(format!(
            "a negative category {x} (categories are 0..{depth})"
        )));
    }
    // Samples: a scalar or a vector is one, a matrix one per row.
    let (samples, per) = match shape.len() {
        0 => (1, 1),
        1 => (1, shape[0]),
        2 => (shape[0], shape[1]),
        n => {
            return Err(Error::invalid(format!(
                "a rank-{n} tensor: multi_hot and count take at most rank 2 (a batch of samples)"
            )));
        }
    };
    let mut out = vec![0f32; samples * depth];
    for s in 0..samples {
        for &x in &values[s * per..(s + 1) * per] {
            if (x as usize) < depth {
                let cell = &mut out[s * depth + x as usize];
                *cell = match mode {
                    EncodingMode::Count => *cell + 1.0,
                    _ => 1.0,
                };
            }
        }
    }
    let out_shape: Vec<usize> = if shape.len() == 2 {
        vec![samples, depth]
    } else {
        vec![depth]
    };
    Ok(Tensor::new(&out_shape, TensorData::F32(out.into()))?)
}
