//! `hashing`: Keras's `Hashing` layer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeatureLayer, LayerFn, check_input};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Tensor, TensorData};

/// TensorFlow's `Fingerprint64` of `bytes` (FarmHash's `Fingerprint64`, stable across
/// platforms and versions): what `tf.strings.to_hash_bucket_fast` hashes with.
pub fn fingerprint64(bytes: &[u8]) -> u64 {
    farmhash::fingerprint64(bytes)
}

/// `tf.strings.to_hash_bucket_fast`: `Fingerprint64(bytes) mod num_buckets`.
pub fn to_hash_bucket_fast(bytes: &[u8], num_buckets: u64) -> u64 {
    fingerprint64(bytes) % num_buckets.max(1)
}

/// `tf.strings.to_hash_bucket_strong` with `key = [k0, k1]`: SipHash-2-4 keyed by the two
/// halves, `mod num_buckets`.
pub fn to_hash_bucket_strong(bytes: &[u8], key: [u64; 2], num_buckets: u64) -> u64 {
    siphasher::sip::SipHasher24::new_with_keys(key[0], key[1]).hash(bytes) % num_buckets.max(1)
}

/// A salt: one integer (used for both halves of the key) or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Salt {
    /// `salt = 133`: the key `[133, 133]`.
    One(u64),
    /// `salt = [133, 137]`.
    Two([u64; 2]),
}

impl Salt {
    /// The SipHash key.
    pub fn key(self) -> [u64; 2] {
        match self {
            Salt::One(k) => [k, k],
            Salt::Two(k) => k,
        }
    }
}

/// A token of a string or integer feature (a mask value, a vocabulary entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Token {
    /// An integer.
    Int(i64),
    /// A string.
    Text(String),
}

/// Hashes a feature's values into `num_bins` bins, as `keras.layers.Hashing`: strings by
/// TensorFlow's `Fingerprint64` (FarmHash), or by SipHash keyed by `salt`; integers hashed
/// as their decimal strings; floats cast to `int64` first. With `mask_value`, bin 0 holds
/// that value and the others hash into bins `1..num_bins`. Output: `int64`, the input's
/// shape.
///
/// ```toml
/// [[stage]]
/// kind = "hashing"
/// input = "city"
/// num_bins = 1024
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HashingSpec {
    /// The feature read.
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Bins (≥ 1), the mask's bin included.
    pub num_bins: u64,
    /// A value that goes to bin 0 (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_value: Option<Token>,
    /// SipHash's key (one integer or two) instead of FarmHash (default: FarmHash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salt: Option<Salt>,
}

impl HashingSpec {
    /// `num_bins` bins of `input`, replaced.
    pub fn new(input: impl Into<String>, num_bins: u64) -> Self {
        HashingSpec {
            input: input.into(),
            output: None,
            num_bins,
            mask_value: None,
            salt: None,
        }
    }

    fn bin(&self, bytes: &[u8], bins: u64) -> i64 {
        (match self.salt {
            Some(salt) => to_hash_bucket_strong(bytes, salt.key(), bins),
            None => to_hash_bucket_fast(bytes, bins),
        }) as i64
    }
}

impl Spec for HashingSpec {
    const KIND: &'static str = "hashing";
    const SUMMARY: &'static str =
        "hash a feature into `num_bins` bins (Keras `Hashing`, TensorFlow's FarmHash or SipHash)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        if self.num_bins == 0 {
            return Err(Invalid::at(
                "num_bins",
                "hashing: `num_bins` must be at least 1",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

impl FeatureLayer for HashingSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        let spec = self.clone();
        Ok(super::one_input(move |t| spec.call(t)))
    }
}

impl HashingSpec {
    /// The layer on `t`.
    pub fn call(&self, t: &Tensor) -> Result<Tensor> {
        let masked = self.mask_value.is_some() && self.num_bins > 1;
        let bins = if masked {
            self.num_bins - 1
        } else {
            self.num_bins
        };
        let hashed = |bytes: &[u8], is_mask: bool| -> i64 {
            if masked {
                if is_mask {
                    0
                } else {
                    self.bin(bytes, bins) + 1
                }
            } else {
                self.bin(bytes, bins)
            }
        };
        let mask_int = |what: &str| -> Result<Option<i64>> {
            match &self.mask_value {
                None => Ok(None),
                Some(Token::Int(m)) => Ok(Some(*m)),
                Some(Token::Text(_)) => Err(Error::invalid(format!(
                    "`mask_value` is a string and the feature holds {what}"
                ))),
            }
        };
        let ints = |values: &mut dyn Iterator<Item = i64>, what: &str| -> Result<Vec<i64>> {
            let mask = mask_int(what)?;
            Ok(values
                .map(|x| hashed(x.to_string().as_bytes(), mask == Some(x)))
                .collect())
        };
        let out: Vec<i64> = match t.data() {
            TensorData::Bytes(v) => {
                let mask = match &self.mask_value {
                    None => None,
                    Some(Token::Text(m)) => Some(m.as_bytes()),
                    Some(Token::Int(_)) => {
                        return Err(Error::invalid(
                            "`mask_value` is an integer and the feature holds strings",
                        ));
                    }
                };
                v.iter()
                    .map(|b| hashed(b, mask == Some(b.as_ref())))
                    .collect()
            }
            TensorData::I64(v) => ints(&mut v.iter().copied(), "integers")?,
            TensorData::I32(v) => ints(&mut v.iter().map(|&x| i64::from(x)), "integers")?,
            TensorData::U8(v) => ints(&mut v.iter().map(|&x| i64::from(x)), "integers")?,
            // Floats are cast to int64 first (toward zero), as Keras does.
            TensorData::F32(v) => ints(&mut v.iter().map(|&x| x as i64), "numbers")?,
            TensorData::F64(v) => ints(&mut v.iter().map(|&x| x as i64), "numbers")?,
        };
        Ok(Tensor::new(t.shape(), TensorData::I64(out.into()))?)
    }
}
