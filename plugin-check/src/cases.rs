//! The generated cases: calls of 1 to 6 elements that fit a plugin's declared inputs, their
//! seeds, and a case as Rust code to paste into a test.

use proptest::prelude::*;
use sluice_core::rng::{ElementRng, StreamKey};
use sluice_core::{Element, ElementId, Tensor, TensorData};
use sluice_sdk::wire::DType;
use sluice_sdk::{Feature, PluginInfo};

/// One generated call: its elements.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) elements: Vec<Element>,
}

fn dims(rank: u8) -> BoxedStrategy<Vec<usize>> {
    match rank {
        3 => (
            1usize..6,
            1usize..6,
            prop_oneof![Just(1usize), Just(3usize)],
        )
            .prop_map(|(h, w, c)| vec![h, w, c])
            .boxed(),
        r => prop::collection::vec(1usize..5, usize::from(r)).boxed(),
    }
}

fn data(dtype: DType, n: usize) -> BoxedStrategy<TensorData> {
    match dtype {
        DType::U8 => prop::collection::vec(any::<u8>(), n)
            .prop_map(|v| TensorData::U8(v.into()))
            .boxed(),
        DType::I32 => prop::collection::vec(any::<i32>(), n)
            .prop_map(|v| TensorData::I32(v.into()))
            .boxed(),
        DType::I64 => prop::collection::vec(any::<i64>(), n)
            .prop_map(|v| TensorData::I64(v.into()))
            .boxed(),
        DType::F32 => prop::collection::vec(-2.0f32..2.0, n)
            .prop_map(|v| TensorData::F32(v.into()))
            .boxed(),
        DType::F64 => prop::collection::vec(-2.0f64..2.0, n)
            .prop_map(|v| TensorData::F64(v.into()))
            .boxed(),
        DType::Bytes => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..8), n)
            .prop_map(|v| {
                TensorData::Bytes(
                    v.into_iter()
                        .map(bytes::Bytes::from)
                        .collect::<Vec<_>>()
                        .into(),
                )
            })
            .boxed(),
    }
}

fn tensor(f: &Feature) -> BoxedStrategy<(String, Tensor)> {
    let dtype = f.dtype.unwrap_or(DType::U8);
    let name = f.name.clone();
    let rank = f.rank.unwrap_or(3);
    dims(rank)
        .prop_flat_map(move |shape| {
            let n = shape.iter().product();
            let name = name.clone();
            data(dtype, n).prop_map(move |d| {
                (
                    name.clone(),
                    Tensor::new(&shape, d).expect("the shape's number of values"),
                )
            })
        })
        .boxed()
}

fn element(inputs: &[Feature]) -> BoxedStrategy<Vec<(String, Tensor)>> {
    let parts: Vec<BoxedStrategy<(String, Tensor)>> = inputs.iter().map(tensor).collect();
    parts.boxed()
}

pub(crate) fn case(info: &PluginInfo) -> BoxedStrategy<Case> {
    let inputs = if info.inputs.is_empty() {
        vec![Feature::new("image").dtype(DType::U8).rank(3)]
    } else {
        info.inputs.clone()
    };
    prop::collection::vec(element(&inputs), 1..=6)
        .prop_map(|elements| Case {
            elements: elements
                .into_iter()
                .enumerate()
                .map(|(i, tensors)| {
                    let mut e = Element::new(ElementId::new(0, i as u64));
                    for (name, t) in tensors {
                        e.insert(&name, t);
                    }
                    e
                })
                .collect(),
        })
        .boxed()
}

pub(crate) fn rngs(elements: &[Element]) -> Vec<ElementRng> {
    let key = StreamKey {
        seed: 7,
        epoch: 0,
        stage: 0,
    };
    elements.iter().map(|e| key.element_rng(e.id())).collect()
}

/// The case as Rust code an author can paste into a test.
pub(crate) fn rust_code(case: &Case) -> String {
    let mut s = String::from("let elements = vec![\n");
    for e in &case.elements {
        s.push_str(&format!(
            "    Element::new(ElementId::new({}, {}))",
            e.id().source,
            e.id().index
        ));
        let mut names: Vec<&str> = e.iter().map(|(n, _)| n).collect();
        names.sort_unstable();
        for name in names {
            let t = e.tensor(name).expect("dense");
            let values = match t.data() {
                TensorData::U8(v) => format!("TensorData::U8(vec!{:?}.into())", v.as_ref()),
                TensorData::I32(v) => format!("TensorData::I32(vec!{:?}.into())", &v[..]),
                TensorData::I64(v) => format!("TensorData::I64(vec!{:?}.into())", &v[..]),
                TensorData::F32(v) => format!("TensorData::F32(vec!{:?}.into())", &v[..]),
                TensorData::F64(v) => format!("TensorData::F64(vec!{:?}.into())", &v[..]),
                TensorData::Bytes(v) => format!(
                    "TensorData::Bytes(vec![{}].into())",
                    v.iter()
                        .map(|b| format!("Bytes::from_static(&{:?})", b.as_ref()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            s.push_str(&format!(
                "\n        .with({name:?}, Tensor::new(&{:?}, {values})?)",
                t.shape()
            ));
        }
        s.push_str(",\n");
    }
    s.push_str("];\n// seeds: each element's RNG of StreamKey { seed: 7, epoch: 0, stage: 0 }\n");
    s
}
