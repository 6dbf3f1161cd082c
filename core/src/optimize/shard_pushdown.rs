//! [`ShardPushdown`]: `shard` below the reader of a file list, so each shard reads only its
//! own files.

use std::sync::Arc;

use crate::error::Result;
use crate::options::Options;
use crate::plan::PlanNode;
use crate::stages::shard::ShardSpec;

use super::Rule;

/// `shard(n, i)` over a stage that can be sharded by its input (a file reader, a file
/// interleave, a global shuffle: [`Stage::shards_by_input`](crate::Stage::shards_by_input))
/// becomes that stage over `shard(n, i)` of its input: shard `i` reads files `i`, `i + n`,
/// ... instead of reading every file and keeping every n-th record (tf.data's auto-shard
/// policy `FILE`). Each record is still in exactly one shard; the order within a shard
/// differs from sharding the records.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShardPushdown;

impl Rule for ShardPushdown {
    fn name(&self) -> &'static str {
        "shard_pushdown"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, _: &Options) -> Result<Option<Arc<PlanNode>>> {
        if node.stage_as::<ShardSpec>().is_none() {
            return Ok(None);
        }
        let [reader] = node.inputs() else {
            return Ok(None);
        };
        let [files] = reader.inputs() else {
            return Ok(None);
        };
        if !reader.stage().shards_by_input() {
            return Ok(None);
        }
        let sharded = PlanNode::new(Arc::clone(node.stage()), vec![Arc::clone(files)]);
        Ok(Some(
            node.rewritten(Arc::clone(reader.stage()), vec![sharded]),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::Optimizer;
    use crate::prelude::*;

    fn optimize(d: &Dataset) -> Arc<PlanNode> {
        Optimizer::new(vec![Box::new(ShardPushdown)])
            .optimize(d.plan(), &Options::default())
            .unwrap()
            .plan
    }

    fn kinds(node: &Arc<PlanNode>) -> Vec<&'static str> {
        let mut out = vec![node.stage().name()];
        let mut n = node;
        while let Some(next) = n.inputs().first() {
            out.push(next.stage().name());
            n = next;
        }
        out
    }

    #[test]
    fn shard_goes_below_a_file_reader() {
        let files = Dataset::file_list(vec!["a".into(), "b".into()]);
        let d = files.read_tfrecord(TfRecordSpec::default()).shard(2, 1);
        let plan = optimize(&d);
        assert_eq!(kinds(&plan), ["tfrecord", "shard", "files"]);
        // It stands for the shard as written: fingerprints do not depend on the rule.
        assert_eq!(plan.fingerprint(), d.plan().fingerprint());
    }

    #[test]
    fn shard_of_elements_stays_where_it_is() {
        let d = Dataset::range(0, 10).batch(2).shard(2, 0);
        assert_eq!(kinds(&optimize(&d)), ["shard", "batch", "range"]);
    }
}
