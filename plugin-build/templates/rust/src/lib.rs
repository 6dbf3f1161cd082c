//! `{{name}}`: a Sluice plugin in Rust (the `map-transform` world of wit/sluice.wit).
//!
//! With probability `p` (default 1), every value of the u8 `image` at or above `threshold`
//! (default 128) becomes `255 - x`. Randomness comes only from the seed the host gives for
//! each element, so runs are reproducible.
//!
//! `sluice plugin build .` builds it; `cargo test` tests it natively.

wit_bindgen::generate!({ path: "wit", world: "map-transform" });

use exports::sluice::plugin::map_element::{Guest as MapGuest, GuestInstance, Instance};
use sluice::plugin::types::{Element, Error, Feature, Kind, Tensor, TensorData};

/// SplitMix64, the generator of Sluice's SDKs: uniform in [0, 1) from 24 random bits.
pub fn uniform(seed: u64) -> f32 {
    let state = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
}

/// The transform: values at or above `threshold` inverted.
pub fn solarize(values: &mut [u8], threshold: u8) {
    for v in values {
        if *v >= threshold {
            *v = 255 - *v;
        }
    }
}

/// One instance, made from the JSON configuration.
pub struct Solarize {
    threshold: u8,
    p: f32,
}

impl Solarize {
    /// Parses the configuration: `threshold` (0 to 255), `p` (0 to 1).
    pub fn from_config(config: &str) -> Result<Solarize, String> {
        let value: serde_json::Value = if config.trim().is_empty() {
            serde_json::json!({})
        } else {
            serde_json::from_str(config).map_err(|e| format!("not JSON: {e}"))?
        };
        let object = value.as_object().ok_or("the configuration must be a JSON object")?;
        let mut me = Solarize { threshold: 128, p: 1.0 };
        for (key, v) in object {
            match key.as_str() {
                "threshold" => {
                    me.threshold = v
                        .as_u64()
                        .and_then(|t| u8::try_from(t).ok())
                        .ok_or("threshold must be an integer from 0 to 255")?;
                }
                "p" => {
                    me.p = v.as_f64().filter(|p| (0.0..=1.0).contains(p)).ok_or("p must be in [0, 1]")?
                        as f32;
                }
                other => return Err(format!("unknown key \"{other}\" (known: threshold, p)")),
            }
        }
        Ok(me)
    }
}

struct Plugin;

impl Guest for Plugin {
    fn info() -> PluginInfo {
        let image = Feature { name: "image".into(), dtype: None, rank: Some(3) };
        PluginInfo {
            name: "{{name}}".into(),
            version: "0.1.0".into(),
            kind: Kind::Map,
            description: "solarizes `image` (u8) with probability p".into(),
            inputs: vec![image.clone()],
            outputs: vec![image],
        }
    }
}

impl MapGuest for Plugin {
    type Instance = Solarize;
}

impl GuestInstance for Solarize {
    fn create(config: String) -> Result<Instance, Error> {
        Solarize::from_config(&config).map(Instance::new).map_err(Error::InvalidConfig)
    }

    fn map(&self, element: Element, seed: u64) -> Result<Element, Error> {
        if uniform(seed) >= self.p {
            return Ok(Vec::new()); // the element unchanged
        }
        let Some(Tensor { name, shape, data }) = element.into_iter().find(|t| t.name == "image")
        else {
            return Err(Error::InvalidInput("no `image` feature".into()));
        };
        let TensorData::U8(mut values) = data else {
            return Err(Error::InvalidInput("`image` must be u8".into()));
        };
        solarize(&mut values, self.threshold);
        Ok(vec![Tensor { name, shape, data: TensorData::U8(values) }])
    }
}

// The exports only in the wasm32 build: their names (`sluice:plugin/...`) are not symbols a
// native linker takes, and `cargo test` builds the crate natively.
#[cfg(target_arch = "wasm32")]
export!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solarizes_at_and_above_the_threshold() {
        let mut v = [0, 127, 128, 255];
        solarize(&mut v, 128);
        assert_eq!(v, [0, 127, 127, 0]);
    }

    #[test]
    fn the_generator_is_the_sdks_splitmix64() {
        // SplitMix64's first output for seed 0 is 0xe220a8397b1dcdaf.
        assert_eq!(uniform(0), (0xe220a8397b1dcdaf_u64 >> 40) as f32 / (1u64 << 24) as f32);
    }

    #[test]
    fn configurations() {
        assert_eq!(Solarize::from_config("{}").unwrap().threshold, 128);
        assert_eq!(Solarize::from_config(r#"{"threshold": 10}"#).unwrap().threshold, 10);
        assert!(Solarize::from_config(r#"{"threshold": 300}"#).is_err());
        assert!(Solarize::from_config(r#"{"q": 1}"#).is_err());
    }
}
