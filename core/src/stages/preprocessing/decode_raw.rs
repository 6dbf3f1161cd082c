//! `decode_raw`: byte strings as typed tensors (`tf.io.decode_raw`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeatureLayer, LayerFn, check_input, one_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// The types `decode_raw` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawType {
    /// `uint8`.
    Uint8,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
}

impl RawType {
    fn size(self) -> usize {
        match self {
            RawType::Uint8 => 1,
            RawType::Int32 | RawType::Float32 => 4,
            RawType::Int64 | RawType::Float64 => 8,
        }
    }
}

/// Reads each byte string as values of `out_type` (`tf.io.decode_raw(bytes, out_type,
/// little_endian)`): a string of `n` bytes gives `n / size` values, so strings of shape `S`
/// give `S + [n / size]`, every string of one length (else an error naming both). With
/// `shape`, each string's values are reshaped to it (e.g. CIFAR's `[3, 32, 32]`).
///
/// ```toml
/// [[stage]]
/// kind = "decode_raw"
/// input = "record"
/// out_type = "uint8"
/// shape = [3073]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecodeRawSpec {
    /// The feature read (byte strings).
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// `uint8`, `int32`, `int64`, `float32` or `float64`.
    pub out_type: RawType,
    /// Bytes in little-endian order (default true, as TensorFlow).
    #[serde(default = "yes")]
    pub little_endian: bool,
    /// Each string's values reshaped to this (default: a vector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<usize>>,
}

fn yes() -> bool {
    true
}

impl Spec for DecodeRawSpec {
    const KIND: &'static str = "decode_raw";
    const SUMMARY: &'static str = "byte strings as typed tensors (`tf.io.decode_raw`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

impl FeatureLayer for DecodeRawSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        let spec = self.clone();
        Ok(one_input(move |t| spec.decode(t)))
    }
}

impl DecodeRawSpec {
    fn decode(&self, t: &Tensor) -> Result<Tensor> {
        let TensorData::Bytes(strings) = t.data() else {
            return Err(wrong_dtype(t, "byte strings"));
        };
        let size = self.out_type.size();
        let len = strings.first().map_or(0, |s| s.len());
        if let Some(other) = strings.iter().find(|s| s.len() != len) {
            return Err(Error::invalid(format!(
                "strings of {len} and {} bytes: decode_raw needs one length",
                other.len()
            )));
        }
        if len % size != 0 {
            return Err(Error::invalid(format!(
                "a string of {len} bytes is not a whole number of {}-byte values",
                size
            )));
        }
        let per = len / size;
        let mut shape = t.shape().to_vec();
        match &self.shape {
            Some(s) => {
                if s.iter().product::<usize>() != per {
                    return Err(Error::invalid(format!(
                        "{per} values per string do not fill shape {s:?}"
                    )));
                }
                shape.extend_from_slice(s);
            }
            None => shape.push(per),
        }
        let le = self.little_endian;
        macro_rules! read {
            ($ty:ty, $n:expr) => {{
                let mut out: Vec<$ty> = Vec::with_capacity(strings.len() * per);
                for s in strings.iter() {
                    for c in s.chunks_exact($n) {
                        let b: [u8; $n] = c.try_into().expect("chunks of n");
                        out.push(if le {
                            <$ty>::from_le_bytes(b)
                        } else {
                            <$ty>::from_be_bytes(b)
                        });
                    }
                }
                out
            }};
        }
        let data = match self.out_type {
            RawType::Uint8 => {
                let mut out = Vec::with_capacity(strings.len() * per);
                for s in strings.iter() {
                    out.extend_from_slice(s);
                }
                TensorData::U8(out.into())
            }
            RawType::Int32 => TensorData::I32(read!(i32, 4).into()),
            RawType::Int64 => TensorData::I64(read!(i64, 8).into()),
            RawType::Float32 => TensorData::F32(read!(f32, 4).into()),
            RawType::Float64 => TensorData::F64(read!(f64, 8).into()),
        };
        Ok(Tensor::new(&shape, data)?)
    }
}
