//! The author's side of the lent path (ABI version 2, `sdk/ABI.md` §11): the tensors a
//! native host lends in place, read-only, for one call ([`ElementRef`], [`TensorRef`],
//! [`DataRef`]), and the buffers a plugin writes its outputs into ([`Outputs`], [`DataMut`]):
//! memory the host allocated and keeps as the output tensors' storage, so a call copies no
//! values across the boundary.
//!
//! ```
//! use sluice_sdk::{Config, DataMut, DataRef, Element, ElementRef, Kind, Outputs, Plugin};
//! use sluice_sdk::{PluginInfo, Result, Rng};
//!
//! /// Adds 1 to every value of the `f32` feature `x`.
//! struct AddOne;
//!
//! impl Plugin for AddOne {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("add_one", "0.1.0", Kind::Map)
//!     }
//!     fn new(_: &Config) -> Result<Self> {
//!         Ok(AddOne)
//!     }
//!     // Read `x` where the host keeps it; write the result straight into a host buffer.
//!     fn map_lent(&mut self, e: &ElementRef<'_>, out: &mut Outputs<'_>, _: &mut Rng) -> Result<()> {
//!         if let Some(x) = e.get("x") {
//!             if let (DataRef::F32(src), DataMut::F32(dst)) = (x.data, out.like(x)?) {
//!                 dst.iter_mut().zip(src).for_each(|(d, s)| *d = s + 1.0);
//!             }
//!         }
//!         Ok(())
//!     }
//!     // `map` (the wire path: WASM hosts, version-1 hosts) runs `map_lent` by default.
//! }
//!
//! let x = sluice_sdk::Tensor::new("x", vec![2], sluice_sdk::Data::F32(vec![1.0, 2.0]))?;
//! let out = AddOne.map(Element { tensors: vec![x] }, &mut Rng::new(1))?;
//! assert_eq!(out.get("x").unwrap().data, sluice_sdk::Data::F32(vec![2.0, 3.0]));
//! # Ok::<(), sluice_sdk::Error>(())
//! ```
//!
//! The module's `unsafe` code turns the host's pointers into slices and hands out the
//! buffers of its allocator; each block says why it is sound.

use std::cell::RefCell;

use crate::abi::lent as c;
use crate::error::{Error, Result};
use crate::wire::{DType, Data, Element, Tensor};

/// Values of a lent tensor, read-only, row-major.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DataRef<'a> {
    /// `u8` values.
    U8(&'a [u8]),
    /// `i32` values.
    I32(&'a [i32]),
    /// `i64` values.
    I64(&'a [i64]),
    /// `f32` values.
    F32(&'a [f32]),
    /// `f64` values.
    F64(&'a [f64]),
    /// Byte strings: only in views of owned elements ([`Element::view`]); hosts never lend
    /// byte strings (such calls take the wire path).
    Bytes(&'a [Vec<u8>]),
}

impl<'a> DataRef<'a> {
    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            DataRef::U8(_) => DType::U8,
            DataRef::I32(_) => DType::I32,
            DataRef::I64(_) => DType::I64,
            DataRef::F32(_) => DType::F32,
            DataRef::F64(_) => DType::F64,
            DataRef::Bytes(_) => DType::Bytes,
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            DataRef::U8(v) => v.len(),
            DataRef::I32(v) => v.len(),
            DataRef::I64(v) => v.len(),
            DataRef::F32(v) => v.len(),
            DataRef::F64(v) => v.len(),
            DataRef::Bytes(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values, copied into owned [`Data`].
    pub fn to_data(&self) -> Data {
        match *self {
            DataRef::U8(v) => Data::U8(v.to_vec()),
            DataRef::I32(v) => Data::I32(v.to_vec()),
            DataRef::I64(v) => Data::I64(v.to_vec()),
            DataRef::F32(v) => Data::F32(v.to_vec()),
            DataRef::F64(v) => Data::F64(v.to_vec()),
            DataRef::Bytes(v) => Data::Bytes(v.to_vec()),
        }
    }

    /// Whether `data` holds the same dtype and the same bits (so `NaN`s with equal bits are
    /// equal, and `0.0` differs from `-0.0`).
    pub fn same_bits(&self, data: &Data) -> bool {
        match (*self, data) {
            (DataRef::U8(a), Data::U8(b)) => a == b.as_slice(),
            (DataRef::I32(a), Data::I32(b)) => a == b.as_slice(),
            (DataRef::I64(a), Data::I64(b)) => a == b.as_slice(),
            (DataRef::F32(a), Data::F32(b)) => {
                bytemuck::cast_slice::<f32, u8>(a) == bytemuck::cast_slice::<f32, u8>(b)
            }
            (DataRef::F64(a), Data::F64(b)) => {
                bytemuck::cast_slice::<f64, u8>(a) == bytemuck::cast_slice::<f64, u8>(b)
            }
            (DataRef::Bytes(a), Data::Bytes(b)) => a == b.as_slice(),
            _ => false,
        }
    }
}

/// A tensor lent read-only for the duration of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorRef<'a> {
    /// The feature name.
    pub name: &'a str,
    /// The dimensions (empty for a scalar).
    pub shape: &'a [u64],
    /// The values; as many as the product of `shape`.
    pub data: DataRef<'a>,
}

impl TensorRef<'_> {
    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The tensor, copied into an owned [`Tensor`].
    pub fn to_tensor(&self) -> Tensor {
        Tensor {
            name: self.name.to_string(),
            shape: self.shape.to_vec(),
            data: self.data.to_data(),
        }
    }

    /// Whether `t` has this name, shape, dtype and the same value bits.
    pub fn same_as(&self, t: &Tensor) -> bool {
        self.name == t.name && self.shape == t.shape.as_slice() && self.data.same_bits(&t.data)
    }
}

/// One element's tensors, lent for the duration of one call: the features the plugin
/// declares as inputs (every dense feature when it declares none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ElementRef<'a> {
    /// The tensors, in the order the host lent them.
    pub tensors: Vec<TensorRef<'a>>,
}

impl<'a> ElementRef<'a> {
    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&TensorRef<'a>> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The element, copied into an owned [`Element`].
    pub fn to_element(&self) -> Element {
        Element {
            tensors: self.tensors.iter().map(TensorRef::to_tensor).collect(),
        }
    }
}

impl Tensor {
    /// This tensor as a [`TensorRef`] (borrowed, no copy).
    pub fn view(&self) -> TensorRef<'_> {
        let data = match &self.data {
            Data::U8(v) => DataRef::U8(v),
            Data::I32(v) => DataRef::I32(v),
            Data::I64(v) => DataRef::I64(v),
            Data::F32(v) => DataRef::F32(v),
            Data::F64(v) => DataRef::F64(v),
            Data::Bytes(v) => DataRef::Bytes(v),
        };
        TensorRef {
            name: &self.name,
            shape: &self.shape,
            data,
        }
    }
}

impl Element {
    /// This element as an [`ElementRef`] (borrowed, no copy).
    pub fn view(&self) -> ElementRef<'_> {
        ElementRef {
            tensors: self.tensors.iter().map(Tensor::view).collect(),
        }
    }
}

/// An output buffer to fill: every value must be written (its initial contents are
/// unspecified: stale values of a recycled buffer, or zeros).
#[derive(Debug)]
pub enum DataMut<'a> {
    /// `u8` values.
    U8(&'a mut [u8]),
    /// `i32` values.
    I32(&'a mut [i32]),
    /// `i64` values.
    I64(&'a mut [i64]),
    /// `f32` values.
    F32(&'a mut [f32]),
    /// `f64` values.
    F64(&'a mut [f64]),
}

impl DataMut<'_> {
    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            DataMut::U8(_) => DType::U8,
            DataMut::I32(_) => DType::I32,
            DataMut::I64(_) => DType::I64,
            DataMut::F32(_) => DType::F32,
            DataMut::F64(_) => DType::F64,
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            DataMut::U8(v) => v.len(),
            DataMut::I32(v) => v.len(),
            DataMut::I64(v) => v.len(),
            DataMut::F32(v) => v.len(),
            DataMut::F64(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `data` in (same dtype and length, else an error).
    pub fn copy_from(&mut self, data: &Data) -> Result<()> {
        fn put<T: Copy>(dst: &mut [T], src: &[T]) -> Result<()> {
            if dst.len() != src.len() {
                return Err(Error::plugin(format!(
                    "an output buffer of {} values cannot take {}",
                    dst.len(),
                    src.len()
                )));
            }
            dst.copy_from_slice(src);
            Ok(())
        }
        match (self, data) {
            (DataMut::U8(d), Data::U8(s)) => put(d, s),
            (DataMut::I32(d), Data::I32(s)) => put(d, s),
            (DataMut::I64(d), Data::I64(s)) => put(d, s),
            (DataMut::F32(d), Data::F32(s)) => put(d, s),
            (DataMut::F64(d), Data::F64(s)) => put(d, s),
            (d, s) => Err(Error::plugin(format!(
                "an output buffer of {} cannot take {} values",
                d.dtype(),
                s.dtype()
            ))),
        }
    }
}

/// Where a lent call's outputs are allocated.
#[derive(Clone, Copy)]
pub(crate) enum Sink<'a> {
    /// The host's allocator (`sluice_process_lent`).
    Host(&'a c::Outputs),
    /// Owned buffers in this process ([`crate::run_map_lent`], the default `map`).
    Arena(&'a Arena),
}

/// An output tensor written for an element (kept for the contract check).
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub(crate) name: String,
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<u64>,
}

/// The outputs of one element in a lent call: each [`Outputs::alloc`] gives a buffer for one
/// output tensor, which replaces (or adds) that feature of the element. Features not written
/// are kept as they are; an element with nothing written is passed on unchanged, without
/// any copy. The buffers stay writable until the plugin's method returns, and are the host's
/// afterwards.
pub struct Outputs<'a> {
    sink: Sink<'a>,
    element: u32,
    written: Vec<Written>,
}

impl std::fmt::Debug for Outputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outputs")
            .field("element", &self.element)
            .field(
                "written",
                &self.written.iter().map(|w| &w.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn values_in(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

impl<'a> Outputs<'a> {
    pub(crate) fn new(sink: Sink<'a>, element: u32) -> Outputs<'a> {
        Outputs {
            sink,
            element,
            written: Vec::new(),
        }
    }

    pub(crate) fn written(&self) -> &[Written] {
        &self.written
    }

    /// A buffer for output tensor `name` of `dtype` and `shape`, to fill with its values.
    /// Errors: a byte-string dtype ([`Error::Declined`]: the call then takes the wire path,
    /// where [`crate::Plugin::map`] runs), a name already written for this element, a shape
    /// too large, or the host refusing the buffer.
    pub fn alloc(&mut self, name: &str, dtype: DType, shape: &[u64]) -> Result<DataMut<'a>> {
        let what = || format!("output {name:?} ({dtype} {shape:?})");
        let Some(size) = dtype.size() else {
            return Err(Error::declined(format!(
                "{}: byte strings cannot be lent",
                what()
            )));
        };
        if self.written.iter().any(|w| w.name == name) {
            return Err(Error::plugin(format!(
                "{} written twice for element {}",
                what(),
                self.element
            )));
        }
        let count = values_in(shape)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| {
                n.checked_mul(size)
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
            .ok_or_else(|| Error::plugin(format!("{}: too large", what())))?;
        let rank = u8::try_from(shape.len())
            .map_err(|_| Error::plugin(format!("{}: more than 255 dimensions", what())))?;
        let data = match self.sink {
            Sink::Host(outputs) => {
                // SAFETY: `outputs` is the host's `sluice_outputs` for this call (ABI.md
                // §11): `alloc` is the host's function, called with its own `ctx`, a name
                // of `name.len()` UTF-8 bytes and `rank` dims, all valid during the call.
                let ptr = unsafe {
                    (outputs.alloc)(
                        outputs.ctx,
                        self.element,
                        name.as_ptr(),
                        name.len(),
                        dtype.code(),
                        rank,
                        shape.as_ptr(),
                    )
                };
                if ptr.is_null() {
                    return Err(Error::plugin(format!(
                        "the host refused a buffer for {} of element {}",
                        what(),
                        self.element
                    )));
                }
                if !(ptr as usize).is_multiple_of(size) {
                    return Err(Error::plugin(format!(
                        "the host's buffer for {} is not aligned to {size} bytes",
                        what()
                    )));
                }
                // SAFETY: by ABI.md §11.4 a non-null buffer from the host's allocator holds
                // `count` values of `dtype` (`count * size` bytes, checked above to fit),
                // is writable, overlaps no input and no other buffer, and stays valid until
                // `sluice_process_lent` returns; `'a` is that call's (the SDK makes the
                // `Outputs` for one call, and plugin code cannot keep it past its method).
                // It is aligned to `size` (checked above) and non-null.
                unsafe { data_mut(dtype, ptr, count) }
            }
            Sink::Arena(arena) => arena.alloc(self.element, name, dtype, shape, count),
        };
        self.written.push(Written {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
        });
        Ok(data)
    }

    /// A buffer for an output with `input`'s name, dtype and shape (a transform that keeps
    /// the shape: most augmentations).
    pub fn like(&mut self, input: &TensorRef<'_>) -> Result<DataMut<'a>> {
        self.alloc(input.name, input.dtype(), input.shape)
    }

    /// A `u8` output buffer.
    pub fn u8(&mut self, name: &str, shape: &[u64]) -> Result<&'a mut [u8]> {
        match self.alloc(name, DType::U8, shape)? {
            DataMut::U8(v) => Ok(v),
            _ => unreachable!("alloc gives the dtype asked for"),
        }
    }

    /// An `i32` output buffer.
    pub fn i32(&mut self, name: &str, shape: &[u64]) -> Result<&'a mut [i32]> {
        match self.alloc(name, DType::I32, shape)? {
            DataMut::I32(v) => Ok(v),
            _ => unreachable!("alloc gives the dtype asked for"),
        }
    }

    /// An `i64` output buffer.
    pub fn i64(&mut self, name: &str, shape: &[u64]) -> Result<&'a mut [i64]> {
        match self.alloc(name, DType::I64, shape)? {
            DataMut::I64(v) => Ok(v),
            _ => unreachable!("alloc gives the dtype asked for"),
        }
    }

    /// An `f32` output buffer.
    pub fn f32(&mut self, name: &str, shape: &[u64]) -> Result<&'a mut [f32]> {
        match self.alloc(name, DType::F32, shape)? {
            DataMut::F32(v) => Ok(v),
            _ => unreachable!("alloc gives the dtype asked for"),
        }
    }

    /// An `f64` output buffer.
    pub fn f64(&mut self, name: &str, shape: &[u64]) -> Result<&'a mut [f64]> {
        match self.alloc(name, DType::F64, shape)? {
            DataMut::F64(v) => Ok(v),
            _ => unreachable!("alloc gives the dtype asked for"),
        }
    }

    /// An owned tensor as an output: copied into a host buffer (one copy), or moved when the
    /// outputs are owned ones. A byte-string tensor is [`Error::Declined`] on the host (the
    /// call then takes the wire path).
    pub fn set(&mut self, tensor: Tensor) -> Result<()> {
        if let Sink::Arena(arena) = self.sink {
            if self.written.iter().any(|w| w.name == tensor.name) {
                return Err(Error::plugin(format!(
                    "output {:?} written twice for element {}",
                    tensor.name, self.element
                )));
            }
            self.written.push(Written {
                name: tensor.name.clone(),
                dtype: tensor.dtype(),
                shape: tensor.shape.clone(),
            });
            arena.put(self.element, tensor);
            return Ok(());
        }
        let mut buf = self.alloc(&tensor.name, tensor.dtype(), &tensor.shape)?;
        buf.copy_from(&tensor.data)
    }
}

/// Makes a `DataMut` over `count` values of `dtype` at `ptr`.
///
/// # Safety
/// `ptr` must be non-null, aligned to `dtype`'s size, and valid for reads and writes of
/// `count` values of `dtype`, exclusively, for `'a`; `dtype` is not [`DType::Bytes`].
unsafe fn data_mut<'a>(dtype: DType, ptr: *mut u8, count: usize) -> DataMut<'a> {
    // SAFETY: (each arm) the caller guarantees `ptr` is non-null, aligned for the dtype,
    // and valid and exclusive for `count` values for `'a`; every bit pattern is a valid
    // value of these types.
    unsafe {
        match dtype {
            DType::U8 => DataMut::U8(std::slice::from_raw_parts_mut(ptr, count)),
            DType::I32 => DataMut::I32(std::slice::from_raw_parts_mut(ptr.cast(), count)),
            DType::I64 => DataMut::I64(std::slice::from_raw_parts_mut(ptr.cast(), count)),
            DType::F32 => DataMut::F32(std::slice::from_raw_parts_mut(ptr.cast(), count)),
            DType::F64 => DataMut::F64(std::slice::from_raw_parts_mut(ptr.cast(), count)),
            DType::Bytes => unreachable!("byte strings are never lent"),
        }
    }
}

/// Owned output buffers, for running the lent path in this process (no host): each
/// allocation is a new vector, kept until [`Arena::into_tensors`].
#[derive(Debug, Default)]
pub(crate) struct Arena {
    tensors: RefCell<Vec<(u32, Tensor)>>,
}

impl Arena {
    fn alloc<'a>(
        &'a self,
        element: u32,
        name: &str,
        dtype: DType,
        shape: &[u64],
        count: usize,
    ) -> DataMut<'a> {
        let mut data = match dtype {
            DType::U8 => Data::U8(vec![0; count]),
            DType::I32 => Data::I32(vec![0; count]),
            DType::I64 => Data::I64(vec![0; count]),
            DType::F32 => Data::F32(vec![0.0; count]),
            DType::F64 => Data::F64(vec![0.0; count]),
            DType::Bytes => unreachable!("alloc declines byte strings first"),
        };
        let ptr: *mut u8 = match &mut data {
            Data::U8(v) => v.as_mut_ptr(),
            Data::I32(v) => v.as_mut_ptr().cast(),
            Data::I64(v) => v.as_mut_ptr().cast(),
            Data::F32(v) => v.as_mut_ptr().cast(),
            Data::F64(v) => v.as_mut_ptr().cast(),
            Data::Bytes(_) => unreachable!("numeric dtypes only"),
        };
        self.put(
            element,
            Tensor {
                name: name.to_string(),
                shape: shape.to_vec(),
                data,
            },
        );
        // SAFETY: `ptr` is the heap buffer of a new vector of `count` values of `dtype`
        // (non-null and aligned even when empty), now owned by `self.tensors`. The arena
        // never reads, writes, reallocates or frees that buffer while `self` is borrowed
        // (pushing to `tensors` moves the vector's header, not its buffer), and it gives
        // the buffer out only here, once: so it is valid and exclusive for `'a`, the
        // borrow of `self` (`into_tensors` takes `self` by value, after every `'a` ends).
        unsafe { data_mut(dtype, ptr, count) }
    }

    fn put(&self, element: u32, tensor: Tensor) {
        self.tensors.borrow_mut().push((element, tensor));
    }

    /// The outputs of `element`, in the order written.
    pub(crate) fn into_tensors(self, element: u32) -> impl Iterator<Item = Tensor> {
        self.tensors
            .into_inner()
            .into_iter()
            .filter(move |(e, _)| *e == element)
            .map(|(_, t)| t)
    }
}

/// The elements of a `sluice_process_lent` call as [`ElementRef`]s, after checking every
/// pointer, code and count (a malformed view is an [`Error::InvalidInput`], never a crash
/// where the checks can see it).
///
/// # Safety
/// `views` must be valid for reads of `n` [`c::ElementView`]s, and each view's tensors,
/// names, dims and values valid for reads as ABI.md §11.2 describes, unchanged for `'a`.
pub(crate) unsafe fn elements_from_c<'a>(
    views: *const c::ElementView,
    n: usize,
) -> Result<Vec<ElementRef<'a>>> {
    // SAFETY: the caller guarantees `views` is valid for `n` element views for `'a`.
    let views: &'a [c::ElementView] = unsafe { slice_of(views, n, "the element views")? };
    let mut out = Vec::with_capacity(views.len());
    for (i, view) in views.iter().enumerate() {
        // SAFETY: the caller guarantees each view's `tensors` is valid for `n_tensors`.
        let tensors: &'a [c::TensorView] =
            unsafe { slice_of(view.tensors, view.n_tensors, "its tensor views") }
                .map_err(|e| Error::invalid_input(format!("element {i}: {e}")))?;
        let mut element = ElementRef {
            tensors: Vec::with_capacity(tensors.len()),
        };
        for (j, t) in tensors.iter().enumerate() {
            // SAFETY: the caller guarantees the tensor view's pointers are valid for `'a`.
            let tensor = unsafe { tensor_from_c(t) }
                .map_err(|e| Error::invalid_input(format!("element {i}, tensor view {j}: {e}")))?;
            element.tensors.push(tensor);
        }
        out.push(element);
    }
    Ok(out)
}

/// `n` values of `T` at `ptr` (empty when `n` is 0, whatever `ptr` is), checking that the
/// pointer is non-null and aligned.
///
/// # Safety
/// When `n > 0`, `ptr` must be valid for reads of `n` values of `T`, unchanged for `'a`.
unsafe fn slice_of<'a, T>(ptr: *const T, n: usize, what: &str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::invalid_input(format!(
            "{what}: null pointer for {n}"
        )));
    }
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::invalid_input(format!(
            "{what}: pointer not aligned to {} bytes",
            std::mem::align_of::<T>()
        )));
    }
    if n.checked_mul(std::mem::size_of::<T>())
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(Error::invalid_input(format!("{what}: {n} values overflow")));
    }
    // SAFETY: non-null and aligned (checked), `n * size_of::<T>()` fits `isize` (checked),
    // and the caller guarantees `n` readable values for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// # Safety
/// `t`'s pointers must be valid for reads as ABI.md §11.2 describes, unchanged for `'a`.
unsafe fn tensor_from_c<'a>(t: &c::TensorView) -> Result<TensorRef<'a>> {
    // SAFETY: the caller guarantees `name` is valid for `name_len` bytes for `'a`.
    let name_bytes: &'a [u8] = unsafe { slice_of(t.name, t.name_len, "the name")? };
    let name = std::str::from_utf8(name_bytes)
        .map_err(|_| Error::invalid_input("the name is not UTF-8"))?;
    let ctx = |msg: String| Error::invalid_input(format!("tensor {name:?}: {msg}"));
    let dtype =
        DType::from_code(t.dtype).ok_or_else(|| ctx(format!("unknown dtype code {}", t.dtype)))?;
    if dtype == DType::Bytes {
        return Err(ctx("byte strings are never lent (dtype 6)".into()));
    }
    // SAFETY: the caller guarantees `dims` is valid for `rank` values for `'a`.
    let shape: &'a [u64] = unsafe { slice_of(t.dims, usize::from(t.rank), "the dims") }
        .map_err(|e| ctx(e.to_string()))?;
    let want = values_in(shape).ok_or_else(|| ctx(format!("shape {shape:?} overflows")))?;
    if t.count != want {
        return Err(ctx(format!(
            "shape {shape:?} holds {want} values, the view says {}",
            t.count
        )));
    }
    let count = usize::try_from(t.count).map_err(|_| ctx("too many values".into()))?;
    let data = t.data;
    // SAFETY: (each arm) the caller guarantees `data` is valid for `count` values of the
    // dtype for `'a`; `slice_of` checks null, alignment and size.
    let data = unsafe {
        match dtype {
            DType::U8 => DataRef::U8(slice_of(data, count, "the values")?),
            DType::I32 => DataRef::I32(slice_of(data.cast(), count, "the values")?),
            DType::I64 => DataRef::I64(slice_of(data.cast(), count, "the values")?),
            DType::F32 => DataRef::F32(slice_of(data.cast(), count, "the values")?),
            DType::F64 => DataRef::F64(slice_of(data.cast(), count, "the values")?),
            DType::Bytes => unreachable!("refused above"),
        }
    };
    Ok(TensorRef { name, shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_buffers_are_distinct_and_kept_in_order() {
        let arena = Arena::default();
        {
            let mut out = Outputs::new(Sink::Arena(&arena), 3);
            let a = out.f32("a", &[2]).unwrap();
            let b = out.u8("b", &[3]).unwrap();
            a.copy_from_slice(&[1.0, 2.0]);
            b.copy_from_slice(&[7, 8, 9]);
            assert!(
                out.f32("a", &[1])
                    .unwrap_err()
                    .to_string()
                    .contains("twice")
            );
            let err = out.alloc("s", DType::Bytes, &[]).unwrap_err();
            assert_eq!(err.status(), crate::abi::status::DECLINED);
            out.set(Tensor::new("c", vec![], Data::I64(vec![5])).unwrap())
                .unwrap();
            assert_eq!(out.written().len(), 3);
        }
        let got: Vec<Tensor> = arena.into_tensors(3).collect();
        assert_eq!(got[0].data, Data::F32(vec![1.0, 2.0]));
        assert_eq!(got[1].data, Data::U8(vec![7, 8, 9]));
        assert_eq!(got[2].data, Data::I64(vec![5]));
    }

    #[test]
    fn views_of_owned_elements_compare_by_bits() {
        let t = Tensor::new("x", vec![2], Data::F32(vec![0.0, f32::NAN])).unwrap();
        let v = t.view();
        assert!(v.same_as(&t));
        let negative_zero = Tensor::new("x", vec![2], Data::F32(vec![-0.0, f32::NAN])).unwrap();
        assert!(!v.same_as(&negative_zero));
        assert_eq!(v.to_tensor().data.len(), 2);
        let e = Element {
            tensors: vec![t.clone()],
        };
        let back = e.view().to_element();
        assert!(back.tensors.len() == 1 && v.same_as(&back.tensors[0]));
    }

    #[test]
    fn malformed_c_views_are_invalid_input() {
        let dims = [2u64, 2];
        let values = [1u8, 2, 3, 4];
        let words = [0u32; 2];
        let good = c::TensorView {
            name: b"x".as_ptr(),
            name_len: 1,
            dims: dims.as_ptr(),
            data: values.as_ptr(),
            count: 4,
            dtype: 1,
            rank: 2,
            reserved: [0; 6],
        };
        let read = |t: c::TensorView| {
            let views = [t];
            let e = [c::ElementView {
                tensors: views.as_ptr(),
                n_tensors: 1,
            }];
            // SAFETY: every pointer is to a live local of the stated length.
            unsafe { elements_from_c(e.as_ptr(), 1) }.map(|v| v[0].tensors[0].to_tensor())
        };
        assert_eq!(read(good).unwrap().data, Data::U8(vec![1, 2, 3, 4]));
        for (bad, want) in [
            (c::TensorView { count: 3, ..good }, "holds 4 values"),
            (c::TensorView { dtype: 9, ..good }, "unknown dtype"),
            (c::TensorView { dtype: 6, ..good }, "never lent"),
            (
                c::TensorView {
                    data: std::ptr::null(),
                    ..good
                },
                "null pointer",
            ),
            (
                c::TensorView {
                    name: [0xffu8].as_ptr(),
                    ..good
                },
                "not UTF-8",
            ),
            (
                c::TensorView {
                    dtype: 4,
                    // One byte into a `u32`: never 4-byte aligned.
                    data: (words.as_ptr() as *const u8).wrapping_add(1),
                    count: 1,
                    rank: 0,
                    ..good
                },
                "not aligned",
            ),
        ] {
            let err = read(bad).unwrap_err();
            assert_eq!(err.status(), crate::abi::status::INVALID_INPUT);
            assert!(err.to_string().contains(want), "{err} lacks {want:?}");
        }
        // SAFETY: zero views: the pointer is not read.
        let none = unsafe { elements_from_c(std::ptr::null(), 0) };
        assert!(none.unwrap().is_empty());
        // SAFETY: a null pointer for one view is refused before any read.
        let err = unsafe { elements_from_c(std::ptr::null(), 1) }.unwrap_err();
        assert!(err.to_string().contains("null pointer"), "{err}");
    }
}
