//! `sql`: the rows of a SQL query as elements, from a SQLite file (rusqlite, SQLite built
//! in) or a PostgreSQL server (the `postgres` client).
//!
//! Each row is an element with one scalar feature per column, named by the column and typed
//! from the column's type: integers (SQLite `INTEGER` affinity; PostgreSQL `int2`, `int4`,
//! `int8`, `oid`, `bool`) are `int64`, reals (`REAL` affinity; `float4`, `float8`) are
//! `float64`, text and blobs (`TEXT`, `BLOB`; `text`, `varchar`, `char`, `name`, `bytea`)
//! are byte strings. A SQLite column without a declared type (an expression) or of
//! `NUMERIC` affinity takes the type of its first non-NULL value in the partition. A NULL
//! is an error naming the row and column unless `null_defaults` gives the column a value;
//! a value of another type is an error naming them too. PostgreSQL types not listed are
//! refused by name (cast them in the query: `::text`, `::float8`).
//!
//! **Partitions**: with `partition_column` (an integer column) and `num_partitions`, the
//! query is read as `num_partitions` ranges of that column between `lower_bound` and
//! `upper_bound` (by default the column's minimum and maximum, asked of the database), as
//! Spark's JDBC source splits a table: the first range also takes the NULLs and everything
//! below, the last everything above. Each partition is one entry of the dataset's file
//! list, read on its own connection, so `shard` gives each host its partitions and
//! `interleave` reads several at once; element ids are (partition, row in it). A checkpoint
//! resumes a partition by skipping the rows already read: a query resumed must return its
//! rows in the same order, so give it an `ORDER BY` on a unique key.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use crossbeam_channel::{Receiver, bounded};
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::sources::format::{FileFormat, OpenedFile, Opening, Record, RecordError, RecordReader};
use crate::tensor::{Tensor, TensorData};

/// A column's value for its NULLs (`null_defaults`): an integer, a float or a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SqlValue {
    /// An integer (also for a float column).
    Int(i64),
    /// A float.
    Float(f64),
    /// Text (for a byte-string column).
    Text(String),
}

/// The rows of a SQL query (see the [module docs](self)).
///
/// ```toml
/// [source]
/// format = "sql"
/// path = "shop.db"                  # a SQLite file (relative: under `dir`), or
/// # url = "postgresql://user@127.0.0.1/shop"
/// query = "SELECT id, price, name FROM items"
/// partition_column = "id"           # optional: read in ranges of this integer column
/// num_partitions = 8
/// null_defaults = { price = 0.0 }   # optional: NULL in these columns becomes the value
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SqlSpec {
    /// A PostgreSQL URL (`postgres://` or `postgresql://`, libpq's form).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A SQLite database file (opened read-only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The query (one statement, no trailing parameters).
    pub query: String,
    /// An integer column to split the query into ranges of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_column: Option<String>,
    /// How many ranges (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_partitions: Option<usize>,
    /// The ranges' lower bound (default: the column's minimum).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<i64>,
    /// The ranges' upper bound (default: the column's maximum).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<i64>,
    /// Values for NULLs, by column; a NULL elsewhere is an error.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub null_defaults: BTreeMap<String, SqlValue>,
}

// Defaults are never NaN in practice; a NaN default only makes two specs unequal.
impl Eq for SqlSpec {}

/// Where the rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Database {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Database {
    /// How messages name it (a URL without its password).
    fn display(&self) -> String {
        match self {
            Database::Sqlite(p) => p.display().to_string(),
            Database::Postgres(url) => redact(url),
        }
    }
}

fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl SqlSpec {
    /// Checks the keys before anything is read.
    pub fn check(&self) -> std::result::Result<(), Invalid> {
        match (&self.url, &self.path) {
            (None, None) => {
                return Err(Invalid::at(
                    "path",
                    "format \"sql\" needs `path` (a SQLite file) or `url` (a PostgreSQL URL)",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(Invalid::at("url", "give `url` or `path`, not both"));
            }
            (Some(url), None)
                if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) =>
            {
                return Err(Invalid::at(
                    "url",
                    format!(
                        "`url` must be a PostgreSQL URL (postgres:// or postgresql://), got \
                         {:?}; a SQLite file is `path`",
                        redact(url)
                    ),
                ));
            }
            _ => {}
        }
        if self.query.trim().is_empty() {
            return Err(Invalid::at("query", "`query` must not be empty"));
        }
        if self.num_partitions == Some(0) {
            return Err(Invalid::at(
                "num_partitions",
                "`num_partitions` must be at least 1",
            ));
        }
        let partitioned = self.partition_column.is_some();
        for (key, set) in [
            ("num_partitions", self.num_partitions.is_some()),
            ("lower_bound", self.lower_bound.is_some()),
            ("upper_bound", self.upper_bound.is_some()),
        ] {
            if set && !partitioned {
                return Err(Invalid::at(
                    key,
                    format!("`{key}` applies only with `partition_column`"),
                ));
            }
        }
        if let (Some(lo), Some(hi)) = (self.lower_bound, self.upper_bound)
            && lo > hi
        {
            return Err(Invalid::at(
                "lower_bound",
                format!("`lower_bound` ({lo}) is above `upper_bound` ({hi})"),
            ));
        }
        Ok(())
    }

    fn database(&self) -> Database {
        match (&self.url, &self.path) {
            (Some(url), _) => Database::Postgres(url.clone()),
            (None, Some(path)) => Database::Sqlite(path.clone()),
            (None, None) => Database::Sqlite(PathBuf::new()),
        }
    }

    /// The query without a trailing `;`.
    fn base_query(&self) -> &str {
        self.query.trim().trim_end_matches(';').trim_end()
    }

    /// The partitions' queries: the query itself, or one range of `partition_column` each.
    fn partition_queries(&self) -> Result<Vec<String>> {
        let Some(column) = &self.partition_column else {
            return Ok(vec![self.base_query().to_string()]);
        };
        let n = self.num_partitions.unwrap_or(1) as i128;
        let (lo, hi) = match (self.lower_bound, self.upper_bound) {
            (Some(lo), Some(hi)) => (Some(lo), Some(hi)),
            (lo, hi) => {
                let bounds = format!(
                    "SELECT CAST(MIN({column}) AS BIGINT), CAST(MAX({column}) AS BIGINT) FROM \
                     ({}) AS sluice_q",
                    self.base_query()
                );
                let (min, max) = self.database().min_max(&bounds)?;
                (lo.or(min), hi.or(max))
            }
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            // No non-NULL value: one partition.
            return Ok(vec![self.base_query().to_string()]);
        };
        let (lo, hi) = (i128::from(lo), i128::from(hi));
        let n = n.min(hi - lo + 1).max(1);
        let bound = |i: i128| lo + (hi - lo + 1) * i / n;
        let wrap = |condition: String| {
            format!(
                "SELECT * FROM ({}) AS sluice_q WHERE {condition}",
                self.base_query()
            )
        };
        if n == 1 {
            return Ok(vec![self.base_query().to_string()]);
        }
        Ok((0..n)
            .map(|i| {
                if i == 0 {
                    wrap(format!("{column} < {} OR {column} IS NULL", bound(1)))
                } else if i == n - 1 {
                    wrap(format!("{column} >= {}", bound(i)))
                } else {
                    wrap(format!(
                        "{column} >= {} AND {column} < {}",
                        bound(i),
                        bound(i + 1)
                    ))
                }
            })
            .collect())
    }

    /// The dataset of the query's rows: one file-list entry per partition, read by the
    /// `sql` format.
    pub fn dataset(&self) -> Result<Dataset> {
        self.check()
            .map_err(|e| Error::invalid(format!("sql: {e}")))?;
        let queries = self.partition_queries()?;
        let db = self.database().display();
        let n = queries.len();
        let names: Vec<String> = (0..n)
            .map(|i| format!("{db} [partition {i} of {n}]"))
            .collect();
        let partitions: HashMap<String, String> = names.iter().cloned().zip(queries).collect();
        let format = SqlFormat {
            spec: self.clone(),
            partitions: Arc::new(partitions),
        };
        Ok(Dataset::file_list(names.into_iter().map(PathBuf::from).collect()).read_files(format))
    }
}

impl Database {
    /// The two integers (or NULLs) of a `SELECT MIN, MAX` query.
    fn min_max(&self, query: &str) -> Result<(Option<i64>, Option<i64>)> {
        let fail = |e: String| Error::invalid(format!("sql: {}: {query}: {e}", self.display()));
        match self {
            Database::Sqlite(path) => {
                let conn = open_sqlite(path).map_err(|e| fail(e.to_string()))?;
                conn.query_row(query, [], |row| Ok((row.get(0)?, row.get(1)?)))
                    .map_err(|e| fail(e.to_string()))
            }
            Database::Postgres(url) => {
                let mut client = connect_postgres(url).map_err(fail)?;
                let row = client
                    .query_one(query, &[])
                    .map_err(|e| fail(e.to_string()))?;
                Ok((
                    row.try_get(0).map_err(|e| fail(e.to_string()))?,
                    row.try_get(1).map_err(|e| fail(e.to_string()))?,
                ))
            }
        }
    }
}

fn open_sqlite(path: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

fn connect_postgres(url: &str) -> std::result::Result<postgres::Client, String> {
    postgres::Client::connect(url, postgres::NoTls).map_err(|e| {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message = format!("{message}: {s}");
            source = s.source();
        }
        format!("cannot connect: {message}")
    })
}

/// A column's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnType {
    Int64,
    Float64,
    Bytes,
}

impl ColumnType {
    fn name(self) -> &'static str {
        match self {
            ColumnType::Int64 => "int64",
            ColumnType::Float64 => "float64",
            ColumnType::Bytes => "bytes",
        }
    }
}

/// One value as read, before typing.
enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Bytes(Bytes),
}

impl Cell {
    fn kind(&self) -> &'static str {
        match self {
            Cell::Null => "NULL",
            Cell::Int(_) => "an integer",
            Cell::Float(_) => "a float",
            Cell::Bytes(_) => "text or bytes",
        }
    }

    fn natural_type(&self) -> Option<ColumnType> {
        match self {
            Cell::Null => None,
            Cell::Int(_) => Some(ColumnType::Int64),
            Cell::Float(_) => Some(ColumnType::Float64),
            Cell::Bytes(_) => Some(ColumnType::Bytes),
        }
    }
}

/// A column of the result: its name, its type when known from the database, and its
/// default for NULLs.
struct Column {
    name: Arc<str>,
    ty: Option<ColumnType>,
    default: Option<SqlValue>,
}

/// The SQLite affinity of a declared type, as SQLite determines it (section 3.1 of its
/// datatype documentation); `None` for no declared type and for NUMERIC affinity (typed by
/// the values).
fn sqlite_affinity(decl: Option<&str>) -> Option<ColumnType> {
    let decl = decl?.to_ascii_uppercase();
    if decl.contains("INT") {
        Some(ColumnType::Int64)
    } else if ["CHAR", "CLOB", "TEXT"].iter().any(|t| decl.contains(t)) {
        Some(ColumnType::Bytes)
    } else if decl.contains("BLOB") || decl.is_empty() {
        (!decl.is_empty()).then_some(ColumnType::Bytes)
    } else if ["REAL", "FLOA", "DOUB"].iter().any(|t| decl.contains(t)) {
        Some(ColumnType::Float64)
    } else {
        None
    }
}

/// Types one row's cells into features (index `row` in its partition).
fn typed_row(
    columns: &mut [Column],
    cells: Vec<Cell>,
    row: u64,
) -> std::result::Result<Vec<(Arc<str>, Tensor)>, RecordError> {
    let mut features = Vec::with_capacity(cells.len());
    for (column, cell) in columns.iter_mut().zip(cells) {
        let bad = |message: String| RecordError {
            offset: row,
            feature: Some(column.name.to_string()),
            message: format!("row {row}, column {:?}: {message}", &*column.name),
            recoverable: true,
        };
        let cell = match cell {
            Cell::Null => match &column.default {
                Some(SqlValue::Int(v)) => Cell::Int(*v),
                Some(SqlValue::Float(v)) => Cell::Float(*v),
                Some(SqlValue::Text(v)) => Cell::Bytes(Bytes::from(v.clone().into_bytes())),
                None => {
                    return Err(bad(format!(
                        "NULL, and the column has no default (null_defaults = {{ {} = ... }})",
                        column.name
                    )));
                }
            },
            other => other,
        };
        let ty = match column.ty {
            Some(ty) => ty,
            None => {
                let ty = cell.natural_type().expect("not NULL");
                column.ty = Some(ty);
                ty
            }
        };
        let tensor = match (ty, cell) {
            (ColumnType::Int64, Cell::Int(v)) => Tensor::scalar_i64(v),
            (ColumnType::Float64, Cell::Float(v)) => scalar_f64(v),
            (ColumnType::Float64, Cell::Int(v)) => scalar_f64(v as f64),
            (ColumnType::Bytes, Cell::Bytes(v)) => Tensor::scalar_bytes(v),
            (ty, cell) => {
                return Err(bad(format!("{} in a {} column", cell.kind(), ty.name())));
            }
        };
        features.push((Arc::clone(&column.name), tensor));
    }
    Ok(features)
}

fn scalar_f64(v: f64) -> Tensor {
    Tensor::new(&[], TensorData::F64(vec![v].into())).expect("one value for a scalar")
}

/// The `sql` format: each "file" of its list is a partition's name, read with that
/// partition's query.
#[derive(Debug, Clone)]
struct SqlFormat {
    spec: SqlSpec,
    partitions: Arc<HashMap<String, String>>,
}

impl FileFormat for SqlFormat {
    fn name(&self) -> &'static str {
        "sql"
    }

    fn params(&self) -> Params {
        let s = &self.spec;
        Params::new()
            .with("database", self.spec.database().display())
            .with("query", &s.query)
            .with("partition_column", &s.partition_column)
            .with("num_partitions", s.num_partitions)
            .with("lower_bound", s.lower_bound)
            .with("upper_bound", s.upper_bound)
            .with("null_defaults", &s.null_defaults)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        self.spec.check()
    }

    fn opening(&self) -> Opening {
        Opening::default()
    }

    fn open_records(&self, path: &str) -> Result<Box<dyn RecordReader>> {
        let query =
            self.partitions.get(path).cloned().ok_or_else(|| {
                Error::data(format!("sql: {path:?} is not one of the partitions"))
            })?;
        let database = self.spec.database();
        let defaults = self.spec.null_defaults.clone();
        let (tx, rx) = bounded(256);
        let name = format!("sluice-sql {path}");
        std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || {
                let send = |item| tx.send(item).is_ok();
                let result = match &database {
                    Database::Sqlite(p) => read_sqlite(p, &query, defaults, &send),
                    Database::Postgres(url) => read_postgres(url, &query, defaults, &send),
                };
                if let Err(message) = result {
                    let _ = tx.send(Err(RecordError {
                        offset: 0,
                        feature: None,
                        message: format!("{}: {message}", database.display()),
                        recoverable: false,
                    }));
                }
            })
            .map_err(|e| Error::invalid(format!("sql: cannot start a reader thread: {e}")))?;
        Ok(Box::new(Rows(rx)))
    }

    fn records(&self, file: OpenedFile) -> Result<Box<dyn RecordReader>> {
        self.open_records(&file.path)
    }
}

type RowItem = std::result::Result<Record, RecordError>;

struct Rows(Receiver<RowItem>);

impl RecordReader for Rows {
    fn next_record(&mut self) -> Option<RowItem> {
        self.0.recv().ok()
    }
}

/// Sends the rows of `query` until the end, an unrecoverable error, or a closed channel
/// (`send` false). A bad row is sent as an error and reading goes on.
fn send_rows(
    columns: &mut [Column],
    row: u64,
    cells: Vec<Cell>,
    send: &dyn Fn(RowItem) -> bool,
) -> bool {
    let item = typed_row(columns, cells, row).map(|features| Record {
        offset: row,
        features,
    });
    send(item)
}

fn columns_of(
    names: Vec<String>,
    types: Vec<Option<ColumnType>>,
    defaults: &BTreeMap<String, SqlValue>,
) -> std::result::Result<Vec<Column>, String> {
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(format!(
                "the query returns two columns named {name:?}: name them apart (AS ...)"
            ));
        }
    }
    Ok(names
        .into_iter()
        .zip(types)
        .map(|(name, ty)| Column {
            default: defaults.get(&name).cloned(),
            name: Arc::from(name),
            ty,
        })
        .collect())
}

fn read_sqlite(
    path: &std::path::Path,
    query: &str,
    defaults: BTreeMap<String, SqlValue>,
    send: &dyn Fn(RowItem) -> bool,
) -> std::result::Result<(), String> {
    use rusqlite::types::ValueRef;
    let conn = open_sqlite(path).map_err(|e| e.to_string())?;
    let mut stmt = conn.prepare(query).map_err(|e| format!("{query}: {e}"))?;
    let names = stmt.column_names().iter().map(|s| s.to_string()).collect();
    let types = stmt
        .columns()
        .iter()
        .map(|c| sqlite_affinity(c.decl_type()))
        .collect();
    let mut columns = columns_of(names, types, &defaults)?;
    let mut rows = stmt.query([]).map_err(|e| format!("{query}: {e}"))?;
    let mut row = 0u64;
    while let Some(r) = rows
        .next()
        .map_err(|e| format!("{query}: row {row}: {e}"))?
    {
        let mut cells = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            let value = r.get_ref(i).map_err(|e| format!("row {row}: {e}"))?;
            cells.push(match value {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(v) => Cell::Int(v),
                ValueRef::Real(v) => Cell::Float(v),
                ValueRef::Text(v) | ValueRef::Blob(v) => Cell::Bytes(Bytes::copy_from_slice(v)),
            });
        }
        if !send_rows(&mut columns, row, cells, send) {
            return Ok(());
        }
        row += 1;
    }
    Ok(())
}

fn read_postgres(
    url: &str,
    query: &str,
    defaults: BTreeMap<String, SqlValue>,
    send: &dyn Fn(RowItem) -> bool,
) -> std::result::Result<(), String> {
    use postgres::fallible_iterator::FallibleIterator;
    use postgres::types::Type;
    let mut client = connect_postgres(url)?;
    let statement = client
        .prepare(query)
        .map_err(|e| format!("{query}: {}", pg_error(&e)))?;
    let mut names = Vec::new();
    let mut types = Vec::new();
    for c in statement.columns() {
        let ty = match *c.type_() {
            Type::INT2 | Type::INT4 | Type::INT8 | Type::OID | Type::BOOL => ColumnType::Int64,
            Type::FLOAT4 | Type::FLOAT8 => ColumnType::Float64,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::BYTEA => {
                ColumnType::Bytes
            }
            ref other => {
                return Err(format!(
                    "column {:?} is of type {other}, which sql does not read: cast it in the \
                     query (::int8, ::float8 or ::text)",
                    c.name()
                ));
            }
        };
        names.push(c.name().to_string());
        types.push(Some(ty));
    }
    let pg_types: Vec<Type> = statement
        .columns()
        .iter()
        .map(|c| c.type_().clone())
        .collect();
    let mut columns = columns_of(names, types, &defaults)?;
    let params: Vec<&(dyn postgres::types::ToSql + Sync)> = Vec::new();
    let mut rows = client
        .query_raw(&statement, params)
        .map_err(|e| format!("{query}: {}", pg_error(&e)))?;
    let mut row = 0u64;
    while let Some(r) = rows
        .next()
        .map_err(|e| format!("{query}: row {row}: {}", pg_error(&e)))?
    {
        let mut cells = Vec::with_capacity(columns.len());
        for (i, ty) in pg_types.iter().enumerate() {
            let get_err = |e: postgres::Error| format!("row {row}, column {i}: {e}");
            let cell = match *ty {
                Type::INT2 => r
                    .try_get::<_, Option<i16>>(i)
                    .map_err(get_err)?
                    .map(|v| Cell::Int(v.into())),
                Type::INT4 => r
                    .try_get::<_, Option<i32>>(i)
                    .map_err(get_err)?
                    .map(|v| Cell::Int(v.into())),
                Type::INT8 => r
                    .try_get::<_, Option<i64>>(i)
                    .map_err(get_err)?
                    .map(Cell::Int),
                Type::OID => r
                    .try_get::<_, Option<u32>>(i)
                    .map_err(get_err)?
                    .map(|v| Cell::Int(v.into())),
                Type::BOOL => r
                    .try_get::<_, Option<bool>>(i)
                    .map_err(get_err)?
                    .map(|v| Cell::Int(v.into())),
                Type::FLOAT4 => r
                    .try_get::<_, Option<f32>>(i)
                    .map_err(get_err)?
                    .map(|v| Cell::Float(v.into())),
                Type::FLOAT8 => r
                    .try_get::<_, Option<f64>>(i)
                    .map_err(get_err)?
                    .map(Cell::Float),
                Type::BYTEA => r
                    .try_get::<_, Option<Vec<u8>>>(i)
                    .map_err(get_err)?
                    .map(|v| Cell::Bytes(v.into())),
                _ => r
                    .try_get::<_, Option<String>>(i)
                    .map_err(get_err)?
                    .map(|v| Cell::Bytes(v.into_bytes().into())),
            };
            cells.push(cell.unwrap_or(Cell::Null));
        }
        if !send_rows(&mut columns, row, cells, send) {
            return Ok(());
        }
        row += 1;
    }
    Ok(())
}

/// A PostgreSQL error with the server's message when it sent one.
fn pg_error(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}
