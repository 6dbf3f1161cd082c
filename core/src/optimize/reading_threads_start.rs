//! [`ReadingThreadsStart`]: where an `auto` interleave's reading starts.

use std::sync::Arc;

use crate::error::Result;
use crate::options::Options;
use crate::parallelism::NumParallel;
use crate::plan::PlanNode;
use crate::stages::interleave::InterleaveStage;

use super::Rule;

/// An `interleave` with `num_parallel = "auto"` starts with as many reading threads as the
/// CPU budget allows (at most one per open file), so that reading (the page-cache copy, the CRCs)
/// runs on the cores the stages after it, on the consumer's thread, leave idle. This rule
/// makes it start with every file read on the consumer's thread instead when its records
/// go, through stages that run on the consumer's thread, to a stage computing on worker
/// threads ([`Stage::computes_in_parallel`](crate::Stage::computes_in_parallel): a
/// parallel `map`, `image_ops`, a batch's row threads): those workers keep the CPUs busy
/// and reading threads would only take CPU from them. Autotune moves from either start.
///
/// Measured on the bench's files (BENCHMARKS.md, "Where an auto interleave starts
/// reading"): `parse` (interleave → batch → parse_example, all on the consumer's thread)
/// faster with the reading threads, `augment`, `eval` and `cache` slower.
/// The elements and their order are the same either way (the interleave's order does not
/// depend on its threads).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadingThreadsStart;

impl Rule for ReadingThreadsStart {
    fn name(&self) -> &'static str {
        "reading_threads_start"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, _: &Options) -> Result<Option<Arc<PlanNode>>> {
        if !node.stage().computes_in_parallel() {
            return Ok(None);
        }
        let [input] = node.inputs() else {
            return Ok(None);
        };
        Ok(start_on_consumer(input).map(|input| node.with_inputs(vec![input])))
    }
}

/// `node` with the `auto` interleave it reads through stages on the consumer's thread made
/// to start reading on the consumer's thread; `None` when there is no such interleave (or
/// it already does).
fn start_on_consumer(node: &Arc<PlanNode>) -> Option<Arc<PlanNode>> {
    if let Some(interleave) = node.stage_as::<InterleaveStage>() {
        if interleave.spec.num_parallel != NumParallel::Auto || interleave.start_on_consumer {
            return None;
        }
        return Some(node.rewritten(
            Arc::new(interleave.starting_on_consumer()),
            node.inputs().to_vec(),
        ));
    }
    // Only through stages on the consumer's thread: a stage of its own threads (a
    // `prefetch`, another parallel stage) already runs beside the workers.
    let [input] = node.inputs() else {
        return None;
    };
    if !node.stage().runs_inline() || node.stage().computes_in_parallel() {
        return None;
    }
    start_on_consumer(input).map(|input| node.with_inputs(vec![input]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::Optimizer;
    use crate::prelude::*;

    fn fixtures() -> String {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord").to_string()
    }

    fn files() -> Dataset {
        Dataset::tfrecord([format!("{}/images.tfrecord-*", fixtures())]).unwrap()
    }

    fn spec() -> ParseExampleSpec {
        ParseExampleSpec::new([("label", FeatureSpec::scalar(FeatureType::Int64))])
    }

    /// The plan's interleave, and whether it starts on the consumer's thread.
    fn interleave_starts_on_consumer(d: &Dataset) -> (bool, Vec<&'static str>) {
        let o = Optimizer::default()
            .optimize(d.plan(), &Options::default())
            .unwrap();
        let mut node = Arc::clone(&o.plan);
        loop {
            if let Some(i) = node.stage_as::<InterleaveStage>() {
                let rules = o.applied.iter().map(|a| a.rule).collect();
                return (i.start_on_consumer, rules);
            }
            node = Arc::clone(&node.inputs()[0]);
        }
    }

    #[test]
    fn an_interleave_before_inline_stages_starts_with_reading_threads() {
        let d = files()
            .interleave(InterleaveSpec::new(4).num_parallel(NumParallel::Auto))
            .batch(8)
            .parse_example(spec());
        let (on_consumer, rules) = interleave_starts_on_consumer(&d);
        assert!(!on_consumer);
        assert!(!rules.contains(&"reading_threads_start"), "{rules:?}");
    }

    #[test]
    fn an_interleave_feeding_parallel_workers_starts_on_the_consumer() {
        let d = files()
            .interleave(InterleaveSpec::new(4).num_parallel(NumParallel::Auto))
            .parse_example(spec())
            .map_with(MapSpec::parallel(NumParallel::Auto), |e, _| Ok(e));
        let (on_consumer, rules) = interleave_starts_on_consumer(&d);
        assert!(on_consumer);
        assert_eq!(
            rules
                .iter()
                .filter(|r| **r == "reading_threads_start")
                .count(),
            1,
            "applied once: {rules:?}"
        );
        // The same elements in the same order as with the reading threads (the map
        // sequential: the rule does not apply).
        let ids = |d: &Dataset| -> Vec<ElementId> {
            d.collect().unwrap().iter().map(|e| e.id()).collect()
        };
        let threaded = files()
            .interleave(InterleaveSpec::new(4).num_parallel(NumParallel::Auto))
            .parse_example(spec())
            .map(Ok);
        assert!(!interleave_starts_on_consumer(&threaded).0);
        assert_eq!(ids(&d), ids(&threaded));
        assert_eq!(ids(&d).len(), 32);
    }

    #[test]
    fn a_prefetch_or_a_fixed_num_parallel_between_keeps_the_threads() {
        // A prefetch runs on its own thread: the interleave's consumer is not the workers'.
        let d = files()
            .interleave(InterleaveSpec::new(4).num_parallel(NumParallel::Auto))
            .prefetch(BufferSize::Fixed(4))
            .map_with(MapSpec::parallel(NumParallel::Auto), |e, _| Ok(e));
        assert!(!interleave_starts_on_consumer(&d).0);
        // A fixed number of reading threads is the user's.
        let d = files()
            .interleave(InterleaveSpec::new(4).num_parallel(2))
            .map_with(MapSpec::parallel(NumParallel::Auto), |e, _| Ok(e));
        assert!(!interleave_starts_on_consumer(&d).0);
    }
}
