//! [`ShardPushdown`]: `shard` below the reader of a file list when there are enough files,
//! so each shard reads only its own files; into a global shuffle, so each shard reads its
//! positions of the one global permutation.

use std::sync::Arc;

use crate::error::Result;
use crate::options::Options;
use crate::plan::PlanNode;
use crate::sources::files::FileList;
use crate::sources::global_shuffle::GlobalShuffleStage;
use crate::stages::interleave::InterleaveStage;
use crate::stages::shard::ShardSpec;

use super::Rule;

/// Where `shard(n, i)` is applied, chosen from the plan (tf.data's auto-shard policy `AUTO`,
/// with a stricter idea of "enough files"):
///
/// - over a stage that can be sharded by its input (a file reader, a file interleave:
///   [`Stage::shards_by_input`](crate::Stage::shards_by_input)) whose file list has **enough
///   files** ([`enough_files`]: every shard gets at least one, and the largest share is at
///   most 1.25× the smallest), it becomes that stage over `shard(n, i)` of its files: shard `i`
///   reads files `i`, `i + n`, ... (**file level**; the order within a shard differs from
///   sharding the records);
/// - with fewer files it stays where it is: shard `i` keeps records `i`, `i + n`, ... of the
///   stream (**record level**; every shard reads every file);
/// - over a global shuffle it is folded into it: shard `i` reads positions `i`, `i + n`, ...
///   of the one global permutation, the same on every shard for a seed (**record level**,
///   each shard reading only its own records).
///
/// Every record is in exactly one shard either way. `explain` shows the choice: `shard`
/// below the reader (file level), above it (record level), or a `shard` parameter on
/// `global_shuffle`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShardPushdown;

/// `interleave` over a record-level `shard` (too few files) over a file reader: the shard
/// goes above the interleave, which reads the files (`interleave` reads a file list; a
/// record-level shard of the interleaved stream keeps each record in one shard).
fn shard_above_interleave(node: &Arc<PlanNode>) -> Option<Arc<PlanNode>> {
    let interleave = node.stage_as::<InterleaveStage>()?;
    if interleave.open.is_some() {
        return None;
    }
    let [shard_node] = node.inputs() else {
        return None;
    };
    let shard = shard_node.stage_as::<ShardSpec>()?;
    let [reader] = shard_node.inputs() else {
        return None;
    };
    reader.stage().file_reader()?;
    let [files] = reader.inputs() else {
        return None;
    };
    let list = files.stage_as::<FileList>()?;
    if enough_files(list.len() as u64, shard.num_shards) {
        return None;
    }
    let interleaved = PlanNode::new(Arc::clone(node.stage()), vec![Arc::clone(reader)]);
    Some(node.rewritten(Arc::clone(shard_node.stage()), vec![interleaved]))
}

/// Whether `files` files shard by file over `shards` shards: each shard gets at least one
/// file and the largest share is at most 1.25× the smallest (so no shard does much more
/// work than another).
pub fn enough_files(files: u64, shards: u64) -> bool {
    let least = files / shards.max(1);
    let most = files.div_ceil(shards.max(1));
    least >= 1 && most * 4 <= least * 5
}

impl Rule for ShardPushdown {
    fn name(&self) -> &'static str {
        "shard_pushdown"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, _: &Options) -> Result<Option<Arc<PlanNode>>> {
        if let Some(moved) = shard_above_interleave(node) {
            return Ok(Some(moved));
        }
        let Some(shard) = node.stage_as::<ShardSpec>() else {
            return Ok(None);
        };
        let [reader] = node.inputs() else {
            return Ok(None);
        };
        if let Some(global) = reader.stage_as::<GlobalShuffleStage>()
            && global.shard.is_none()
        {
            let folded = global.sharded(shard.num_shards, shard.index);
            return Ok(Some(
                node.rewritten(Arc::new(folded), reader.inputs().to_vec()),
            ));
        }
        let [files] = reader.inputs() else {
            return Ok(None);
        };
        if !reader.stage().shards_by_input() {
            return Ok(None);
        }
        if let Some(list) = files.stage_as::<FileList>()
            && !enough_files(list.len() as u64, shard.num_shards)
        {
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
    fn enough_files_means_balanced_shares() {
        assert!(enough_files(16, 4));
        assert!(enough_files(17, 4)); // 5 / 4: at most 1.25x
        assert!(!enough_files(6, 4)); // 2 / 1
        assert!(!enough_files(3, 4)); // a shard without a file
        assert!(enough_files(1, 1));
    }

    #[test]
    fn with_too_few_files_the_shard_stays_at_record_level() {
        let files = Dataset::file_list(vec!["a".into(), "b".into(), "c".into()]);
        let d = files.read_tfrecord(TfRecordSpec::default()).shard(2, 1);
        assert_eq!(kinds(&optimize(&d)), ["shard", "tfrecord", "files"]);
    }

    #[test]
    fn a_record_level_shard_before_interleave_moves_above_it() {
        let files = Dataset::file_list(vec!["a".into(), "b".into(), "c".into()]);
        let d = files
            .read_tfrecord(TfRecordSpec::default())
            .shard(2, 0)
            .interleave(InterleaveSpec::new(2));
        assert_eq!(
            kinds(&optimize(&d)),
            ["shard", "interleave", "tfrecord", "files"]
        );
    }

    #[test]
    fn a_shard_of_a_global_shuffle_is_folded_into_it() {
        let files = Dataset::file_list(vec!["a".into(), "b".into(), "c".into(), "d".into()]);
        let d = files
            .read_tfrecord_global_shuffle(TfRecordSpec::default(), GlobalShuffleSpec::default())
            .shard(4, 3);
        let plan = optimize(&d);
        assert_eq!(kinds(&plan), ["global_shuffle", "files"]);
        assert_eq!(
            plan.stage().params().get("shard"),
            Some(&serde_json::json!("3/4"))
        );
        assert_eq!(plan.fingerprint(), d.plan().fingerprint());
    }

    #[test]
    fn shard_of_elements_stays_where_it_is() {
        let d = Dataset::range(0, 10).batch(2).shard(2, 0);
        assert_eq!(kinds(&optimize(&d)), ["shard", "batch", "range"]);
    }
}
