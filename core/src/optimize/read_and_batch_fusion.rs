//! [`ReadAndBatchFusion`]: a format's reader and the `batch` after it as one stage.

use std::sync::Arc;

use crate::error::Result;
use crate::options::Options;
use crate::plan::PlanNode;
use crate::sources::format::ReadFiles;
use crate::sources::format_batch::FusedReadBatch;
use crate::stages::batch::BatchSpec;

use super::Rule;

/// A `batch` whose input is a file reader of a format that reads in chunks (CSV, Parquet,
/// Arrow IPC) becomes one stage reading each batch's rows straight into its columns: no
/// element per record, no stacking (as tf.data's `map_and_batch_fusion` does for maps).
/// The output is the same elements, errors, skips and records; stats still show both
/// stages. Off when [`Options::map_and_batch_fusion`](crate::Options::map_and_batch_fusion)
/// is false (the same switch: both fuse a batch into the stage before it).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadAndBatchFusion;

impl Rule for ReadAndBatchFusion {
    fn name(&self) -> &'static str {
        "read_and_batch_fusion"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, options: &Options) -> Result<Option<Arc<PlanNode>>> {
        if !options.map_and_batch_fusion {
            return Ok(None);
        }
        let Some(batch) = node.stage_as::<BatchSpec>() else {
            return Ok(None);
        };
        let [read] = node.inputs() else {
            return Ok(None);
        };
        let format = match read.stage_as::<ReadFiles>() {
            Some(r) if r.format().reads_chunks() => r.format().name(),
            _ => return Ok(None),
        };
        let fused = FusedReadBatch {
            batch: *batch,
            format,
        };
        Ok(Some(
            node.rewritten(Arc::new(fused), vec![Arc::clone(read)]),
        ))
    }
}
