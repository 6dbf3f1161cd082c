//! The lent path end to end in one process: plugin crates run by [`InProcess`], whose lent
//! calls go through the same C structures and SDK entry point as a loaded library's. Every
//! case is also run through the wire path: both give the same elements.

use std::sync::Arc;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugin_host::testing::{digest, run_stage};
use sluice_plugin_host::{Backend, CallCounts, CallPath, InProcess, PluginStage};
use sluice_sdk::{
    Config, DType, Data, DataRef, Element as SdkElement, ElementRef, Error, Feature, Kind, Outputs,
    Plugin, PluginInfo, Result, Rng, Tensor as SdkTensor,
};

/// Runs `elements` through `P` on both paths (chunks of `chunk`), checks they agree, and
/// returns the lent path's output and call counts.
fn both_paths<P: Plugin>(
    elements: &[Element],
    chunk: usize,
) -> (sluice_core::Result<Vec<Element>>, CallCounts) {
    let backend: Arc<dyn Backend> = InProcess::<P>::new();
    let lent = PluginStage::with_path(backend.clone(), &json!({}), CallPath::Lent).unwrap();
    let wire = PluginStage::with_path(backend, &json!({}), CallPath::Wire).unwrap();
    let a = run_stage(&lent, elements, 0, chunk, 9);
    let b = run_stage(&wire, elements, 0, chunk, 9);
    match (&a, &b) {
        (Ok(a), Ok(b)) => assert_eq!(digest(a), digest(b), "the paths agree"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "the same error"),
        (a, b) => panic!("the paths disagree: {a:?} against {b:?}"),
    }
    assert_eq!(wire.calls().lent, 0);
    (a, lent.calls())
}

fn values(n: i64) -> Vec<Element> {
    (0..n)
        .map(|i| Element::new(ElementId::new(0, i as u64)).with("value", Tensor::scalar_i64(i)))
        .collect()
}

fn images(n: usize) -> Vec<Element> {
    (0..n)
        .map(|i| {
            let px: Vec<u8> = (0..2 * 3 * 3).map(|j| (i * 7 + j * 13) as u8).collect();
            Element::new(ElementId::new(0, i as u64))
                .with(
                    "image",
                    Tensor::new(&[2, 3, 3], TensorData::U8(px.into())).unwrap(),
                )
                .with("name", Tensor::scalar_bytes(format!("img{i}").into()))
        })
        .collect()
}

/// A filter written for the wire only (`filter`): the lent path's default copies.
struct KeepEven;

impl Plugin for KeepEven {
    fn info() -> PluginInfo {
        PluginInfo::new("keep_even", "1", Kind::Filter)
            .input(Feature::new("value").dtype(DType::I64).rank(0))
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(KeepEven)
    }
    fn filter(&mut self, e: &SdkElement, _: &mut Rng) -> Result<bool> {
        match &e.get("value").unwrap().data {
            Data::I64(v) => Ok(v[0] % 2 == 0),
            _ => Err(Error::invalid_input("not i64")),
        }
    }
}

/// The same filter written for the lent path only (`filter_lent`).
struct KeepEvenLent;

impl Plugin for KeepEvenLent {
    fn info() -> PluginInfo {
        KeepEven::info()
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(KeepEvenLent)
    }
    fn filter_lent(&mut self, e: &ElementRef<'_>, _: &mut Rng) -> Result<bool> {
        match e.get("value").unwrap().data {
            DataRef::I64(v) => Ok(v[0] % 2 == 0),
            _ => Err(Error::invalid_input("not i64")),
        }
    }
}

#[test]
fn filters_take_the_lent_path_either_way_they_are_written() {
    for (out, calls) in [
        both_paths::<KeepEven>(&values(10), 4),
        both_paths::<KeepEvenLent>(&values(10), 4),
    ] {
        let kept: Vec<i64> = out
            .unwrap()
            .iter()
            .map(|e| e.tensor("value").unwrap().as_i64().unwrap()[0])
            .collect();
        assert_eq!(kept, vec![0, 2, 4, 6, 8]);
        assert_eq!(
            calls,
            CallCounts {
                lent: 3,
                wire: 0,
                declined: 0
            }
        );
    }
}

/// A map whose outputs have other shapes and dtypes than its input: the mean of `image`
/// (an `f64` scalar) and a grey `f32` image of shape [H, W].
struct Stats;

impl Plugin for Stats {
    fn info() -> PluginInfo {
        PluginInfo::new("stats", "1", Kind::Map)
            .input(Feature::new("image").dtype(DType::U8).rank(3))
            .output(Feature::new("mean").dtype(DType::F64).rank(0))
            .output(Feature::new("gray").dtype(DType::F32).rank(2))
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(Stats)
    }
    fn map_lent(&mut self, e: &ElementRef<'_>, out: &mut Outputs<'_>, _: &mut Rng) -> Result<()> {
        let image = e.get("image").unwrap();
        let DataRef::U8(px) = image.data else {
            return Err(Error::invalid_input("u8 only"));
        };
        let (h, w, c) = (image.shape[0], image.shape[1], image.shape[2] as usize);
        // Two outputs held at once.
        let mean = out.f64("mean", &[])?;
        let gray = out.f32("gray", &[h, w])?;
        mean[0] = px.iter().map(|&x| f64::from(x)).sum::<f64>() / px.len() as f64;
        for (g, p) in gray.iter_mut().zip(px.chunks_exact(c)) {
            *g = p.iter().map(|&x| f32::from(x)).sum::<f32>() / c as f32;
        }
        Ok(())
    }
}

#[test]
fn outputs_of_other_shapes_and_dtypes_are_allocated_as_asked() {
    let input = images(5);
    let (out, calls) = both_paths::<Stats>(&input, 2);
    let out = out.unwrap();
    assert_eq!(calls.lent, 3);
    for (o, i) in out.iter().zip(&input) {
        assert_eq!(o.tensor("gray").unwrap().shape(), &[2, 3]);
        let px = i.tensor("image").unwrap().as_u8().unwrap();
        let mean = px.iter().map(|&x| f64::from(x)).sum::<f64>() / 18.0;
        match o.tensor("mean").unwrap().data() {
            TensorData::F64(m) => assert_eq!(m[0], mean),
            other => panic!("{other:?}"),
        }
        // The input features are kept as they are (the same buffers).
        assert_eq!(
            o.tensor("image").unwrap().as_u8().unwrap().as_ptr(),
            px.as_ptr()
        );
        assert_eq!(o.tensor("name"), i.tensor("name"));
    }
}

/// A map that adds a byte-string feature: byte strings cannot be lent, so its lent calls
/// decline and take the wire path (where `map` runs `map_lent` on owned buffers).
struct Tag;

impl Plugin for Tag {
    fn info() -> PluginInfo {
        PluginInfo::new("tag", "1", Kind::Map).input(Feature::new("value"))
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(Tag)
    }
    fn map_lent(&mut self, e: &ElementRef<'_>, out: &mut Outputs<'_>, _: &mut Rng) -> Result<()> {
        let DataRef::I64(v) = e.get("value").unwrap().data else {
            return Err(Error::invalid_input("i64 only"));
        };
        out.set(SdkTensor::new(
            "tag",
            vec![],
            Data::Bytes(vec![format!("v{}", v[0]).into_bytes()]),
        )?)
    }
}

#[test]
fn byte_string_outputs_decline_and_take_the_wire() {
    let (out, calls) = both_paths::<Tag>(&values(5), 2);
    let tags: Vec<String> = out
        .unwrap()
        .iter()
        .map(|e| {
            String::from_utf8(e.tensor("tag").unwrap().as_bytes_list().unwrap()[0].to_vec())
                .unwrap()
        })
        .collect();
    assert_eq!(tags, ["v0", "v1", "v2", "v3", "v4"]);
    assert_eq!(
        calls,
        CallCounts {
            lent: 0,
            wire: 3,
            declined: 3
        }
    );
}

/// A map over every feature (none declared): an element with a byte string is not lent.
struct Identity;

impl Plugin for Identity {
    fn info() -> PluginInfo {
        PluginInfo::new("identity", "1", Kind::Map)
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(Identity)
    }
    fn map_lent(&mut self, _: &ElementRef<'_>, _: &mut Outputs<'_>, _: &mut Rng) -> Result<()> {
        Ok(())
    }
}

#[test]
fn byte_string_inputs_take_the_wire_and_unchanged_elements_keep_their_buffers() {
    let (out, calls) = both_paths::<Identity>(&images(4), 4);
    assert_eq!(out.unwrap().len(), 4);
    assert_eq!(
        calls,
        CallCounts {
            lent: 0,
            wire: 1,
            declined: 0
        }
    );
    // Without the byte strings: lent, and nothing is written or copied.
    let plain: Vec<Element> = values(4);
    let (out, calls) = both_paths::<Identity>(&plain, 4);
    assert_eq!(calls.lent, 1);
    for (o, i) in out.unwrap().iter().zip(&plain) {
        assert_eq!(
            o.tensor("value").unwrap().as_i64().unwrap().as_ptr(),
            i.tensor("value").unwrap().as_i64().unwrap().as_ptr()
        );
    }
}

/// Implements neither `map` nor `map_lent`.
struct Neither;

impl Plugin for Neither {
    fn info() -> PluginInfo {
        PluginInfo::new("neither", "1", Kind::Map)
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(Neither)
    }
}

#[test]
fn a_plugin_implementing_neither_method_fails_with_a_message_not_a_stack_overflow() {
    let backend: Arc<dyn Backend> = InProcess::<Neither>::new();
    for path in [CallPath::Lent, CallPath::Wire] {
        let stage = PluginStage::with_path(backend.clone(), &json!({}), path).unwrap();
        let err = run_stage(&stage, &values(2), 0, 2, 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("plugin neither: plugin error on elements [0:0, 0:1]"),
            "{err}"
        );
        assert!(err.contains("implements neither"), "{path:?}: {err}");
    }
}

/// Breaks its declared output (`image` u8) by writing `f32`, panics on value 3, writes a
/// feature twice on value 4.
struct Wrong;

impl Plugin for Wrong {
    fn info() -> PluginInfo {
        PluginInfo::new("wrong", "1", Kind::Map)
            .input(Feature::new("value").dtype(DType::I64))
            .output(Feature::new("image").dtype(DType::U8))
    }
    fn new(_: &Config) -> Result<Self> {
        Ok(Wrong)
    }
    fn map_lent(&mut self, e: &ElementRef<'_>, out: &mut Outputs<'_>, _: &mut Rng) -> Result<()> {
        let DataRef::I64(v) = e.get("value").unwrap().data else {
            return Err(Error::invalid_input("i64 only"));
        };
        match v[0] {
            3 => panic!("three"),
            4 => {
                out.u8("image", &[1])?[0] = 1;
                out.u8("image", &[1])?[0] = 2;
            }
            _ => out.f32("image", &[1])?[0] = 0.5,
        }
        Ok(())
    }
}

#[test]
fn broken_contracts_panics_and_double_writes_are_errors_naming_the_plugin() {
    let backend: Arc<dyn Backend> = InProcess::<Wrong>::new();
    let stage = PluginStage::new(backend, &json!({})).unwrap();
    let all = values(6);
    let err = |range: std::ops::Range<usize>| {
        run_stage(&stage, &all[range], 0, 1, 1)
            .unwrap_err()
            .to_string()
    };
    let e = err(0..1);
    assert!(
        e.contains("plugin wrong: plugin error on elements [0:0]"),
        "{e}"
    );
    assert!(e.contains("the plugin broke its output contract"), "{e}");
    assert!(
        e.contains("element 0: feature \"image\" is f32, expected u8"),
        "{e}"
    );
    let e = err(3..4);
    assert!(
        e.contains("plugin wrong: panic on elements [0:0]: panicked: three"),
        "{e}"
    );
    let e = err(4..5);
    assert!(
        e.contains("output \"image\" (u8 [1]) written twice for element 0"),
        "{e}"
    );
    // The stage goes on after the panic (a fresh instance).
    assert!(err(5..6).contains("broke its output contract"));
}
