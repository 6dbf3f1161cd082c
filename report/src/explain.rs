//! [`explain`]: the bottleneck of a run, in words with its numbers, and what to try.
//!
//! The rules are in [`explain`]'s documentation.

use crate::format::{maybe_seconds, number, percent, seconds};
use crate::run::{Run, Stage, StageExt};

/// Busy share from which a stage counts as working all the time.
pub(crate) const BUSY: f64 = 0.8;
/// A buffer whose mean occupancy is under this share of its capacity is "mostly empty".
pub(crate) const EMPTY_BUFFER: f64 = 0.25;
/// p99 over p50 from which a stage has slow elements.
pub(crate) const SLOW_TAIL: f64 = 10.0;

/// What limits the run (the rules are in [`explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Nothing waited measurably (or no stage statistics).
    NoWaiting,
    /// A buffering stage was mostly empty: the stage feeding it is slower than the
    /// consumer.
    ProducerSlower {
        /// The stage feeding it (`name#index`), when known.
        producer: Option<String>,
    },
    /// Busy all the time on as many threads as CPUs: the CPUs are the limit.
    CpuBound,
    /// Busy all the time on fewer threads than CPUs: give it more.
    MoreThreads,
    /// A reader: reading is the limit; read more files at once.
    StarvedReads,
    /// It waited on its input more than it worked: the limit is upstream.
    Starved,
    /// It was blocked on its full output buffer: its consumer is slower.
    Blocked,
    /// It works, not all the time, and is neither starved nor blocked: its own work per
    /// element is the cost.
    SlowWork,
}

/// The bottleneck explained: the stage, the facts with their numbers, the finding and
/// the suggestion.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The bottleneck stage (`name#index`), if any.
    pub stage: Option<String>,
    /// Its share of all the waiting in the pipeline (0 to 1).
    pub share: f64,
    /// What the numbers say, one sentence each.
    pub facts: Vec<String>,
    /// The rule that applied.
    pub finding: Finding,
    /// What to try, in words.
    pub suggestion: String,
    /// Set when its p99 is over ten times its p50: the ratio.
    pub slow_elements: Option<f64>,
}

/// Whether a stage of this kind reads records (from files or storage).
fn is_reader(name: &str) -> bool {
    const READERS: [&str; 12] = [
        "files",
        "interleave",
        "tfrecord",
        "read_files",
        "text_lines",
        "csv",
        "fixed_length",
        "parquet",
        "arrow",
        "numpy",
        "tfds",
        "global_shuffle",
    ];
    READERS.contains(&name) || name.contains("read") || name.contains("tfrecord")
}

/// The stage that feeds `s` (the one numbered just before it), if any.
fn producer<'a>(run: &'a Run, s: &Stage) -> Option<&'a Stage> {
    run.stages
        .iter()
        .filter(|x| x.index < s.index)
        .max_by_key(|x| x.index)
}

/// The bottleneck of `run` explained: the stage that caused the most waiting in the
/// pipeline, the facts about it with their numbers, one [`Finding`] and what to try.
///
/// The rules are few and checked in order on the bottleneck stage (the one that caused
/// the most waiting in the pipeline):
///
/// 1. it only buffers (no work of its own, e.g. `prefetch`) and its buffer was mostly
///    empty (mean under a quarter of its capacity): [`Finding::ProducerSlower`];
/// 2. its threads were busy at least 80 % of the time and it has as many threads as the
///    machine has CPUs: [`Finding::CpuBound`];
/// 3. busy at least 80 % with fewer threads: [`Finding::MoreThreads`];
/// 4. it reads (a file reader, `interleave`, a source): [`Finding::StarvedReads`];
/// 5. it waited on its own input longer than it worked: [`Finding::Starved`];
/// 6. it was blocked on a full output buffer longer than it worked:
///    [`Finding::Blocked`];
/// 7. otherwise: [`Finding::SlowWork`].
///
/// Beside the finding, a stage whose p99 time per element is over ten times its p50 has
/// slow elements ([`Explanation::slow_elements`]).
pub fn explain(run: &Run) -> Explanation {
    let total: f64 = run.stages.iter().map(|s| s.caused_wait_seconds).sum();
    let Some(b) = run.bottleneck_stage().filter(|_| total > 0.0) else {
        return Explanation {
            stage: None,
            share: 0.0,
            facts: vec!["No stage caused measurable waiting in this run.".into()],
            finding: Finding::NoWaiting,
            suggestion: "Nothing to tune here: the pipeline kept up with its consumer.".into(),
            slow_elements: None,
        };
    };
    let share = b.caused_wait_seconds / total;
    let threads = b.thread_count();
    let id = b.id();
    let mut facts = vec![format!(
        "{id} caused {} of all the waiting in the pipeline ({} of {}).",
        percent(share),
        seconds(b.caused_wait_seconds),
        seconds(total)
    )];
    let own_work = b.element_p50_seconds.is_some();
    if own_work {
        facts.push(format!(
            "Its {threads} thread{} {} busy {} of the time; its own work took {} per element at the median (p50) and {} at p99.",
            if threads == 1 { "" } else { "s" },
            if threads == 1 { "was" } else { "were" },
            percent(b.busy_fraction),
            maybe_seconds(b.element_p50_seconds),
            maybe_seconds(b.element_p99_seconds),
        ));
    } else {
        facts.push(format!(
            "It does no work of its own per element (its thread's time is its input's); it has {threads} thread{}.",
            if threads == 1 { "" } else { "s" }
        ));
    }
    facts.push(format!(
        "Its consumer waited {} on it; it waited {} on its own input (starved) and {} on a full output buffer (blocked).",
        seconds(b.consumer_wait_seconds),
        seconds(b.wait_upstream_seconds),
        seconds(b.wait_downstream_seconds)
    ));
    if b.buffer_capacity > 0 {
        facts.push(format!(
            "Its buffer held {} of {} elements on average.",
            number(b.buffer_mean),
            b.buffer_capacity
        ));
    }
    let cpus = run.cpus.filter(|c| *c > 0);
    let upstream = producer(run, b);
    let (finding, suggestion) = if !own_work
        && b.buffer_capacity > 0
        && b.buffer_mean < EMPTY_BUFFER * b.buffer_capacity as f64
    {
        let p = upstream.map(Stage::id);
        let s = format!(
            "Its buffer was mostly empty: the stage feeding it ({}) is slower than the consumer. A larger buffer will not help; make {} faster (see its busy share below).",
            p.as_deref().unwrap_or("its input"),
            p.as_deref().unwrap_or("its input"),
        );
        (Finding::ProducerSlower { producer: p }, s)
    } else if own_work && b.busy_fraction >= BUSY && cpus.is_some_and(|c| threads >= c) {
        (
            Finding::CpuBound,
            format!(
                "{id} was busy {} on {threads} threads, as many as the machine's {} CPUs: the CPUs are the limit. More threads will not help; make its work cheaper (smaller images, a crop fused into the decode, fewer ops) or run on more CPUs.",
                percent(b.busy_fraction),
                cpus.unwrap_or(threads)
            ),
        )
    } else if own_work && b.busy_fraction >= BUSY {
        (
            Finding::MoreThreads,
            format!(
                "{id} was busy {} on {threads} thread{} with {} CPUs: give it more threads (raise its num_parallel, or num_parallel = \"auto\").",
                percent(b.busy_fraction),
                if threads == 1 { "" } else { "s" },
                cpus.map_or_else(|| "more".to_string(), |c| c.to_string())
            ),
        )
    } else if is_reader(&b.name) {
        (
            Finding::StarvedReads,
            format!(
                "{id} reads, and reading is the limit: read more files at once (raise interleave's cycle_length and num_parallel), so that storage latency hides behind parallel reads."
            ),
        )
    } else if b.wait_upstream_seconds > b.busy_seconds {
        let p = upstream.map_or_else(|| "its input".to_string(), Stage::id);
        (
            Finding::Starved,
            format!(
                "{id} waited on its own input longer than it worked: the limit is upstream of it, at {p}; speed that up (or add a prefetch after it)."
            ),
        )
    } else if b.wait_downstream_seconds > b.busy_seconds {
        (
            Finding::Blocked,
            format!(
                "{id} was mostly blocked on its full output buffer: its consumer (the training loop?) is slower than the pipeline."
            ),
        )
    } else {
        (
            Finding::SlowWork,
            format!(
                "{id}'s own work per element is the cost, and its threads were busy only {}: make its work cheaper, or run it in parallel (num_parallel) so that the work overlaps.",
                percent(b.busy_fraction)
            ),
        )
    };
    let slow_elements = match (b.element_p50_seconds, b.element_p99_seconds) {
        (Some(p50), Some(p99)) if p50 > 0.0 && p99 / p50 > SLOW_TAIL => Some(p99 / p50),
        _ => None,
    };
    if let Some(r) = slow_elements {
        facts.push(format!(
            "Its p99 is {}× its p50: a few slow elements (large images, slow reads) stall its consumer; a prefetch after it smooths them.",
            number(r)
        ));
    }
    Explanation {
        stage: Some(id),
        share,
        facts,
        finding,
        suggestion,
        slow_elements,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(index: usize, name: &str, caused: f64) -> Stage {
        Stage {
            index,
            name: name.into(),
            caused_wait_seconds: caused,
            consumer_wait_seconds: caused,
            element_p50_seconds: Some(0.01),
            element_p99_seconds: Some(0.02),
            ..Stage::default()
        }
    }

    fn run(stages: Vec<Stage>, cpus: u64) -> Run {
        Run {
            stages,
            cpus: Some(cpus),
            ..Run::default()
        }
    }

    #[test]
    fn busy_on_every_cpu_is_cpu_bound() {
        let mut m = stage(1, "map", 9.0);
        m.workers = 4;
        m.busy_fraction = 0.97;
        let e = explain(&run(vec![stage(0, "tfrecord", 1.0), m], 4));
        assert_eq!(e.finding, Finding::CpuBound);
        assert_eq!(e.stage.as_deref(), Some("map#1"));
        assert!((e.share - 0.9).abs() < 1e-9);
        assert!(e.facts[0].contains("90%"), "{:?}", e.facts);
        assert!(
            e.facts[1].contains("4 threads were busy 97%"),
            "{:?}",
            e.facts
        );
        assert!(e.suggestion.contains("CPUs are the limit"));
    }

    #[test]
    fn busy_on_fewer_threads_wants_more() {
        let mut m = stage(1, "map", 9.0);
        m.workers = 2;
        m.busy_fraction = 0.95;
        let e = explain(&run(vec![stage(0, "tfrecord", 1.0), m], 8));
        assert_eq!(e.finding, Finding::MoreThreads);
        assert!(e.suggestion.contains("num_parallel"));
    }

    #[test]
    fn an_empty_prefetch_blames_its_producer() {
        let mut p = stage(2, "prefetch", 5.0);
        p.element_p50_seconds = None;
        p.buffer_capacity = 8;
        p.buffer_mean = 0.5;
        let e = explain(&run(
            vec![stage(0, "tfrecord", 1.0), stage(1, "map", 2.0), p],
            4,
        ));
        assert_eq!(
            e.finding,
            Finding::ProducerSlower {
                producer: Some("map#1".into())
            }
        );
        assert!(e.suggestion.contains("map#1"));
        // A full prefetch is not blamed on its producer.
        let mut p = stage(2, "prefetch", 5.0);
        p.element_p50_seconds = None;
        p.buffer_capacity = 8;
        p.buffer_mean = 7.0;
        let e = explain(&run(vec![stage(1, "map", 2.0), p], 4));
        assert_ne!(e.finding, Finding::ProducerSlower { producer: None });
    }

    #[test]
    fn a_starved_reader_wants_parallel_reads() {
        let mut r = stage(0, "interleave", 5.0);
        r.busy_fraction = 0.1;
        r.wait_upstream_seconds = 3.0;
        let e = explain(&run(vec![r, stage(1, "batch", 1.0)], 4));
        assert_eq!(e.finding, Finding::StarvedReads);
        assert!(e.suggestion.contains("cycle_length"));
    }

    #[test]
    fn starved_blocked_and_slow_work() {
        let mut s = stage(1, "map", 5.0);
        s.busy_seconds = 1.0;
        s.wait_upstream_seconds = 4.0;
        let e = explain(&run(vec![stage(0, "range", 1.0), s.clone()], 4));
        assert_eq!(e.finding, Finding::Starved);
        assert!(e.suggestion.contains("range#0"));
        s.wait_upstream_seconds = 0.0;
        s.wait_downstream_seconds = 3.0;
        assert_eq!(explain(&run(vec![s.clone()], 4)).finding, Finding::Blocked);
        s.wait_downstream_seconds = 0.0;
        s.busy_fraction = 0.3;
        let e = explain(&run(vec![s], 4));
        assert_eq!(e.finding, Finding::SlowWork);
        assert!(e.suggestion.contains("30%"));
    }

    #[test]
    fn slow_elements_and_no_waiting() {
        let mut s = stage(0, "map", 1.0);
        s.element_p99_seconds = Some(0.5);
        let e = explain(&run(vec![s], 2));
        assert_eq!(e.slow_elements, Some(50.0));
        assert!(e.facts.iter().any(|f| f.contains("50×")));
        let e = explain(&run(vec![stage(0, "map", 0.0)], 2));
        assert_eq!((e.finding, e.stage), (Finding::NoWaiting, None));
    }
}
