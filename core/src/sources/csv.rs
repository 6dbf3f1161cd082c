//! `csv`: rows of CSV files (`tf.data.experimental.CsvDataset`, and `make_csv_dataset`'s
//! type inference).
//!
//! The fields are split as TensorFlow's CSV reader splits them, which is not RFC 4180's
//! reading in three places, so the tokenizer is Sluice's own (a few dozen lines over bytes)
//! rather than the `csv` crate's: an empty line is a record (of one empty field), a quote
//! inside an unquoted field is an error, and a lone `\r` ends a record as `\n` and `\r\n`
//! do. The fixtures in `tests/fixtures/formats/` hold TensorFlow's readings of the awkward
//! cases.

use std::fmt;
use std::io::BufRead;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::sources::format::{FileFormat, OpenedFile, Opening, Record, RecordError, RecordReader};
use crate::tensor::{Tensor, TensorData};

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
        let mut rows = Rows {
            input: file.input,
            delim: self.delim(),
            quotes: self.use_quote_delim,
            offset: 0,
            line: 1,
            eof: false,
        };
        let header = if self.header {
            match rows.next_row() {
                Some(Ok(row)) => Some(row.fields),
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
                        sample.push(row.fields.clone());
                        ahead.push_back(Ok(row));
                    }
                    Some(Err(e)) => {
                        ahead.push_back(Err(e));
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
        Ok(Box::new(CsvRecords {
            rows,
            ahead,
            columns,
            na: Bytes::from(self.na_value.clone().into_bytes()),
            exact: self.select_cols.is_empty(),
        }))
    }
}

/// One row: its fields, where it starts, its first line.
struct Row {
    fields: Vec<Bytes>,
    offset: u64,
    line: u64,
}

/// A row that could not be split.
struct RowError {
    offset: u64,
    message: String,
}

/// TensorFlow's CSV tokenizer over a byte stream.
struct Rows {
    input: Box<dyn BufRead + Send>,
    delim: u8,
    quotes: bool,
    offset: u64,
    line: u64,
    eof: bool,
}

impl Rows {
    fn peek(&mut self) -> std::io::Result<Option<u8>> {
        let buf = self.input.fill_buf()?;
        Ok(buf.first().copied())
    }

    fn bump(&mut self) {
        self.input.consume(1);
        self.offset += 1;
    }

    fn next_row(&mut self) -> Option<std::result::Result<Row, RowError>> {
        if self.eof {
            return None;
        }
        let start = self.offset;
        let line = self.line;
        let err = |s: &Self, message: String| RowError {
            offset: start,
            message: format!("line {line}: {message}", line = s.line.min(line).max(line)),
        };
        match self.peek() {
            Ok(None) => {
                self.eof = true;
                return None;
            }
            Ok(Some(_)) => {}
            Err(e) => {
                self.eof = true;
                return Some(Err(err(self, format!("cannot read: {e}"))));
            }
        }
        let mut fields = Vec::new();
        let mut field = Vec::new();
        loop {
            // One field.
            field.clear();
            let quoted = self.quotes && matches!(self.peek(), Ok(Some(b'"')));
            if quoted {
                self.bump();
                loop {
                    match self.peek() {
                        Ok(Some(b'"')) => {
                            self.bump();
                            if matches!(self.peek(), Ok(Some(b'"'))) {
                                self.bump();
                                field.push(b'"');
                            } else {
                                break;
                            }
                        }
                        Ok(Some(b)) => {
                            if b == b'\n' {
                                self.line += 1;
                            }
                            field.push(b);
                            self.bump();
                        }
                        Ok(None) => {
                            self.eof = true;
                            return Some(Err(err(
                                self,
                                "the file ends inside a quoted field (no closing quote)"
                                    .to_string(),
                            )));
                        }
                        Err(e) => {
                            self.eof = true;
                            return Some(Err(err(self, format!("cannot read: {e}"))));
                        }
                    }
                }
            }
            // Up to the delimiter or the end of the record.
            let end = loop {
                match self.peek() {
                    Ok(Some(b)) if b == self.delim => {
                        self.bump();
                        break false;
                    }
                    Ok(Some(b'\n')) => {
                        self.bump();
                        self.line += 1;
                        break true;
                    }
                    Ok(Some(b'\r')) => {
                        self.bump();
                        if matches!(self.peek(), Ok(Some(b'\n'))) {
                            self.bump();
                        }
                        self.line += 1;
                        break true;
                    }
                    Ok(Some(b)) => {
                        if quoted {
                            let message = format!(
                                "a quoted field is followed by {:?}, not by the delimiter or \
                                 the end of the line",
                                b as char
                            );
                            self.skip_line();
                            return Some(Err(err(self, message)));
                        }
                        if b == b'"' && self.quotes {
                            self.skip_line();
                            return Some(Err(err(
                                self,
                                "a quote inside an unquoted field (quote the whole field, \
                                 or set use_quote_delim = false)"
                                    .to_string(),
                            )));
                        }
                        field.push(b);
                        self.bump();
                    }
                    Ok(None) => {
                        self.eof = true;
                        break true;
                    }
                    Err(e) => {
                        self.eof = true;
                        return Some(Err(err(self, format!("cannot read: {e}"))));
                    }
                }
            };
            fields.push(Bytes::copy_from_slice(&field));
            if end {
                return Some(Ok(Row {
                    fields,
                    offset: start,
                    line,
                }));
            }
        }
    }

    /// Skips to the start of the next line (after a bad row).
    fn skip_line(&mut self) {
        loop {
            match self.peek() {
                Ok(Some(b'\n')) => {
                    self.bump();
                    self.line += 1;
                    return;
                }
                Ok(Some(b'\r')) => {
                    self.bump();
                    if matches!(self.peek(), Ok(Some(b'\n'))) {
                        self.bump();
                    }
                    self.line += 1;
                    return;
                }
                Ok(Some(_)) => self.bump(),
                _ => {
                    self.eof = true;
                    return;
                }
            }
        }
    }
}

struct CsvRecords {
    rows: Rows,
    /// Rows read ahead for the type inference.
    ahead: std::collections::VecDeque<std::result::Result<Row, RowError>>,
    columns: Columns,
    na: Bytes,
    /// Every column is read: a row must have exactly as many fields.
    exact: bool,
}

impl RecordReader for CsvRecords {
    fn next_record(&mut self) -> Option<std::result::Result<Record, RecordError>> {
        let row = match self.ahead.pop_front().or_else(|| self.rows.next_row())? {
            Ok(row) => row,
            Err(e) => {
                return Some(Err(RecordError {
                    offset: e.offset,
                    feature: None,
                    message: e.message,
                    recoverable: !self.rows.eof,
                }));
            }
        };
        let c = &self.columns;
        let want = c.index.last().map_or(0, |&i| i + 1);
        let n = row.fields.len();
        if (self.exact && n != c.index.len()) || n < want {
            let expected = if self.exact { c.index.len() } else { want };
            return Some(Err(RecordError {
                offset: row.offset,
                feature: None,
                message: format!("line {}: expected {expected} fields, found {n}", row.line),
                recoverable: true,
            }));
        }
        let mut features = Vec::with_capacity(c.index.len());
        for (k, &i) in c.index.iter().enumerate() {
            let field = &row.fields[i];
            let default = &c.defaults[k];
            let name = &c.names[k];
            let bad = |message: String| RecordError {
                offset: row.offset,
                feature: Some(name.to_string()),
                message: format!("line {}, column {i} (`{name}`): {message}", row.line),
                recoverable: true,
            };
            let missing = field.is_empty() || (!self.na.is_empty() && *field == self.na);
            let tensor = if missing {
                match &default.default {
                    Some(v) => default_tensor(default.dtype, v),
                    None => {
                        return Some(Err(bad(
                            "the field is missing and the column has no default (it is \
                             required)"
                                .to_string(),
                        )));
                    }
                }
            } else {
                match parse_field(default.dtype, field) {
                    Some(t) => t,
                    None => {
                        return Some(Err(bad(format!(
                            "not a valid {}: {:?}",
                            default.dtype,
                            String::from_utf8_lossy(field)
                        ))));
                    }
                }
            };
            features.push((Arc::clone(name), tensor));
        }
        Some(Ok(Record {
            offset: row.offset,
            features,
        }))
    }
}

fn scalar(data: TensorData) -> Tensor {
    Tensor::new(&[], data).expect("one value, a scalar")
}

fn default_tensor(dtype: CsvType, v: &CsvValue) -> Tensor {
    match (dtype, v) {
        (CsvType::Int32, CsvValue::Int(i)) => scalar(TensorData::I32(vec![*i as i32].into())),
        (CsvType::Int64, CsvValue::Int(i)) => scalar(TensorData::I64(vec![*i].into())),
        (CsvType::Float32, CsvValue::Int(i)) => scalar(TensorData::F32(vec![*i as f32].into())),
        (CsvType::Float64, CsvValue::Int(i)) => scalar(TensorData::F64(vec![*i as f64].into())),
        (CsvType::Float32, CsvValue::Float(f)) => scalar(TensorData::F32(vec![*f as f32].into())),
        (CsvType::Float64, CsvValue::Float(f)) => scalar(TensorData::F64(vec![*f].into())),
        (_, CsvValue::Bytes(b)) => Tensor::scalar_bytes(b.clone()),
        // Checked when the pipeline was validated.
        (t, v) => unreachable!("default {v:?} for a {t} column"),
    }
}

/// A field's value as `dtype`, as TensorFlow parses it (numbers may have spaces around
/// them); `None` when it is not one.
fn parse_field(dtype: CsvType, field: &Bytes) -> Option<Tensor> {
    if dtype == CsvType::String {
        return Some(Tensor::scalar_bytes(field.clone()));
    }
    let s = std::str::from_utf8(field).ok()?.trim();
    Some(match dtype {
        CsvType::Int32 => scalar(TensorData::I32(vec![s.parse::<i32>().ok()?].into())),
        CsvType::Int64 => scalar(TensorData::I64(vec![s.parse::<i64>().ok()?].into())),
        CsvType::Float32 => scalar(TensorData::F32(vec![s.parse::<f32>().ok()?].into())),
        CsvType::Float64 => scalar(TensorData::F64(vec![s.parse::<f64>().ok()?].into())),
        CsvType::String => unreachable!(),
    })
}
