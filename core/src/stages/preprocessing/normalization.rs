//! `normalization`: Keras's `Normalization` layer with a given mean and variance.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeatureLayer, LayerFn, check_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// One number for every feature, or one per feature of the last axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Stat {
    /// The same for every value.
    One(f64),
    /// One per position of the last axis.
    PerFeature(Vec<f64>),
}

impl Stat {
    fn values(&self) -> Vec<f32> {
        match self {
            Stat::One(x) => vec![*x as f32],
            Stat::PerFeature(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
}

/// Keras's epsilon (`keras.config.epsilon()`): the least standard deviation divided by.
const EPSILON: f32 = 1e-7;

/// Centres and scales a numeric feature as `keras.layers.Normalization(mean=, variance=)`
/// (axis -1): `(x - mean) / max(sqrt(variance), 1e-7)` in `float32`, or with `invert`
/// `mean + x * max(sqrt(variance), 1e-7)`. `mean` and `variance` are one number or one per
/// position of the feature's last axis, or come from `adapted`, a statistics file of
/// `sluice adapt` (`--mean-variance FEATURE`). Output: `float32`, the input's shape.
///
/// ```toml
/// [[stage]]
/// kind = "normalization"
/// input = "age"
/// mean = 38.6
/// variance = 186.1
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NormalizationSpec {
    /// The feature read.
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The mean (or `adapted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<Stat>,
    /// The variance (or `adapted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variance: Option<Stat>,
    /// A statistics file written by `adapt` (`sluice adapt`), whose mean and variance of
    /// the feature `input` are used instead of `mean` and `variance`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapted: Option<String>,
    /// Scale back instead (default false).
    #[serde(default)]
    pub invert: bool,
}

impl Spec for NormalizationSpec {
    const KIND: &'static str = "normalization";
    const SUMMARY: &'static str = "(x - mean) / sqrt(variance) in float32 (Keras `Normalization`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        let (mean, variance) = match (&self.mean, &self.variance, &self.adapted) {
            (Some(m), Some(v), None) => (m, v),
            (None, None, Some(_)) => return Ok(()),
            _ => {
                return Err(Invalid::at(
                    "mean",
                    "normalization: give `mean` and `variance`, or `adapted` (a statistics file of `sluice adapt`)",
                ));
            }
        };
        let (m, v) = (mean.values().len(), variance.values().len());
        if m != v && m != 1 && v != 1 {
            return Err(Invalid::at(
                "variance",
                format!("normalization: {m} means and {v} variances"),
            ));
        }
        if variance.values().iter().any(|&x| x < 0.0) {
            return Err(Invalid::at(
                "variance",
                "normalization: a negative variance",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

impl FeatureLayer for NormalizationSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        let (mean, variance) = match &self.adapted {
            Some(path) => {
                let (m, v) = super::adapt::Statistics::load(path)?.mean_variance(&self.input)?;
                (Stat::One(m), Stat::One(v))
            }
            None => (
                self.mean
                    .clone()
                    .ok_or_else(|| Error::invalid("no `mean`"))?,
                self.variance
                    .clone()
                    .ok_or_else(|| Error::invalid("no `variance`"))?,
            ),
        };
        let mean = mean.values();
        // max(sqrt(variance), epsilon), each step rounded to float32 as TensorFlow's ops.
        let scale: Vec<f32> = variance
            .values()
            .into_iter()
            .map(|v| v.sqrt().max(EPSILON))
            .collect();
        let invert = self.invert;
        Ok(super::one_input(move |t: &Tensor| {
            let x: Vec<f32> = match t.data() {
                TensorData::F32(v) => v.to_vec(),
                TensorData::F64(v) => v.iter().map(|&x| x as f32).collect(),
                TensorData::I64(v) => v.iter().map(|&x| x as f32).collect(),
                TensorData::I32(v) => v.iter().map(|&x| x as f32).collect(),
                TensorData::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
                TensorData::Bytes(_) => return Err(wrong_dtype(t, "numbers")),
            };
            let width = mean.len().max(scale.len());
            let last = t.shape().last().copied().unwrap_or(1);
            if width > 1 && (t.rank() == 0 || last != width) {
                return Err(Error::invalid(format!(
                    "{width} means and variances, and the feature's last axis has {} \
                     positions (shape {:?})",
                    if t.rank() == 0 { 1 } else { last },
                    t.shape()
                )));
            }
            let at = |v: &[f32], i: usize| if v.len() == 1 { v[0] } else { v[i % width] };
            let out: Vec<f32> = x
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    if invert {
                        at(&mean, i) + x * at(&scale, i)
                    } else {
                        (x - at(&mean, i)) / at(&scale, i)
                    }
                })
                .collect();
            Ok(Tensor::new(t.shape(), TensorData::F32(out.into()))?)
        }))
    }
}
