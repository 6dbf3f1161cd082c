//! Autotune: `num_parallel = auto` and `prefetch(auto)` change while the pipeline runs,
//! within the CPU and RAM budgets, never change the output, and explain every decision.
//!
//! These tests assert behaviour, not speed: they wait (up to a generous deadline) for the
//! tuner to act, then check what it did and what it said.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngCore;
use sluice_core::autotune::KnobKind;
use sluice_core::prelude::*;
use sluice_core::{PipelineIter, PipelineStats};

/// One test at a time: they time the machine and count threads.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn value(e: &Element) -> i64 {
    e.tensor("value").unwrap().as_i64().unwrap()[0]
}

/// Pulls from `it` until `done(stats)` or the deadline; returns the values pulled.
fn pull_until(
    it: &mut PipelineIter,
    deadline: Duration,
    done: impl Fn(&PipelineStats) -> bool,
) -> Vec<i64> {
    let start = Instant::now();
    let mut out = Vec::new();
    while let Some(e) = it.next() {
        out.push(value(&e.expect("runs")));
        if out.len() % 64 == 0 && (done(&it.stats()) || start.elapsed() > deadline) {
            break;
        }
    }
    out
}

/// `files` TFRecord files `d.tfrecord-{s}` in `dir` of `records` records `"{s}:{r}"` each;
/// their glob pattern.
fn shards(dir: &std::path::Path, files: usize, records: usize) -> String {
    use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
    for s in 0..files {
        let mut w = TfRecordWriter::new(Vec::new(), Compression::None).unwrap();
        for r in 0..records {
            w.write_record(format!("{s}:{r}").as_bytes()).unwrap();
        }
        std::fs::write(dir.join(format!("d.tfrecord-{s}")), w.finish().unwrap()).unwrap();
    }
    format!("{}/d.tfrecord-*", dir.display())
}

/// A map that waits (not computes) 1 ms per element: more threads always help, up to the
/// budget, even on a loaded machine.
fn waiting_map(ds: &Dataset, num_parallel: NumParallel) -> Dataset {
    ds.map_with(MapSpec::parallel(num_parallel), |e, _| {
        std::thread::sleep(Duration::from_millis(1));
        Ok(e)
    })
}

#[test]
fn the_bottleneck_at_the_cpu_budget_is_left_there_with_the_reason() {
    let _serial = serial();
    let ds = waiting_map(&Dataset::range(0, i64::MAX), NumParallel::Auto)
        .with_options(Options::default().with_seed(1).with_cpu_budget(4));
    let mut it = ds.iter().unwrap();
    let got = pull_until(&mut it, Duration::from_secs(30), |s| !s.autotune.is_empty());
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as i64));
    let stats = it.stats();
    let first = stats
        .autotune
        .first()
        .unwrap_or_else(|| panic!("no decision after {} elements", got.len()));
    // It starts at the budget; the stage the pipeline waits on is never given less.
    assert_eq!((first.from, first.to), (4, 4), "{first}");
    assert_eq!(first.knob, KnobKind::NumParallel);
    assert!(first.stage.starts_with("map#"), "{first}");
    assert!(first.reason.contains("the bottleneck"), "{first}");
    assert!(first.reason.contains("CPU budget"), "{first}");
    assert_eq!(stats.tuned.len(), 1);
    assert_eq!(stats.tuned[0].2, 4);
    let report = stats.report();
    assert!(report.contains("autotune: map#"), "{report}");
}

#[test]
fn a_stage_that_is_not_the_bottleneck_is_probed_and_explained() {
    let _serial = serial();
    // A cheap auto map ahead of a sequential stage that waits 1 ms per element: the tuner
    // probes the map with fewer threads (parking workers) and says what it measured.
    let ds = Dataset::range(0, i64::MAX)
        .map_with(MapSpec::parallel(NumParallel::Auto), |e, _| Ok(e))
        .map(|e| {
            std::thread::sleep(Duration::from_millis(1));
            Ok(e)
        })
        .with_options(Options::default().with_seed(1).with_cpu_budget(4));
    let mut it = ds.iter().unwrap();
    let got = pull_until(&mut it, Duration::from_secs(60), |s| {
        s.autotune.iter().any(|d| d.reason.contains("elements/s"))
    });
    // Ordered output while workers are parked and woken.
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as i64));
    let stats = it.stats();
    let probed: Vec<_> = stats
        .autotune
        .iter()
        .filter(|d| d.reason.contains("elements/s"))
        .collect();
    assert!(!probed.is_empty(), "{:?}", stats.autotune);
    for d in &probed {
        assert_eq!(d.knob, KnobKind::NumParallel);
        assert!(d.stage.starts_with("map#"), "{d}");
        assert!((1..=4).contains(&d.from) && (1..=4).contains(&d.to), "{d}");
        // Kept after a probe with fewer threads (its threads are nearly idle, so it tries
        // 1 at once), or lowered because fewer measured faster twice.
        assert!(
            (d.reason.starts_with("kept 4: ") && d.reason.contains(" gave "))
                || d.reason.starts_with("lowered"),
            "{d}"
        );
    }
}

#[test]
fn a_prefetch_buffer_is_capped_by_the_ram_budget_and_says_so() {
    let _serial = serial();
    // Elements of 1 MiB; a 16 MiB budget leaves half, 8 MiB, for the one tuned buffer.
    let ds = Dataset::range(0, i64::MAX)
        .map(|mut e| {
            e.insert(
                "pad",
                Tensor::new(&[1 << 20], TensorData::U8(vec![0u8; 1 << 20].into()))?,
            );
            Ok(e)
        })
        .prefetch(BufferSize::Auto)
        .with_options(
            Options::default()
                .with_seed(1)
                .with_cpu_budget(8)
                .with_ram_budget(16 << 20),
        );
    let mut it = ds.iter().unwrap();
    let got = pull_until(&mut it, Duration::from_secs(30), |s| {
        s.autotune.iter().any(|d| d.reason.contains("RAM budget"))
    });
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as i64));
    let stats = it.stats();
    let capped = stats
        .autotune
        .iter()
        .find(|d| d.reason.contains("RAM budget"))
        .unwrap_or_else(|| panic!("no RAM decision: {:?}", stats.autotune));
    // It started at 2 per CPU of the budget, 16, and may hold 7 of these elements (of 1 MiB
    // and 8 bytes each).
    assert_eq!((capped.from, capped.to), (16, 7), "{capped}");
    assert_eq!(capped.knob, KnobKind::BufferSize);
    assert!(capped.reason.contains("7 elements of 1024 KiB"), "{capped}");
    assert!(
        stats.tuned.iter().all(|(_, _, v)| *v <= 7),
        "{:?}",
        stats.tuned
    );
}

/// Autotune changes threads and buffers, never elements: an `auto` pipeline gives the same
/// bits as a sequential one, including random augmentation keyed by element.
#[test]
fn auto_settings_do_not_change_the_output() {
    let _serial = serial();
    let build = |np: NumParallel, buffer: BufferSize| {
        Dataset::range(0, 3000)
            .map_with(MapSpec::parallel(np), |mut e, rng| {
                let x = rng.next_u64();
                e.insert("r", Tensor::scalar_i64(x as i64));
                Ok(e)
            })
            .shuffle(100)
            .batch_with(BatchSpec::new(7).num_parallel(np))
            .prefetch(buffer)
            .with_options(Options::default().with_seed(9).with_cpu_budget(3))
    };
    let auto = build(NumParallel::Auto, BufferSize::Auto)
        .collect()
        .unwrap();
    let fixed = build(NumParallel::Fixed(1), BufferSize::Fixed(1))
        .collect()
        .unwrap();
    assert_eq!(auto.len(), fixed.len());
    for (a, b) in auto.iter().zip(&fixed) {
        assert_eq!(a.id(), b.id());
        for name in ["value", "r"] {
            assert_eq!(
                a.tensor(name).unwrap().as_i64().unwrap(),
                b.tensor(name).unwrap().as_i64().unwrap()
            );
        }
    }
}

/// The next epoch of the same dataset starts from what the previous one ended with.
#[test]
fn a_second_epoch_starts_where_autotune_left_off() {
    let _serial = serial();
    let ds = waiting_map(&Dataset::range(0, 2000), NumParallel::Auto)
        .with_options(Options::default().with_seed(1).with_cpu_budget(3));
    let first: Vec<i64> = ds.collect().unwrap().iter().map(value).collect();
    let ended = ds.stats().unwrap().tuned;
    let mut it = ds.iter().unwrap();
    // Before the tuner has changed anything, the knob holds the learned value.
    let started = it.stats().tuned;
    let second: Vec<i64> = it.by_ref().map(|e| value(&e.unwrap())).collect();
    assert_eq!(first, second);
    assert_eq!(ended.len(), 1);
    assert_eq!(started, ended);
}

/// Dropping a pipeline stops the tuner thread with the rest.
#[test]
fn dropping_the_pipeline_stops_the_tuner() {
    let _serial = serial();
    let ds = waiting_map(&Dataset::range(0, i64::MAX), NumParallel::Auto)
        .prefetch(BufferSize::Auto)
        .with_options(Options::default().with_seed(1).with_cpu_budget(2));
    // The pipeline's own threads (all named `sluice-…`): the test harness starts a thread
    // per test whenever it likes, so the process's thread count is not this test's own.
    let threads = || {
        std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .filter(|name| name.starts_with("sluice-"))
                    .count()
            })
            .unwrap_or(0)
    };
    let before = threads();
    {
        let mut it = ds.iter().unwrap();
        pull_until(&mut it, Duration::from_millis(400), |_| false);
        assert!(threads() > before);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while threads() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(threads(), before);
}

/// Reading threads of an `interleave` given and taken away while it reads (a file's
/// read-ahead is kept when its thread goes): the records come in the same order.
#[test]
fn interleave_threads_come_and_go_without_changing_the_output() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let pattern = shards(dir.path(), 4, 300);
    let build = |np: NumParallel| {
        Dataset::tfrecord([&pattern])
            .unwrap()
            .interleave(InterleaveSpec::new(4).num_parallel(np))
            .map_with(MapSpec::parallel(np), |e, _| {
                std::thread::sleep(Duration::from_micros(300));
                Ok(e)
            })
            .repeat(None)
            .with_options(Options::default().with_seed(1).with_cpu_budget(2))
    };
    let auto = build(NumParallel::Auto);
    let mut it = auto.iter().unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    while let Some(e) = it.next() {
        got.push(e.unwrap());
        if got.len() % 100 == 0
            && (it
                .stats()
                .autotune
                .iter()
                .any(|d| d.stage.starts_with("interleave") && d.reason.contains("elements/s"))
                || start.elapsed() > Duration::from_secs(60))
        {
            break;
        }
    }
    let stats = it.stats();
    drop(it);
    let probes: Vec<_> = stats
        .autotune
        .iter()
        .filter(|d| d.stage.starts_with("interleave"))
        .collect();
    assert!(
        probes.iter().any(|d| d.reason.contains("elements/s")),
        "{:?}",
        stats.autotune
    );
    let reference: Vec<Element> = build(NumParallel::Sequential)
        .take(got.len() as u64)
        .collect()
        .unwrap();
    assert_eq!(got.len(), reference.len());
    for (a, b) in got.iter().zip(&reference) {
        assert_eq!(a.id(), b.id());
        assert_eq!(a.tensor("record"), b.tensor("record"));
    }
}

/// A reading thread adds a thread, not CPU: while the process keeps its CPUs busy (here a
/// worker computing without pause on a CPU budget of one), the interleave is not probed
/// with one, and the tuner says why.
#[test]
fn no_reading_thread_is_tried_while_the_cpus_are_busy() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let pattern = shards(dir.path(), 2, 200);
    let ds = Dataset::tfrecord([&pattern])
        .unwrap()
        .interleave(InterleaveSpec::new(2).num_parallel(NumParallel::Auto))
        .map_with(MapSpec::parallel(NumParallel::Auto), |e, _| {
            // ~300 µs of computing per record.
            let start = Instant::now();
            let mut x = 1u64;
            while start.elapsed() < Duration::from_micros(300) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            Ok(e)
        })
        .repeat(None)
        .with_options(Options::default().with_seed(1).with_cpu_budget(1));
    let mut it = ds.iter().unwrap();
    let start = Instant::now();
    let said = |s: &PipelineStats| {
        s.autotune
            .iter()
            .any(|d| d.stage.starts_with("interleave") && d.reason.contains("CPUs busy"))
    };
    let mut n = 0;
    while let Some(e) = it.next() {
        e.unwrap();
        n += 1;
        if n % 100 == 0 && (said(&it.stats()) || start.elapsed() > Duration::from_secs(30)) {
            break;
        }
    }
    let stats = it.stats();
    assert!(said(&stats), "{:?}", stats.autotune);
    assert!(
        !stats
            .autotune
            .iter()
            .any(|d| d.stage.starts_with("interleave") && d.to > 0),
        "{:?}",
        stats.autotune
    );
    let note = stats
        .autotune
        .iter()
        .find(|d| d.stage.starts_with("interleave"))
        .unwrap();
    assert_eq!(
        (note.knob, note.from, note.to),
        (KnobKind::ReadingThreads, 0, 0)
    );
}
