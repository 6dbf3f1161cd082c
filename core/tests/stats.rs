//! The stats report names the stage that limits the pipeline, also when it sits below an
//! inline `batch` read by a `prefetch` thread; record-reading stages count records in.

use std::time::{Duration, Instant};

use sluice_core::prelude::*;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Element, PipelineStats, Result, StageStats};

/// Keeps a CPU busy for `d` (a CPU-bound stage, like decoding an image).
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn stage<'a>(stats: &'a PipelineStats, name: &str) -> &'a StageStats {
    stats
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}:\n{}", stats.report()))
}

/// Runs one epoch and returns its stats.
fn run(ds: &Dataset, batches: usize) -> PipelineStats {
    let mut it = ds.iter().unwrap();
    let mut n = 0;
    for batch in it.by_ref() {
        batch.unwrap();
        n += 1;
    }
    assert_eq!(n, batches);
    it.stats()
}

#[test]
fn a_slow_sequential_map_under_batch_and_prefetch_is_the_bottleneck() {
    // range (fast) -> map (1 ms per element, inline) -> batch (inline) -> prefetch (thread).
    // The consumer waits on prefetch, whose thread waits inside batch, which is waiting
    // inside map almost all the time: map is the stage to blame, not batch.
    let ds = Dataset::range(0, 160)
        .map(|e: Element| {
            spin(Duration::from_millis(1));
            Ok(e)
        })
        .batch(16)
        .prefetch(BufferSize::Fixed(2));
    let stats = run(&ds, 10);
    let b = stats.bottleneck().expect("a bottleneck");
    assert_eq!(b.name, "map", "{}", stats.report());
    assert!(
        stats
            .report()
            .contains(&format!("bottleneck: #{} map", b.index)),
        "{}",
        stats.report()
    );
    let map = stage(&stats, "map");
    let batch = stage(&stats, "batch");
    assert!(
        map.busy_fraction > 0.5,
        "map is saturated:\n{}",
        stats.report()
    );
    assert!(
        map.caused_wait_seconds > 4.0 * batch.caused_wait_seconds,
        "batch's own work is small beside map's:\n{}",
        stats.report()
    );
}

#[test]
fn a_saturated_parallel_stage_under_an_inline_batch_is_the_bottleneck() {
    // The shape of the augment pipeline: a parallel element-wise stage (image_ops) whose
    // workers are always busy, then an inline batch and a prefetch.
    let ds = Dataset::range(0, 192)
        .map_with(MapSpec::parallel(2), |e, _| {
            spin(Duration::from_millis(1));
            Ok(e)
        })
        .batch(16)
        .prefetch(BufferSize::Fixed(2));
    let stats = run(&ds, 12);
    let b = stats.bottleneck().expect("a bottleneck");
    assert_eq!(b.name, "map", "{}", stats.report());
    assert_eq!(b.workers, 2, "{}", stats.report());
    let batch = stage(&stats, "batch");
    assert!(
        b.caused_wait_seconds > 4.0 * batch.caused_wait_seconds,
        "{}",
        stats.report()
    );
}

#[test]
fn a_slow_consumer_makes_no_stage_a_large_bottleneck() {
    // Nothing upstream is slow: the stages' caused waits stay small next to the run.
    let ds = Dataset::range(0, 64)
        .batch(8)
        .prefetch(BufferSize::Fixed(2));
    let mut it = ds.iter().unwrap();
    let mut n = 0;
    for b in it.by_ref() {
        b.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        n += 1;
    }
    assert_eq!(n, 8);
    let stats = it.stats();
    let caused: f64 = stats.stages.iter().map(|s| s.caused_wait_seconds).sum();
    assert!(
        caused < 0.25 * stats.wall_seconds,
        "caused {caused}s of {}s:\n{}",
        stats.wall_seconds,
        stats.report()
    );
}

/// Writes `files` TFRecord files of `per_file` records each into a new temporary directory.
fn record_files(files: usize, per_file: usize) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..files {
        let path = dir.path().join(format!("part-{f}.tfrecord"));
        let mut w = TfRecordWriter::create(&path, Compression::None)?;
        for r in 0..per_file {
            w.write_record(format!("file {f} record {r}").as_bytes())?;
        }
        w.finish()?;
    }
    Ok(dir)
}

#[test]
fn record_reading_stages_count_records_in_not_file_names() -> Result<()> {
    let dir = record_files(3, 5)?;
    let pattern = format!("{}/part-*.tfrecord", dir.path().display());
    let sequential = Dataset::tfrecord([pattern.as_str()])?;
    let interleaved = Dataset::tfrecord([pattern.as_str()])?
        .interleave(InterleaveSpec::new(2).num_parallel(NumParallel::Auto));
    for (ds, name) in [(sequential, "tfrecord"), (interleaved, "interleave")] {
        assert_eq!(ds.collect()?.len(), 15);
        let stats = ds.stats().unwrap();
        let files = stage(&stats, "files");
        assert_eq!(files.elements_out, 3, "{}", stats.report());
        let reader = stage(&stats, name);
        assert_eq!(
            (reader.elements_in, reader.elements_out),
            (15, 15),
            "{}",
            stats.report()
        );
    }
    Ok(())
}

/// A stage of large elements (a batch of images is tens of MB) shows its counts while the
/// pipeline runs, not only every 64 elements.
#[test]
fn large_elements_are_counted_as_they_pass() {
    let ds = Dataset::range(0, 1_000).map(|e: Element| {
        let big = Tensor::new(
            &[1 << 19],
            sluice_core::TensorData::F32(vec![0.0f32; 1 << 19].into()),
        )?;
        Ok(e.with("big", big))
    });
    let mut it = ds.iter().unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    let stats = it.stats();
    let map = stage(&stats, "map");
    assert_eq!(map.elements_out, 3, "{}", stats.report());
}

/// `image_ops` running a batch's rows on the run's row threads (fused with `batch`, or on a
/// batch of encoded images) reports those threads, in its stats and in the report's
/// bottleneck line; on single images without a batch after it, none.
#[test]
fn image_ops_on_batches_reports_the_row_threads() {
    let shards = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/tfrecord/images.tfrecord-*"
    );
    let parsed = || {
        Dataset::tfrecord([shards])
            .unwrap()
            .parse_example(ParseExampleSpec::new([(
                "image",
                FeatureSpec::scalar(FeatureType::String),
            )]))
    };
    let ops = || {
        ImageOpsSpec::new(vec![
            ImageOp::Decode { channels: Some(3) },
            ImageOp::RandomCrop {
                height: 16,
                width: 16,
            },
            ImageOp::ToUnitF32,
        ])
    };
    let options = |budget| Options::default().with_seed(1).with_cpu_budget(budget);
    for budget in [1, 3] {
        // Fused: image_ops then batch.
        let fused = parsed()
            .image_ops(ops())
            .batch(8)
            .with_options(options(budget));
        let stats = run(&fused, 4);
        let img = stage(&stats, "image_ops");
        assert_eq!(img.row_threads, budget as u64, "{}", stats.report());
        assert_eq!(img.threads(), budget as u64);
        if stats.bottleneck().is_some_and(|b| b.name == "image_ops") {
            assert!(
                stats
                    .report()
                    .contains(&format!("of its {budget} thread(s)")),
                "{}",
                stats.report()
            );
        }
        // On batches of encoded images.
        let batched = parsed()
            .batch(8)
            .image_ops(ops())
            .with_options(options(budget));
        let stats = run(&batched, 4);
        assert_eq!(stage(&stats, "image_ops").row_threads, budget as u64);
    }
    // Single images, nothing batched: no row threads.
    let single = parsed()
        .image_ops(ops().num_parallel(NumParallel::Sequential))
        .with_options(options(2));
    let mut it = single.iter().unwrap();
    assert_eq!(it.by_ref().count(), 32);
    let stats = it.stats();
    let img = stage(&stats, "image_ops");
    assert_eq!(
        (img.row_threads, img.threads()),
        (0, 0),
        "{}",
        stats.report()
    );
}
