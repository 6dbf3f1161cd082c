//! `broken`: a map plugin over the `u8` image feature `image` that breaks one property of
//! `sluice plugin check` on request (`{"break": MODE}`), for the checker's tests:
//!
//! | mode | breaks |
//! |---|---|
//! | `none` | nothing (it inverts the image) |
//! | `nondeterministic` | determinism: a process-wide call counter changes the output |
//! | `contract` | the output contract: `image` comes back as `f32` though declared `u8` |
//! | `slow` | the time limit: each element takes 30 ms |
//! | `refuse` | accepting its contract: images wider than 2 pixels are refused |
//! | `panic` | accepting its contract: it panics on images taller than 2 pixels |
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_sdk::{
    Config, DType, Data, Element, Error, Feature, Kind, Plugin, PluginInfo, Result, Rng,
};

static CALLS: AtomicU64 = AtomicU64::new(0);

/// The plugin.
#[derive(Debug, Clone)]
pub struct Broken {
    mode: String,
}

impl Plugin for Broken {
    fn info() -> PluginInfo {
        PluginInfo::new("broken", "0.0.1", Kind::Map)
            .input(Feature::new("image").dtype(DType::U8).rank(3))
            .output(Feature::new("image").dtype(DType::U8).rank(3))
    }

    fn new(config: &Config) -> Result<Self> {
        config.only(&["break"])?;
        let mode: String = config.get_or("break", "none".to_string())?;
        let known = [
            "none",
            "nondeterministic",
            "contract",
            "slow",
            "refuse",
            "panic",
        ];
        if !known.contains(&mode.as_str()) {
            return Err(Error::config(format!(
                "unknown mode {mode:?} (known: {known:?})"
            )));
        }
        Ok(Broken { mode })
    }

    fn map(&mut self, mut element: Element, _rng: &mut Rng) -> Result<Element> {
        let image = element
            .get_mut("image")
            .ok_or_else(|| Error::invalid_input("no image"))?;
        let (h, w) = (image.shape[0], image.shape[1]);
        match self.mode.as_str() {
            "refuse" if w > 2 => return Err(Error::plugin(format!("refusing an image {w} wide"))),
            "panic" if h > 2 => panic!("cannot handle an image {h} tall"),
            "slow" => {
                let until = Instant::now() + Duration::from_millis(30);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            _ => {}
        }
        let Data::U8(values) = &mut image.data else {
            return Err(Error::invalid_input("image must be u8"));
        };
        let bump = if self.mode == "nondeterministic" {
            CALLS.fetch_add(1, Ordering::Relaxed) as u8
        } else {
            0
        };
        values
            .iter_mut()
            .for_each(|x| *x = (255 - *x).wrapping_add(bump));
        if self.mode == "contract" {
            let floats = values.iter().map(|&x| f32::from(x)).collect();
            image.data = Data::F32(floats);
        }
        Ok(element)
    }
}

sluice_sdk::export_plugin!(Broken);
