//! `faulty`: a plugin for testing hosts. A batch plugin over the `value` feature (an `i64`
//! scalar) that passes elements through unchanged unless configured to act on one value:
//! `panic_on` panics, `error_on` returns an error status, `drop_on` drops that element;
//! `loop_on` loops forever and `grow_on` allocates until memory runs out (for the WASM
//! sandbox's time and memory limits: never configure them in a native build).
#![deny(unsafe_code)]

use sluice_sdk::{
    Config, DType, Data, Element, Error, Feature, Kind, Plugin, PluginInfo, Result, Rng,
};

/// The plugin.
#[derive(Debug, Clone, Default)]
pub struct Faulty {
    panic_on: Option<i64>,
    error_on: Option<i64>,
    drop_on: Option<i64>,
    loop_on: Option<i64>,
    grow_on: Option<i64>,
}

fn value(e: &Element) -> Result<i64> {
    match &e.get("value").map(|t| &t.data) {
        Some(Data::I64(v)) if v.len() == 1 => Ok(v[0]),
        _ => Err(Error::invalid_input("`value` must be one i64")),
    }
}

impl Plugin for Faulty {
    fn info() -> PluginInfo {
        PluginInfo::new("faulty", "0.0.1", Kind::Batch)
            .description("misbehaves on request, for tests")
            .input(Feature::new("value").dtype(DType::I64).rank(0))
    }

    fn new(config: &Config) -> Result<Self> {
        config.only(&["panic_on", "error_on", "drop_on", "loop_on", "grow_on"])?;
        Ok(Faulty {
            panic_on: config.get_or("panic_on", None)?,
            error_on: config.get_or("error_on", None)?,
            drop_on: config.get_or("drop_on", None)?,
            loop_on: config.get_or("loop_on", None)?,
            grow_on: config.get_or("grow_on", None)?,
        })
    }

    fn batch(&mut self, elements: Vec<Element>, _rngs: &mut [Rng]) -> Result<Vec<(u32, Element)>> {
        let mut out = Vec::with_capacity(elements.len());
        for (i, e) in elements.into_iter().enumerate() {
            let v = value(&e)?;
            if Some(v) == self.panic_on {
                panic!("faulty plugin panics on {v}");
            }
            if Some(v) == self.loop_on {
                loop {
                    std::hint::spin_loop();
                }
            }
            if Some(v) == self.grow_on {
                let mut held: Vec<Vec<u8>> = Vec::new();
                loop {
                    held.push(vec![1; 1 << 20]);
                    std::hint::black_box(&held);
                }
            }
            if Some(v) == self.error_on {
                return Err(Error::plugin(format!("faulty plugin refuses {v}")));
            }
            if Some(v) != self.drop_on {
                out.push((i as u32, e));
            }
        }
        Ok(out)
    }
}

#[cfg(feature = "core-abi")]
sluice_sdk::export_plugin!(Faulty);
