//! Criterion benches of the executor: per-element cost of the source, of an identity map
//! (sequential and parallel), of shuffle and of batch/unbatch.
//!
//! The overhead of an identity map stage is `range_map_identity - range` per element.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sluice_core::prelude::*;

const N: i64 = 200_000;

fn drain(ds: &Dataset) -> usize {
    let mut n = 0;
    for e in ds.iter().unwrap() {
        e.unwrap();
        n += 1;
    }
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("executor");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(4));

    let range = Dataset::range(0, N);
    g.bench_function("range", |b| b.iter(|| drain(&range)));

    let map = Dataset::range(0, N).map(Ok);
    g.bench_function("range_map_identity", |b| b.iter(|| drain(&map)));

    let map2 = Dataset::range(0, N).map(Ok).map(Ok);
    g.bench_function("range_map_identity_x2", |b| b.iter(|| drain(&map2)));

    let par = Dataset::range(0, N)
        .map_with(MapSpec::parallel(2), |e, _| Ok(e))
        .with_options(Options::default().with_cpu_budget(2));
    g.bench_function("range_map_identity_parallel2", |b| b.iter(|| drain(&par)));

    let shuffle = Dataset::range(0, N)
        .shuffle(1024)
        .with_options(Options::default().with_seed(1));
    g.bench_function("range_shuffle_1024", |b| b.iter(|| drain(&shuffle)));

    let batch = Dataset::range(0, N).batch(64).unbatch();
    g.bench_function("range_batch64_unbatch", |b| b.iter(|| drain(&batch)));

    let prefetch = Dataset::range(0, N).prefetch(BufferSize::Fixed(64));
    g.bench_function("range_prefetch64", |b| b.iter(|| drain(&prefetch)));

    // Batching images: 4096 elements of 64x64x3 f32 (48 KiB each) into batches of 64.
    let images: Vec<Element> = (0..4096)
        .map(|i| {
            Element::new(ElementId::new(0, i)).with(
                "image",
                Tensor::new(
                    &[64, 64, 3],
                    TensorData::F32(vec![i as f32; 64 * 64 * 3].into()),
                )
                .unwrap(),
            )
        })
        .collect();
    let source = Dataset::from_elements(images);
    let seq = source.batch(64);
    g.bench_function("batch64_images_sequential", |b| b.iter(|| drain(&seq)));
    let par = source
        .batch_with(BatchSpec::new(64).num_parallel(2))
        .with_options(Options::default().with_cpu_budget(2));
    g.bench_function("batch64_images_parallel2", |b| b.iter(|| drain(&par)));

    g.bench_function("pipeline_build_and_drop", |b| {
        b.iter_batched(
            || {
                Dataset::range(0, 10)
                    .map_with(MapSpec::parallel(2), |e, _| Ok(e))
                    .prefetch(BufferSize::Fixed(2))
            },
            |ds| drain(&ds),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
