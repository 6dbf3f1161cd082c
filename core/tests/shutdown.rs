//! Dropping a pipeline stops and joins its threads promptly. (Alone in its test binary, so
//! the process's thread count is this test's own.)

use std::time::{Duration, Instant};

use sluice_core::prelude::*;

/// Threads of this process (Linux).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn dropping_an_iterator_stops_and_joins_its_threads_promptly() {
    let slow = Dataset::range(0, 1_000_000)
        .map_with(MapSpec::parallel(4), |e, _| {
            std::thread::sleep(Duration::from_millis(1));
            Ok(e)
        })
        .prefetch(BufferSize::Fixed(4))
        .with_options(Options::default().with_cpu_budget(4));
    let before = threads();
    let mut it = slow.iter().unwrap();
    for _ in 0..10 {
        it.next().unwrap().unwrap();
    }
    let during = threads();
    assert_eq!(
        during,
        before + 6,
        "4 map workers, the dispatcher and the prefetch thread"
    );
    let t = Instant::now();
    drop(it);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(2), "drop took {took:?}");
    // Every thread the pipeline started is joined by the time drop returns.
    let after = threads();
    assert_eq!(
        after, before,
        "threads left running: {before} -> {during} -> {after}"
    );
}
