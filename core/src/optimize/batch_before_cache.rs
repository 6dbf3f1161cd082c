//! [`BatchBeforeCache`]: a `batch` after an in-memory `cache` batches before it, so the
//! cache keeps the batches.

use std::sync::Arc;

use crate::error::Result;
use crate::options::{ErrorPolicy, Options};
use crate::plan::PlanNode;
use crate::stages::batch::BatchSpec;
use crate::stages::cache::{CacheSpec, CacheStage};

use super::Rule;

/// `… → cache (in memory) → batch` becomes `… → batch → cache`: the first pass batches the
/// elements as before and the cache keeps the batches, so every later pass hands out the
/// cached batches as they are instead of copying every element into a new batch again
/// (the `cache2` pipeline's second epoch was that copy and nothing else). The cache replays
/// the same elements in the same order each pass, so the batches are the same bits.
///
/// Applies to an ordered `batch` (sequential, or `deterministic`) over a memory cache under
/// the `fail` error policy (under `skip`, a batch that fails is skipped and counted once
/// instead of every pass). A disk cache is left alone: its file, named by the plan above
/// it, holds elements. Both new nodes stand for the `batch` as written, so fingerprints do
/// not change. As with any cache, its values are shared by every pass: Python arrays of
/// cached batches are read-only (`sluice.torch.to_torch` copies them).
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchBeforeCache;

impl Rule for BatchBeforeCache {
    fn name(&self) -> &'static str {
        "batch_before_cache"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, options: &Options) -> Result<Option<Arc<PlanNode>>> {
        if options.error_policy != ErrorPolicy::Fail
            || node.stage_as::<BatchSpec>().is_none()
            || !node.stage().order_deterministic()
        {
            return Ok(None);
        }
        let [cache] = node.inputs() else {
            return Ok(None);
        };
        if cache
            .stage_as::<CacheStage>()
            .is_none_or(|c| c.spec() != &CacheSpec::Memory)
        {
            return Ok(None);
        }
        let [input] = cache.inputs() else {
            return Ok(None);
        };
        let batch = node.rewritten(Arc::clone(node.stage()), vec![Arc::clone(input)]);
        // A cache of its own: the written one may be shared with plans that batch otherwise.
        let cached = node.rewritten(Arc::new(CacheStage::new(CacheSpec::Memory)), vec![batch]);
        Ok(Some(cached))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::Optimizer;
    use crate::prelude::*;

    /// The stage names of the optimized plan, output first, and the rules applied.
    fn optimized(d: &Dataset) -> (Vec<&'static str>, Vec<&'static str>) {
        let o = Optimizer::new(vec![Box::new(BatchBeforeCache)])
            .optimize(d.plan(), &d.options())
            .unwrap();
        let mut names = Vec::new();
        let mut node = Arc::clone(&o.plan);
        loop {
            names.push(node.stage().name());
            match node.inputs() {
                [input] => node = Arc::clone(input),
                _ => break,
            }
        }
        (names, o.applied.iter().map(|a| a.rule).collect())
    }

    #[test]
    fn a_batch_after_a_memory_cache_moves_below_it() {
        let d = Dataset::range(0, 10).cache(CacheSpec::Memory).batch(4);
        let (names, rules) = optimized(&d);
        assert_eq!(names, ["cache", "batch", "range"]);
        assert_eq!(rules, ["batch_before_cache"]);
        // The plan as written keeps its fingerprint.
        let o = Optimizer::new(vec![Box::new(BatchBeforeCache)])
            .optimize(d.plan(), &d.options())
            .unwrap();
        assert_eq!(o.plan.fingerprint(), d.plan().fingerprint());
    }

    #[test]
    fn other_plans_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let src = Dataset::range(0, 10);
        let disk = src
            .cache(CacheSpec::Directory(dir.path().to_path_buf()))
            .batch(4);
        assert_eq!(optimized(&disk).0, ["batch", "cache", "range"]);
        let skip = src
            .cache(CacheSpec::Memory)
            .batch(4)
            .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
        assert_eq!(optimized(&skip).0, ["batch", "cache", "range"]);
        let mut unordered = BatchSpec::new(4);
        unordered.num_parallel = NumParallel::Fixed(2);
        unordered.deterministic = false;
        let d = src.cache(CacheSpec::Memory).batch_with(unordered);
        assert_eq!(optimized(&d).0, ["batch", "cache", "range"]);
        let between = src.cache(CacheSpec::Memory).map(Ok).batch(4);
        assert_eq!(optimized(&between).0, ["batch", "map", "cache", "range"]);
    }
}
