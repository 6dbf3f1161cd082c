//! `probe`: a map plugin for the hosts' tests that reports where its kernel read the values
//! of the `image` feature (`u8` or `f32`) and where it wrote the result, so a test can count
//! the copies a call makes on the way in and out. It adds 1 to every value (wrapping for
//! `u8`) and outputs the addresses as `i64` scalars `seen_in` and `wrote_out`.
//!
//! Configuration: `lent` (default true): `map_lent` reads the lent image and writes into the
//! host's buffer; with `false` it takes the SDK's default path through `map`
//! ([`sluice_sdk::map_lent_via_map`]), which works on an owned copy. `map` (the wire path)
//! works in place on the decoded image.
#![deny(unsafe_code)]

use sluice_sdk::{
    Config, Data, DataRef, Element, ElementRef, Error, Feature, Kind, Outputs, Plugin, PluginInfo,
    Result, Rng, Tensor,
};

/// The plugin.
#[derive(Debug, Clone)]
pub struct Probe {
    lent: bool,
}

fn address<T>(v: &[T]) -> i64 {
    v.as_ptr() as usize as i64
}

fn wrong(dtype: sluice_sdk::DType) -> Error {
    Error::invalid_input(format!("`image` must be u8 or f32, got {dtype}"))
}

impl Plugin for Probe {
    fn info() -> PluginInfo {
        PluginInfo::new("probe", "0.0.1", Kind::Map)
            .description("adds 1 to `image` and reports where it read and wrote, for tests")
            .input(Feature::new("image"))
            .output(Feature::new("image"))
    }

    fn new(config: &Config) -> Result<Self> {
        config.only(&["lent"])?;
        Ok(Probe {
            lent: config.get_or("lent", true)?,
        })
    }

    fn map(&mut self, mut element: Element, _rng: &mut Rng) -> Result<Element> {
        let image = element
            .get_mut("image")
            .ok_or_else(|| Error::invalid_input("no `image`"))?;
        let at = match &mut image.data {
            Data::U8(v) => {
                v.iter_mut().for_each(|x| *x = x.wrapping_add(1));
                address(v)
            }
            Data::F32(v) => {
                v.iter_mut().for_each(|x| *x += 1.0);
                address(v)
            }
            other => return Err(wrong(other.dtype())),
        };
        // In place: read and written at the same address.
        element.set(Tensor::new("seen_in", vec![], Data::I64(vec![at]))?);
        element.set(Tensor::new("wrote_out", vec![], Data::I64(vec![at]))?);
        Ok(element)
    }

    fn map_lent(
        &mut self,
        element: &ElementRef<'_>,
        out: &mut Outputs<'_>,
        rng: &mut Rng,
    ) -> Result<()> {
        if !self.lent {
            return sluice_sdk::map_lent_via_map(self, element, out, rng);
        }
        let image = element
            .get("image")
            .ok_or_else(|| Error::invalid_input("no `image`"))?;
        let (seen, wrote) = match image.data {
            DataRef::U8(src) => {
                let dst = out.u8("image", image.shape)?;
                dst.iter_mut()
                    .zip(src)
                    .for_each(|(d, s)| *d = s.wrapping_add(1));
                (address(src), address(dst))
            }
            DataRef::F32(src) => {
                let dst = out.f32("image", image.shape)?;
                dst.iter_mut().zip(src).for_each(|(d, s)| *d = s + 1.0);
                (address(src), address(dst))
            }
            other => return Err(wrong(other.dtype())),
        };
        out.i64("seen_in", &[])?[0] = seen;
        out.i64("wrote_out", &[])?[0] = wrote;
        Ok(())
    }
}

sluice_sdk::export_plugin!(Probe);
