//! `numpy`: NumPy's `.npy` and `.npz` files, sliced along the first axis like
//! `tf.data.Dataset.from_tensor_slices`.
//!
//! A file is read into memory whole (once, as it is opened) and its rows are slices of that
//! one buffer: no copy per element. (Memory-mapping would save the read of a large local
//! file, but needs `unsafe` code, which the workspace denies; and object-store files must be
//! read anyway.) Fortran-ordered arrays are transposed to row-major order and big-endian ones
//! byte-swapped as they are read.

use std::io::{Cursor, Read, Seek};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sluice_proto::tfrecord::Compression;

use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::sources::format::{FileFormat, OpenedFile, Opening, Record, RecordError, RecordReader};
use crate::sources::storage::StorageSpec;
use crate::tensor::{Shared, Tensor, TensorData};

/// Reads NumPy files (`numpy.save`'s `.npy`, `numpy.savez` / `savez_compressed`'s `.npz`)
/// as `from_tensor_slices` reads arrays: one element per index of the first axis.
///
/// An `.npy` file is one feature, named by `name` (default `value`); an `.npz` archive is one
/// feature per array (named as in the archive, without `.npy`), all of the same first
/// dimension; `arrays` keeps only some of them, in its order. Files are told apart by their
/// first bytes, not their names.
///
/// dtypes: `uint8`, `int32`, `int64`, `float32`, `float64` as themselves; `bool` as `u8`
/// (0/1); `int8`, `int16`, `uint16` widened to `i32`, `uint32` to `i64`; `float16` to `f32`;
/// byte strings (`S`) and Unicode strings (`U`, as UTF-8) as byte strings without their
/// trailing NULs, as NumPy gives them. Other dtypes (`uint64`, complex, objects, records)
/// are an error naming the dtype. Either byte order, C or Fortran order.
///
/// ```toml
/// [source]
/// format = "numpy"
/// files = ["features.npz"]
/// arrays = ["image", "label"]   # default: every array of the archive
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NumpySpec {
    /// The feature an `.npy` file's array is put in (default `value`).
    pub name: String,
    /// The arrays of an `.npz` archive to read, in this order (default: all of them, in
    /// the archive's order). A name the archive lacks is an error.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arrays: Vec<String>,
    /// How URLs are reached and read; empty: the environment's settings.
    #[serde(skip_serializing_if = "StorageSpec::is_empty")]
    pub storage: StorageSpec,
}

impl Default for NumpySpec {
    fn default() -> Self {
        NumpySpec {
            name: "value".to_string(),
            arrays: Vec::new(),
            storage: StorageSpec::default(),
        }
    }
}

impl FileFormat for NumpySpec {
    fn name(&self) -> &'static str {
        "numpy"
    }

    fn params(&self) -> Params {
        self.opening()
            .params()
            .with("name", &self.name)
            .with("arrays", self.arrays.join(","))
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.name.is_empty() {
            return Err(Invalid::at("name", "`name` must not be empty"));
        }
        Ok(())
    }

    fn opening(&self) -> Opening {
        Opening {
            compression_type: Compression::None,
            storage: self.storage.clone(),
        }
    }

    fn records(&self, mut file: OpenedFile) -> Result<Box<dyn RecordReader>> {
        let path = file.path.clone();
        let bad = |m: String| Error::data(format!("{path}: {m}"));
        let mut bytes = Vec::with_capacity(file.size.unwrap_or(0) as usize);
        file.input
            .read_to_end(&mut bytes)
            .map_err(|error| Error::Io {
                path: path.clone().into(),
                error,
            })?;
        let arrays: Vec<(Arc<str>, Array)> = if bytes.starts_with(NPY_MAGIC) {
            let array = parse_npy(&bytes).map_err(bad)?;
            vec![(Arc::from(self.name.as_str()), array)]
        } else if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
            read_npz(Cursor::new(bytes), &self.arrays).map_err(bad)?
        } else {
            return Err(bad(
                "not a NumPy file (neither .npy's \\x93NUMPY nor an .npz archive's PK)".into(),
            ));
        };
        let mut rows = None;
        for (name, a) in &arrays {
            let Some(&n) = a.shape.first() else {
                return Err(bad(format!(
                    "`{name}` is a 0-d array (a scalar): it has no first axis to slice"
                )));
            };
            match rows {
                None => rows = Some((name.clone(), n)),
                Some((ref first, m)) if m != n => {
                    return Err(bad(format!(
                        "`{name}` has {n} rows but `{first}` has {m}: every array needs the \
                         same first dimension"
                    )));
                }
                Some(_) => {}
            }
        }
        let rows = rows.map_or(0, |(_, n)| n);
        Ok(Box::new(Rows {
            arrays,
            rows,
            next: 0,
        }))
    }
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// One array, its values row-major.
struct Array {
    shape: Vec<usize>,
    data: TensorData,
    /// Where the data starts in the file (or archive member), and a row's bytes there.
    data_offset: u64,
    row_bytes: u64,
}

struct Rows {
    arrays: Vec<(Arc<str>, Array)>,
    rows: usize,
    next: usize,
}

impl RecordReader for Rows {
    fn next_record(&mut self) -> Option<std::result::Result<Record, RecordError>> {
        if self.next >= self.rows {
            return None;
        }
        let i = self.next;
        self.next += 1;
        let mut offset = 0;
        let features = self
            .arrays
            .iter()
            .enumerate()
            .map(|(k, (name, a))| {
                if k == 0 {
                    offset = a.data_offset + i as u64 * a.row_bytes;
                }
                let inner = &a.shape[1..];
                let per: usize = inner.iter().product();
                let data = a.data.slice(i * per..(i + 1) * per);
                let t = Tensor::new(inner, data).expect("row shape matches its values");
                (Arc::clone(name), t)
            })
            .collect();
        Some(Ok(Record { offset, features }))
    }
}

/// The arrays of an `.npz` archive (`want`: these, in this order; empty: all).
fn read_npz<R: Read + Seek>(
    reader: R,
    want: &[String],
) -> std::result::Result<Vec<(Arc<str>, Array)>, String> {
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| format!("not a valid .npz: {e}"))?;
    let names: Vec<String> = (0..zip.len())
        .filter_map(|i| {
            zip.name_for_index(i)
                .and_then(|n| n.ok())
                .map(|n| n.to_string())
        })
        .collect();
    let array_name = |member: &str| member.strip_suffix(".npy").unwrap_or(member).to_string();
    let chosen: Vec<String> = if want.is_empty() {
        names.clone()
    } else {
        want.iter()
            .map(|w| {
                names
                    .iter()
                    .find(|m| array_name(m) == *w)
                    .cloned()
                    .ok_or_else(|| {
                        format!(
                            "no array `{w}` in the archive (it has {})",
                            names
                                .iter()
                                .map(|m| format!("`{}`", array_name(m)))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })
            })
            .collect::<std::result::Result<_, _>>()?
    };
    let mut out = Vec::with_capacity(chosen.len());
    for member in chosen {
        let name = array_name(&member);
        let mut entry = zip
            .by_name(&member)
            .map_err(|e| format!("`{name}`: cannot read it from the archive: {e}"))?;
        let mut bytes = Vec::with_capacity(entry.size() as usize);
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| format!("`{name}`: cannot read it from the archive: {e}"))?;
        let array = parse_npy(&bytes).map_err(|e| format!("`{name}`: {e}"))?;
        out.push((Arc::from(name.as_str()), array));
    }
    Ok(out)
}

/// What a header's `descr` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    Uint,
    Float,
    Bytes,
    Unicode,
}

/// Parses one `.npy` file's bytes.
fn parse_npy(bytes: &[u8]) -> std::result::Result<Array, String> {
    if !bytes.starts_with(NPY_MAGIC) || bytes.len() < 10 {
        return Err("not an .npy file (no \\x93NUMPY magic)".into());
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err("truncated .npy header".into());
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or("truncated .npy header")?;
    let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
    let descr = dict_value(header, "descr").ok_or("the .npy header has no 'descr'")?;
    let fortran =
        dict_value(header, "fortran_order").ok_or("the .npy header has no 'fortran_order'")?;
    let shape = dict_value(header, "shape").ok_or("the .npy header has no 'shape'")?;
    let descr = descr
        .trim()
        .strip_prefix('\'')
        .and_then(|d| d.strip_suffix('\''))
        .ok_or_else(|| {
            format!("dtype {descr} is not supported (records and sub-arrays are not)")
        })?;
    let fortran = match fortran.trim() {
        "True" => true,
        "False" => false,
        other => return Err(format!("bad fortran_order {other:?} in the .npy header")),
    };
    let shape: Vec<usize> = shape
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("bad shape {shape} in the .npy header"))?;
    let (order, rest) = descr.split_at(1.min(descr.len()));
    let (big, rest) = match order {
        "<" | "=" => (false, rest),
        ">" => (true, rest),
        "|" => (false, rest),
        _ => (false, descr),
    };
    let (code, size) = rest.split_at(1.min(rest.len()));
    let size: usize = size
        .parse()
        .map_err(|_| format!("dtype '{descr}' is not supported"))?;
    let kind = match code {
        "b" | "?" if size == 1 => Kind::Bool,
        "i" => Kind::Int,
        "u" => Kind::Uint,
        "f" => Kind::Float,
        "S" | "a" => Kind::Bytes,
        "U" => Kind::Unicode,
        _ => {
            return Err(format!(
                "dtype '{descr}' is not supported (supported: bool, int8-64, uint8-32, \
                 float16-64, byte and Unicode strings)"
            ));
        }
    };
    let count: usize = shape.iter().product();
    let item = if kind == Kind::Unicode {
        size * 4
    } else {
        size
    };
    let data_offset = start + header_len;
    let body = &bytes[data_offset..];
    if body.len() < count * item {
        return Err(format!(
            "truncated data: shape {shape:?} of '{descr}' needs {} bytes, the file has {}",
            count * item,
            body.len()
        ));
    }
    let body = &body[..count * item];
    // The file's order of values -> row-major order.
    let order = if fortran && shape.len() > 1 {
        Some(fortran_to_c(&shape))
    } else {
        None
    };
    let at = |i: usize| -> &[u8] {
        let j = order.as_ref().map_or(i, |o| o[i]);
        &body[j * item..(j + 1) * item]
    };
    macro_rules! nums {
        ($t:ty, $n:literal) => {{
            let v: Vec<$t> = (0..count)
                .map(|i| {
                    let b: [u8; $n] = at(i).try_into().expect("item size");
                    if big {
                        <$t>::from_be_bytes(b)
                    } else {
                        <$t>::from_le_bytes(b)
                    }
                })
                .collect();
            v
        }};
    }
    let unsupported = || format!("dtype '{descr}' is not supported");
    let data = match (kind, size) {
        (Kind::Bool, 1) | (Kind::Uint, 1) => {
            let v: Vec<u8> = (0..count).map(|i| at(i)[0]).collect();
            TensorData::U8(Bytes::from(v))
        }
        (Kind::Int, 1) => TensorData::I32(Shared::new(
            (0..count).map(|i| at(i)[0] as i8 as i32).collect(),
        )),
        (Kind::Int, 2) => TensorData::I32(Shared::new(
            nums!(i16, 2).into_iter().map(i32::from).collect(),
        )),
        (Kind::Uint, 2) => TensorData::I32(Shared::new(
            nums!(u16, 2).into_iter().map(i32::from).collect(),
        )),
        (Kind::Int, 4) => TensorData::I32(Shared::new(nums!(i32, 4))),
        (Kind::Uint, 4) => TensorData::I64(Shared::new(
            nums!(u32, 4).into_iter().map(i64::from).collect(),
        )),
        (Kind::Int, 8) => TensorData::I64(Shared::new(nums!(i64, 8))),
        (Kind::Float, 2) => TensorData::F32(Shared::new(
            nums!(u16, 2).into_iter().map(f16_to_f32).collect(),
        )),
        (Kind::Float, 4) => TensorData::F32(Shared::new(nums!(f32, 4))),
        (Kind::Float, 8) => TensorData::F64(Shared::new(nums!(f64, 8))),
        (Kind::Uint, 8) => {
            return Err(format!(
                "dtype '{descr}' (uint64) is not supported: its values do not all fit int64; \
                 convert the array (e.g. astype('int64')) if they do"
            ));
        }
        (Kind::Bytes, _) => TensorData::Bytes(Shared::new(
            (0..count)
                .map(|i| {
                    let b = at(i);
                    let end = b.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
                    Bytes::copy_from_slice(&b[..end])
                })
                .collect(),
        )),
        (Kind::Unicode, _) => TensorData::Bytes(Shared::new(
            (0..count)
                .map(|i| {
                    let b = at(i);
                    let mut s = String::with_capacity(size);
                    for c in b.chunks_exact(4) {
                        let c: [u8; 4] = c.try_into().expect("4 bytes");
                        let u = if big {
                            u32::from_be_bytes(c)
                        } else {
                            u32::from_le_bytes(c)
                        };
                        s.push(char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER));
                    }
                    Bytes::from(s.trim_end_matches('\0').to_string())
                })
                .collect(),
        )),
        _ => return Err(unsupported()),
    };
    let row_items: usize = shape.iter().skip(1).product();
    Ok(Array {
        data,
        data_offset: data_offset as u64,
        row_bytes: (row_items * item) as u64,
        shape,
    })
}

/// For each row-major index, the index of that value in Fortran (column-major) order.
fn fortran_to_c(shape: &[usize]) -> Vec<usize> {
    let count: usize = shape.iter().product();
    let mut strides = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        strides[k] = strides[k - 1] * shape[k - 1];
    }
    let mut out = Vec::with_capacity(count);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..count {
        out.push(idx.iter().zip(&strides).map(|(i, s)| i * s).sum());
        // Row-major odometer: the last axis moves fastest.
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

/// IEEE half precision to single.
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if frac == 0 => sign,
        0 => {
            // Subnormal: normalize.
            let mut e = 127 - 15 + 1;
            let mut f = frac;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((f & 0x3ff) << 13)
        }
        0x1f => sign | 0x7f80_0000 | (frac << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// The text of `key`'s value in the header's Python dict literal (up to the next top-level
/// comma).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k1 = format!("'{key}'");
    let at = header.find(&k1)? + k1.len();
    let rest = header[at..].trim_start().strip_prefix(':')?;
    let mut depth = 0i32;
    let mut quote = None;
    for (i, c) in rest.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, '}') if depth == 0 => return Some(&rest[..i]),
            (None, '}') => depth -= 1,
            (None, ',') if depth == 0 => return Some(&rest[..i]),
            _ => {}
        }
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values() {
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
        assert_eq!(dict_value(h, "descr"), Some(" '<f4'"));
        assert_eq!(dict_value(h, "shape"), Some(" (3, 4)"));
        assert_eq!(dict_value(h, "fortran_order"), Some(" False"));
    }

    #[test]
    fn fortran_order() {
        // shape (2, 3): Fortran order stores column by column.
        assert_eq!(fortran_to_c(&[2, 3]), vec![0, 2, 4, 1, 3, 5]);
    }

    #[test]
    fn half() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
    }
}
