//! [`FilesToInterleave`]: `interleave` over a file reader reads several of its files at once.

use std::sync::Arc;

use crate::error::Result;
use crate::options::Options;
use crate::plan::PlanNode;
use crate::stages::interleave::InterleaveStage;

use super::Rule;

/// `interleave(spec)` as written over a stage that reads the files of its input one after
/// the other ([`Stage::file_reader`](crate::Stage::file_reader): `tfrecord`, and any file
/// source) becomes an interleave over the file list that reads each file as that reader
/// would, `cycle_length` at a time: tf.data's
/// `files.interleave(TFRecordDataset, cycle_length)`. Every new file source gets
/// `interleave` this way by giving its stage a `file_reader`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FilesToInterleave;

impl Rule for FilesToInterleave {
    fn name(&self) -> &'static str {
        "files_to_interleave"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, _: &Options) -> Result<Option<Arc<PlanNode>>> {
        let Some(interleave) = node.stage_as::<InterleaveStage>() else {
            return Ok(None);
        };
        if interleave.open.is_some() {
            return Ok(None);
        }
        let [reader] = node.inputs() else {
            return Ok(None);
        };
        let ([files], Some(open)) = (reader.inputs(), reader.stage().file_reader()) else {
            return Ok(None);
        };
        let stage = interleave.reading_files(reader.stage().as_ref(), open);
        Ok(Some(
            node.rewritten(Arc::new(stage), vec![Arc::clone(files)]),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::Optimizer;
    use crate::prelude::*;

    fn fixtures() -> String {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord").to_string()
    }

    #[test]
    fn interleave_over_tfrecord_reads_the_file_list() {
        let d = Dataset::tfrecord([format!("{}/images.tfrecord-*", fixtures())])
            .unwrap()
            .interleave(InterleaveSpec::new(2));
        let o = Optimizer::new(vec![Box::new(FilesToInterleave)])
            .optimize(d.plan(), &Options::default())
            .unwrap();
        assert_eq!(o.plan.stage().name(), "interleave");
        assert_eq!(o.plan.inputs()[0].stage().name(), "files");
        assert_eq!(o.applied.len(), 1);
        assert_eq!(o.applied[0].rule, "files_to_interleave");
        // The records of all four files, each once, in tf.data's round-robin order.
        let got: Vec<ElementId> = d.collect().unwrap().iter().map(|e| e.id()).collect();
        assert_eq!(got.len(), 32);
        assert_eq!(
            &got[..4],
            [
                ElementId::new(0, 0),
                ElementId::new(1, 0),
                ElementId::new(0, 1),
                ElementId::new(1, 1)
            ]
        );
    }

    #[test]
    fn interleave_over_anything_else_is_refused_when_built() {
        let d = Dataset::range(0, 4).interleave(InterleaveSpec::new(2));
        let o = Optimizer::default()
            .optimize(d.plan(), &Options::default())
            .unwrap();
        assert!(o.applied.is_empty());
        let err = d.iter().unwrap_err().to_string();
        assert!(err.contains("interleave#1"), "{err}");
        assert!(err.contains("its input here is `range`"), "{err}");
        assert!(err.contains("interleave_with"), "{err}");
    }
}
