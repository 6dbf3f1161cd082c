//! `clip`: `tf.clip_by_value` on a numeric feature.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::eigen::{daz_f32, daz_f64};
use super::{FeatureLayer, LayerFn, check_input, one_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// Clips a numeric feature to `[clip_value_min, clip_value_max]` as
/// `tf.clip_by_value(x, clip_value_min, clip_value_max)`: `maximum(minimum(x, max), min)`,
/// NaN staying NaN, the dtype and shape kept. Bit for bit TensorFlow's on x86-64, signed
/// zeros included (where `x` equals a bound, TF's vectorized kernel returns the bound and
/// its scalar tail `x`: here too), and subnormals read as zeros of their sign (TF's
/// kernels run with denormals flushed). Integers take integral bounds within their range. A
/// bound left out does not clip (`min` and `max` are accepted for the keys).
///
/// ```toml
/// [[stage]]
/// kind = "clip"
/// input = "income"
/// clip_value_min = 0.0
/// clip_value_max = 250000.0
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClipSpec {
    /// The feature read (numbers).
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The least value (default: none).
    #[serde(
        default,
        alias = "min",
        skip_serializing_if = "Option::is_none",
        with = "float_or_word"
    )]
    #[schemars(with = "Option<f64>")]
    pub clip_value_min: Option<f64>,
    /// The greatest value (default: none).
    #[serde(
        default,
        alias = "max",
        skip_serializing_if = "Option::is_none",
        with = "float_or_word"
    )]
    #[schemars(with = "Option<f64>")]
    pub clip_value_max: Option<f64>,
}

impl ClipSpec {
    /// Clips `input` to `[min, max]`.
    pub fn new(input: impl Into<String>, min: f64, max: f64) -> Self {
        ClipSpec {
            input: input.into(),
            output: None,
            clip_value_min: Some(min),
            clip_value_max: Some(max),
        }
    }
}

impl Spec for ClipSpec {
    const KIND: &'static str = "clip";
    const SUMMARY: &'static str = "clip numbers to [min, max] (`tf.clip_by_value`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        let (lo, hi) = (self.clip_value_min, self.clip_value_max);
        if lo.is_none() && hi.is_none() {
            return Err(Invalid::at(
                "clip_value_min",
                "clip: give `clip_value_min`, `clip_value_max` or both",
            ));
        }
        for (key, b) in [("clip_value_min", lo), ("clip_value_max", hi)] {
            if b.is_some_and(f64::is_nan) {
                return Err(Invalid::at(key, format!("clip: `{key}` is NaN")));
            }
        }
        if let (Some(lo), Some(hi)) = (lo, hi)
            && lo > hi
        {
            return Err(Invalid::at(
                "clip_value_max",
                format!("clip: `clip_value_min` ({lo}) is above `clip_value_max` ({hi})"),
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

/// Floats per AVX packet (and doubles: half as many).
const F32_PACKET: usize = 8;

/// TF's `minimum` then `maximum` (NaN propagated) of one float: on a vectorized position
/// a tie returns the bound, on the scalar tail `x`.
macro_rules! clip_float {
    ($name:ident, $t:ty, $daz:ident) => {
        fn $name(v: &[$t], lo: $t, hi: $t, packet: usize) -> Vec<$t> {
            let packed = v.len() - v.len() % packet;
            let (lo, hi) = ($daz(lo), $daz(hi));
            v.iter()
                .enumerate()
                .map(|(i, &x)| {
                    let x = $daz(x);
                    let vector = i < packed;
                    // minimum(x, hi)
                    let m = if x.is_nan() {
                        x
                    } else if vector {
                        if x < hi { x } else { hi }
                    } else if hi < x {
                        hi
                    } else {
                        x
                    };
                    // maximum(m, lo)
                    if m.is_nan() {
                        m
                    } else if vector {
                        if m > lo { m } else { lo }
                    } else if m < lo {
                        lo
                    } else {
                        m
                    }
                })
                .collect()
        }
    };
}
clip_float!(clip_f32, f32, daz_f32);
clip_float!(clip_f64, f64, daz_f64);

/// An integer bound: integral and within the dtype's range.
fn integral(b: f64, min: f64, max: f64, dtype: &str) -> Result<f64> {
    if b.is_infinite() {
        return Ok(b.clamp(min, max));
    }
    if b.fract() != 0.0 || b < min || b > max {
        return Err(Error::invalid(format!(
            "the bound {b} is not a {dtype} value (integers are clipped by integers in their range)"
        )));
    }
    Ok(b)
}

impl FeatureLayer for ClipSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        let lo = self.clip_value_min.unwrap_or(f64::NEG_INFINITY);
        let hi = self.clip_value_max.unwrap_or(f64::INFINITY);
        Ok(one_input(move |t: &Tensor| {
            macro_rules! ints {
                ($v:expr, $t:ty, $name:expr) => {{
                    let (min, max) = (<$t>::MIN as f64, <$t>::MAX as f64);
                    let l = integral(lo, min, max, $name)? as $t;
                    let h = integral(hi, min, max, $name)? as $t;
                    $v.iter().map(|&x| x.min(h).max(l)).collect::<Vec<$t>>()
                }};
            }
            let data = match t.data() {
                TensorData::F32(v) => {
                    TensorData::F32(clip_f32(v, lo as f32, hi as f32, F32_PACKET).into())
                }
                TensorData::F64(v) => TensorData::F64(clip_f64(v, lo, hi, F32_PACKET / 2).into()),
                TensorData::I64(v) => TensorData::I64(ints!(v, i64, "int64").into()),
                TensorData::I32(v) => TensorData::I32(ints!(v, i32, "int32").into()),
                TensorData::U8(v) => TensorData::U8(ints!(v, u8, "uint8").into()),
                TensorData::Bytes(_) => return Err(wrong_dtype(t, "numbers")),
            };
            Ok(Tensor::new(t.shape(), data)?)
        }))
    }
}

/// A bound as a number, or as the word `"inf"`, `"-inf"` or `"nan"` (JSON, which the Python
/// front end speaks, has no infinities): written back as a number when finite.
mod float_or_word {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Number(f64),
        Word(String),
    }

    pub(super) fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) if x.is_nan() => s.serialize_str("nan"),
            Some(x) if x.is_infinite() => s.serialize_str(if *x > 0.0 { "inf" } else { "-inf" }),
            Some(x) => s.serialize_f64(*x),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match Option::<Given>::deserialize(d)? {
            None => Ok(None),
            Some(Given::Number(x)) => Ok(Some(x)),
            Some(Given::Word(w)) => match w.to_ascii_lowercase().as_str() {
                "inf" | "+inf" | "infinity" | "+infinity" => Ok(Some(f64::INFINITY)),
                "-inf" | "-infinity" => Ok(Some(f64::NEG_INFINITY)),
                "nan" => Ok(Some(f64::NAN)),
                _ => Err(serde::de::Error::custom(format!(
                    "{w:?} is not a number (a bound is a number, \"inf\", \"-inf\" or \"nan\")"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod json_tests {
    use super::*;

    #[test]
    fn infinite_bounds_travel_through_json_as_words() {
        let spec: ClipSpec = serde_json::from_str(
            r#"{"input": "x", "clip_value_min": "-inf", "clip_value_max": 3.5}"#,
        )
        .unwrap();
        assert_eq!(spec.clip_value_min, Some(f64::NEG_INFINITY));
        assert_eq!(spec.clip_value_max, Some(3.5));
        let json = serde_json::to_string(&spec).unwrap();
        assert!(json.contains(r#""clip_value_min":"-inf""#), "{json}");
        assert_eq!(serde_json::from_str::<ClipSpec>(&json).unwrap(), spec);
        let err = serde_json::from_str::<ClipSpec>(r#"{"input": "x", "min": "big"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("did not match") || err.contains("not a number"),
            "{err}"
        );
    }
}
