//! Error propagation, stricter than `check_error_propagation`: under the fail policy the
//! outputs of every element before the failing one arrive first, in order (whole batches for
//! batching stages), then the error; errors a stage raises itself (a record it cannot parse
//! or read, an image it cannot crop) name that stage, the element id and its file and
//! offset; under the skip policy the failing stage counts the skip and the rest arrives.
//! Also image_ops bit for bit at any thread count and the directory cache against no cache.
//!
//! | stage | outputs before the error, in order | stage-raised error names stage + element + file/offset | skip counted in that stage |
//! |---|---|---|---|
//! | map, filter (1-4 threads), prefetch, repeat, skip, concatenate, zip, cache (memory) | ✓ | | ✓ (map) |
//! | map_chunks (sequential, parallel) | ✓ | | |
//! | batch (sequential, parallel), padded_batch → unbatch | ✓ (whole batches) | | |
//! | tfrecord, interleave (0-2 threads): a corrupt record | ✓ | ✓ | ✓ |
//! | parse_example: a record that is not an Example | ✓ | ✓ | ✓ |
//! | image_ops (sequential, parallel): a crop larger than the image | ✓ | ✓ (element) | ✓ |

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_core::Error;
use sluice_core::prelude::*;
use sluice_core::proto::TfMessage;
use sluice_core::proto::example::{Example, Feature, Features, Int64List, feature::Kind};
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};

fn values(e: &Element) -> Vec<i64> {
    e.tensor("value").unwrap().as_i64().unwrap().to_vec()
}

/// The values that arrive before the first error, and that error's message.
fn until_error(ds: &Dataset) -> (Vec<i64>, Option<String>) {
    let mut out = Vec::new();
    for e in ds.iter().unwrap() {
        match e {
            Ok(e) => out.extend(values(&e)),
            Err(err) => return (out, Some(err.to_string())),
        }
    }
    (out, None)
}

/// All values under the skip policy, and the `skipped` count of the stage named `stage`.
fn skipping(ds: &Dataset, stage: &str) -> (Vec<i64>, u64) {
    let ds = ds.with_options(
        Options::default()
            .with_seed(3)
            .with_cpu_budget(4)
            .with_error_policy(ErrorPolicy::Skip),
    );
    let mut it = ds.iter().unwrap();
    let mut out: Vec<i64> = it.by_ref().flat_map(|e| values(&e.unwrap())).collect();
    out.sort_unstable();
    let stats = it.stats();
    let skipped = stats
        .stages
        .iter()
        .find(|s| s.name == stage)
        .unwrap_or_else(|| panic!("no stage {stage} in the stats"))
        .skipped;
    (out, skipped)
}

fn options() -> Options {
    Options::default().with_seed(3).with_cpu_budget(4)
}

/// `range(0, n)` whose element `k` fails in a sequential map.
fn failing_source(n: i64, k: i64) -> Dataset {
    Dataset::range(0, n).map(move |e| {
        if values(&e)[0] == k {
            return Err(Error::user(format!("injected at {k}")));
        }
        Ok(e)
    })
}

type StageFn = Box<dyn Fn(Dataset) -> Dataset>;

/// Stages after which an upstream error arrives after the outputs of the elements before
/// it; `true` for batching stages (only whole batches before the error).
fn downstream_stages(threads: usize, size: usize) -> Vec<(&'static str, bool, StageFn)> {
    let other = |n: i64| {
        Dataset::range(0, n).map(|e| Ok(Element::new(e.id()).with("other", Tensor::scalar_i64(0))))
    };
    vec![
        (
            "map",
            false,
            Box::new(move |d: Dataset| d.map_with(MapSpec::parallel(threads), |e, _| Ok(e))),
        ),
        (
            "filter",
            false,
            Box::new(move |d: Dataset| d.filter_with(MapSpec::parallel(threads), |_, _| Ok(true))),
        ),
        (
            "map_chunks",
            false,
            Box::new(move |d: Dataset| {
                d.map_chunks(MapChunksSpec::new(size).num_parallel(threads), |c, _| {
                    Ok(c.into_iter().enumerate().collect())
                })
            }),
        ),
        (
            "map_chunks sequential",
            false,
            Box::new(move |d: Dataset| {
                d.map_chunks(MapChunksSpec::new(size), |c, _| {
                    Ok(c.into_iter().enumerate().collect())
                })
            }),
        ),
        (
            "batch",
            true,
            Box::new(move |d: Dataset| {
                d.batch_with(BatchSpec::new(size).num_parallel(threads))
                    .unbatch()
            }),
        ),
        (
            "batch sequential",
            true,
            Box::new(move |d: Dataset| d.batch(size).unbatch()),
        ),
        (
            "padded_batch",
            true,
            Box::new(move |d: Dataset| d.padded_batch(PaddedBatchSpec::new(size)).unbatch()),
        ),
        (
            "prefetch",
            false,
            Box::new(move |d: Dataset| d.prefetch(BufferSize::Fixed(size))),
        ),
        ("repeat", false, Box::new(|d: Dataset| d.repeat(Some(2)))),
        ("skip 0", false, Box::new(|d: Dataset| d.skip(0))),
        (
            "concatenate",
            false,
            Box::new(|d: Dataset| d.concatenate(&Dataset::range(1000, 1010))),
        ),
        (
            "zip",
            false,
            Box::new(move |d: Dataset| Dataset::zip(vec![d, other(10_000)])),
        ),
        (
            "cache (memory)",
            false,
            Box::new(|d: Dataset| d.cache(CacheSpec::Memory)),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Fail policy: everything before element `k` (whole batches for batching stages), in
    /// order, then the error naming element `0:k` and its cause.
    #[test]
    fn an_upstream_error_arrives_after_the_elements_before_it(
        n in 1i64..120, k_frac in 0.0f64..1.0, threads in 1usize..=4, size in 1usize..12,
    ) {
        let k = ((n as f64 * k_frac) as i64).min(n - 1);
        for (name, batching, stage) in downstream_stages(threads, size) {
            let (got, err) = until_error(&stage(failing_source(n, k)).with_options(options()));
            let before = if batching { k - k % size as i64 } else { k };
            prop_assert_eq!(&got, &(0..before).collect::<Vec<_>>(), "{}: outputs before the error", name);
            let err = err.unwrap_or_else(|| panic!("{name}: the error at {k} was lost"));
            prop_assert!(
                err.contains(&format!("element 0:{k}")) && err.contains(&format!("injected at {k}")),
                "{}: {}", name, err
            );
        }
    }

    /// A map's own error under both policies, at 1 to 4 threads: in order under fail;
    /// skipped, counted by the map and the rest delivered under skip.
    #[test]
    fn a_stage_error_is_in_order_or_skipped_and_counted(
        n in 1i64..150, k_frac in 0.0f64..1.0, threads in 1usize..=4,
    ) {
        let k = ((n as f64 * k_frac) as i64).min(n - 1);
        let ds = Dataset::range(0, n)
            .map_with(MapSpec::parallel(threads), move |e, _| {
                if values(&e)[0] == k {
                    return Err(Error::user("bad value"));
                }
                Ok(e)
            })
            .batch(4)
            .prefetch(BufferSize::Fixed(2))
            .with_options(options());
        let (got, err) = until_error(&ds);
        prop_assert_eq!(got, (0..k - k % 4).collect::<Vec<_>>());
        let err = err.expect("the error");
        prop_assert!(err.starts_with("map#1: element 0:") && err.contains("bad value"), "{}", err);
        let (rest, skipped) = skipping(&ds, "map");
        prop_assert_eq!(rest, (0..n).filter(|&v| v != k).collect::<Vec<_>>());
        prop_assert_eq!(skipped, 1);
    }
}

fn example(v: i64) -> Vec<u8> {
    Example {
        features: Some(Features {
            feature: BTreeMap::from([(
                "value".to_string(),
                Feature {
                    kind: Some(Kind::Int64List(Int64List { value: vec![v] })),
                },
            )]),
        }),
    }
    .to_bytes()
}

/// `files` files holding values `0..n` dealt round-robin (value `v` is record `v / files` of
/// file `v % files`); value `bad` is written as a record that is not an Example.
fn write(dir: &Path, n: i64, files: i64, bad: i64) -> Vec<PathBuf> {
    (0..files)
        .map(|f| {
            let path = dir.join(format!("part-{f:03}.tfrecord"));
            let mut w = TfRecordWriter::create(&path, Compression::None).unwrap();
            for v in (f..n).step_by(files as usize) {
                if v == bad {
                    w.write_record(b"\xff\xff not an Example").unwrap();
                } else {
                    w.write_record(&example(v)).unwrap();
                }
            }
            w.finish().unwrap();
            path
        })
        .collect()
}

fn parse() -> ParseExampleSpec {
    ParseExampleSpec::new([("value", FeatureSpec::scalar(FeatureType::Int64))])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// parse_example on a record that is not an Example: the outputs of the interleave order
    /// before it, then an error naming `parse_example`, the record's id and its file; under
    /// skip, one skip counted by parse_example and every other value.
    #[test]
    fn parse_example_names_the_bad_record(
        n in 1i64..80, files in 1i64..5, bad_frac in 0.0f64..1.0, threads in 0usize..3,
    ) {
        let bad = ((n as f64 * bad_frac) as i64).min(n - 1);
        let dir = tempfile::tempdir().unwrap();
        let paths = write(dir.path(), n, files, bad);
        let interleave = |threads: usize| {
            let spec = InterleaveSpec::new(files as usize);
            if threads > 0 { spec.num_parallel(threads) } else { spec }
        };
        let ds = Dataset::file_list(paths)
            .read_tfrecord(TfRecordSpec::default())
            .interleave(interleave(threads))
            .parse_example(parse())
            .with_options(options());
        // With a cycle over every file, the interleave order is the values' order.
        let (got, err) = until_error(&ds);
        prop_assert_eq!(got, (0..bad).collect::<Vec<_>>());
        let err = err.expect("the error");
        let file = format!("part-{:03}.tfrecord at offset", bad % files);
        let id = format!("element {}:{}", bad % files, bad / files);
        prop_assert!(err.starts_with("parse_example#") && err.contains(&id) && err.contains(&file), "{}", err);
        let (rest, skipped) = skipping(&ds, "parse_example");
        prop_assert_eq!(rest, (0..n).filter(|&v| v != bad).collect::<Vec<_>>());
        prop_assert_eq!(skipped, 1);
    }
}

/// A record with a bad data checksum: read through `tfrecord` and through `interleave` (0 to
/// 2 threads), the error names the reading stage, the record's id and its header's offset;
/// under skip that record alone is skipped and counted.
#[test]
fn a_corrupt_record_is_named_by_id_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = (0..3)
        .map(|f| {
            let path = dir.path().join(format!("part-{f}.tfrecord"));
            let mut w = TfRecordWriter::create(&path, Compression::None).unwrap();
            for j in 0..10 {
                w.write_record(format!("{f}{j}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
            path
        })
        .collect();
    // Records of 2 data bytes take 8 + 4 + 2 + 4 = 18 bytes: flip a data byte of record 5 of
    // file 1 (header at offset 90).
    let mut bytes = std::fs::read(&paths[1]).unwrap();
    bytes[90 + 12] ^= 0xff;
    std::fs::write(&paths[1], &bytes).unwrap();
    let record = |e: &Element| {
        String::from_utf8(e.tensor("record").unwrap().as_bytes_list().unwrap()[0].to_vec()).unwrap()
    };
    let source = || Dataset::file_list(paths.clone()).read_tfrecord(TfRecordSpec::default());
    let mut pipelines = vec![("tfrecord", source())];
    for threads in 0..3 {
        let spec = InterleaveSpec::new(3);
        let spec = if threads > 0 {
            spec.num_parallel(threads)
        } else {
            spec
        };
        pipelines.push(("interleave", source().interleave(spec)));
    }
    for (stage, ds) in pipelines {
        let ds = ds.with_options(options());
        let mut got = Vec::new();
        let mut err = None;
        for e in ds.iter().unwrap() {
            match e {
                Ok(e) => got.push(record(&e)),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        assert!(!got.contains(&"15".to_string()), "{stage}: {got:?}");
        let err = err.expect("the error");
        assert_eq!(err.element(), Some(ElementId::new(1, 5)), "{stage}: {err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{stage}#"))
                && text.contains("part-1.tfrecord at offset 90)"),
            "{text}"
        );
        let ds = ds.with_options(options().with_error_policy(ErrorPolicy::Skip));
        let mut it = ds.iter().unwrap();
        let mut rest: Vec<String> = it.by_ref().map(|e| record(&e.unwrap())).collect();
        rest.sort();
        let mut want: Vec<String> = (0..3)
            .flat_map(|f| (0..10).map(move |j| format!("{f}{j}")))
            .filter(|r| r != "15")
            .collect();
        want.sort();
        assert_eq!(rest, want, "{stage}");
        let stats = it.stats();
        let counted = stats.stages.iter().find(|s| s.name == stage).unwrap();
        assert_eq!(counted.skipped, 1, "{stage}");
    }
}

/// Small u8 images of varied sizes with a `value` label.
fn images(n: u64) -> Dataset {
    let elements: Vec<Element> = (0..n)
        .map(|i| {
            let (h, w) = (3 + (i % 5) as usize, 4 + (i % 3) as usize);
            let pixels: Vec<u8> = (0..h * w * 3)
                .map(|j| (j as u64 * 7 + i * 13) as u8)
                .collect();
            Element::new(ElementId::new(0, i))
                .with(
                    "image",
                    Tensor::new(&[h, w, 3], TensorData::U8(pixels.into())).unwrap(),
                )
                .with("value", Tensor::scalar_i64(i as i64))
        })
        .collect();
    Dataset::from_elements(elements)
}

fn random_ops() -> Vec<ImageOp> {
    vec![
        ImageOp::RandomFlipLeftRight { p: 0.5 },
        ImageOp::RandomCrop {
            height: 3,
            width: 3,
        },
        ImageOp::Resize {
            height: 5,
            width: 4,
            method: Resample::Bilinear,
        },
        ImageOp::RandomBrightness { max_delta: 0.3 },
        ImageOp::RandomRotate {
            max_degrees: 20.0,
            fill: 0.0,
        },
    ]
}

/// Every element in full (ids, provenance, every value's dtype, shape and bits).
fn everything(ds: &Dataset) -> Vec<String> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| format!("{e:?}"))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// image_ops with random ops: the same bits sequentially and at 1 to 3 threads, with a
    /// CPU budget of 1 or 4; another seed gives other images.
    #[test]
    fn image_ops_is_bit_identical_at_any_parallelism(n in 1u64..30, threads in 1usize..=3, seed: u64) {
        let run = |parallel: NumParallel, seed: u64, cpu: usize| {
            everything(
                &images(n)
                    .image_ops(ImageOpsSpec::new(random_ops()).num_parallel(parallel))
                    .with_options(Options::default().with_seed(seed).with_cpu_budget(cpu)),
            )
        };
        let sequential = run(NumParallel::Sequential, seed, 1);
        prop_assert_eq!(&run(NumParallel::Fixed(threads), seed, 4), &sequential);
        prop_assert_eq!(&run(NumParallel::Sequential, seed, 1), &sequential);
        if n >= 4 {
            prop_assert_ne!(&run(NumParallel::Sequential, seed ^ 1, 1), &sequential);
        }
    }

    /// A directory cache gives what the pipeline without it gives, on the pass that writes it,
    /// on the next pass, and to a fresh dataset with the same definition.
    #[test]
    fn a_directory_cache_is_transparent(n in 0i64..80, buffer in 1usize..16, seed: u64) {
        let dir = tempfile::tempdir().unwrap();
        let pipeline = || Dataset::range(0, n).shuffle(buffer).with_options(options().with_seed(seed));
        let cached = || pipeline().cache(CacheSpec::Directory(dir.path().to_path_buf()));
        let want = everything(&pipeline());
        let ds = cached();
        prop_assert_eq!(&everything(&ds), &want);
        prop_assert_eq!(&everything(&ds), &want);
        prop_assert_eq!(&everything(&cached()), &want);
    }
}

/// image_ops failing on one image (a crop larger than it): the images before it arrive, then
/// an error naming image_ops and the element; under skip, image_ops counts it.
#[test]
fn an_image_ops_error_names_the_stage_and_element() {
    let ds = images(10).map(|e| {
        if values(&e)[0] == 4 {
            let empty = Tensor::new(&[0, 3, 3], TensorData::U8(Vec::new().into())).unwrap();
            return Ok(e.with("image", empty));
        }
        Ok(e)
    });
    for parallel in [NumParallel::Sequential, NumParallel::Fixed(2)] {
        let ops = vec![ImageOp::RandomCrop {
            height: 2,
            width: 2,
        }];
        let ds = ds
            .image_ops(ImageOpsSpec::new(ops).num_parallel(parallel))
            .with_options(options());
        let (got, err) = until_error(&ds);
        assert_eq!(got, vec![0, 1, 2, 3], "{parallel:?}");
        let err = err.expect("the error");
        assert!(err.starts_with("image_ops#2: element 0:4: "), "{err}");
        let (rest, skipped) = skipping(&ds, "image_ops");
        assert_eq!(rest, vec![0, 1, 2, 3, 5, 6, 7, 8, 9]);
        assert_eq!(skipped, 1);
    }
}
