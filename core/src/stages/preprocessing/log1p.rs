//! `log1p`: `tf.math.log1p` on a numeric feature.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::eigen::{log1p_f32, log1p_f64};
use super::{FeatureLayer, LayerFn, check_input, one_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// `log(1 + x)` of a numeric feature, as `tf.math.log1p`: float32 and float64 kept, bit for
/// bit TensorFlow's on x86-64 (its vectorized kernel's rounding on whole packets, the C
/// library's `log1p` on the tail, as TF computes the same tensor); integers are cast to
/// float32 first (as a Keras layer casts its inputs). `log1p(-1) = -inf`, below -1 NaN,
/// `-0.0` and subnormals kept. The usual transform of skewed counts before `normalization`.
///
/// ```toml
/// [[stage]]
/// kind = "log1p"
/// input = "clicks"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Log1pSpec {
    /// The feature read (numbers).
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl Log1pSpec {
    /// `log1p` of `input`, replaced.
    pub fn new(input: impl Into<String>) -> Self {
        Log1pSpec {
            input: input.into(),
            output: None,
        }
    }
}

impl Spec for Log1pSpec {
    const KIND: &'static str = "log1p";
    const SUMMARY: &'static str = "log(1 + x) (`tf.math.log1p`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

impl FeatureLayer for Log1pSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        Ok(one_input(|t: &Tensor| {
            let data = match t.data() {
                TensorData::F32(v) => TensorData::F32(log1p_f32(v).into()),
                TensorData::F64(v) => TensorData::F64(log1p_f64(v).into()),
                TensorData::I64(v) => {
                    let x: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                    TensorData::F32(log1p_f32(&x).into())
                }
                TensorData::I32(v) => {
                    let x: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                    TensorData::F32(log1p_f32(&x).into())
                }
                TensorData::U8(v) => {
                    let x: Vec<f32> = v.iter().map(|&x| f32::from(x)).collect();
                    TensorData::F32(log1p_f32(&x).into())
                }
                TensorData::Bytes(_) => return Err(wrong_dtype(t, "numbers")),
            };
            Ok(Tensor::new(t.shape(), data)?)
        }))
    }
}
