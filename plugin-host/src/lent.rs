//! The host's side of the lent path (ABI version 2, `sdk/ABI.md` §11): a [`LentCall`] lends
//! a chunk's tensors to the plugin where they are (views of the pipeline's own buffers,
//! read-only for the call) and allocates the plugin's output tensors from the buffer pool
//! through the allocator it passes (`sluice_outputs`); after the call those buffers become
//! the output tensors' storage as they are. No value is copied by the host either way.
//!
//! This module's `unsafe` code is the allocator the plugin calls back (an `extern "C"`
//! function reading its context and the plugin's name and dims) and the in-process call of
//! the SDK's lent entry point; each block says why it is sound.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, PoisonError};

use sluice_core::tensor::pool;
use sluice_core::{Tensor, TensorData};
use sluice_sdk::abi::lent::{ElementView, KEEP_UNSET, Outputs, TensorView};
use sluice_sdk::abi::status;
use sluice_sdk::wire::DType;
use sluice_sdk::{Kind, Plugin, PluginInfo};

use crate::backend::{CallFailure, Lent};
use crate::wire::sdk_dtype;

/// An output buffer the allocator handed out.
enum Buf {
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// One output tensor the plugin asked for.
struct Allocation {
    element: u32,
    name: String,
    shape: Vec<usize>,
    buf: Buf,
    /// Where its values are (what the plugin got).
    address: usize,
}

/// The allocator's state: what it handed out, and why it refused, if it did.
struct Recorder {
    kind: Kind,
    n_elements: usize,
    allocations: Vec<Allocation>,
    refused: Option<String>,
}

fn buffer<T: pool::Poolable + Copy + Default>(count: usize) -> (Vec<T>, usize) {
    let mut v = pool::take_filled::<T>(count);
    let address = v.as_mut_ptr() as usize;
    (v, address)
}

impl Recorder {
    fn alloc(
        &mut self,
        element: u32,
        name: &[u8],
        dtype: u8,
        dims: &[u64],
    ) -> Result<usize, String> {
        if self.kind != Kind::Map {
            return Err(format!("a {:?} plugin has no output tensors", self.kind));
        }
        if element as usize >= self.n_elements {
            return Err(format!(
                "element {element} is out of range (the call has {})",
                self.n_elements
            ));
        }
        let name = std::str::from_utf8(name)
            .map_err(|_| format!("element {element}: an output name is not UTF-8"))?;
        let what = || format!("element {element}, output {name:?}");
        let dtype = match DType::from_code(dtype) {
            Some(DType::Bytes) => {
                return Err(format!(
                    "{}: byte strings cannot be lent (decline the call to take the wire path)",
                    what()
                ));
            }
            Some(d) => d,
            None => return Err(format!("{}: unknown dtype code {dtype}", what())),
        };
        if self
            .allocations
            .iter()
            .any(|a| a.element == element && a.name == name)
        {
            return Err(format!("{}: asked for twice", what()));
        }
        let size = dtype.size().expect("numeric");
        let count = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| {
                n.checked_mul(size)
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
            .ok_or_else(|| format!("{}: shape {dims:?} is too large", what()))?;
        let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        let (buf, address) = match dtype {
            DType::U8 => {
                let (v, a) = buffer::<u8>(count);
                (Buf::U8(v), a)
            }
            DType::I32 => {
                let (v, a) = buffer::<i32>(count);
                (Buf::I32(v), a)
            }
            DType::I64 => {
                let (v, a) = buffer::<i64>(count);
                (Buf::I64(v), a)
            }
            DType::F32 => {
                let (v, a) = buffer::<f32>(count);
                (Buf::F32(v), a)
            }
            DType::F64 => {
                let (v, a) = buffer::<f64>(count);
                (Buf::F64(v), a)
            }
            DType::Bytes => unreachable!("refused above"),
        };
        self.allocations.push(Allocation {
            element,
            name: name.to_string(),
            shape,
            buf,
            address,
        });
        Ok(address)
    }
}

/// `sluice_alloc_output`, the allocator the host passes in `sluice_outputs`: a buffer from
/// the pool for one output tensor, or null (the reason kept for the host's message).
///
/// # Safety
/// `ctx` must be the context of a live [`LentCall`]'s outputs; `name` valid for `name_len`
/// bytes and `dims` for `rank` values during the call (ABI.md §11.4).
unsafe extern "C" fn alloc_output(
    ctx: *mut c_void,
    element: u32,
    name: *const u8,
    name_len: usize,
    dtype: u8,
    rank: u8,
    dims: *const u64,
) -> *mut u8 {
    if ctx.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `ctx` is the address of the `Mutex<Recorder>` boxed in the `LentCall` whose
    // outputs the plugin was given: the host passes it only for the call, during which the
    // `LentCall` (and so the box) is alive and not moved out of; it is only used shared.
    let recorder = unsafe { &*ctx.cast::<Mutex<Recorder>>() };
    let done = catch_unwind(AssertUnwindSafe(|| {
        let mut recorder = recorder.lock().unwrap_or_else(PoisonError::into_inner);
        let result = if (name_len > 0 && name.is_null()) || (rank > 0 && dims.is_null()) {
            Err(format!(
                "element {element}: a null name or dims pointer for an output"
            ))
        } else if rank > 0 && !(dims as usize).is_multiple_of(std::mem::align_of::<u64>()) {
            Err(format!(
                "element {element}: the dims pointer is not 8-byte aligned"
            ))
        } else {
            let name: &[u8] = if name_len == 0 {
                &[]
            } else {
                // SAFETY: non-null (checked above); the ABI has the plugin pass a name valid
                // for `name_len` bytes during this call, which only reads it.
                unsafe { std::slice::from_raw_parts(name, name_len) }
            };
            let dims: &[u64] = if rank == 0 {
                &[]
            } else {
                // SAFETY: non-null and aligned (checked above); the ABI has the plugin pass
                // `rank` dims valid during this call, which only reads them.
                unsafe { std::slice::from_raw_parts(dims, usize::from(rank)) }
            };
            recorder.alloc(element, name, dtype, dims)
        };
        match result {
            Ok(address) => address as *mut u8,
            Err(reason) => {
                recorder.refused.get_or_insert(reason);
                std::ptr::null_mut()
            }
        }
    }));
    done.unwrap_or(std::ptr::null_mut())
}

/// One call through the lent path: the chunk's tensors as `sluice_element_view`s pointing
/// into the elements' own buffers (read-only), the seeds, and the outputs (`sluice_outputs`:
/// this host's allocator and the `keep` flags of a filter). Made by [`LentCall::new`], given
/// to [`crate::Instance::call_lent`], read with [`LentCall::finish`].
pub struct LentCall<'a> {
    kind: Kind,
    elements: Vec<ElementView>,
    tensors: Vec<TensorView>,
    /// Every view's dims, which the views point into (kept alive, never read here).
    _dims: Vec<u64>,
    seeds: &'a [u64],
    keep: Box<[u8]>,
    recorder: Box<Mutex<Recorder>>,
    outputs: Outputs,
    /// Per element: each lent tensor's name and the address of its values.
    lent: Vec<Vec<(&'a str, usize)>>,
    _tensors: PhantomData<&'a Tensor>,
}

impl std::fmt::Debug for LentCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LentCall")
            .field("kind", &self.kind)
            .field("elements", &self.elements.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// What a lent call gave back (after [`Lent::Done`]).
#[derive(Debug)]
pub struct LentOutput {
    /// The output tensors, in the order asked for: (input element, name, tensor over the
    /// buffer the plugin wrote).
    pub tensors: Vec<(usize, String, Tensor)>,
    /// A filter's decisions: 1 keep, 0 drop (anything else: the plugin broke the ABI).
    pub keep: Vec<u8>,
    /// Why the allocator refused a buffer, when it did.
    pub refused: Option<String>,
}

impl<'a> LentCall<'a> {
    /// A call of a `kind` plugin on `inputs` (per element: the tensors to lend, by feature
    /// name) with one seed per element. `None` when a tensor holds byte strings, which are
    /// never lent, or has more than 255 dimensions (the call takes the wire path).
    pub fn new(
        kind: Kind,
        inputs: &[Vec<(&'a str, &'a Tensor)>],
        seeds: &'a [u64],
    ) -> Option<LentCall<'a>> {
        let n_tensors = inputs.iter().map(Vec::len).sum();
        let mut tensors = Vec::with_capacity(n_tensors);
        let mut dims = Vec::with_capacity(inputs.iter().flatten().map(|(_, t)| t.rank()).sum());
        let mut dims_at = Vec::with_capacity(n_tensors);
        let mut lent = Vec::with_capacity(inputs.len());
        for element in inputs {
            let mut names = Vec::with_capacity(element.len());
            for &(name, t) in element {
                let rank = u8::try_from(t.rank()).ok()?;
                let data: *const u8 = match t.data() {
                    TensorData::U8(v) => v.as_ptr(),
                    TensorData::I32(v) => v.as_ptr().cast(),
                    TensorData::I64(v) => v.as_ptr().cast(),
                    TensorData::F32(v) => v.as_ptr().cast(),
                    TensorData::F64(v) => v.as_ptr().cast(),
                    TensorData::Bytes(_) => return None,
                };
                dims_at.push(dims.len());
                dims.extend(t.shape().iter().map(|&d| d as u64));
                names.push((name, data as usize));
                tensors.push(TensorView {
                    name: name.as_ptr(),
                    name_len: name.len(),
                    dims: std::ptr::null(),
                    data,
                    count: t.len() as u64,
                    dtype: sdk_dtype(t.dtype()).code(),
                    rank,
                    reserved: [0; 6],
                });
            }
            lent.push(names);
        }
        // `dims` is complete: point each view at its dims.
        for (view, &at) in tensors.iter_mut().zip(&dims_at) {
            if view.rank > 0 {
                view.dims = dims[at..].as_ptr();
            }
        }
        let mut elements = Vec::with_capacity(inputs.len());
        let mut at = 0;
        for element in inputs {
            elements.push(ElementView {
                tensors: if element.is_empty() {
                    std::ptr::null()
                } else {
                    tensors[at..].as_ptr()
                },
                n_tensors: element.len(),
            });
            at += element.len();
        }
        let mut keep = vec![KEEP_UNSET; inputs.len()].into_boxed_slice();
        let recorder = Box::new(Mutex::new(Recorder {
            kind,
            n_elements: inputs.len(),
            allocations: Vec::new(),
            refused: None,
        }));
        let outputs = Outputs {
            ctx: std::ptr::from_ref::<Mutex<Recorder>>(&recorder)
                .cast_mut()
                .cast(),
            alloc: alloc_output,
            keep: keep.as_mut_ptr(),
        };
        Some(LentCall {
            kind,
            elements,
            tensors,
            _dims: dims,
            seeds,
            keep,
            recorder,
            outputs,
            lent,
            _tensors: PhantomData,
        })
    }

    /// The plugin's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// `elements` of `sluice_process_lent`: valid while `self` is.
    pub fn elements_ptr(&self) -> *const ElementView {
        self.elements.as_ptr()
    }

    /// `n_elements`.
    pub fn n_elements(&self) -> usize {
        self.elements.len()
    }

    /// `seeds` (8-byte aligned).
    pub fn seeds(&self) -> &'a [u64] {
        self.seeds
    }

    /// `outputs` of `sluice_process_lent`: valid while `self` is.
    pub fn outputs_ptr(&self) -> *const Outputs {
        &self.outputs
    }

    /// Per element, each lent tensor's name and the address of its values: the elements'
    /// own buffers (for tests that check nothing was copied).
    pub fn lent(&self) -> &[Vec<(&'a str, usize)>] {
        &self.lent
    }

    /// The output buffers handed out so far: (element, name, address of the values).
    pub fn allocated(&self) -> Vec<(u32, String, usize)> {
        self.recorder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .allocations
            .iter()
            .map(|a| (a.element, a.name.clone(), a.address))
            .collect()
    }

    /// The outputs, after the call returned: the buffers the plugin wrote become tensors as
    /// they are (no copy; large ones go back to the pool when the last tensor over them
    /// drops).
    pub fn finish(self) -> LentOutput {
        let recorder = self
            .recorder
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let tensors = recorder
            .allocations
            .into_iter()
            .map(|a| {
                let data = match a.buf {
                    Buf::U8(v) => TensorData::U8(pool::recycled_bytes(v)),
                    Buf::I32(v) => TensorData::I32(v.into()),
                    Buf::I64(v) => TensorData::I64(v.into()),
                    Buf::F32(v) => TensorData::F32(v.into()),
                    Buf::F64(v) => TensorData::F64(v.into()),
                };
                let tensor =
                    Tensor::new(&a.shape, data).expect("the buffer holds the shape's values");
                (a.element as usize, a.name, tensor)
            })
            .collect();
        LentOutput {
            tensors,
            keep: self.keep.into_vec(),
            refused: recorder.refused,
        }
    }
}

/// The result of a `sluice_process_lent` status: [`Lent::Done`] on OK, [`Lent::Declined`] on
/// DECLINED (with the plugin's message), a [`CallFailure`] otherwise (`message` is read only
/// then).
pub fn lent_status(
    code: i32,
    message: impl FnOnce() -> String,
) -> std::result::Result<Lent, CallFailure> {
    match code {
        status::OK => Ok(Lent::Done),
        status::DECLINED => Ok(Lent::Declined(message())),
        code => Err(CallFailure::from_status(code, message())),
    }
}

/// A lent call of a plugin compiled into this process ([`crate::InProcess`]): the SDK's
/// `sluice_process_lent` code run directly on `call`'s views and outputs.
pub(crate) fn call_in_process<P: Plugin>(
    plugin: &mut P,
    info: &PluginInfo,
    call: &mut LentCall<'_>,
) -> std::result::Result<Lent, CallFailure> {
    let seeds = call.seeds();
    // SAFETY: `call` made these pointers as ABI.md §11 says: element views pointing into
    // its own vectors and the borrowed tensors (alive for the call), aligned seeds, and
    // outputs whose allocator (`alloc_output`) and keep flags follow §11.3–§11.4; `call` is
    // borrowed for the whole call.
    let result = unsafe {
        sluice_sdk::export::process_lent_raw(
            plugin,
            info,
            call.elements_ptr(),
            call.n_elements(),
            seeds.as_ptr(),
            seeds.len(),
            call.outputs_ptr(),
        )
    };
    match result {
        Ok(()) => Ok(Lent::Done),
        Err((code, message)) => lent_status(code, || message),
    }
}
