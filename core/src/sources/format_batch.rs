//! [`FusedReadBatch`]: a format's reader fused with the `batch` right after it, reading each
//! batch's rows straight into its columns ([`Chunk`]s) instead of making one element per
//! record and stacking them again.
//!
//! Made by the [`ReadAndBatchFusion`](crate::optimize::ReadAndBatchFusion) rule for formats
//! that read in chunks ([`FileFormat::reads_chunks`]: CSV, Parquet, Arrow IPC). The output
//! is the unfused pipeline's, element for element: the same batches (a batch spans files
//! as it does unfused), ids and provenance (the first row's), records ([`Units`]: each
//! row's, this host's only in a resumed epoch), errors (a bad record through the reader's
//! error policy, a batch that cannot be assembled through the batch's), counts and file
//! ends. Stats still show both stages: the reader (its `in` the records read) and `batch`.

use std::sync::Arc;

use crate::elastic::{Unit, Units};
use crate::element::{Element, ElementId, Provenance, Value, batch_values, unbatch_value};
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::plan::PlanNode;
use crate::run::{BuildContext, Input};
use crate::sources::files::filename_of;
use crate::sources::format::{Chunk, ChunkReader, FileWalk, ReadFiles, record_error};
use crate::stage::Stage;
use crate::stages::batch::BatchSpec;
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::{Tensor, TensorData};

/// A `batch` fused with the [`ReadFiles`] that is its input (see the [module docs](self)).
#[derive(Debug, Clone)]
pub(crate) struct FusedReadBatch {
    /// The `batch` as written.
    pub batch: BatchSpec,
    /// The format's name (for `explain`).
    pub format: &'static str,
}

impl Stage for FusedReadBatch {
    fn name(&self) -> &'static str {
        "batch"
    }

    fn params(&self) -> Params {
        Params::of(&self.batch).with("fused_with_input", self.format)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Stage::validate(&self.batch)
    }

    fn check_inputs(&self, inputs: &[Arc<PlanNode>]) -> std::result::Result<(), String> {
        match inputs {
            [read]
                if read
                    .stage_as::<ReadFiles>()
                    .is_some_and(|r| r.format().reads_chunks()) =>
            {
                Ok(())
            }
            _ => Err("a batch fused with its reader needs that reader as its input".into()),
        }
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, "batch")?;
        let format = Arc::clone(
            input
                .node()
                .stage_as::<ReadFiles>()
                .ok_or_else(|| Error::invalid("a fused batch's input is not a file reader"))?
                .format(),
        );
        let spec = self.batch;
        let batch_ctx = ctx.clone();
        input.open_with(move |inputs, ctx, skip| {
            let list = crate::stages::single_input(inputs, format.name())?;
            // `in` counts the records read, not the file names taken from the input.
            ctx.metrics().set_counts_own_inputs();
            let open_format = Arc::clone(&format);
            let files = FileWalk::new(list.open()?, move |file: &Element| {
                let path = filename_of(file)?;
                let reader = open_format.open_chunks(&path)?;
                Ok(OpenChunks {
                    reader,
                    file: Arc::from(path.as_str()),
                    file_index: file.id().source,
                    index: 0,
                })
            });
            let mut stream = ChunkBatches {
                files,
                current: None,
                size: spec.batch_size,
                drop_remainder: spec.drop_remainder,
                ctx: ctx.clone(),
                batch_ctx,
            };
            let skipped = stream.skip_records(skip)?;
            Ok((Box::new(stream) as BoxStream, skipped))
        })
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        crate::stages::batch::batch_from(
            self,
            self.batch.batch_size,
            self.batch.drop_remainder,
            inputs,
            ctx,
            skip,
        )
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }
}

/// A file being read in chunks.
struct OpenChunks {
    reader: Box<dyn ChunkReader>,
    file: Arc<str>,
    file_index: u64,
    /// The index of the next record (records read and bad ones so far).
    index: u64,
}

/// A batch being filled: its pieces (chunks, or the rows kept of them) and its rows'
/// records.
#[derive(Default)]
struct Filling {
    rows: usize,
    first: Option<(ElementId, Provenance)>,
    pieces: Vec<Vec<(Arc<str>, Value)>>,
    units: Vec<Unit>,
}

struct ChunkBatches {
    files: FileWalk<OpenChunks>,
    current: Option<OpenChunks>,
    size: usize,
    drop_remainder: bool,
    /// The reader's context (errors of records, elastic marks, counts).
    ctx: BuildContext,
    /// The batch's (a remainder left out, a batch that cannot be assembled).
    batch_ctx: BuildContext,
}

/// What reading the next chunk gave.
enum Step {
    /// Rows for the batch (possibly none kept).
    Rows,
    /// The files are all read.
    End,
}

impl ChunkBatches {
    /// Reads past the first `n` records (for a resume by position under the fail policy,
    /// as the unfused reader discards its first `n` elements); returns how many there were.
    fn skip_records(&mut self, n: u64) -> Result<u64> {
        let mut skipped = 0;
        while skipped < n {
            if !self.open_current()? {
                break;
            }
            let cur = self.current.as_mut().expect("opened");
            let max = (n - skipped).min(self.size.max(1) as u64) as usize;
            match cur.reader.next_chunk(max) {
                None => {
                    let (file_index, count) = (cur.file_index, cur.index);
                    self.current = None;
                    self.ctx.file_ended(file_index, count);
                }
                Some(Ok(chunk)) => {
                    cur.index += chunk.len() as u64;
                    skipped += chunk.len() as u64;
                }
                Some(Err(bad)) => {
                    let id = ElementId::new(cur.file_index, cur.index);
                    return Err(record_error(&self.ctx, &cur.file, id, bad));
                }
            }
        }
        Ok(skipped)
    }

    /// The file being read, the next one opened when there is none; `None` after the
    /// last. A file that cannot be opened goes through the error policy.
    fn open_current(&mut self) -> Result<bool> {
        while self.current.is_none() {
            let Some(entry) = self.files.next_file() else {
                return Ok(false);
            };
            let (file, opened) = entry?;
            match opened {
                Ok(open) => self.current = Some(open),
                Err(e) => {
                    if let Some(e) = self.ctx.on_error(self.ctx.element_error(&file, e)) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(self.current.is_some())
    }

    /// Reads the next chunk (at most `want` records) into `batch`.
    fn read_into(&mut self, batch: &mut Filling, want: usize) -> Result<Step> {
        if !self.open_current()? {
            return Ok(Step::End);
        }
        let cur = self.current.as_mut().expect("opened");
        match cur.reader.next_chunk(want) {
            None => {
                let (file_index, count) = (cur.file_index, cur.index);
                self.current = None;
                self.ctx.file_ended(file_index, count);
                Ok(Step::Rows)
            }
            Some(Err(bad)) => {
                let id = ElementId::new(cur.file_index, cur.index);
                cur.index += 1;
                let recoverable = bad.recoverable;
                let err = record_error(&self.ctx, &cur.file, id, bad);
                let (file_index, count) = (cur.file_index, cur.index);
                if !recoverable {
                    // Nothing after it can be read: the file ends here either way.
                    self.current = None;
                }
                match self.ctx.on_error(err) {
                    Some(e) => Err(e),
                    None => {
                        if !recoverable {
                            self.ctx.file_ended(file_index, count);
                        }
                        Ok(Step::Rows)
                    }
                }
            }
            Some(Ok(chunk)) => {
                let n = chunk.len();
                self.ctx.metrics().add_in(n as u64);
                let first_index = cur.index;
                cur.index += n as u64;
                let (file, file_index) = (Arc::clone(&cur.file), cur.file_index);
                let mut kept = Vec::new();
                let mut all = true;
                for (r, &offset) in chunk.offsets.iter().enumerate() {
                    match self
                        .ctx
                        .stamp_record(file_index, first_index + r as u64, offset)
                    {
                        Some(unit) => {
                            batch.units.extend(unit);
                            kept.push(r);
                        }
                        None => all = false,
                    }
                }
                let Some(&first) = kept.first() else {
                    return Ok(Step::Rows);
                };
                if batch.first.is_none() {
                    batch.first = Some((
                        ElementId::new(file_index, first_index + first as u64),
                        Provenance {
                            file,
                            offset: chunk.offsets[first],
                        },
                    ));
                }
                batch.rows += kept.len();
                batch.pieces.push(if all {
                    chunk.columns
                } else {
                    select_rows(chunk, &kept)?
                });
                Ok(Step::Rows)
            }
        }
    }
}

impl ElementStream for ChunkBatches {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let mut batch = Filling::default();
            let mut ended = false;
            while batch.rows < self.size {
                let want = self.size - batch.rows;
                match self.read_into(&mut batch, want) {
                    Ok(Step::Rows) => {}
                    Ok(Step::End) => {
                        ended = true;
                        break;
                    }
                    Err(e) => return Some(Err(e)),
                }
            }
            let (id, provenance) = batch.first.take()?;
            let units = Units::many(std::mem::take(&mut batch.units));
            if ended && self.drop_remainder && batch.rows < self.size {
                self.batch_ctx.dropped(&units);
                return None;
            }
            let rows = batch.rows as u64;
            match assemble(batch.pieces) {
                Ok(columns) => {
                    let mut out = Element::from_values(id, Some(provenance), columns);
                    out.set_units(units);
                    return Some(Ok(out));
                }
                Err(e) => {
                    let mut at = Element::new(id);
                    at.set_provenance(Some(provenance));
                    let e = self.batch_ctx.element_error(&at, e);
                    match self.batch_ctx.on_error_dropping(e, rows) {
                        Some(e) => return Some(Err(e)),
                        None => self.batch_ctx.skipped(&units),
                    }
                }
            }
        }
    }
}

/// The rows `kept` of a chunk (a resumed epoch, where some of its records are done).
fn select_rows(chunk: Chunk, kept: &[usize]) -> Result<Vec<(Arc<str>, Value)>> {
    chunk
        .columns
        .into_iter()
        .map(|(name, value)| {
            let rows = kept
                .iter()
                .map(|&r| unbatch_value(&value, r))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Value> = rows.iter().collect();
            Ok((name, batch_values(&refs)?))
        })
        .collect()
}

/// One batch's columns from its pieces, as `batch` stacks the rows: a dense tensor when
/// every row has one shape, ragged otherwise; an error when the pieces' names or types
/// differ (rows from files of different columns).
fn assemble(mut pieces: Vec<Vec<(Arc<str>, Value)>>) -> Result<Vec<(Arc<str>, Value)>> {
    if pieces.len() == 1 {
        return Ok(pieces.pop().expect("one piece"));
    }
    let names: Vec<Arc<str>> = pieces[0].iter().map(|(n, _)| Arc::clone(n)).collect();
    for p in &pieces[1..] {
        if p.len() != names.len() || p.iter().zip(&names).any(|((n, _), m)| n != m) {
            return Err(Error::data(format!(
                "cannot batch elements with different values: {:?} and {:?}",
                names,
                p.iter().map(|(n, _)| n).collect::<Vec<_>>()
            )));
        }
    }
    names
        .into_iter()
        .enumerate()
        .map(|(k, name)| {
            let parts: Vec<&Value> = pieces.iter().map(|p| &p[k].1).collect();
            let value =
                concat_rows(&parts).map_err(|e| Error::data_of(&name, format!("{name}: {e}")))?;
            Ok((name, value))
        })
        .collect()
}

/// Values of rows, piece after piece, as one: dense pieces of one row shape are
/// concatenated; anything else is stacked row by row as `batch` does.
fn concat_rows(parts: &[&Value]) -> Result<Value> {
    let dense: Option<Vec<&Tensor>> = parts.iter().map(|v| v.as_dense()).collect();
    if let Some(dense) = dense {
        let first = dense[0];
        if first.rank() >= 1
            && dense
                .iter()
                .all(|t| t.rank() == first.rank() && t.shape()[1..] == first.shape()[1..])
        {
            let rows = dense.iter().map(|t| t.shape()[0]).sum();
            let data = TensorData::concat(&dense.iter().map(|t| t.data()).collect::<Vec<_>>())?;
            let mut shape = first.shape().to_vec();
            shape[0] = rows;
            return Ok(Value::Dense(Tensor::new(&shape, data)?));
        }
    }
    let mut rows = Vec::new();
    for v in parts {
        let n = match v {
            Value::Dense(t) => t.shape().first().copied().unwrap_or(0),
            Value::Ragged(r) => r.rows(),
        };
        for i in 0..n {
            rows.push(unbatch_value(v, i)?);
        }
    }
    let refs: Vec<&Value> = rows.iter().collect();
    batch_values(&refs)
}
