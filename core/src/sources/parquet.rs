//! `parquet`: Apache Parquet files, one element per row.

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sources::columnar::{Batches, NullValue, Whole, columnar_format, missing};
use crate::sources::format::OpenedFile;
use crate::sources::storage::StorageSpec;

/// Rows per record batch read from a row group.
const BATCH_ROWS: usize = 4096;

/// Reads Parquet files: one element per row, one feature per column (see
/// [`NullValue`] for nulls and the crate docs of the Arrow types for how each type is read:
/// numbers as scalars of their type, strings and binaries as byte strings, lists as 1-D
/// tensors of their row's length, structs as one feature per field named `struct.field`).
///
/// Only the columns named in `columns` are decoded (default: all, in the file's order);
/// row groups are read one after the other as the file is read, a few thousand rows at a
/// time. Compression: snappy, zstd, gzip and uncompressed pages. A local file is read
/// where it is; an object-store file is fetched whole first. The element's offset is the
/// row's index in the file.
///
/// A null is an error naming the file, the row and the column, unless `null_value` is given:
/// then a null number is that number (cast to the column's type), a null string that
/// string, a null list an empty list.
///
/// ```toml
/// [source]
/// format = "parquet"
/// files = ["train-*.parquet"]
/// columns = ["image", "label"]   # default: all
/// null_value = 0                 # default: a null is an error
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ParquetSpec {
    /// The columns to read, in this order (default: all, in the file's order). A name the
    /// file lacks is an error.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// What a null reads as (default: a null is an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub null_value: Option<NullValue>,
    /// How URLs are reached and read; empty: the environment's settings.
    #[serde(skip_serializing_if = "StorageSpec::is_empty")]
    pub storage: StorageSpec,
}

columnar_format!(ParquetSpec, "parquet");

impl ParquetSpec {
    /// The rows of `file`, a record batch at a time.
    fn rows(&self, file: OpenedFile) -> Result<Batches> {
        let path = file.path.clone();
        let bad = |m: String| Error::data(format!("{path}: {m}"));
        let batches: Box<dyn Iterator<Item = std::result::Result<_, String>> + Send> =
            match Whole::of(file)? {
                Whole::File(f) => self.batches(f).map_err(bad)?,
                Whole::Bytes(b) => self.batches(b).map_err(bad)?,
            };
        Ok(Batches::new(
            batches,
            self.columns.clone(),
            self.null_value.clone(),
        ))
    }

    fn batches<R: parquet::file::reader::ChunkReader + 'static>(
        &self,
        reader: R,
    ) -> std::result::Result<
        Box<dyn Iterator<Item = std::result::Result<arrow_array::RecordBatch, String>> + Send>,
        String,
    > {
        let builder = ParquetRecordBatchReaderBuilder::try_new(reader)
            .map_err(|e| format!("not a readable Parquet file: {e}"))?;
        // The row groups' row counts are the file's word: a negative one, or a sum past
        // `usize`, is a malformed file (parquet 60 sums them unchecked when it builds the
        // reader: fuzz finding `parquet-row-count-overflow`).
        let mut rows = 0_usize;
        for (i, group) in builder.metadata().row_groups().iter().enumerate() {
            let n = group.num_rows();
            rows = usize::try_from(n)
                .ok()
                .and_then(|n| rows.checked_add(n))
                .ok_or_else(|| {
                    format!("not a readable Parquet file: row group {i} has {n} rows")
                })?;
        }
        let builder = builder.with_batch_size(BATCH_ROWS);
        let builder = if self.columns.is_empty() {
            builder
        } else {
            let schema = builder.schema().clone();
            let roots = self
                .columns
                .iter()
                .map(|c| schema.index_of(c).map_err(|_| missing(c, &schema)))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            builder.with_projection(mask)
        };
        let reader = builder
            .build()
            .map_err(|e| format!("not a readable Parquet file: {e}"))?;
        Ok(Box::new(reader.map(|r| r.map_err(|e| e.to_string()))))
    }
}
