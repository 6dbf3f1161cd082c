//! The rows of a batch run on the run's own threads: `cpu_budget` of them, ended with the
//! run. (Alone in its binary: it counts the process's threads.)

use std::time::{Duration, Instant};

use sluice_core::prelude::*;

fn row_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|name| name.starts_with("sluice-rows"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_batch_s_rows_use_cpu_budget_threads_that_end_with_the_run() {
    let shards = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/tfrecord/images.tfrecord-*"
    );
    for budget in [1, 3] {
        let ds = Dataset::tfrecord([shards])
            .unwrap()
            .parse_example(ParseExampleSpec::new([(
                "image",
                FeatureSpec::scalar(FeatureType::String),
            )]))
            .image_ops(ImageOpsSpec::new(vec![
                ImageOp::Decode { channels: Some(3) },
                ImageOp::RandomCrop {
                    height: 16,
                    width: 16,
                },
                ImageOp::ToUnitF32,
            ]))
            .batch(8)
            .with_options(Options::default().with_seed(1).with_cpu_budget(budget));
        {
            let mut it = ds.iter().unwrap();
            let first = it.next().unwrap().unwrap();
            assert_eq!(first.tensor("image").unwrap().shape(), &[8, 16, 16, 3]);
            // A thread names itself once it first runs: on a busy machine the last may
            // not have run yet when the first batch is out.
            let deadline = Instant::now() + Duration::from_secs(5);
            while row_threads() < budget && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(row_threads(), budget, "cpu_budget {budget}");
            assert_eq!(it.count(), 3);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while row_threads() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(row_threads(), 0, "the row threads end with the run");
    }
}
