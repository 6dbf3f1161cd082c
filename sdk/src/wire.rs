//! The element wire format: how a batch of elements crosses the ABI, in both directions.
//!
//! All integers are little-endian. A buffer is:
//!
//! ```text
//! batch   := "SLB1" | u32 n | u32 parent[n] | element[n]
//! element := u32 n_tensors | tensor[n_tensors]
//!          | u32 0xFFFF_FFFF                      (output only: the parent input, unchanged)
//! tensor  := u32 name_len | name (UTF-8) | u8 dtype | u8 rank | u16 0 | u64 dim[rank] | payload
//! payload := u64 n_values | zero padding to an 8-byte offset | n_values LE values  (numbers)
//!          | u64 n_values | (u64 len | len bytes)[n_values]                         (bytes)
//! ```
//!
//! `n_values` must equal the product of the dims (1 for rank 0). In an input batch,
//! `parent[i] = i`. In an output batch, `parent[i]` is the index of the input element that
//! output `i` comes from; parents never decrease (outputs stay in input order). dtype codes:
//! 1 `u8`, 2 `i32`, 3 `i64`, 4 `f32`, 5 `f64`, 6 byte strings. `sdk/ABI.md` has the whole
//! contract.

use serde::{Deserialize, Serialize};

use crate::abi::{BATCH_MAGIC, PASS_THROUGH};
use crate::error::Error;

/// A tensor's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// Unsigned bytes (pixels). Code 1.
    U8,
    /// 32-bit signed integers. Code 2.
    I32,
    /// 64-bit signed integers. Code 3.
    I64,
    /// 32-bit floats. Code 4.
    F32,
    /// 64-bit floats. Code 5.
    F64,
    /// Byte strings. Code 6.
    Bytes,
}

impl DType {
    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            DType::U8 => 1,
            DType::I32 => 2,
            DType::I64 => 3,
            DType::F32 => 4,
            DType::F64 => 5,
            DType::Bytes => 6,
        }
    }

    /// The dtype of a wire code.
    pub fn from_code(code: u8) -> Option<DType> {
        Some(match code {
            1 => DType::U8,
            2 => DType::I32,
            3 => DType::I64,
            4 => DType::F32,
            5 => DType::F64,
            6 => DType::Bytes,
            _ => return None,
        })
    }

    /// Bytes per value (`None` for byte strings).
    pub fn size(self) -> Option<usize> {
        match self {
            DType::U8 => Some(1),
            DType::I32 | DType::F32 => Some(4),
            DType::I64 | DType::F64 => Some(8),
            DType::Bytes => None,
        }
    }

    /// The lower-case name (`"f32"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bytes => "bytes",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor's values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// `u8` values.
    U8(Vec<u8>),
    /// `i32` values.
    I32(Vec<i32>),
    /// `i64` values.
    I64(Vec<i64>),
    /// `f32` values.
    F32(Vec<f32>),
    /// `f64` values.
    F64(Vec<f64>),
    /// Byte strings.
    Bytes(Vec<Vec<u8>>),
}

impl Data {
    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Data::U8(_) => DType::U8,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::Bytes(_) => DType::Bytes,
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            Data::U8(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::Bytes(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A named dense tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// The feature name, e.g. `"image"`.
    pub name: String,
    /// The dimensions (empty for a scalar).
    pub shape: Vec<u64>,
    /// The values; as many as the product of `shape`.
    pub data: Data,
}

impl Tensor {
    /// A tensor, checking that `data` has as many values as `shape` says.
    pub fn new(name: impl Into<String>, shape: Vec<u64>, data: Data) -> Result<Tensor, Error> {
        let name = name.into();
        let want = values_in(&shape).ok_or_else(|| Error::wire(0, "shape overflows"))?;
        if want != data.len() as u64 {
            return Err(Error::wire(
                0,
                format!(
                    "tensor {name:?}: shape {shape:?} holds {want} values, data has {}",
                    data.len()
                ),
            ));
        }
        Ok(Tensor { name, shape, data })
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }
}

/// One element: named tensors, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Element {
    /// The tensors.
    pub tensors: Vec<Tensor>,
}

impl Element {
    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The tensor named `name`, mutably.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Tensor> {
        self.tensors.iter_mut().find(|t| t.name == name)
    }

    /// Sets (replaces or appends) a tensor.
    pub fn set(&mut self, tensor: Tensor) {
        match self.tensors.iter_mut().find(|t| t.name == tensor.name) {
            Some(slot) => *slot = tensor,
            None => self.tensors.push(tensor),
        }
    }
}

/// One element of a decoded batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The input element this one comes from (its own index in an input batch).
    pub parent: u32,
    /// The element; `None` means the parent input element, unchanged.
    pub element: Option<Element>,
}

fn values_in(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Writes a batch buffer. For an input batch, pass parents `0..n`.
///
/// ```
/// use sluice_sdk::wire::{decode_batch, DType, Encoder};
///
/// let mut enc = Encoder::new(&[0]);
/// enc.element(2);
/// enc.numeric("image", DType::U8, &[2, 2, 1], &[1, 2, 3, 4]);
/// enc.bytes("label", &[], [b"cat".as_slice()]);
/// let batch = decode_batch(&enc.finish()).unwrap();
/// assert_eq!(batch[0].element.as_ref().unwrap().tensors.len(), 2);
/// ```
#[derive(Debug, Default)]
pub struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    /// Starts a batch of `parents.len()` elements.
    pub fn new(parents: &[u32]) -> Encoder {
        Encoder::with_capacity(parents, 0)
    }

    /// [`Encoder::new`] with room for `bytes` more bytes.
    pub fn with_capacity(parents: &[u32], bytes: usize) -> Encoder {
        Encoder::reusing(Vec::new(), parents, bytes)
    }

    /// [`Encoder::with_capacity`] writing into `buf` (cleared first): a caller that keeps its
    /// buffer from call to call allocates (and faults in) its memory once.
    pub fn reusing(mut buf: Vec<u8>, parents: &[u32], bytes: usize) -> Encoder {
        buf.clear();
        buf.reserve(8 + 4 * parents.len() + bytes);
        buf.extend_from_slice(&BATCH_MAGIC);
        buf.extend_from_slice(&(parents.len() as u32).to_le_bytes());
        for p in parents {
            buf.extend_from_slice(&p.to_le_bytes());
        }
        Encoder { buf }
    }

    /// Starts an element of `n_tensors` tensors (write them next).
    pub fn element(&mut self, n_tensors: u32) {
        self.buf.extend_from_slice(&n_tensors.to_le_bytes());
    }

    /// An output element that is its parent input, unchanged.
    pub fn pass_through(&mut self) {
        self.buf.extend_from_slice(&PASS_THROUGH.to_le_bytes());
    }

    fn header(&mut self, name: &str, dtype: DType, shape: &[u64]) {
        self.buf
            .extend_from_slice(&(name.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(dtype.code());
        self.buf.push(shape.len() as u8);
        self.buf.extend_from_slice(&[0, 0]);
        for d in shape {
            self.buf.extend_from_slice(&d.to_le_bytes());
        }
    }

    /// A numeric tensor whose values are given as little-endian bytes (`le_bytes.len()` =
    /// values × the dtype's size).
    pub fn numeric(&mut self, name: &str, dtype: DType, shape: &[u64], le_bytes: &[u8]) {
        self.header(name, dtype, shape);
        let n = le_bytes.len() / dtype.size().unwrap_or(1);
        self.buf.extend_from_slice(&(n as u64).to_le_bytes());
        let pad = self.buf.len().next_multiple_of(8) - self.buf.len();
        self.buf.extend(std::iter::repeat_n(0u8, pad));
        self.buf.extend_from_slice(le_bytes);
    }

    /// A byte-string tensor.
    pub fn bytes<'a>(
        &mut self,
        name: &str,
        shape: &[u64],
        values: impl IntoIterator<Item = &'a [u8]>,
    ) {
        self.header(name, DType::Bytes, shape);
        let count_at = self.buf.len();
        self.buf.extend_from_slice(&0u64.to_le_bytes());
        let mut n = 0u64;
        for v in values {
            self.buf.extend_from_slice(&(v.len() as u64).to_le_bytes());
            self.buf.extend_from_slice(v);
            n += 1;
        }
        self.buf[count_at..count_at + 8].copy_from_slice(&n.to_le_bytes());
    }

    /// Any [`Tensor`].
    pub fn tensor(&mut self, t: &Tensor) {
        match &t.data {
            Data::U8(v) => self.numeric(&t.name, DType::U8, &t.shape, v),
            Data::I32(v) => {
                self.numeric_values(&t.name, DType::I32, &t.shape, v, |x| x.to_le_bytes())
            }
            Data::I64(v) => {
                self.numeric_values(&t.name, DType::I64, &t.shape, v, |x| x.to_le_bytes())
            }
            Data::F32(v) => {
                self.numeric_values(&t.name, DType::F32, &t.shape, v, |x| x.to_le_bytes())
            }
            Data::F64(v) => {
                self.numeric_values(&t.name, DType::F64, &t.shape, v, |x| x.to_le_bytes())
            }
            Data::Bytes(v) => self.bytes(&t.name, &t.shape, v.iter().map(Vec::as_slice)),
        }
    }

    fn numeric_values<T: bytemuck::Pod, const N: usize>(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[u64],
        values: &[T],
        le: impl Fn(T) -> [u8; N],
    ) {
        if cfg!(target_endian = "little") {
            // The values' memory is their little-endian bytes: one copy.
            self.numeric(name, dtype, shape, bytemuck::cast_slice(values));
            return;
        }
        self.header(name, dtype, shape);
        self.buf
            .extend_from_slice(&(values.len() as u64).to_le_bytes());
        let pad = self.buf.len().next_multiple_of(8) - self.buf.len();
        self.buf.extend(std::iter::repeat_n(0u8, pad));
        self.buf.reserve(values.len() * N);
        for &v in values {
            self.buf.extend_from_slice(&le(v));
        }
    }

    /// A whole element.
    pub fn whole(&mut self, e: &Element) {
        self.element(e.tensors.len() as u32);
        for t in &e.tensors {
            self.tensor(t);
        }
    }

    /// The finished buffer.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Encodes elements as an input batch (parents `0..n`).
pub fn encode_batch(elements: &[Element]) -> Vec<u8> {
    let parents: Vec<u32> = (0..elements.len() as u32).collect();
    let mut enc = Encoder::new(&parents);
    for e in elements {
        enc.whole(e);
    }
    enc.finish()
}

/// Reads a batch buffer, checking every length, count and code against the buffer's size
/// (a malformed buffer is a [`Error`] naming the byte offset, never a panic).
pub fn decode_batch(buf: &[u8]) -> Result<Vec<Entry>, Error> {
    let mut r = Reader { buf, pos: 0 };
    let magic = r.take(4, "batch magic")?;
    if magic != BATCH_MAGIC {
        return Err(Error::wire(
            0,
            format!("not a batch buffer: magic {magic:?}, expected \"SLB1\""),
        ));
    }
    let n = r.u32("element count")?;
    // Each element takes at least 4 bytes: a forged count cannot allocate much.
    if u64::from(n) * 8 > buf.len() as u64 {
        return Err(Error::wire(
            4,
            format!("{n} elements cannot fit in {} bytes", buf.len()),
        ));
    }
    let mut parents = Vec::with_capacity(n as usize);
    for _ in 0..n {
        parents.push(r.u32("parent index")?);
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut last = 0u32;
    for (i, parent) in parents.into_iter().enumerate() {
        if parent < last {
            return Err(Error::wire(
                r.pos,
                format!("element {i}: parent {parent} comes after parent {last} (out of order)"),
            ));
        }
        last = parent;
        let n_tensors = r.u32("tensor count")?;
        let element = if n_tensors == PASS_THROUGH {
            None
        } else {
            let mut tensors = Vec::new();
            for _ in 0..n_tensors {
                tensors.push(r.tensor(i)?);
            }
            Some(Element { tensors })
        };
        out.push(Entry { parent, element });
    }
    if r.pos != buf.len() {
        return Err(Error::wire(
            r.pos,
            format!("{} bytes after the last element", buf.len() - r.pos),
        ));
    }
    Ok(out)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(Error::wire(
                self.pos,
                format!(
                    "truncated: {what} needs {n} bytes, {} left",
                    self.buf.len() - self.pos
                ),
            )),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn tensor(&mut self, element: usize) -> Result<Tensor, Error> {
        let at = self.pos;
        let name_len = self.u32("tensor name length")? as usize;
        let name = std::str::from_utf8(self.take(name_len, "tensor name")?)
            .map_err(|_| Error::wire(at + 4, format!("element {element}: name is not UTF-8")))?
            .to_string();
        let ctx = |msg: String| format!("element {element}, tensor {name:?}: {msg}");
        let head = self.take(4, "dtype and rank")?;
        let dtype = DType::from_code(head[0]).ok_or_else(|| {
            Error::wire(self.pos - 4, ctx(format!("unknown dtype code {}", head[0])))
        })?;
        let rank = usize::from(head[1]);
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(self.u64("dimension")?);
        }
        let want = values_in(&shape)
            .ok_or_else(|| Error::wire(at, ctx(format!("shape {shape:?} overflows"))))?;
        let n_at = self.pos;
        let n = self.u64("value count")?;
        if n != want {
            return Err(Error::wire(
                n_at,
                ctx(format!(
                    "shape {shape:?} holds {want} values, the payload says {n}"
                )),
            ));
        }
        let data = match dtype.size() {
            Some(size) => {
                let pad = self.pos.next_multiple_of(8) - self.pos;
                self.take(pad, "alignment padding")?;
                let bytes = n
                    .checked_mul(size as u64)
                    .and_then(|b| usize::try_from(b).ok())
                    .ok_or_else(|| Error::wire(n_at, ctx(format!("{n} values overflow"))))?;
                let raw = self.take(bytes, "tensor values")?;
                numeric(dtype, raw)
            }
            None => {
                // Each value takes at least 8 bytes.
                if n.saturating_mul(8) > (self.buf.len() - self.pos) as u64 {
                    return Err(Error::wire(
                        n_at,
                        ctx(format!(
                            "{n} byte strings cannot fit in the rest of the buffer"
                        )),
                    ));
                }
                let mut values = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let len = usize::try_from(self.u64("byte string length")?)
                        .map_err(|_| Error::wire(self.pos - 8, ctx("length overflows".into())))?;
                    values.push(self.take(len, "byte string")?.to_vec());
                }
                Data::Bytes(values)
            }
        };
        Ok(Tensor { name, shape, data })
    }
}

fn numeric(dtype: DType, raw: &[u8]) -> Data {
    fn le<T, const N: usize>(raw: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
        // On little-endian machines this compiles to plain (vectorized) loads.
        raw.chunks_exact(N)
            .map(|c| f(c.try_into().expect("N bytes")))
            .collect()
    }
    match dtype {
        DType::U8 => Data::U8(raw.to_vec()),
        DType::I32 => Data::I32(le(raw, i32::from_le_bytes)),
        DType::I64 => Data::I64(le(raw, i64::from_le_bytes)),
        DType::F32 => Data::F32(le(raw, f32::from_le_bytes)),
        DType::F64 => Data::F64(le(raw, f64::from_le_bytes)),
        DType::Bytes => unreachable!("numeric dtypes only"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tensor() -> impl Strategy<Value = Tensor> {
        let shape = prop::collection::vec(0u64..4, 0..4);
        (shape, 0u8..6, "[a-z/]{0,8}").prop_flat_map(|(shape, code, name)| {
            let n = values_in(&shape).unwrap() as usize;
            let data = match code {
                0 => prop::collection::vec(any::<u8>(), n)
                    .prop_map(Data::U8)
                    .boxed(),
                1 => prop::collection::vec(any::<i32>(), n)
                    .prop_map(Data::I32)
                    .boxed(),
                2 => prop::collection::vec(any::<i64>(), n)
                    .prop_map(Data::I64)
                    .boxed(),
                3 => prop::collection::vec(any::<f32>(), n)
                    .prop_map(Data::F32)
                    .boxed(),
                4 => prop::collection::vec(any::<f64>(), n)
                    .prop_map(Data::F64)
                    .boxed(),
                _ => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..5), n)
                    .prop_map(Data::Bytes)
                    .boxed(),
            };
            data.prop_map(move |data| Tensor {
                name: name.clone(),
                shape: shape.clone(),
                data,
            })
        })
    }

    fn bits(e: &[Entry]) -> String {
        // NaN != NaN: compare the debug form of the bit patterns instead.
        format!(
            "{:?}",
            e.iter()
                .map(|x| x.element.as_ref().map(|e| e
                    .tensors
                    .iter()
                    .map(|t| (
                        t.name.clone(),
                        t.shape.clone(),
                        match &t.data {
                            Data::F32(v) =>
                                format!("{:?}", v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()),
                            Data::F64(v) =>
                                format!("{:?}", v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()),
                            other => format!("{other:?}"),
                        }
                    ))
                    .collect::<Vec<_>>()))
                .collect::<Vec<_>>()
        )
    }

    proptest! {
        #[test]
        fn round_trips(elements in prop::collection::vec(prop::collection::vec(tensor(), 0..4).prop_map(|tensors| Element { tensors }), 0..5)) {
            let buf = encode_batch(&elements);
            let back = decode_batch(&buf).unwrap();
            prop_assert_eq!(back.len(), elements.len());
            let want: Vec<Entry> = elements.iter().enumerate().map(|(i, e)| Entry { parent: i as u32, element: Some(e.clone()) }).collect();
            prop_assert_eq!(bits(&back), bits(&want));
        }

        #[test]
        fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_batch(&buf);
        }

        #[test]
        fn damaged_buffers_are_errors_not_panics(
            elements in prop::collection::vec(prop::collection::vec(tensor(), 1..3).prop_map(|tensors| Element { tensors }), 1..3),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let buf = encode_batch(&elements);
            let cut = cut.index(buf.len());
            prop_assert!(decode_batch(&buf[..cut]).is_err(), "a truncated buffer is an error");
            let mut damaged = buf.clone();
            let i = flip.index(damaged.len());
            damaged[i] ^= byte | 1;
            let _ = decode_batch(&damaged);
        }
    }

    /// The example of `sdk/ABI.md` §5, byte for byte.
    #[test]
    fn the_abi_documents_example_bytes() {
        let mut enc = Encoder::new(&[0]);
        enc.element(1);
        enc.numeric("x", DType::I64, &[], &7i64.to_le_bytes());
        let want: Vec<u8> = [
            &b"SLB1"[..],
            &[1, 0, 0, 0, 0, 0, 0, 0],
            &[1, 0, 0, 0],
            &[1, 0, 0, 0, b'x'],
            &[3, 0, 0, 0],
            &[1, 0, 0, 0, 0, 0, 0, 0],
            &[0; 7],
            &[7, 0, 0, 0, 0, 0, 0, 0],
        ]
        .concat();
        assert_eq!(enc.finish(), want);
    }

    #[test]
    fn numeric_payloads_are_8_byte_aligned() {
        let mut enc = Encoder::new(&[0]);
        enc.element(2);
        enc.numeric("a", DType::U8, &[3], &[1, 2, 3]);
        enc.numeric("bb", DType::F32, &[1], &1.5f32.to_le_bytes());
        let buf = enc.finish();
        let at = buf.len() - 4;
        assert_eq!(at % 8, 0);
        assert_eq!(&buf[at..], &1.5f32.to_le_bytes());
    }

    #[test]
    fn pass_through_and_parents() {
        let mut enc = Encoder::new(&[0, 2, 2]);
        enc.pass_through();
        enc.element(0);
        enc.pass_through();
        let back = decode_batch(&enc.finish()).unwrap();
        assert_eq!(
            back[0],
            Entry {
                parent: 0,
                element: None
            }
        );
        assert_eq!(back[1].parent, 2);
        assert_eq!(back[1].element, Some(Element::default()));
        let mut enc = Encoder::new(&[1, 0]);
        enc.element(0);
        enc.element(0);
        let err = decode_batch(&enc.finish()).unwrap_err();
        assert!(err.to_string().contains("out of order"), "{err}");
    }

    #[test]
    fn a_count_that_disagrees_with_the_shape_is_an_error() {
        let mut enc = Encoder::new(&[0]);
        enc.element(1);
        enc.numeric("x", DType::I32, &[2], &7i32.to_le_bytes());
        let err = decode_batch(&enc.finish()).unwrap_err();
        assert!(
            err.to_string()
                .contains("holds 2 values, the payload says 1"),
            "{err}"
        );
        assert!(err.to_string().contains("\"x\""), "{err}");
    }
}
