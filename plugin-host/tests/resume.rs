//! Resuming a pipeline through a plugin stage at a position (a checkpoint without elastic
//! progress, here because of `repeat`): a `map` plugin (one output per input, of that input
//! alone: ABI §7) is not called for the elements before the position; other kinds are run
//! and their outputs dropped. Either way the resumed run gives exactly the elements an
//! uninterrupted run would have.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugin_host::{Backend, InProcess, PluginStage};
use sluice_sdk::{
    Config, DType, Data, Element as SdkElement, Error, Feature, Kind, Plugin, PluginInfo, Result,
    Rng, Tensor as SdkTensor,
};

static MAPPED: AtomicU64 = AtomicU64::new(0);
static FILTERED: AtomicU64 = AtomicU64::new(0);

fn value(e: &SdkElement) -> Result<i64> {
    match &e
        .get("value")
        .ok_or_else(|| Error::invalid_input("no value"))?
        .data
    {
        Data::I64(v) => Ok(v[0]),
        _ => Err(Error::invalid_input("not i64")),
    }
}

/// `value * 10` plus a draw of the element's RNG (so a skipped element would change the
/// outputs if seeds depended on the calls made).
struct Scale;

impl Plugin for Scale {
    fn info() -> PluginInfo {
        PluginInfo::new("scale", "1", Kind::Map).input(Feature::new("value").dtype(DType::I64))
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(Scale)
    }
    fn map(&mut self, e: SdkElement, rng: &mut Rng) -> Result<SdkElement> {
        MAPPED.fetch_add(1, Ordering::Relaxed);
        let v = value(&e)? * 10 + (rng.next_u64() % 7) as i64;
        let mut out = SdkElement::default();
        out.set(SdkTensor::new("value", vec![], Data::I64(vec![v]))?);
        Ok(out)
    }
}

/// Keeps values not divisible by 3.
struct NotThree;

impl Plugin for NotThree {
    fn info() -> PluginInfo {
        PluginInfo::new("not_three", "1", Kind::Filter)
            .input(Feature::new("value").dtype(DType::I64))
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(NotThree)
    }
    fn filter(&mut self, e: &SdkElement, _: &mut Rng) -> Result<bool> {
        FILTERED.fetch_add(1, Ordering::Relaxed);
        Ok(value(e)? % 3 != 0)
    }
}

fn values(it: impl Iterator<Item = sluice_core::Result<Element>>) -> Vec<Vec<i64>> {
    it.map(|b| {
        b.unwrap()
            .tensor("value")
            .unwrap()
            .as_i64()
            .unwrap()
            .to_vec()
    })
    .collect()
}

/// The pipeline `range(0, 500) → repeat 3 → plugin → batch 10`, the plugin `P` (a new
/// dataset for each run: a dataset's each `iter` is its next epoch).
fn pipeline<P: Plugin>() -> Dataset {
    let backend: Arc<dyn Backend> = InProcess::<P>::new();
    let stage = PluginStage::new(backend, &json!({})).unwrap();
    stage
        .apply(
            &Dataset::range(0, 500).repeat(Some(3)),
            MapChunksSpec::new(16).num_parallel(2),
        )
        .batch(10)
        .with_options(Options::default().with_seed(5))
}

#[test]
fn a_map_plugin_is_not_called_for_the_elements_before_a_resumed_position() {
    let whole = values(pipeline::<Scale>().iter().unwrap());
    assert_eq!(whole.len(), 150);

    let mut it = pipeline::<Scale>().iter().unwrap();
    let first: Vec<Vec<i64>> = values(it.by_ref().take(120));
    let checkpoint = it.checkpoint().unwrap();
    drop(it);
    MAPPED.store(0, Ordering::Relaxed);
    let rest = values(pipeline::<Scale>().resume(&checkpoint).unwrap());
    assert!([first, rest].concat() == whole, "the resumed run differs");
    // 300 elements were left; the 1200 before the position were skipped, not mapped (a
    // few chunks of read-ahead at most are mapped twice).
    let mapped = MAPPED.load(Ordering::Relaxed);
    assert!(
        mapped <= 300 + 4 * 16,
        "{mapped} calls for 300 elements left"
    );
    assert!(mapped >= 300);
}

#[test]
fn a_filter_plugin_resumes_by_running_and_dropping_the_elements_before_the_position() {
    let whole = values(pipeline::<NotThree>().iter().unwrap());
    assert_eq!(whole.iter().flatten().count(), 3 * (500 - 167));

    let mut it = pipeline::<NotThree>().iter().unwrap();
    let first: Vec<Vec<i64>> = values(it.by_ref().take(50));
    let checkpoint = it.checkpoint().unwrap();
    drop(it);
    FILTERED.store(0, Ordering::Relaxed);
    let rest = values(pipeline::<NotThree>().resume(&checkpoint).unwrap());
    assert!([first, rest].concat() == whole, "the resumed run differs");
    // A filter's count is not known without running it: every element is filtered again.
    assert!(FILTERED.load(Ordering::Relaxed) >= 1500);
}
