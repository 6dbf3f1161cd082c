//! `hashed_crossing`: Keras's `HashedCrossing` layer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::category_encoding::{EncodingMode, encode};
use super::hashing::fingerprint64;
use super::{FeatureLayer, LayerFn, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// `tf.sparse.cross_hashed`'s default key.
const HASH_KEY: u64 = 0x00DE_CAFC_AFFE;

/// TensorFlow's `FingerprintCat64`: two fingerprints combined into one.
pub fn fingerprint_cat64(fp1: u64, fp2: u64) -> u64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let mut result = fp1 ^ MUL;
    result ^= shift_mix(fp2.wrapping_mul(MUL)).wrapping_mul(MUL);
    result = result.wrapping_mul(MUL);
    result = shift_mix(result).wrapping_mul(MUL);
    shift_mix(result)
}

/// What crossing output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrossingMode {
    /// The bin, `int64` (the default).
    #[default]
    Int,
    /// A one-hot `float32` vector of `num_bins`.
    OneHot,
}

/// Crosses two or more features into `num_bins` bins, as `keras.layers.HashedCrossing`
/// (`tf.sparse.cross_hashed`): each sample's values hashed (strings by TensorFlow's
/// `Fingerprint64`, integers as their own 64 bits) and combined in order with
/// `FingerprintCat64` from TensorFlow's default key, modulo `num_bins`. The features are
/// scalars (one sample), vectors (a batch) or `[n, 1]` columns, of one shape. Output:
/// `int64` bins of that shape, or one-hot `float32` vectors.
///
/// ```toml
/// [[stage]]
/// kind = "hashed_crossing"
/// inputs = ["city", "weekday"]
/// output = "city_x_weekday"
/// num_bins = 4096
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HashedCrossingSpec {
    /// The features crossed (two or more), in order.
    pub inputs: Vec<String>,
    /// The feature written.
    pub output: String,
    /// Bins (≥ 1).
    pub num_bins: u64,
    /// `int` (default) or `one_hot`.
    #[serde(default)]
    pub output_mode: CrossingMode,
}

impl Spec for HashedCrossingSpec {
    const KIND: &'static str = "hashed_crossing";
    const SUMMARY: &'static str =
        "cross features into hashed bins (Keras `HashedCrossing`, TensorFlow's FingerprintCat64)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.inputs.len() < 2 || self.inputs.iter().any(String::is_empty) {
            return Err(Invalid::at(
                "inputs",
                "hashed_crossing: `inputs` names two or more features",
            ));
        }
        if self.output.is_empty() {
            return Err(Invalid::at(
                "output",
                "hashed_crossing: `output` names no feature",
            ));
        }
        if self.num_bins == 0 {
            return Err(Invalid::at(
                "num_bins",
                "hashed_crossing: `num_bins` must be at least 1",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

/// Each value of `t` as the crossing hashes it: a string's `Fingerprint64`, an integer's
/// own bits (TensorFlow's `HashCrosser` takes integers as they are).
fn fingerprints(t: &Tensor) -> Result<Vec<u64>> {
    Ok(match t.data() {
        TensorData::Bytes(v) => v.iter().map(|b| fingerprint64(b)).collect(),
        TensorData::I64(v) => v.iter().map(|&x| x as u64).collect(),
        TensorData::I32(v) => v.iter().map(|&x| i64::from(x) as u64).collect(),
        TensorData::U8(v) => v.iter().map(|&x| u64::from(x)).collect(),
        _ => return Err(wrong_dtype(t, "strings or integers")),
    })
}

impl FeatureLayer for HashedCrossingSpec {
    fn input(&self) -> &str {
        &self.inputs[0]
    }

    fn more_inputs(&self) -> &[String] {
        &self.inputs[1..]
    }

    fn output(&self) -> Option<&str> {
        Some(&self.output)
    }

    fn layer(&self) -> Result<LayerFn> {
        let (bins, mode, names) = (self.num_bins, self.output_mode, self.inputs.clone());
        Ok(std::sync::Arc::new(move |args: &[&Tensor]| {
            let shape = args[0].shape();
            if shape.len() > 2 || (shape.len() == 2 && shape[1] != 1) {
                return Err(Error::invalid(format!(
                    "shape {shape:?}: one value per sample (a scalar, a vector or [n, 1])"
                )));
            }
            if let Some((k, t)) = args.iter().enumerate().find(|(_, t)| t.shape() != shape) {
                return Err(Error::invalid(format!(
                    "`{}` has shape {:?} and `{}` {:?}: crossed features have one shape",
                    names[0],
                    shape,
                    names[k],
                    t.shape()
                )));
            }
            let prints = args
                .iter()
                .map(|t| fingerprints(t))
                .collect::<Result<Vec<_>>>()?;
            let out: Vec<i64> = (0..args[0].len())
                .map(|i| {
                    let h = prints
                        .iter()
                        .fold(HASH_KEY, |acc, p| fingerprint_cat64(acc, p[i]));
                    (h % bins) as i64
                })
                .collect();
            let bins_t = Tensor::new(shape, TensorData::I64(out.into()))?;
            match mode {
                CrossingMode::Int => Ok(bins_t),
                CrossingMode::OneHot => encode(&bins_t, bins as usize, EncodingMode::OneHot),
            }
        }))
    }
}
