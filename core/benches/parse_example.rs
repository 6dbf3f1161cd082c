//! Criterion bench of `parse_example` on a batch of 256 image-like Examples, each with six
//! features (`image`: ~20 KB of random bytes, `label`, `height`, `width`, `channels`:
//! int64, `format`: bytes), parsing `image` (string scalar) and `label` (int64 scalar).
//! Throughput is counted in records, so criterion's `thrpt` is records per second and the
//! time per record is the reported time / 256.
//!
//! - `fast_batch`: [`ParseExampleSpec::parse_batch`], the stage's path after `batch`.
//! - `fast_one`: [`ParseExampleSpec::parse_one`] on each record, the unbatched path.
//! - `reference_batch` / `reference_one`: the original prost-based path, for comparison.
//!
//! ```sh
//! cargo bench -p sluice-core --bench parse_example
//! IMAGE_BYTES=100 cargo bench -p sluice-core --bench parse_example   # small images
//! ```
//!
//! With small images the 256 records stay in L2 and the time is the scanner's own; with
//! ~20 KB images each record's fields after the image are a cache miss away.

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use sluice_core::prelude::*;
use sluice_core::proto::TfMessage;
use sluice_core::proto::example::{BytesList, Feature, Features, Int64List, feature::Kind};

const RECORDS: usize = 256;

/// Image sizes: 18-22 KB, or exactly `IMAGE_BYTES`.
fn image_size() -> std::ops::Range<usize> {
    match std::env::var("IMAGE_BYTES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(n) => n..n + 1,
        None => 18_000..22_000,
    }
}

fn int(v: i64) -> Feature {
    Feature {
        kind: Some(Kind::Int64List(Int64List { value: vec![v] })),
    }
}

fn bytes(v: Vec<u8>) -> Feature {
    Feature {
        kind: Some(Kind::BytesList(BytesList {
            value: vec![Bytes::from(v)],
        })),
    }
}

/// 256 serialized Examples, as the TFRecord reader yields them (one `Bytes` per record).
fn records() -> Vec<Bytes> {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    (0..RECORDS)
        .map(|i| {
            let mut image = vec![0u8; rng.random_range(image_size())];
            rng.fill(&mut image[..]);
            let feature = [
                ("image", bytes(image)),
                ("label", int(i as i64 % 1000)),
                ("height", int(480)),
                ("width", int(640)),
                ("channels", int(3)),
                ("format", bytes(b"jpeg".to_vec())),
            ]
            .into_iter()
            .map(|(k, f)| (k.to_string(), f))
            .collect();
            let example = sluice_core::proto::Example {
                features: Some(Features { feature }),
            };
            Bytes::from(example.to_bytes())
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let spec = ParseExampleSpec::new([
        ("image", FeatureSpec::scalar(FeatureType::String)),
        ("label", FeatureSpec::scalar(FeatureType::Int64)),
    ]);
    let records = records();
    assert!(spec.parse_batch(&records).unwrap() == spec.parse_batch_reference(&records).unwrap());

    let mut g = c.benchmark_group("parse_example_256_images");
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.bench_function("fast_batch", |b| {
        b.iter(|| spec.parse_batch(&records).unwrap())
    });
    g.bench_function("fast_one", |b| {
        b.iter(|| {
            for (i, r) in records.iter().enumerate() {
                std::hint::black_box(spec.parse_one(r, i).unwrap());
            }
        })
    });
    g.bench_function("reference_batch", |b| {
        b.iter(|| spec.parse_batch_reference(&records).unwrap())
    });
    g.bench_function("reference_one", |b| {
        b.iter(|| {
            for (i, r) in records.iter().enumerate() {
                std::hint::black_box(spec.parse_one_reference(r, i).unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
