//! A compact binary encoding of elements (used by the disk cache).
//!
//! Little-endian throughout:
//!
//! ```text
//! element := u64 source, u64 index, u8 has_provenance,
//!            [u32 file_len, file bytes, u64 offset]   (if has_provenance)
//!            u32 n_values, value * n_values
//! value   := u32 name_len, name (UTF-8), u8 kind (0 dense, 1 ragged),
//!            tensor, [u64 n_splits, i64 * n_splits]   (if ragged)
//! tensor  := u8 dtype (0 u8, 1 i32, 2 i64, 3 f32, 4 f64, 5 bytes), u32 rank, u64 * rank,
//!            data: numeric values packed; byte strings as (u64 len, bytes) each
//! ```

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::element::{Element, ElementId, Provenance, Ragged, Value};
use crate::error::{Error, Result};
use crate::tensor::{DType, Shape, Tensor, TensorData};

/// Encodes an element.
pub(crate) fn encode(element: &Element, out: &mut BytesMut) {
    out.put_u64_le(element.id().source);
    out.put_u64_le(element.id().index);
    match element.provenance() {
        Some(p) => {
            out.put_u8(1);
            out.put_u32_le(p.file.len() as u32);
            out.put_slice(p.file.as_bytes());
            out.put_u64_le(p.offset);
        }
        None => out.put_u8(0),
    }
    out.put_u32_le(element.len() as u32);
    for (name, value) in element.iter() {
        out.put_u32_le(name.len() as u32);
        out.put_slice(name.as_bytes());
        match value {
            Value::Dense(t) => {
                out.put_u8(0);
                encode_tensor(t, out);
            }
            Value::Ragged(r) => {
                out.put_u8(1);
                encode_tensor(&r.values, out);
                out.put_u64_le(r.row_splits.len() as u64);
                for s in r.row_splits.iter() {
                    out.put_i64_le(*s);
                }
            }
        }
    }
}

fn encode_tensor(t: &Tensor, out: &mut BytesMut) {
    out.put_u8(match t.dtype() {
        DType::U8 => 0,
        DType::I32 => 1,
        DType::I64 => 2,
        DType::F32 => 3,
        DType::F64 => 4,
        DType::Bytes => 5,
    });
    out.put_u32_le(t.rank() as u32);
    for d in t.shape() {
        out.put_u64_le(*d as u64);
    }
    match t.data() {
        TensorData::U8(v) => out.put_slice(v),
        TensorData::I32(v) => v.iter().for_each(|x| out.put_i32_le(*x)),
        TensorData::I64(v) => v.iter().for_each(|x| out.put_i64_le(*x)),
        TensorData::F32(v) => v.iter().for_each(|x| out.put_f32_le(*x)),
        TensorData::F64(v) => v.iter().for_each(|x| out.put_f64_le(*x)),
        TensorData::Bytes(v) => {
            for b in v.iter() {
                out.put_u64_le(b.len() as u64);
                out.put_slice(b);
            }
        }
    }
}

struct Reader {
    buf: Bytes,
}

impl Reader {
    fn need(&self, n: usize) -> Result<()> {
        if self.buf.remaining() < n {
            Err(Error::data("encoded element is truncated"))
        } else {
            Ok(())
        }
    }
    fn u8(&mut self) -> Result<u8> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }
    fn u32(&mut self) -> Result<u32> {
        self.need(4)?;
        Ok(self.buf.get_u32_le())
    }
    fn u64(&mut self) -> Result<u64> {
        self.need(8)?;
        Ok(self.buf.get_u64_le())
    }
    fn len(&mut self, per: usize) -> Result<usize> {
        let n = self.u64()? as usize;
        self.need(n.saturating_mul(per))?;
        Ok(n)
    }
    fn bytes(&mut self, n: usize) -> Result<Bytes> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }
    fn string(&mut self) -> Result<String> {
        let n = self.u32()? as usize;
        let b = self.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::data("encoded name is not UTF-8"))
    }
}

/// Decodes an element encoded by [`encode`]. Byte values are slices of `buf`.
pub(crate) fn decode(buf: Bytes) -> Result<Element> {
    let mut r = Reader { buf };
    let id = ElementId::new(r.u64()?, r.u64()?);
    let mut e = Element::new(id);
    if r.u8()? == 1 {
        let file = r.string()?;
        let offset = r.u64()?;
        e.set_provenance(Some(Provenance {
            file: Arc::from(file),
            offset,
        }));
    }
    let n = r.u32()?;
    for _ in 0..n {
        let name = r.string()?;
        let kind = r.u8()?;
        let t = decode_tensor(&mut r)?;
        let v = match kind {
            0 => Value::Dense(t),
            1 => {
                let n = r.len(8)?;
                let splits: Vec<i64> = (0..n).map(|_| r.buf.get_i64_le()).collect();
                Value::Ragged(Ragged::new(t, splits.into())?)
            }
            k => {
                return Err(Error::data(format!(
                    "unknown value kind {k} in encoded element"
                )));
            }
        };
        e.insert(&name, v);
    }
    if r.buf.has_remaining() {
        return Err(Error::data("trailing bytes after encoded element"));
    }
    Ok(e)
}

fn decode_tensor(r: &mut Reader) -> Result<Tensor> {
    let dtype = r.u8()?;
    let rank = r.u32()? as usize;
    if rank > 64 {
        return Err(Error::data("encoded tensor rank is absurd"));
    }
    let mut shape = Shape::new();
    for _ in 0..rank {
        shape.push(r.u64()? as usize);
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or_else(|| Error::data("encoded tensor shape overflows"))?;
    macro_rules! nums {
        ($size:expr, $get:ident) => {{
            r.need(n.saturating_mul($size))?;
            (0..n).map(|_| r.buf.$get()).collect::<Vec<_>>().into()
        }};
    }
    let data = match dtype {
        0 => TensorData::U8(r.bytes(n)?),
        1 => TensorData::I32(nums!(4, get_i32_le)),
        2 => TensorData::I64(nums!(8, get_i64_le)),
        3 => TensorData::F32(nums!(4, get_f32_le)),
        4 => TensorData::F64(nums!(8, get_f64_le)),
        5 => {
            let mut v = Vec::with_capacity(n.min(1 << 20));
            for _ in 0..n {
                let len = r.u64()? as usize;
                v.push(r.bytes(len)?);
            }
            TensorData::Bytes(v.into())
        }
        d => return Err(Error::data(format!("unknown dtype {d} in encoded element"))),
    };
    Ok(Tensor::new(&shape, data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_dense_ragged_and_provenance() {
        let mut e = Element::new(ElementId::new(3, 9))
            .with(
                "img",
                Tensor::new(&[2, 2], TensorData::U8(Bytes::from_static(&[1, 2, 3, 4]))).unwrap(),
            )
            .with(
                "f",
                Tensor::vector(TensorData::F32(vec![1.5, f32::NAN].into())),
            )
            .with(
                "s",
                Tensor::vector(TensorData::Bytes(
                    vec![Bytes::from_static(b"ab"), Bytes::new()].into(),
                )),
            );
        e.insert(
            "r",
            Value::Ragged(
                Ragged::new(
                    Tensor::vector(TensorData::I64(vec![1, 2, 3].into())),
                    vec![0, 1, 3].into(),
                )
                .unwrap(),
            ),
        );
        e.set_provenance(Some(Provenance {
            file: Arc::from("a.tfrecord"),
            offset: 77,
        }));
        let mut buf = BytesMut::new();
        encode(&e, &mut buf);
        let back = decode(buf.freeze()).unwrap();
        assert_eq!(back.id(), e.id());
        assert_eq!(back.provenance(), e.provenance());
        assert_eq!(back.tensor("img"), e.tensor("img"));
        assert_eq!(back.get("r"), e.get("r"));
        assert_eq!(back.tensor("f").unwrap().as_f32().unwrap()[0], 1.5);
        assert!(back.tensor("f").unwrap().as_f32().unwrap()[1].is_nan());
        assert_eq!(back.tensor("s"), e.tensor("s"));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for n in 0..40 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
            let _ = decode(Bytes::from(junk));
        }
        assert!(decode(Bytes::from_static(&[0xff; 8])).is_err());
    }
}
