//! Pipeline elements to and from the wire format of `sdk/ABI.md`: the batch buffer a call
//! takes ([`encode`]) and the tensors it gives back ([`to_core`]).

use sluice_core::{DType as CoreDType, Element, Tensor, TensorData, Value};
use sluice_sdk::PluginInfo;
use sluice_sdk::wire::{DType, Data, Encoder};

use crate::contract::check_feature;
use crate::error::{Error, Result};

/// The wire dtype of a pipeline dtype.
pub(crate) fn sdk_dtype(d: CoreDType) -> DType {
    match d {
        CoreDType::U8 => DType::U8,
        CoreDType::I32 => DType::I32,
        CoreDType::I64 => DType::I64,
        CoreDType::F32 => DType::F32,
        CoreDType::F64 => DType::F64,
        CoreDType::Bytes => DType::Bytes,
    }
}

/// The tensors of `e` a call sends (by the wire or lent): the declared input features after
/// checking the input contract, or every dense feature when none are declared
/// ([`Error::Contract`] for a missing, mistyped or ragged one).
pub fn inputs<'e>(info: &'e PluginInfo, e: &'e Element) -> Result<Vec<(&'e str, &'e Tensor)>> {
    let contract = |message: String| Error::Contract {
        plugin: info.name.clone(),
        element: e.id().to_string(),
        message,
    };
    if info.inputs.is_empty() {
        let mut all = Vec::new();
        for (name, value) in e.iter() {
            match value {
                Value::Dense(t) => all.push((name, t)),
                Value::Ragged(_) => {
                    return Err(contract(format!(
                        "feature {name:?} is ragged; plugins take dense tensors"
                    )));
                }
            }
        }
        return Ok(all);
    }
    for f in &info.inputs {
        check_feature(f, e).map_err(contract)?;
    }
    Ok(info
        .inputs
        .iter()
        .map(|f| (f.name.as_str(), e.tensor(&f.name).expect("checked above")))
        .collect())
}

/// Each element's features as a call sends them ([`inputs`] of every element), for the
/// lent path, hosts that take typed tensors ([`crate::Instance::call_features`]) and the
/// wire ([`encode_selected`]).
pub fn select<'a>(
    info: &'a PluginInfo,
    elements: &'a [Element],
) -> Result<Vec<Vec<(&'a str, &'a Tensor)>>> {
    elements.iter().map(|e| inputs(info, e)).collect()
}

/// The input batch buffer for `elements`: the declared input features (all dense features
/// when none are declared), after checking the input contract ([`Error::Contract`]);
/// `buf` is reused for its memory.
pub fn encode(info: &PluginInfo, elements: &[Element], buf: Vec<u8>) -> Result<Vec<u8>> {
    Ok(encode_selected(&select(info, elements)?, buf))
}

/// The input batch buffer for features [`select`] chose; `buf` is reused for its memory.
pub fn encode_selected(selected: &[Vec<(&str, &Tensor)>], buf: Vec<u8>) -> Vec<u8> {
    let size = selected
        .iter()
        .flatten()
        .map(|(name, t)| name.len() + t.nbytes() + 64)
        .sum();
    let parents: Vec<u32> = (0..selected.len() as u32).collect();
    let mut enc = Encoder::reusing(buf, &parents, size);
    for tensors in selected {
        enc.element(tensors.len() as u32);
        for &(name, t) in tensors {
            write_tensor(&mut enc, name, t);
        }
    }
    enc.finish()
}

fn write_tensor(enc: &mut Encoder, name: &str, t: &Tensor) {
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    match t.data() {
        TensorData::U8(v) => enc.numeric(name, DType::U8, &shape, v),
        TensorData::I32(v) => enc.numeric(name, DType::I32, &shape, &le_bytes(v, i32::to_le_bytes)),
        TensorData::I64(v) => enc.numeric(name, DType::I64, &shape, &le_bytes(v, i64::to_le_bytes)),
        TensorData::F32(v) => enc.numeric(name, DType::F32, &shape, &le_bytes(v, f32::to_le_bytes)),
        TensorData::F64(v) => enc.numeric(name, DType::F64, &shape, &le_bytes(v, f64::to_le_bytes)),
        TensorData::Bytes(v) => enc.bytes(name, &shape, v.iter().map(|b| b.as_ref())),
    }
}

/// The values' little-endian bytes: their own memory on little-endian machines.
fn le_bytes<T: bytemuck::Pod, const N: usize>(
    values: &[T],
    f: impl Fn(T) -> [u8; N],
) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        return std::borrow::Cow::Borrowed(bytemuck::cast_slice(values));
    }
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&f(v));
    }
    std::borrow::Cow::Owned(out)
}

/// A wire tensor as a pipeline tensor (the values move, no copy).
pub fn to_core(t: sluice_sdk::Tensor) -> sluice_core::Result<Tensor> {
    let shape: Vec<usize> = t
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| sluice_core::Error::invalid("a dimension does not fit in usize"))?;
    let data = match t.data {
        Data::U8(v) => TensorData::U8(v.into()),
        Data::I32(v) => TensorData::I32(v.into()),
        Data::I64(v) => TensorData::I64(v.into()),
        Data::F32(v) => TensorData::F32(v.into()),
        Data::F64(v) => TensorData::F64(v.into()),
        Data::Bytes(v) => TensorData::Bytes(
            v.into_iter()
                .map(bytes::Bytes::from)
                .collect::<Vec<_>>()
                .into(),
        ),
    };
    Ok(Tensor::new(&shape, data)?)
}
