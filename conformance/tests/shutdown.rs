//! Dropping an iterator half-way joins every thread its stages started (alone in this test
//! binary, since it counts the process's threads).

use sluice_conformance::check_drop_stops_threads;
use sluice_core::prelude::*;

/// A stage under test.
type StageFn = Box<dyn Fn(Dataset) -> Dataset>;

#[test]
fn dropping_a_pipeline_half_way_stops_its_threads() {
    let stages: Vec<(&str, StageFn)> = vec![
        (
            "map parallel",
            Box::new(|ds: Dataset| ds.map_with(MapSpec::parallel(3), |e, _| Ok(e))),
        ),
        (
            "map_chunks parallel",
            Box::new(|ds: Dataset| {
                ds.map_chunks(MapChunksSpec::new(4).num_parallel(2), |c, _| {
                    Ok(c.into_iter().map(|e| (0, e)).take(0).collect())
                })
            }),
        ),
        (
            "batch parallel",
            Box::new(|ds: Dataset| ds.batch_with(BatchSpec::new(8).num_parallel(2))),
        ),
        (
            "prefetch",
            Box::new(|ds: Dataset| ds.prefetch(BufferSize::Fixed(4))),
        ),
        (
            "shuffle then prefetch",
            Box::new(|ds: Dataset| ds.shuffle(16).prefetch(BufferSize::Auto)),
        ),
    ];
    for (name, stage) in stages {
        check_drop_stops_threads(stage, 10_000).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
