//! The optimizer: named rules that rewrite the plan as written into the plan that runs.
//!
//! Builder methods and pipeline files only append stages; every rewrite lives here, as a
//! [`Rule`] that is tested on its own. The [`Optimizer`] applies its rules, in order, to
//! every node (inputs first), and repeats until no rule changes anything. Each rewritten
//! node remembers the node as written it stands for ([`PlanNode::origin`]), so fingerprints
//! (disk caches, checkpoints) do not depend on which rules ran.
//!
//! | rule | rewrites | why |
//! |---|---|---|
//! | [`FilesToInterleave`] | `interleave` over a file reader (e.g. `tfrecord`) → an interleave over the file list, reading each file as a sub-dataset | tf.data's `interleave(TFRecordDataset)`: several files read at once |
//! | [`ShardPushdown`] | `shard` over a file reader or file interleave with enough files → the reader over `shard` of its files; `shard` over a global shuffle → the global shuffle reading its positions of the permutation | each shard reads only its own files, or its part of one global order; with too few files the shard stays at record level |
//! | [`DecodeCropFusion`] | `image_ops` starting with `decode`, a random or centre crop (and a random flip) → one window decode | a JPEG is decoded only where the crop needs it; same pixels and draws |
//! | [`MapAndBatchFusion`] | `batch` after `image_ops` → one stage decoding and augmenting each batch's rows in parallel into its buffer | tf.data's `map_and_batch_fusion`; off with `Options::map_and_batch_fusion = false` |
//! | [`ReadAndBatchFusion`] | `batch` after a reader of a format that reads in chunks (`csv`, `parquet`, `arrow`) → one stage reading each batch's rows straight into its columns | no element per record and no stacking; off with `Options::map_and_batch_fusion = false` |
//! | [`BatchBeforeCache`] | `batch` after an in-memory `cache` → `batch` before it | the cache keeps the batches: later passes hand them out without copying every element into a batch again |
//! | [`ReadingThreadsStart`] | an `auto` `interleave` whose records go, through stages on the consumer's thread, to a stage computing on worker threads → it starts reading on the consumer's thread instead of on the CPU budget's reading threads | the workers keep the CPUs busy; reading threads would take CPU from them |
//!
//! Adding a rule: a type implementing [`Rule`] in its own file here, listed in
//! [`Optimizer::default`], with tests of its own (that it applies where it should, leaves
//! other plans alone, and that the output is the same bits with and without it).

mod batch_before_cache;
mod decode_crop_fusion;
mod files_to_interleave;
mod map_and_batch_fusion;
mod read_and_batch_fusion;
mod reading_threads_start;
mod shard_pushdown;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

pub use batch_before_cache::BatchBeforeCache;
pub use decode_crop_fusion::DecodeCropFusion;
pub use files_to_interleave::FilesToInterleave;
pub use map_and_batch_fusion::MapAndBatchFusion;
pub use read_and_batch_fusion::ReadAndBatchFusion;
pub use reading_threads_start::ReadingThreadsStart;
pub use shard_pushdown::{ShardPushdown, enough_files};

use crate::error::Result;
use crate::options::Options;
use crate::plan::{self, PlanNode};

/// A rewrite of the plan.
pub trait Rule: Send + Sync {
    /// The rule's name, as `explain` shows it (`map_and_batch_fusion`).
    fn name(&self) -> &'static str;

    /// `node` rewritten (its inputs are already rewritten), or `None` when the rule does
    /// not apply to it. A replacement is made with [`PlanNode::rewritten`] (or keeps the
    /// origin with [`PlanNode::with_inputs`]) so it remembers the node as written.
    fn rewrite(&self, node: &Arc<PlanNode>, options: &Options) -> Result<Option<Arc<PlanNode>>>;
}

/// A rule that changed the plan, and the stage it changed (for `explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The rule's name.
    pub rule: &'static str,
    /// The stage it rewrote, as written (`interleave`).
    pub stage: String,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at {})", self.rule, self.stage)
    }
}

/// The plan that runs.
#[derive(Debug)]
pub struct Optimized {
    /// The rewritten plan.
    pub plan: Arc<PlanNode>,
    /// The rewrites, in the order they were made.
    pub applied: Vec<Applied>,
    /// Each stage's number (see [`crate::plan`]), keyed by node.
    pub(crate) numbers: Arc<HashMap<usize, usize>>,
}

/// The rules, in the order they are tried.
pub struct Optimizer {
    rules: Vec<Box<dyn Rule>>,
}

/// Passes over the plan at most: each pass applies every rule everywhere, and rules only
/// move `shard` down and merge stages, so a plan settles in a few.
const MAX_PASSES: usize = 8;

impl Default for Optimizer {
    /// Every rule: [`FilesToInterleave`], [`ShardPushdown`], [`BatchBeforeCache`],
    /// [`DecodeCropFusion`], [`MapAndBatchFusion`], [`ReadAndBatchFusion`],
    /// [`ReadingThreadsStart`].
    fn default() -> Self {
        Optimizer::new(vec![
            Box::new(FilesToInterleave),
            Box::new(ShardPushdown),
            Box::new(BatchBeforeCache),
            Box::new(DecodeCropFusion),
            Box::new(MapAndBatchFusion),
            Box::new(ReadAndBatchFusion),
            Box::new(ReadingThreadsStart),
        ])
    }
}

impl Optimizer {
    /// An optimizer with these rules, tried in this order.
    pub fn new(rules: Vec<Box<dyn Rule>>) -> Self {
        Optimizer { rules }
    }

    /// No rules: the plan runs as written.
    pub fn none() -> Self {
        Optimizer::new(Vec::new())
    }

    /// The rules' names, in order.
    pub fn rule_names(&self) -> Vec<&'static str> {
        self.rules.iter().map(|r| r.name()).collect()
    }

    /// `plan` rewritten by the rules until none applies, and numbered.
    pub fn optimize(&self, plan: &Arc<PlanNode>, options: &Options) -> Result<Optimized> {
        let mut current = Arc::clone(plan);
        let mut applied = Vec::new();
        for _ in 0..MAX_PASSES {
            let before = applied.len();
            for rule in &self.rules {
                let mut memo = HashMap::new();
                current = apply(rule.as_ref(), &current, options, &mut memo, &mut applied)?;
            }
            if applied.len() == before {
                break;
            }
        }
        let numbers = Arc::new(plan::number(&current));
        Ok(Optimized {
            plan: current,
            applied,
            numbers,
        })
    }
}

/// `rule` applied to every node under and including `node`, inputs first; shared nodes
/// are rewritten once (`memo`) so they stay shared.
fn apply(
    rule: &dyn Rule,
    node: &Arc<PlanNode>,
    options: &Options,
    memo: &mut HashMap<usize, Arc<PlanNode>>,
    applied: &mut Vec<Applied>,
) -> Result<Arc<PlanNode>> {
    if let Some(done) = memo.get(&node.key()) {
        return Ok(Arc::clone(done));
    }
    let mut changed = false;
    let mut inputs = Vec::with_capacity(node.inputs().len());
    for input in node.inputs() {
        let rewritten = apply(rule, input, options, memo, applied)?;
        changed |= !Arc::ptr_eq(&rewritten, input);
        inputs.push(rewritten);
    }
    let node_now = if changed {
        node.with_inputs(inputs)
    } else {
        Arc::clone(node)
    };
    let out = match rule.rewrite(&node_now, options)? {
        Some(new) => {
            applied.push(Applied {
                rule: rule.name(),
                stage: node_now.stage().display_name().into_owned(),
            });
            new
        }
        None => node_now,
    };
    memo.insert(node.key(), Arc::clone(&out));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn no_rules_leave_the_plan_as_written_and_number_inputs_first() {
        let d = Dataset::range(0, 10)
            .batch(2)
            .prefetch(BufferSize::Fixed(2));
        let o = Optimizer::none()
            .optimize(d.plan(), &Options::default())
            .unwrap();
        assert!(Arc::ptr_eq(&o.plan, d.plan()));
        assert!(o.applied.is_empty());
        let numbers: Vec<(String, usize)> = plan::nodes(&o.plan)
            .iter()
            .map(|n| (n.stage().name().to_string(), o.numbers[&n.key()]))
            .collect();
        assert_eq!(
            numbers,
            [
                ("range".to_string(), 0),
                ("batch".to_string(), 1),
                ("prefetch".to_string(), 2)
            ]
        );
    }

    #[test]
    fn a_shared_input_stays_one_stage() {
        let a = Dataset::range(0, 4);
        let z = Dataset::zip(vec![a.clone(), a.clone()]);
        let o = Optimizer::default()
            .optimize(z.plan(), &Options::default())
            .unwrap();
        assert_eq!(plan::nodes(&o.plan).len(), 2);
    }
}
