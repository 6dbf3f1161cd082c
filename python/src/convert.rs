//! Tensors to NumPy arrays without a copy, and Python values to tensors.
//!
//! A numeric tensor becomes a [`Buffer`], an object exposing NumPy's
//! `__array_interface__` over the tensor's memory; `numpy.asarray(buffer)` makes an
//! ndarray whose `base` is the buffer, so the memory Rust wrote stays alive as long as the
//! array (or any view of it) does. The array is writable when nothing else in Sluice holds
//! the buffer (a fresh batch), read-only otherwise (an element shared with a cache, a
//! slice of a record). Byte strings become object arrays of `bytes`.

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use sluice_core::{DType, Element, Tensor, TensorData, Value};

use crate::errors::invalid;

/// Tensor memory lent to NumPy (`numpy.asarray(buffer)`); the array's `base`.
#[pyclass(module = "sluice._sluice", frozen)]
pub(crate) struct Buffer {
    tensor: Tensor,
    writable: bool,
}

#[pymethods]
impl Buffer {
    /// NumPy's array interface (version 3) over the tensor's memory.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, self.tensor.shape())?)?;
        d.set_item("typestr", typestr(self.tensor.dtype()))?;
        d.set_item("data", (self.address(), !self.writable))?;
        Ok(d)
    }

    /// The address of the first value: where Rust wrote the tensor.
    #[getter]
    fn address(&self) -> usize {
        match self.tensor.data() {
            TensorData::U8(v) => v.as_ptr() as usize,
            TensorData::I32(v) => v.as_ptr() as usize,
            TensorData::I64(v) => v.as_ptr() as usize,
            TensorData::F32(v) => v.as_ptr() as usize,
            TensorData::F64(v) => v.as_ptr() as usize,
            TensorData::Bytes(v) => v.as_ptr() as usize,
        }
    }

    /// Whether NumPy may write to the memory (no other part of Sluice holds it).
    #[getter]
    fn writable(&self) -> bool {
        self.writable
    }

    /// Bytes of memory held.
    #[getter]
    fn nbytes(&self) -> usize {
        self.tensor.nbytes()
    }

    fn __repr__(&self) -> String {
        format!(
            "<sluice Buffer {} {:?} at {:#x}>",
            self.tensor.dtype(),
            self.tensor.shape(),
            self.address()
        )
    }
}

fn typestr(dtype: DType) -> &'static str {
    match dtype {
        DType::U8 => "|u1",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::Bytes => "|O",
    }
}

/// Whether nothing else holds `data`'s memory.
fn unique(data: &TensorData) -> bool {
    match data {
        TensorData::U8(v) => v.is_unique(),
        TensorData::I32(v) => v.is_unique(),
        TensorData::I64(v) => v.is_unique(),
        TensorData::F32(v) => v.is_unique(),
        TensorData::F64(v) => v.is_unique(),
        TensorData::Bytes(_) => false,
    }
}

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY
        .get_or_try_init(py, || Ok(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// `tensor` as an ndarray: numeric tensors without a copy, byte strings as an object array
/// of `bytes`.
pub(crate) fn tensor_to_numpy<'py>(py: Python<'py>, tensor: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let np = numpy(py)?;
    if let TensorData::Bytes(values) = tensor.data() {
        let items = PyList::new(py, values.iter().map(|b| PyBytes::new(py, b)))?;
        let flat = np.call_method1("empty", (values.len(), "O"))?;
        flat.set_item(pyo3::types::PySlice::full(py), items)?;
        return flat.call_method1("reshape", (PyTuple::new(py, tensor.shape())?,));
    }
    // Writable when this element holds the only reference: then no other part of Sluice
    // can see a write through the array.
    let writable = unique(tensor.data());
    let buffer = Bound::new(py, Buffer { tensor, writable })?;
    np.call_method1("asarray", (buffer,))
}

/// A value as Python: a dense tensor as an ndarray, a ragged one as a list of ndarrays
/// (one per row, each without a copy).
pub(crate) fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Value::Dense(t) => tensor_to_numpy(py, t.clone()),
        Value::Ragged(r) => {
            let rows = PyList::empty(py);
            for i in 0..r.rows() {
                let row = r.row(i).map_err(|e| crate::errors::to_py(py, &e))?;
                rows.append(tensor_to_numpy(py, row)?)?;
            }
            Ok(rows.into_any())
        }
    }
}

/// An element as a dict `name -> ndarray` (names in the element's order), taking its
/// values: a buffer this element alone held becomes a writable array.
pub(crate) fn element_into_dict<'py>(
    py: Python<'py>,
    mut element: Element,
) -> PyResult<Bound<'py, PyDict>> {
    let names: Vec<String> = element.iter().map(|(name, _)| name.to_string()).collect();
    let d = PyDict::new(py);
    for name in names {
        let py_value = match element.remove(&name) {
            Some(Value::Dense(t)) => tensor_to_numpy(py, t)?,
            Some(other) => value_to_py(py, &other)?,
            None => continue,
        };
        d.set_item(name, py_value)?;
    }
    Ok(d)
}

/// An element as a dict `name -> ndarray` (names in the element's order), sharing its
/// values (so the arrays are read-only).
pub(crate) fn element_to_dict<'py>(
    py: Python<'py>,
    element: &Element,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, value) in element.iter() {
        d.set_item(name, value_to_py(py, value)?)?;
    }
    Ok(d)
}

/// `obj` (an ndarray, a NumPy scalar, a Python number, `bytes`/`str`, or a (nested) list of
/// them) as a tensor, copied once. `name` is the feature, for errors.
pub(crate) fn tensor_from_py(
    py: Python<'_>,
    name: &str,
    obj: &Bound<'_, PyAny>,
) -> PyResult<Tensor> {
    let np = numpy(py)?;
    let arr = np.call_method1("asarray", (obj,))?;
    let dtype = arr.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    // A numeric array is copied once, by NumPy, straight into memory Rust allocated (a
    // zeroed buffer lent to NumPy as a writable array): no intermediate `bytes`.
    let n: usize = shape.iter().product();
    let data = match (kind.as_str(), itemsize) {
        ("u", 1) => Some(TensorData::U8(Bytes::from(vec![0u8; n]))),
        ("i", 4) => Some(TensorData::I32(vec![0i32; n].into())),
        ("i", 8) => Some(TensorData::I64(vec![0i64; n].into())),
        ("f", 4) => Some(TensorData::F32(vec![0f32; n].into())),
        ("f", 8) => Some(TensorData::F64(vec![0f64; n].into())),
        _ => None,
    };
    if let Some(data) = data {
        let tensor = Tensor::new(&shape, data).map_err(|e| crate::errors::to_py(py, &e.into()))?;
        let target = Bound::new(
            py,
            Buffer {
                tensor: tensor.clone(),
                writable: true,
            },
        )?;
        let view = np.call_method1("asarray", (target,))?;
        np.call_method1("copyto", (view, &arr))?;
        return Ok(tensor);
    }
    let data = match (kind.as_str(), itemsize) {
        ("S" | "U" | "O", _) => {
            let items = arr.call_method0("ravel")?.call_method0("tolist")?;
            let mut values = Vec::new();
            for item in items.try_iter()? {
                let item = item?;
                if let Ok(b) = item.cast::<PyBytes>() {
                    values.push(Bytes::copy_from_slice(b.as_bytes()));
                } else if let Ok(s) = item.cast::<PyString>() {
                    values.push(Bytes::copy_from_slice(s.to_cow()?.as_bytes()));
                } else {
                    return Err(invalid(
                        py,
                        format!(
                            "feature `{name}`: an object array must hold bytes or str, not {}",
                            item.get_type().name()?
                        ),
                    ));
                }
            }
            TensorData::Bytes(values.into())
        }
        _ => {
            let dtype_name: String = dtype.str()?.extract()?;
            return Err(invalid(
                py,
                format!(
                    "feature `{name}`: NumPy dtype {dtype_name} is not one Sluice holds \
                     (uint8, int32, int64, float32, float64, bytes/str); cast it first, \
                     e.g. `x.astype(np.int64)`"
                ),
            ));
        }
    };
    Tensor::new(&shape, data).map_err(|e| crate::errors::to_py(py, &e.into()))
}

/// A dict `name -> array-like` as an element with `template`'s id and provenance.
pub(crate) fn dict_to_element(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    template: Option<(sluice_core::ElementId, Option<sluice_core::Provenance>)>,
    what: &str,
) -> PyResult<Element> {
    let dict = obj.cast::<PyDict>().map_err(|_| {
        let type_name = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        invalid(
            py,
            format!("{what} must give a dict of feature name -> array, not {type_name}"),
        )
    })?;
    let mut element = match template {
        Some((id, provenance)) => {
            let mut e = Element::new(id);
            e.set_provenance(provenance);
            e
        }
        None => Element::new(sluice_core::ElementId::new(0, 0)),
    };
    for (key, value) in dict.iter() {
        let name: String = key
            .extract()
            .map_err(|_| invalid(py, format!("{what}: feature names must be str, got {key}")))?;
        let tensor = tensor_from_py(py, &name, &value)?;
        element.insert(&name, tensor);
    }
    Ok(element)
}
