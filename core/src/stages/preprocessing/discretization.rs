//! `discretization`: Keras's `Discretization` layer, with given bin boundaries or the ones
//! `adapt` learnt (`num_bins`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeatureLayer, LayerFn, check_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// Buckets a numeric feature as `keras.layers.Discretization(bin_boundaries=)`: each value
/// becomes the number of boundaries at or below it (`[0., 1., 2.5]`: x < 0 → 0,
/// 0 ≤ x < 1 → 1, ..., x ≥ 2.5 → 3; NaN → 3). Output: `int32`, the input's shape.
///
/// The boundaries are given (`bin_boundaries`), or learnt by `adapt` as
/// `Discretization(num_bins=N, epsilon=0.01).adapt` learns them (the `quantiles` analyzer,
/// `sluice adapt --quantiles FEATURE:N`): `adapted` names the statistics file, and
/// `num_bins` / `epsilon`, when given, must be the ones it was learnt with.
///
/// ```toml
/// [[stage]]
/// kind = "discretization"
/// input = "age"
/// bin_boundaries = [18.0, 35.0, 65.0]
///
/// [[stage]]
/// kind = "discretization"
/// input = "income"
/// num_bins = 10
/// adapted = "stats.json"   # sluice adapt pipeline.toml --out stats.json --quantiles income:10
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscretizationSpec {
    /// The feature read.
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The boundaries, increasing (or `adapted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin_boundaries: Option<Vec<f64>>,
    /// A statistics file written by `adapt` whose boundaries of the feature `input` (its
    /// `quantiles` analyzer) are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapted: Option<String>,
    /// With `adapted`: the bins the boundaries were learnt for (checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_bins: Option<usize>,
    /// With `adapted`: the tolerance they were learnt with (checked; Keras's default 0.01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
}

impl DiscretizationSpec {
    /// Buckets `input` by `bin_boundaries`.
    pub fn new(input: impl Into<String>, bin_boundaries: Vec<f64>) -> Self {
        DiscretizationSpec {
            input: input.into(),
            output: None,
            bin_boundaries: Some(bin_boundaries),
            adapted: None,
            num_bins: None,
            epsilon: None,
        }
    }

    /// Buckets `input` by the boundaries `adapt` learnt of it, saved in `statistics`.
    pub fn adapted(input: impl Into<String>, statistics: impl Into<String>) -> Self {
        DiscretizationSpec {
            input: input.into(),
            output: None,
            bin_boundaries: None,
            adapted: Some(statistics.into()),
            num_bins: None,
            epsilon: None,
        }
    }

    /// The boundaries: given, or read from the statistics file (and checked).
    fn boundaries(&self) -> Result<Vec<f64>> {
        if let Some(b) = &self.bin_boundaries {
            return Ok(b.clone());
        }
        let path = self
            .adapted
            .as_deref()
            .ok_or_else(|| Error::invalid("no `bin_boundaries` and no `adapted`"))?;
        let stats = super::adapt::Statistics::load(path)?;
        let (bounds, num_bins) = stats.bin_boundaries(&self.input)?;
        if let Some(n) = self.num_bins
            && n != num_bins
        {
            return Err(Error::invalid(format!(
                "{path}: the boundaries of `{}` were learnt for {num_bins} bins, where the stage says `num_bins = {n}`",
                self.input
            )));
        }
        if let (Some(e), Some(super::adapt::Learnt::Quantiles { epsilon, .. })) =
            (self.epsilon, stats.features.get(&self.input))
            && e != *epsilon
        {
            return Err(Error::invalid(format!(
                "{path}: the boundaries of `{}` were learnt with epsilon {epsilon}, where the stage says {e}",
                self.input
            )));
        }
        if let Some(m) = increasing(bounds) {
            return Err(Error::invalid(format!(
                "{path}: the boundaries learnt of `{}` {m} (NaN values in the data adapted?)",
                self.input
            )));
        }
        Ok(bounds.to_vec())
    }
}

/// What is wrong with `bounds`, if they are not increasing or hold NaN.
fn increasing(bounds: &[f64]) -> Option<&'static str> {
    if bounds.iter().any(|b| b.is_nan()) {
        Some("hold NaN")
    } else if bounds.windows(2).any(|w| w[0] > w[1]) {
        Some("are not increasing")
    } else {
        None
    }
}

impl Spec for DiscretizationSpec {
    const KIND: &'static str = "discretization";
    const SUMMARY: &'static str = "bucket numbers by boundaries (Keras `Discretization`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        match (&self.bin_boundaries, &self.adapted) {
            (Some(b), None) => {
                if increasing(b).is_some() {
                    return Err(Invalid::at(
                        "bin_boundaries",
                        "discretization: `bin_boundaries` must be increasing (and not NaN)",
                    ));
                }
                if self.num_bins.is_some() || self.epsilon.is_some() {
                    return Err(Invalid::at(
                        "num_bins",
                        "discretization: `num_bins` and `epsilon` go with `adapted` (boundaries learnt by `adapt`), not `bin_boundaries`",
                    ));
                }
            }
            (None, Some(_)) => {
                if self.num_bins == Some(0) {
                    return Err(Invalid::at(
                        "num_bins",
                        "discretization: `num_bins` must be at least 1",
                    ));
                }
            }
            _ => {
                return Err(Invalid::at(
                    "bin_boundaries",
                    "discretization: give `bin_boundaries`, or `adapted` (a statistics file of `sluice adapt --quantiles`)",
                ));
            }
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
        let bounds: Vec<f32> = self.boundaries()?.iter().map(|&b| b as f32).collect();
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
