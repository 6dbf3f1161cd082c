//! Elements as `tf.train.Example`s: what `sluice run --output` writes.

use sluice_proto::Example;
use sluice_proto::example::Feature;

use crate::element::{Element, Value};
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorData};

/// The Examples of an element: one, or, when `batched`, one per row of the batch. Each
/// value becomes a feature of the same name, flattened in row-major order: byte strings a
/// `bytes_list`, integers (u8, i32, i64) an `int64_list`, floats (f32, f64) a `float_list`.
/// Shapes are not stored (parse them back with a `fixed_len` feature of the known shape).
/// A ragged value is split by row; unbatched, it cannot be a feature (an error).
///
/// ```
/// use sluice_core::{Element, ElementId, Tensor};
///
/// let e = Element::new(ElementId::new(0, 0)).with("label", Tensor::scalar_i64(3));
/// let examples = sluice_core::example::to_examples(&e, false).unwrap();
/// assert_eq!(examples.len(), 1);
/// ```
pub fn to_examples(element: &Element, batched: bool) -> Result<Vec<Example>> {
    if !batched {
        return Ok(vec![to_example(element.iter())?]);
    }
    (0..batch_rows(element)? as usize)
        .map(|i| {
            let row: Vec<(&str, Value)> = element
                .iter()
                .map(|(name, v)| {
                    let row = match v {
                        Value::Dense(t) => Value::Dense(t.row(i)?),
                        Value::Ragged(r) => Value::Dense(r.row(i)?),
                    };
                    Ok((name, row))
                })
                .collect::<Result<_>>()
                .map_err(|e| {
                    Error::data(format!(
                        "cannot split row {i} of element {}: {e}",
                        element.id()
                    ))
                })?;
            to_example(row.iter().map(|(n, v)| (*n, v)))
        })
        .collect()
}

/// The rows of a batched element: the leading dimension of its values.
pub fn batch_rows(element: &Element) -> Result<u64> {
    match element.iter().next() {
        None => Ok(0),
        Some((name, Value::Dense(t))) => match t.shape().first() {
            Some(&n) => Ok(n as u64),
            None => Err(Error::data(format!(
                "value `{name}` of a batch is a scalar (expected a batch dimension)"
            ))),
        },
        Some((_, Value::Ragged(r))) => Ok(r.rows() as u64),
    }
}

/// An Example with one feature per value, flattened.
fn to_example<'a>(values: impl Iterator<Item = (&'a str, &'a Value)>) -> Result<Example> {
    let mut features = Vec::new();
    for (name, value) in values {
        let Value::Dense(t) = value else {
            return Err(Error::data(format!(
                "value `{name}` is ragged: a row of it cannot be a feature"
            )));
        };
        features.push((name.to_string(), feature(t)));
    }
    Ok(Example::from_features(features))
}

fn feature(t: &Tensor) -> Feature {
    match t.data() {
        TensorData::Bytes(v) => Feature::bytes_list(v.iter().cloned()),
        TensorData::U8(v) => Feature::int64s(v.iter().map(|&x| i64::from(x))),
        TensorData::I32(v) => Feature::int64s(v.iter().map(|&x| i64::from(x))),
        TensorData::I64(v) => Feature::int64s(v.iter().copied()),
        TensorData::F32(v) => Feature::floats(v.iter().copied()),
        TensorData::F64(v) => Feature::floats(v.iter().map(|&x| x as f32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::example::{BytesList, FloatList, Int64List, feature::Kind};

    #[test]
    fn values_become_flattened_features_of_their_kind() {
        let values = [
            (
                "image",
                Value::Dense(
                    Tensor::new(&[1, 2, 1], TensorData::U8(vec![3u8, 250].into())).unwrap(),
                ),
            ),
            (
                "x",
                Value::Dense(Tensor::new(&[2], TensorData::F64(vec![0.5, 1.5].into())).unwrap()),
            ),
            (
                "name",
                Value::Dense(Tensor::scalar_bytes(b"cat".to_vec().into())),
            ),
        ];
        let ex = to_example(values.iter().map(|(n, v)| (*n, v))).unwrap();
        let f = &ex.features.unwrap().feature;
        assert_eq!(
            f["image"].kind,
            Some(Kind::Int64List(Int64List {
                value: vec![3, 250]
            }))
        );
        assert_eq!(
            f["x"].kind,
            Some(Kind::FloatList(FloatList {
                value: vec![0.5, 1.5]
            }))
        );
        assert_eq!(
            f["name"].kind,
            Some(Kind::BytesList(BytesList {
                value: vec![b"cat".to_vec().into()]
            }))
        );
    }
}
