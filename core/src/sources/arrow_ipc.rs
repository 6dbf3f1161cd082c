//! `arrow`: Arrow IPC files, in the file format (`.arrow`, `.feather` v2) or the stream
//! format (what Hugging Face `datasets` saves: `data-00000-of-00001.arrow`).

use std::io::{BufRead, Read, Seek};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sources::columnar::{Batches, NullValue, Whole, columnar_format};
use crate::sources::format::OpenedFile;
use crate::sources::ipc_checked::{IpcFile, IpcStream};
use crate::sources::storage::StorageSpec;

/// Reads Arrow IPC files: one element per row, one feature per column, as
/// [`ParquetSpec`](crate::sources::parquet::ParquetSpec) reads its rows (the same types,
/// `columns` and `null_value`). Both IPC formats are read, told apart by their first bytes:
/// the file format (`ARROW1` magic: `pyarrow.ipc.new_file`, Feather v2) and the stream
/// format (`pyarrow.ipc.new_stream`; Hugging Face `datasets`' `data-*.arrow` files, which
/// load as they are). Record batches are read one after the other as the file is read
/// (the stream format straight from the file, the file format through its footer: a local
/// file where it is, an object-store file fetched whole first); compressed batches (LZ4,
/// zstd) too. The element's offset is the row's index in the file.
///
/// ```toml
/// [source]
/// format = "arrow"
/// files = ["hf_dataset/train/data-*.arrow"]
/// columns = ["image", "label"]   # default: all
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArrowSpec {
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

/// The file format's first bytes.
const FILE_MAGIC: &[u8] = b"ARROW1";

columnar_format!(ArrowSpec, "arrow");

impl ArrowSpec {
    /// The rows of `file`, a record batch at a time.
    fn rows(&self, mut file: OpenedFile) -> Result<Batches> {
        let path = file.path.clone();
        let bad = |e: arrow_schema::ArrowError| {
            Error::data(format!("{path}: not a readable Arrow IPC file: {e}"))
        };
        let head = file.input.fill_buf().map_err(|error| Error::Io {
            path: path.clone().into(),
            error,
        })?;
        let batches: Box<dyn Iterator<Item = std::result::Result<_, String>> + Send> =
            if head.starts_with(FILE_MAGIC) {
                match Whole::of(file)? {
                    Whole::File(f) => file_batches(f).map_err(bad)?,
                    Whole::Bytes(b) => file_batches(std::io::Cursor::new(b)).map_err(bad)?,
                }
            } else {
                let reader = IpcStream::open(file.input).map_err(bad)?;
                Box::new(reader.map(|r| r.map_err(|e| e.to_string())))
            };
        Ok(Batches::new(
            batches,
            self.columns.clone(),
            self.null_value.clone(),
        ))
    }
}

fn file_batches<R: Read + Seek + Send + 'static>(
    reader: R,
) -> std::result::Result<
    Box<dyn Iterator<Item = std::result::Result<arrow_array::RecordBatch, String>> + Send>,
    arrow_schema::ArrowError,
> {
    let reader = IpcFile::open(std::io::BufReader::new(reader))?;
    Ok(Box::new(reader.map(|r| r.map_err(|e| e.to_string()))))
}
