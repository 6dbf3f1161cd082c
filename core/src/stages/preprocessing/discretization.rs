//! `discretization`: Keras's `Discretization` layer with given bin boundaries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeatureLayer, LayerFn, check_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// Buckets a numeric feature as `keras.layers.Discretization(bin_boundaries=)`: each value
/// becomes the number of boundaries at or below it (`[0., 1., 2.5]`: x < 0 → 0,
/// 0 ≤ x < 1 → 1, ..., x ≥ 2.5 → 3; NaN → 3). Output: `int32`, the input's shape.
///
/// ```toml
/// [[stage]]
/// kind = "discretization"
/// input = "age"
/// bin_boundaries = [18.0, 35.0, 65.0]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscretizationSpec {
    /// The feature read.
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The boundaries, increasing.
    pub bin_boundaries: Vec<f64>,
}

impl Spec for DiscretizationSpec {
    const KIND: &'static str = "discretization";
    const SUMMARY: &'static str = "bucket numbers by boundaries (Keras `Discretization`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        if self.bin_boundaries.iter().any(|b| b.is_nan())
            || self.bin_boundaries.windows(2).any(|w| w[0] > w[1])
        {
            return Err(Invalid::at(
                "bin_boundaries",
                "discretization: `bin_boundaries` must be increasing (and not NaN)",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

impl FeatureLayer for DiscretizationSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        // Keras compares in float32 (the boundaries are cast to the input's float type).
        let bounds: Vec<f32> = self.bin_boundaries.iter().map(|&b| b as f32).collect();
        Ok(super::one_input(move |t: &Tensor| {
            // Boundaries at or below `x` (NaN compares below none: past the last bucket).
            let bucket = |x: f32| -> i32 {
                if x.is_nan() {
                    return bounds.len() as i32;
                }
                bounds.partition_point(|&b| b <= x) as i32
            };
            let out: Vec<i32> = match t.data() {
                TensorData::F32(v) => v.iter().map(|&x| bucket(x)).collect(),
                TensorData::F64(v) => v.iter().map(|&x| bucket(x as f32)).collect(),
                TensorData::I64(v) => v.iter().map(|&x| bucket(x as f32)).collect(),
                TensorData::I32(v) => v.iter().map(|&x| bucket(x as f32)).collect(),
                TensorData::U8(v) => v.iter().map(|&x| bucket(f32::from(x))).collect(),
                TensorData::Bytes(_) => return Err(wrong_dtype(t, "numbers")),
            };
            Ok(Tensor::new(t.shape(), TensorData::I32(out.into()))?)
        }))
    }
}
