//! `csv`: rows of CSV files (`tf.data.experimental.CsvDataset`, and `make_csv_dataset`'s
//! type inference).
//!
//! The fields are split as TensorFlow's CSV reader splits them, which is not RFC 4180's
//! reading in three places, so the tokenizer is Sluice's own (a few dozen lines over bytes)
//! rather than the `csv` crate's: an empty line is a record (of one empty field), a quote
//! inside an unquoted field is an error, and a lone `\r` ends a record as `\n` and `\r\n`
//! do. The fixtures in `tests/fixtures/formats/` hold TensorFlow's readings of the awkward
//! cases.

use std::borrow::Cow;
use std::fmt;
use std::io::BufRead;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::element::Value;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::sources::format::{
    Chunk, ChunkReader, ChunkRecords, FileFormat, OpenedFile, Opening, RecordError, RecordReader,
};
use crate::tensor::{Tensor, TensorData};
use sluice_tensor::Shared;
use sluice_tensor::pool::Poolable;

/// The type of a CSV column (TensorFlow's `record_defaults` dtypes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CsvType {
    /// `tf.int32`.
    Int32,
    /// `tf.int64`.
    Int64,
    /// `tf.float32`.
    Float32,
    /// `tf.float64`.
    Float64,
    /// `tf.string`: the field's bytes.
    String,
}

impl CsvType {
    /// Its name, as written.
    pub fn name(self) -> &'static str {
        match self {
            CsvType::Int32 => "int32",
            CsvType::Int64 => "int64",
            CsvType::Float32 => "float32",
            CsvType::Float64 => "float64",
            CsvType::String => "string",
        }
    }

    fn parse(name: &str) -> Option<CsvType> {
        Some(match name {
            "int32" => CsvType::Int32,
            "int64" => CsvType::Int64,
            "float32" => CsvType::Float32,
            "float64" => CsvType::Float64,
            "string" => CsvType::String,
            _ => return None,
        })
    }
}

impl fmt::Display for CsvType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A column's default value (its type's).
#[derive(Debug, Clone)]
pub enum CsvValue {
    /// An integer (int32 or int64 columns).
    Int(i64),
    /// A float (float32 or float64 columns).
    Float(f64),
    /// A byte string (string columns).
    Bytes(Bytes),
}

impl PartialEq for CsvValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CsvValue::Int(a), CsvValue::Int(b)) => a == b,
            (CsvValue::Float(a), CsvValue::Float(b)) => a.to_bits() == b.to_bits(),
            (CsvValue::Bytes(a), CsvValue::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for CsvValue {}

/// One entry of `record_defaults`: a column's type and, unless the column is required, the
/// value a missing field takes.
///
/// Written as TensorFlow's `record_defaults` entries are: `0` (an int32 column defaulting
/// to 0, as `tf.constant(0)`), `0.0` (float32), `""` or any other string (a string column
/// with that default), a type name alone (`"int64"`: a required column, an error when
/// missing), or a table `{ type = "int64", default = -1 }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDefault {
    /// The column's type.
    pub dtype: CsvType,
    /// The value of a missing field; `None`: the column is required.
    pub default: Option<CsvValue>,
}

impl ColumnDefault {
    /// A required column of `dtype`.
    pub fn required(dtype: CsvType) -> Self {
        ColumnDefault {
            dtype,
            default: None,
        }
    }

    /// A column of `dtype` whose missing fields take `default` (checked against the type
    /// when the pipeline is built).
    pub fn with_default(dtype: CsvType, default: CsvValue) -> Self {
        ColumnDefault {
            dtype,
            default: Some(default),
        }
    }

    fn check(&self) -> std::result::Result<(), String> {
        match (&self.default, self.dtype) {
            (None, _)
            | (Some(CsvValue::Int(_)), CsvType::Int64 | CsvType::Float32 | CsvType::Float64)
            | (Some(CsvValue::Float(_)), CsvType::Float32 | CsvType::Float64)
            | (Some(CsvValue::Bytes(_)), CsvType::String) => Ok(()),
            (Some(CsvValue::Int(v)), CsvType::Int32) if i32::try_from(*v).is_ok() => Ok(()),
            (Some(v), t) => Err(format!("the default {v:?} is not a {t}")),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum DefaultRepr {
    Int(i64),
    Float(f64),
    Str(String),
    Table {
        #[serde(rename = "type")]
        dtype: CsvType,
        #[serde(default)]
        default: Option<ValueRepr>,
    },
}

#[derive(Deserialize, Serialize)]
#[serde(untagged)]
enum ValueRepr {
    Int(i64),
    Float(f64),
    Str(String),
}

impl<'de> Deserialize<'de> for ColumnDefault {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(match DefaultRepr::deserialize(d)? {
            DefaultRepr::Int(v) => ColumnDefault::with_default(CsvType::Int32, CsvValue::Int(v)),
            DefaultRepr::Float(v) => {
                ColumnDefault::with_default(CsvType::Float32, CsvValue::Float(v))
            }
            DefaultRepr::Str(s) => match CsvType::parse(&s) {
                Some(t) => ColumnDefault::required(t),
                None => ColumnDefault::with_default(
                    CsvType::String,
                    CsvValue::Bytes(Bytes::from(s.into_bytes())),
                ),
            },
            DefaultRepr::Table { dtype, default } => ColumnDefault {
                dtype,
                default: default.map(|v| match v {
                    ValueRepr::Int(i) => CsvValue::Int(i),
                    ValueRepr::Float(f) => CsvValue::Float(f),
                    ValueRepr::Str(s) => CsvValue::Bytes(Bytes::from(s.into_bytes())),
                }),
            },
        })
    }
}

impl Serialize for ColumnDefault {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.dtype.name())?;
        match &self.default {
            None => {}
            Some(CsvValue::Int(v)) => m.serialize_entry("default", v)?,
            Some(CsvValue::Float(v)) => m.serialize_entry("default", v)?,
            Some(CsvValue::Bytes(b)) => {
                m.serialize_entry("default", &String::from_utf8_lossy(b))?;
            }
        }
        m.end()
    }
}

/// A column chosen by `select_cols`: its index in the file or its name (with a header or
/// `column_names`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ColumnRef {
    /// Index from 0.
    Index(usize),
    /// Name.
    Name(String),
}

/// Reads CSV files as `tf.data.experimental.CsvDataset` does: one element per row, one
/// scalar feature per selected column, named by the header (`header = true`), by
/// `column_names`, or `col<i>` (`i` the column's index in the file).
///
/// ```toml
/// [source]
/// format = "csv"
/// files = ["train-*.csv"]
/// header = true
/// record_defaults = [0, 0.0, "", "int64", { type = "float64", default = -1.0 }]
/// select_cols = ["id", "price"]   # or indexes; default: every column
/// field_delim = ","
/// use_quote_delim = true
/// na_value = "NA"                 # fields equal to it are missing (take the default)
/// compression_type = "gzip"       # "" / none (default), gzip, zlib, auto
/// ```
///
/// Without `record_defaults`, the columns' types are inferred from the first
/// `num_rows_for_inference` rows of the first file as `make_csv_dataset` infers them
/// (int32, int64, float32, float64, then string; missing fields are 0 or empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CsvSpec {
    /// Per selected column: its type and default (see [`ColumnDefault`]). Empty: inferred.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub record_defaults: Vec<ColumnDefault>,
    /// Whether each file's first row is a header (names, not data). Default false.
    pub header: bool,
    /// The columns to read, by index or name, in any order (they are read in the file's
    /// order, as in TensorFlow). Empty: every column.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub select_cols: Vec<ColumnRef>,
    /// The columns' names when there is no header (and to rename them when there is).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub column_names: Vec<String>,
    /// The field delimiter, one byte. Default `,`.
    pub field_delim: String,
    /// Whether a field in double quotes may hold delimiters, newlines and `""` (a quote).
    /// Default true.
    pub use_quote_delim: bool,
    /// A field equal to it is missing, as an empty one is. Default: empty.
    pub na_value: String,
    /// Rows of the first file read to infer the types when `record_defaults` is empty.
    /// Default 100.
    pub num_rows_for_inference: usize,
    /// `""` / `none` (default), `gzip`, `zlib` or `auto`.
    #[serde(
        alias = "compression",
        with = "crate::sources::format::compression_type",
        skip_serializing_if = "crate::sources::format::is_none"
    )]
    pub compression_type: sluice_proto::tfrecord::Compression,
    /// How URLs are reached and read; empty: the environment's settings.
    #[serde(skip_serializing_if = "crate::sources::storage::StorageSpec::is_empty")]
    pub storage: crate::sources::storage::StorageSpec,
}

impl Default for CsvSpec {
    fn default() -> Self {
        CsvSpec {
            record_defaults: Vec::new(),
            header: false,
            select_cols: Vec::new(),
            column_names: Vec::new(),
            field_delim: ",".to_string(),
            use_quote_delim: true,
            na_value: String::new(),
            num_rows_for_inference: 100,
            compression_type: sluice_proto::tfrecord::Compression::None,
            storage: Default::default(),
        }
    }
}

/// The columns a file's rows are read into: for each selected column (in file order), its
/// index in the file, name, type and default.
#[derive(Debug, Clone)]
struct Columns {
    index: Vec<usize>,
    names: Vec<Arc<str>>,
    defaults: Vec<ColumnDefault>,
}

impl CsvSpec {
    /// A spec with `record_defaults`, every other key at its default.
    pub fn new(record_defaults: Vec<ColumnDefault>) -> Self {
        CsvSpec {
            record_defaults,
            ..CsvSpec::default()
        }
    }

    fn delim(&self) -> u8 {
        self.field_delim.as_bytes().first().copied().unwrap_or(b',')
    }

    /// The selected columns of a file whose header (when it has one) is `header`.
    fn columns(
        &self,
        header: Option<&[Bytes]>,
        path: &str,
    ) -> std::result::Result<Columns, String> {
        let names_in_file: Option<Vec<String>> = if !self.column_names.is_empty() {
            Some(self.column_names.clone())
        } else {
            header.map(|h| {
                h.iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect()
            })
        };
        let mut index: Vec<usize> = if self.select_cols.is_empty() {
            let n = if !self.record_defaults.is_empty() {
                self.record_defaults.len()
            } else {
                names_in_file.as_ref().map_or(0, Vec::len)
            };
            (0..n).collect()
        } else {
            let mut index = Vec::new();
            for c in &self.select_cols {
                index.push(match c {
                    ColumnRef::Index(i) => *i,
                    ColumnRef::Name(n) => {
                        let Some(names) = &names_in_file else {
                            return Err(format!(
                                "select_cols names column {n:?}, but {path} has no header and \
                                 no column_names are given"
                            ));
                        };
                        names.iter().position(|m| m == n).ok_or_else(|| {
                            format!(
                                "select_cols names column {n:?}, which {path} does not have \
                                 (its columns: {})",
                                names.join(", ")
                            )
                        })?
                    }
                });
            }
            index.sort_unstable();
            if index.windows(2).any(|w| w[0] == w[1]) {
                return Err("select_cols names a column twice".to_string());
            }
            index
        };
        if index.is_empty() && self.record_defaults.is_empty() {
            index = Vec::new();
        }
        let names = index
            .iter()
            .map(|&i| {
                names_in_file
                    .as_ref()
                    .and_then(|n| n.get(i).cloned())
                    .unwrap_or_else(|| format!("col{i}"))
            })
            .map(|n| Arc::from(n.as_str()))
            .collect();
        Ok(Columns {
            index,
            names,
            defaults: self.record_defaults.clone(),
        })
    }

    /// `make_csv_dataset`'s inference: each column's type from the first rows.
    fn infer(&self, rows: &[Vec<Bytes>], width: usize) -> Vec<ColumnDefault> {
        (0..width)
            .map(|c| {
                let mut t: Option<CsvType> = None;
                for row in rows {
                    let Some(f) = row.get(c) else { continue };
                    if f.is_empty() || f.as_ref() == self.na_value.as_bytes() {
                        continue;
                    }
                    t = Some(infer_type(f, t));
                }
                let dtype = t.unwrap_or(CsvType::String);
                let default = match dtype {
                    CsvType::Int32 | CsvType::Int64 => CsvValue::Int(0),
                    CsvType::Float32 | CsvType::Float64 => CsvValue::Float(0.0),
                    CsvType::String => CsvValue::Bytes(Bytes::new()),
                };
                ColumnDefault::with_default(dtype, default)
            })
            .collect()
    }
}

/// The narrowest of int32, int64, float32, float64, string that holds `field` and is at
/// least `prev` (`make_csv_dataset`'s `_infer_type`).
fn infer_type(field: &[u8], prev: Option<CsvType>) -> CsvType {
    let order = [
        CsvType::Int32,
        CsvType::Int64,
        CsvType::Float32,
        CsvType::Float64,
        CsvType::String,
    ];
    let start = prev.map_or(0, |p| order.iter().position(|&t| t == p).unwrap_or(0));
    let s = std::str::from_utf8(field).unwrap_or("").trim();
    for &t in &order[start..] {
        let fits = match t {
            CsvType::Int32 => s.parse::<i32>().is_ok(),
            CsvType::Int64 => s.parse::<i64>().is_ok(),
            CsvType::Float32 => s
                .parse::<f32>()
                .is_ok_and(|v| !v.is_infinite() || s.to_ascii_lowercase().contains("inf")),
            CsvType::Float64 => s.parse::<f64>().is_ok(),
            CsvType::String => true,
        };
        if fits {
            return t;
        }
    }
    CsvType::String
}

impl FileFormat for CsvSpec {
    fn name(&self) -> &'static str {
        "csv"
    }

    fn params(&self) -> Params {
        Params::of(self).without(&["storage"]).with(
            "storage",
            if self.storage.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::to_value(self.storage.redacted()).unwrap_or_default()
            },
        )
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.field_delim.len() != 1 {
            return Err(Invalid::at(
                "field_delim",
                format!("`field_delim` must be one byte, got {:?}", self.field_delim),
            ));
        }
        if self.field_delim == "\"" || self.field_delim == "\n" || self.field_delim == "\r" {
            return Err(Invalid::at(
                "field_delim",
                "`field_delim` cannot be a quote or a line break",
            ));
        }
        for (i, d) in self.record_defaults.iter().enumerate() {
            d.check()
                .map_err(|m| Invalid::at("record_defaults", format!("entry {i}: {m}")))?;
        }
        if !self.select_cols.is_empty()
            && !self.record_defaults.is_empty()
            && self.select_cols.len() != self.record_defaults.len()
        {
            return Err(Invalid::at(
                "record_defaults",
                format!(
                    "{} record_defaults for {} select_cols: give one per selected column",
                    self.record_defaults.len(),
                    self.select_cols.len()
                ),
            ));
        }
        if self.record_defaults.is_empty() && self.num_rows_for_inference == 0 {
            return Err(Invalid::at(
                "num_rows_for_inference",
                "without record_defaults the types are inferred from at least one row",
            ));
        }
        Ok(())
    }

    fn opening(&self) -> Opening {
        Opening {
            compression_type: self.compression_type,
            storage: self.storage.clone(),
        }
    }

    fn records(&self, file: OpenedFile) -> Result<Box<dyn RecordReader>> {
        Ok(Box::new(ChunkRecords::new(
            self.chunks(file)?,
            RECORD_CHUNK,
        )))
    }

    fn reads_chunks(&self) -> bool {
        true
    }

    fn open_chunks(&self, path: &str) -> Result<Box<dyn ChunkReader>> {
        // Read fused with `batch`: the rows are split on a thread of their own while they
        // are parsed into the batch's columns.
        Ok(Box::new(
            self.chunks(self.opening().open(path)?)?.split_ahead()?,
        ))
    }
}

/// Rows read at once for the element-per-record path: its records are rows of these
/// chunks (each value a one-row slice of its column's buffer).
const RECORD_CHUNK: usize = 64;

impl CsvSpec {
    /// The rows of `file`, read in chunks.
    fn chunks(&self, file: OpenedFile) -> Result<CsvChunks> {
        let mut rows = Rows::new(file.input, self.delim(), self.use_quote_delim);
        let header = if self.header {
            match rows.next_row() {
                Some(Ok(row)) => Some(row.owned_fields()),
                Some(Err(e)) => {
                    return Err(Error::data(format!(
                        "{}: the header: {}",
                        file.path, e.message
                    )));
                }
                None => None,
            }
        } else {
            None
        };
        let mut columns = self
            .columns(header.as_deref(), &file.path)
            .map_err(|m| Error::InvalidArgument(format!("csv source: {m}")))?;
        let mut ahead = std::collections::VecDeque::new();
        if columns.defaults.is_empty() {
            // Types inferred from the first rows (read ahead, then returned first).
            let mut sample = Vec::new();
            while sample.len() < self.num_rows_for_inference {
                match rows.next_row() {
                    Some(Ok(row)) => {
                        sample.push(row.owned_fields());
                        ahead.push_back(Ok(row));
                    }
                    Some(Err(e)) => {
                        ahead.push_back(Err((e, !rows.eof)));
                        break;
                    }
                    None => break,
                }
            }
            let width = sample.iter().map(Vec::len).max().unwrap_or(0);
            let inferred = self.infer(&sample, width);
            if columns.index.is_empty() {
                columns.index = (0..width).collect();
                columns.names = (0..width)
                    .map(|i| {
                        header
                            .as_ref()
                            .and_then(|h| h.get(i))
                            .map(|f| String::from_utf8_lossy(f).into_owned())
                            .or_else(|| self.column_names.get(i).cloned())
                            .unwrap_or_else(|| format!("col{i}"))
                    })
                    .map(|n| Arc::from(n.as_str()))
                    .collect();
            }
            columns.defaults = columns
                .index
                .iter()
                .map(|&i| {
                    inferred.get(i).cloned().unwrap_or_else(|| {
                        ColumnDefault::with_default(CsvType::String, CsvValue::Bytes(Bytes::new()))
                    })
                })
                .collect();
        }
        let builder = Builder::new(&columns.defaults);
        Ok(CsvChunks {
            source: Source::Here(Box::new(rows)),
            ahead,
            columns,
            na: Bytes::from(self.na_value.clone().into_bytes()),
            exact: self.select_cols.is_empty(),
            builder,
            pending: None,
        })
    }
}

/// One row: its fields, where it starts, its first line.
struct Row {
    /// The row's bytes (a copy of the file's).
    data: Bytes,
    /// Each field's bounds in `data`, or its unescaped bytes (a quoted field with `""`).
    fields: Vec<Field>,
    offset: u64,
    line: u64,
}

/// Where a field's bytes are.
enum Field {
    /// `data[start..end]`.
    In(usize, usize),
    /// Bytes of its own.
    Own(Bytes),
}

impl Row {
    /// Field `i`'s bytes.
    fn field(&self, i: usize) -> &[u8] {
        match &self.fields[i] {
            Field::In(start, end) => &self.data[*start..*end],
            Field::Own(b) => b,
        }
    }

    /// Field `i` as a `Bytes` (a slice of the row's, no copy).
    fn field_bytes(&self, i: usize) -> Bytes {
        match &self.fields[i] {
            Field::In(start, end) => self.data.slice(*start..*end),
            Field::Own(b) => b.clone(),
        }
    }

    fn owned_fields(&self) -> Vec<Bytes> {
        (0..self.fields.len())
            .map(|i| self.field_bytes(i))
            .collect()
    }
}

/// A row split where it lies in the reader's buffer.
struct RowView<'a> {
    /// Its bytes (its terminator included).
    data: &'a [u8],
    /// Each field's bounds in `data`, and whether it holds `""` to unescape.
    bounds: &'a [(usize, usize, bool)],
    offset: u64,
    line: u64,
}

/// A row that could not be split.
struct RowError {
    offset: u64,
    message: String,
}

/// TensorFlow's CSV tokenizer over a byte stream: rows are found in a buffer read in large
/// blocks; each row is copied once into a `Bytes` its fields are slices of (a quoted field
/// with `""` in it gets its own unescaped copy).
struct Rows {
    input: Box<dyn BufRead + Send>,
    delim: u8,
    quotes: bool,
    /// Bytes read and not yet consumed: `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    /// The stream offset of `buf[pos]`.
    offset: u64,
    /// The line `buf[pos]` is on (from 1).
    line: u64,
    /// The input is exhausted (what is left is in `buf`).
    input_done: bool,
    /// No more rows.
    eof: bool,
    /// Field bounds of the row being split, reused: (start, end, unescape), relative to
    /// the row's start.
    bounds: Vec<(usize, usize, bool)>,
    /// The bytes that end an unquoted field's scan: the delimiter, `\n`, `\r`, and `"`
    /// when quotes are read.
    stops: [bool; 256],
}

/// Block size of the reads.
const BLOCK: usize = 1 << 20;

/// What splitting the bytes at hand gave.
enum Split {
    /// A whole row of `len` bytes (its terminator included) with `newlines` line breaks.
    Row { len: usize, newlines: u64 },
    /// The bytes end inside the row: more are needed (or, at the end of the input, the row
    /// ends there, or a quoted field is not closed).
    More,
    /// A bad row: the message, and how many bytes to skip (to the end of its line).
    Bad { message: String, skip: usize },
}

impl Rows {
    fn new(input: Box<dyn BufRead + Send>, delim: u8, quotes: bool) -> Rows {
        Rows {
            input,
            delim,
            quotes,
            buf: Vec::new(),
            pos: 0,
            offset: 0,
            line: 1,
            input_done: false,
            eof: false,
            bounds: Vec::new(),
            stops: {
                let mut stops = [false; 256];
                for b in [delim, b'\n', b'\r'] {
                    stops[usize::from(b)] = true;
                }
                stops[usize::from(b'"')] = quotes;
                stops
            },
        }
    }

    /// Reads another block into the buffer (dropping what was consumed). `Ok(false)` at the
    /// end of the input.
    fn refill(&mut self) -> std::io::Result<bool> {
        if self.input_done {
            return Ok(false);
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        let start = self.buf.len();
        self.buf.resize(start + BLOCK, 0);
        let mut filled = start;
        while filled < self.buf.len() {
            match self.input.read(&mut self.buf[filled..]) {
                Ok(0) => {
                    self.input_done = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(filled);
                    return Err(e);
                }
            }
        }
        self.buf.truncate(filled);
        Ok(filled > start)
    }

    /// Splits the row at the start of `bytes` into `self.bounds`. `at_end`: no bytes come
    /// after these.
    fn split(&mut self, bytes: &[u8], at_end: bool) -> Split {
        self.bounds.clear();
        let (delim, quotes) = (self.delim, self.quotes);
        let mut i = 0;
        let mut newlines = 0;
        loop {
            // One field, from `i`.
            if quotes && bytes.get(i) == Some(&b'"') {
                let start = i + 1;
                let mut j = start;
                let mut escaped = false;
                loop {
                    match memchr_quote(&bytes[j..]) {
                        Some(k) => {
                            newlines += count_newlines(&bytes[j..j + k]);
                            j += k;
                            if bytes.get(j + 1) == Some(&b'"') {
                                escaped = true;
                                j += 2;
                                continue;
                            }
                            if j + 1 == bytes.len() && !at_end {
                                return Split::More;
                            }
                            break;
                        }
                        None if at_end => {
                            return Split::Bad {
                                message: "the file ends inside a quoted field (no closing \
                                          quote)"
                                    .to_string(),
                                skip: bytes.len(),
                            };
                        }
                        None => return Split::More,
                    }
                }
                self.bounds.push((start, j, escaped));
                i = j + 1;
                match bytes.get(i) {
                    Some(&b) if b == delim => i += 1,
                    Some(b'\n') => {
                        return Split::Row {
                            len: i + 1,
                            newlines: newlines + 1,
                        };
                    }
                    Some(b'\r') => return self.end_cr(bytes, i, newlines, at_end),
                    None if at_end => return Split::Row { len: i, newlines },
                    None => return Split::More,
                    Some(&b) => {
                        return Split::Bad {
                            message: format!(
                                "a quoted field is followed by {:?}, not by the delimiter \
                                 or the end of the line",
                                b as char
                            ),
                            skip: line_end(bytes, i),
                        };
                    }
                }
                continue;
            }
            // An unquoted field: up to the delimiter or the end of the line.
            let start = i;
            let mut j = i;
            while j < bytes.len() && !self.stops[usize::from(bytes[j])] {
                j += 1;
            }
            if quotes && bytes.get(j) == Some(&b'"') {
                return Split::Bad {
                    message: "a quote inside an unquoted field (quote the whole field, \
                              or set use_quote_delim = false)"
                        .to_string(),
                    skip: line_end(bytes, j),
                };
            }
            self.bounds.push((start, j, false));
            match bytes.get(j) {
                Some(&b) if b == delim => i = j + 1,
                Some(b'\n') => {
                    return Split::Row {
                        len: j + 1,
                        newlines: newlines + 1,
                    };
                }
                Some(b'\r') => return self.end_cr(bytes, j, newlines, at_end),
                Some(_) => unreachable!("the scan stops only at these"),
                None if at_end => return Split::Row { len: j, newlines },
                None => return Split::More,
            }
        }
    }

    /// A row ending at the `\r` at `i` (and a `\n` after it).
    fn end_cr(&self, bytes: &[u8], i: usize, newlines: u64, at_end: bool) -> Split {
        match bytes.get(i + 1) {
            Some(b'\n') => Split::Row {
                len: i + 2,
                newlines: newlines + 1,
            },
            None if !at_end => Split::More,
            _ => Split::Row {
                len: i + 1,
                newlines: newlines + 1,
            },
        }
    }

    /// The next row, copied out (for the rows read ahead, and the header).
    fn next_row(&mut self) -> Option<std::result::Result<Row, RowError>> {
        self.next_row_with(|view| Row {
            data: Bytes::copy_from_slice(view.data),
            fields: view
                .bounds
                .iter()
                .map(|&(start, end, escaped)| {
                    if escaped {
                        Field::Own(Bytes::from(unescape(&view.data[start..end])))
                    } else {
                        Field::In(start, end)
                    }
                })
                .collect(),
            offset: view.offset,
            line: view.line,
        })
    }

    /// What `f` makes of the next row, seen where it lies in the buffer (no copy).
    fn next_row_with<R>(
        &mut self,
        f: impl FnOnce(&RowView<'_>) -> R,
    ) -> Option<std::result::Result<R, RowError>> {
        if self.eof {
            return None;
        }
        let mut f = Some(f);
        loop {
            if self.pos == self.buf.len() {
                match self.refill() {
                    Ok(true) => {}
                    Ok(false) => {
                        self.eof = true;
                        return None;
                    }
                    Err(e) => return Some(Err(self.fail(format!("cannot read: {e}")))),
                }
            }
            let at_end = self.input_done;
            let bytes = std::mem::take(&mut self.buf);
            let split = self.split(&bytes[self.pos..], at_end);
            self.buf = bytes;
            match split {
                Split::Row { len, newlines } => {
                    let view = RowView {
                        data: &self.buf[self.pos..self.pos + len],
                        bounds: &self.bounds,
                        offset: self.offset,
                        line: self.line,
                    };
                    let out = (f.take().expect("called once"))(&view);
                    self.consume(len, newlines);
                    return Some(Ok(out));
                }
                Split::More => match self.refill() {
                    Ok(_) => {}
                    Err(e) => return Some(Err(self.fail(format!("cannot read: {e}")))),
                },
                Split::Bad { message, skip } => {
                    let err = RowError {
                        offset: self.offset,
                        message: format!("line {}: {message}", self.line),
                    };
                    let rest = &self.buf[self.pos..self.pos + skip];
                    let newlines = count_newlines(rest);
                    // Past the line's end too.
                    let mut skip = skip;
                    let tail = &self.buf[self.pos + skip..];
                    let extra = match tail {
                        [b'\r', b'\n', ..] => 2,
                        [b'\r', ..] | [b'\n', ..] => 1,
                        _ => 0,
                    };
                    skip += extra;
                    self.consume(skip, newlines + u64::from(extra > 0));
                    if self.pos == self.buf.len() && self.input_done {
                        self.eof = true;
                    }
                    return Some(Err(err));
                }
            }
        }
    }

    fn consume(&mut self, len: usize, newlines: u64) {
        self.pos += len;
        self.offset += len as u64;
        self.line += newlines;
    }

    fn fail(&mut self, message: String) -> RowError {
        self.eof = true;
        RowError {
            offset: self.offset,
            message: format!("line {}: {message}", self.line),
        }
    }
}

/// The position of the next `"` in `bytes`.
fn memchr_quote(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'"')
}

/// Line breaks (`\n`, or `\r` not followed by `\n`) in `bytes`.
fn count_newlines(bytes: &[u8]) -> u64 {
    let mut n = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
            n += 1;
        }
    }
    n
}

/// Where the line holding `bytes[i]` ends (its terminator excluded).
fn line_end(bytes: &[u8], i: usize) -> usize {
    bytes[i..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map_or(bytes.len(), |k| i + k)
}

/// A quoted field's bytes with each `""` made one `"`.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        out.push(field[i]);
        i += if field[i] == b'"' { 2 } else { 1 };
    }
    out
}

/// The rows of one CSV file, parsed into columns a chunk at a time.
struct CsvChunks {
    source: Source,
    /// Rows read ahead for the type inference.
    ahead: std::collections::VecDeque<std::result::Result<Row, (RowError, bool)>>,
    columns: Columns,
    na: Bytes,
    /// Every column is read: a row must have exactly as many fields.
    exact: bool,
    builder: Builder,
    /// A bad row met after the rows of the last chunk: the next call's.
    pending: Option<RecordError>,
}

impl ChunkReader for CsvChunks {
    fn next_chunk(&mut self, max: usize) -> Option<std::result::Result<Chunk, RecordError>> {
        if let Some(bad) = self.pending.take() {
            return Some(Err(bad));
        }
        let setup = Setup {
            columns: &self.columns,
            na: &self.na,
            exact: self.exact,
        };
        while self.builder.rows() < max {
            let pushed = match self.ahead.pop_front() {
                Some(Ok(row)) => Ok(self.builder.push_row(&setup, &row)),
                Some(Err(e)) => Err(e),
                None => {
                    let builder = &mut self.builder;
                    match self
                        .source
                        .next_row_with(|row| builder.push_row(&setup, row))
                    {
                        Some(Ok(pushed)) => Ok(pushed),
                        Some(Err(e)) => Err(e),
                        None => break,
                    }
                }
            };
            let bad = match pushed {
                Ok(Ok(())) => continue,
                Ok(Err(bad)) => bad,
                Err((e, recoverable)) => RecordError {
                    offset: e.offset,
                    feature: None,
                    message: e.message,
                    recoverable,
                },
            };
            if self.builder.rows() == 0 {
                return Some(Err(bad));
            }
            self.pending = Some(bad);
            break;
        }
        if self.builder.rows() == 0 {
            return None;
        }
        Some(Ok(self.builder.finish(&self.columns)))
    }
}

impl CsvChunks {
    /// This reader with the file's rows split ahead on a thread of their own (in blocks of
    /// [`BLOCK_ROWS`]), so that splitting and parsing run at once.
    fn split_ahead(mut self) -> Result<CsvChunks> {
        let Source::Here(rows) = self.source else {
            return Ok(self);
        };
        let (tx, rx) = crossbeam_channel::bounded(AHEAD_BLOCKS);
        std::thread::Builder::new()
            .name("sluice-csv-split".into())
            .spawn(move || split_blocks(*rows, tx))
            .map_err(|e| Error::internal(format!("cannot start a thread: {e}")))?;
        self.source = Source::Ahead {
            blocks: rx,
            current: None,
            next: 0,
        };
        Ok(self)
    }
}

/// Rows per block split ahead.
const BLOCK_ROWS: usize = 512;
/// Blocks split ahead at most.
const AHEAD_BLOCKS: usize = 4;

/// Where a file's rows come from.
enum Source {
    /// Split here, as they are parsed.
    Here(Box<Rows>),
    /// Split ahead by a thread of their own ([`split_blocks`]).
    Ahead {
        blocks: crossbeam_channel::Receiver<Block>,
        current: Option<Block>,
        /// The next row of `current`.
        next: usize,
    },
}

impl Source {
    /// What `f` makes of the next row; `None` at the end; a row that cannot be split, and
    /// whether reading can go on after it.
    fn next_row_with<R>(
        &mut self,
        f: impl FnOnce(&RowView<'_>) -> R,
    ) -> Option<std::result::Result<R, (RowError, bool)>> {
        match self {
            Source::Here(rows) => match rows.next_row_with(f)? {
                Ok(r) => Some(Ok(r)),
                Err(e) => Some(Err((e, !rows.eof))),
            },
            Source::Ahead {
                blocks,
                current,
                next,
            } => loop {
                let Some(block) = current else {
                    *current = Some(blocks.recv().ok()?);
                    *next = 0;
                    continue;
                };
                if let Some(row) = block.rows.get(*next) {
                    *next += 1;
                    let view = RowView {
                        data: &block.data[row.bytes.clone()],
                        bounds: &block.bounds[row.fields.clone()],
                        offset: row.offset,
                        line: row.line,
                    };
                    return Some(Ok(f(&view)));
                }
                if let Some(bad) = block.error.take() {
                    return Some(Err(bad));
                }
                *current = None;
            },
        }
    }
}

/// Rows split ahead: their bytes one after the other, their fields' bounds (relative to
/// each row's start), and the row that could not be split after them, if one.
#[derive(Default)]
struct Block {
    data: Vec<u8>,
    bounds: Vec<(usize, usize, bool)>,
    rows: Vec<BlockRow>,
    error: Option<(RowError, bool)>,
}

struct BlockRow {
    bytes: std::ops::Range<usize>,
    fields: std::ops::Range<usize>,
    offset: u64,
    line: u64,
}

impl Block {
    fn push(&mut self, row: &RowView<'_>) {
        let (start, first) = (self.data.len(), self.bounds.len());
        self.data.extend_from_slice(row.data);
        self.bounds.extend_from_slice(row.bounds);
        self.rows.push(BlockRow {
            bytes: start..self.data.len(),
            fields: first..self.bounds.len(),
            offset: row.offset,
            line: row.line,
        });
    }
}

/// The splitting thread: `rows` in blocks, until the end of the file or until the reader
/// is dropped (the channel closes).
fn split_blocks(mut rows: Rows, blocks: crossbeam_channel::Sender<Block>) {
    loop {
        let mut block = Block::default();
        let mut end = false;
        while block.rows.len() < BLOCK_ROWS {
            match rows.next_row_with(|row| block.push(row)) {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    block.error = Some((e, !rows.eof));
                    break;
                }
                None => {
                    end = true;
                    break;
                }
            }
        }
        let some = !block.rows.is_empty() || block.error.is_some();
        if some && blocks.send(block).is_err() {
            return;
        }
        if end {
            return;
        }
    }
}

/// What parsing a row needs besides the row.
struct Setup<'a> {
    columns: &'a Columns,
    na: &'a [u8],
    exact: bool,
}

/// The fields of a row, split.
trait Fields {
    fn count(&self) -> usize;
    /// Field `i`'s bytes (a quoted field's with each `""` made one `"`).
    fn field(&self, i: usize) -> Cow<'_, [u8]>;
    /// The row's bytes, and where field `i` lies in them when it is a plain slice of them
    /// (not unescaped).
    fn raw(&self) -> &[u8];
    fn span(&self, i: usize) -> Option<(usize, usize)>;
    fn offset(&self) -> u64;
    fn line(&self) -> u64;
}

impl Fields for Row {
    fn count(&self) -> usize {
        self.fields.len()
    }
    fn field(&self, i: usize) -> Cow<'_, [u8]> {
        Cow::Borrowed(Row::field(self, i))
    }
    fn raw(&self) -> &[u8] {
        &self.data
    }
    fn span(&self, i: usize) -> Option<(usize, usize)> {
        match self.fields[i] {
            Field::In(start, end) => Some((start, end)),
            Field::Own(_) => None,
        }
    }
    fn offset(&self) -> u64 {
        self.offset
    }
    fn line(&self) -> u64 {
        self.line
    }
}

impl Fields for RowView<'_> {
    fn count(&self) -> usize {
        self.bounds.len()
    }
    fn field(&self, i: usize) -> Cow<'_, [u8]> {
        let (start, end, escaped) = self.bounds[i];
        let bytes = &self.data[start..end];
        if escaped {
            Cow::Owned(unescape(bytes))
        } else {
            Cow::Borrowed(bytes)
        }
    }
    fn raw(&self) -> &[u8] {
        self.data
    }
    fn span(&self, i: usize) -> Option<(usize, usize)> {
        let (start, end, escaped) = self.bounds[i];
        (!escaped).then_some((start, end))
    }
    fn offset(&self) -> u64 {
        self.offset
    }
    fn line(&self) -> u64 {
        self.line
    }
}

/// One column being filled.
enum Col {
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// Each value's bounds in the builder's byte arena.
    Str(Vec<(usize, usize)>),
}

impl Col {
    fn new(dtype: CsvType) -> Col {
        match dtype {
            CsvType::Int32 => Col::I32(Vec::new()),
            CsvType::Int64 => Col::I64(Vec::new()),
            CsvType::Float32 => Col::F32(Vec::new()),
            CsvType::Float64 => Col::F64(Vec::new()),
            CsvType::String => Col::Str(Vec::new()),
        }
    }

    fn truncate(&mut self, n: usize) {
        match self {
            Col::I32(v) => v.truncate(n),
            Col::I64(v) => v.truncate(n),
            Col::F32(v) => v.truncate(n),
            Col::F64(v) => v.truncate(n),
            Col::Str(v) => v.truncate(n),
        }
    }
}

/// Rows parsed into typed columns: numbers straight into their column's buffer, strings
/// into one byte arena the chunk's values are slices of (no allocation per row or field).
struct Builder {
    cols: Vec<Col>,
    arena: Vec<u8>,
    offsets: Vec<u64>,
}

impl Builder {
    fn new(defaults: &[ColumnDefault]) -> Builder {
        Builder {
            cols: defaults.iter().map(|d| Col::new(d.dtype)).collect(),
            arena: Vec::new(),
            offsets: Vec::new(),
        }
    }

    fn rows(&self) -> usize {
        self.offsets.len()
    }

    /// Parses `row` into the columns; a bad row leaves them as they were.
    fn push_row(
        &mut self,
        setup: &Setup<'_>,
        row: &impl Fields,
    ) -> std::result::Result<(), RecordError> {
        let c = setup.columns;
        let want = c.index.last().map_or(0, |&i| i + 1);
        let n = row.count();
        if (setup.exact && n != c.index.len()) || n < want {
            let expected = if setup.exact { c.index.len() } else { want };
            return Err(RecordError {
                offset: row.offset(),
                feature: None,
                message: format!("line {}: expected {expected} fields, found {n}", row.line()),
                recoverable: true,
            });
        }
        let (rows, arena) = (self.rows(), self.arena.len());
        // The row checked as UTF-8 once: numbers are parsed from slices of it (fields
        // start and end at ASCII delimiters, so at character boundaries).
        let text = std::str::from_utf8(row.raw()).ok();
        for (k, &i) in c.index.iter().enumerate() {
            let field = row.field(i);
            let default = &c.defaults[k];
            let missing = field.is_empty() || (!setup.na.is_empty() && *field == *setup.na);
            let fault = if missing {
                match &default.default {
                    Some(v) => {
                        self.push_default(k, v);
                        None
                    }
                    None => Some(
                        "the field is missing and the column has no default (it is required)"
                            .to_string(),
                    ),
                }
            } else if self.push_field(k, &field, text.zip(row.span(i))) {
                None
            } else {
                Some(format!(
                    "not a valid {}: {:?}",
                    default.dtype,
                    String::from_utf8_lossy(&field)
                ))
            };
            if let Some(message) = fault {
                for col in &mut self.cols {
                    col.truncate(rows);
                }
                self.arena.truncate(arena);
                let name = &c.names[k];
                return Err(RecordError {
                    offset: row.offset(),
                    feature: Some(name.to_string()),
                    message: format!("line {}, column {i} (`{name}`): {message}", row.line()),
                    recoverable: true,
                });
            }
        }
        self.offsets.push(row.offset());
        Ok(())
    }

    /// Parses `field` into column `k` as TensorFlow parses it (numbers may have spaces
    /// around them); false when it is not a value of the column's type. `in_row`: the
    /// row's text and the field's place in it, when the field is a plain slice of it.
    fn push_field(
        &mut self,
        k: usize,
        field: &[u8],
        in_row: Option<(&str, (usize, usize))>,
    ) -> bool {
        if let Col::Str(v) = &mut self.cols[k] {
            let start = self.arena.len();
            self.arena.extend_from_slice(field);
            v.push((start, self.arena.len()));
            return true;
        }
        let text = match in_row {
            Some((row, (start, end))) => row.get(start..end),
            None => std::str::from_utf8(field).ok(),
        };
        let Some(s) = text.map(trim) else {
            return false;
        };
        match &mut self.cols[k] {
            Col::I32(v) => parse_int(s.as_bytes())
                .and_then(|x| i32::try_from(x).ok())
                .map(|x| v.push(x))
                .is_some(),
            Col::I64(v) => parse_int(s.as_bytes()).map(|x| v.push(x)).is_some(),
            Col::F32(v) => s.parse().map(|x| v.push(x)).is_ok(),
            Col::F64(v) => s.parse().map(|x| v.push(x)).is_ok(),
            Col::Str(_) => unreachable!("handled above"),
        }
    }

    /// Column `k`'s default (checked against its type when the pipeline was validated).
    fn push_default(&mut self, k: usize, value: &CsvValue) {
        match (&mut self.cols[k], value) {
            (Col::I32(v), CsvValue::Int(i)) => v.push(*i as i32),
            (Col::I64(v), CsvValue::Int(i)) => v.push(*i),
            (Col::F32(v), CsvValue::Int(i)) => v.push(*i as f32),
            (Col::F64(v), CsvValue::Int(i)) => v.push(*i as f64),
            (Col::F32(v), CsvValue::Float(f)) => v.push(*f as f32),
            (Col::F64(v), CsvValue::Float(f)) => v.push(*f),
            (Col::Str(v), CsvValue::Bytes(b)) => {
                let start = self.arena.len();
                self.arena.extend_from_slice(b);
                v.push((start, self.arena.len()));
            }
            (_, v) => unreachable!("default {v:?} does not fit its column"),
        }
    }

    /// The rows so far as a chunk (each column a vector `[rows]`); empties the builder.
    fn finish(&mut self, columns: &Columns) -> Chunk {
        let rows = self.rows();
        let arena = Bytes::from(std::mem::take(&mut self.arena));
        let columns = columns
            .names
            .iter()
            .zip(&mut self.cols)
            .map(|(name, col)| {
                let data = match col {
                    Col::I32(v) => TensorData::I32(Shared::from(take_vec(v, rows))),
                    Col::I64(v) => TensorData::I64(Shared::from(take_vec(v, rows))),
                    Col::F32(v) => TensorData::F32(Shared::from(take_vec(v, rows))),
                    Col::F64(v) => TensorData::F64(Shared::from(take_vec(v, rows))),
                    Col::Str(v) => {
                        let mut out = sluice_tensor::pool::take::<Bytes>(rows);
                        out.extend(v.drain(..).map(|(a, b)| arena.slice(a..b)));
                        TensorData::Bytes(Shared::from(out))
                    }
                };
                let t = Tensor::new(&[rows], data).expect("one value per row");
                (Arc::clone(name), Value::Dense(t))
            })
            .collect();
        Chunk {
            offsets: std::mem::take(&mut self.offsets),
            columns,
        }
    }
}

/// `s` without the whitespace around it (`str::trim`, skipped when it starts and ends with
/// ASCII characters that are not whitespace: Unicode's other white space is not ASCII).
fn trim(s: &str) -> &str {
    let b = s.as_bytes();
    let plain = |c: Option<&u8>| c.is_some_and(|&c| c.is_ascii() && !c.is_ascii_whitespace());
    if plain(b.first()) && plain(b.last()) {
        s
    } else {
        s.trim()
    }
}

/// An integer as `i64::from_str` reads it (an optional sign, then decimal digits), from
/// bytes; `None` when it is not one or does not fit.
fn parse_int(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulated negatively, so that i64::MIN fits.
    let mut acc: i64 = 0;
    for &d in digits {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        acc = acc.checked_mul(10)?.checked_sub(i64::from(d))?;
    }
    if negative {
        Some(acc)
    } else {
        acc.checked_neg()
    }
}

/// The values of `v` (its `rows`), leaving it empty with room for as many (from the pool
/// the tensors' buffers return to).
fn take_vec<T: Poolable>(v: &mut Vec<T>, rows: usize) -> Vec<T> {
    std::mem::replace(v, sluice_tensor::pool::take(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The byte-level integer parse reads exactly what `i64::from_str` reads.
        #[test]
        fn parse_int_agrees_with_std(s in "[-+]?[0-9]{0,21}|[-+0-9a ]{0,6}|.{0,4}") {
            prop_assert_eq!(parse_int(s.as_bytes()), s.parse::<i64>().ok());
        }

        /// The trim is `str::trim`.
        #[test]
        fn trim_agrees_with_std(s in "\\PC{0,6}|[ \t\u{a0}\u{3000}]?[0-9.]{0,3}[ \t\u{a0}\u{2003}]?") {
            prop_assert_eq!(trim(&s), s.trim());
        }
    }

    #[test]
    fn parse_int_extremes() {
        for s in [
            "-9223372036854775808",
            "9223372036854775807",
            "+0",
            "-0",
            "007",
        ] {
            assert_eq!(parse_int(s.as_bytes()), s.parse::<i64>().ok(), "{s}");
        }
        for s in [
            "9223372036854775808",
            "-9223372036854775809",
            "",
            "+",
            "-",
            "1-",
            " 1",
        ] {
            assert_eq!(parse_int(s.as_bytes()), None, "{s:?}");
        }
    }
}
