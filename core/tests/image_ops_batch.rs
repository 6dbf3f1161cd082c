//! `image_ops` then `batch`, fused (the default, `map_and_batch_fusion`) or not: the same
//! batches bit for bit, the same errors, the same skips and counts.

use sluice_core::prelude::*;

fn shards() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/tfrecord/images.tfrecord-*"
    )
    .to_string()
}

/// The fixture's 32 image records (JPEG and PNG, 32x48), parsed.
fn records() -> Vec<Element> {
    Dataset::tfrecord([shards()])
        .unwrap()
        .parse_example(ParseExampleSpec::new([
            ("image", FeatureSpec::scalar(FeatureType::String)),
            ("label", FeatureSpec::scalar(FeatureType::Int64)),
        ]))
        .collect()
        .unwrap()
}

fn augment_ops() -> Vec<ImageOp> {
    vec![
        ImageOp::Decode { channels: Some(3) },
        ImageOp::RandomCrop {
            height: 24,
            width: 24,
        },
        ImageOp::RandomFlipLeftRight { p: 0.5 },
        ImageOp::ToUnitF32,
        ImageOp::RandomBrightness { max_delta: 0.1 },
        ImageOp::RandomContrast {
            lower: 0.75,
            upper: 1.5,
        },
        ImageOp::Normalize {
            mean: vec![0.5; 3],
            std: vec![0.25; 3],
            scale: 1.0,
        },
    ]
}

/// Everything a run gives: each output (an error as its message) and the skip counts
/// per stage (fusion or not, the same stages exist and count the same).
#[derive(Debug, PartialEq)]
struct Run {
    outputs: Vec<Result<Element, String>>,
    skipped: Vec<(String, u64)>,
}

fn run(ds: &Dataset, fused: bool, policy: ErrorPolicy) -> Run {
    let ds = ds.with_options(
        Options::default()
            .with_seed(11)
            .with_cpu_budget(2)
            .with_error_policy(policy)
            .with_map_and_batch_fusion(fused),
    );
    let mut it = ds.iter().unwrap();
    let mut outputs = Vec::new();
    for r in it.by_ref() {
        let failed = r.is_err();
        outputs.push(r.map_err(|e| e.to_string()));
        if failed {
            break;
        }
    }
    let skipped = it
        .stats()
        .stages
        .iter()
        .map(|s| (s.name.clone(), s.skipped))
        .collect();
    Run { outputs, skipped }
}

/// Runs `ds` fused and unfused under `policy` and checks they agree; returns the run.
fn same(ds: &Dataset, policy: ErrorPolicy) -> Run {
    let fused = run(ds, true, policy);
    let unfused = run(ds, false, policy);
    assert_eq!(fused.outputs.len(), unfused.outputs.len());
    for (i, (a, b)) in fused.outputs.iter().zip(&unfused.outputs).enumerate() {
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert_eq!(names(a), names(b), "batch {i}");
                assert_eq!(a.id(), b.id(), "batch {i}");
                for name in names(a) {
                    let (x, y) = (a.tensor(&name).unwrap(), b.tensor(&name).unwrap());
                    assert_eq!(x.shape(), y.shape(), "batch {i} {name}");
                    match (x.as_f32(), y.as_f32()) {
                        (Some(x), Some(y)) => {
                            let bits =
                                |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                            assert_eq!(bits(x), bits(y), "batch {i} {name}: bits differ");
                        }
                        _ => assert_eq!(x, y, "batch {i} {name}"),
                    }
                }
            }
            _ => assert_eq!(a, b, "output {i}"),
        }
    }
    assert_eq!(fused.skipped, unfused.skipped);
    fused
}

fn names(e: &Element) -> Vec<String> {
    e.iter().map(|(n, _)| n.to_string()).collect()
}

fn damaged(e: &Element) -> Element {
    let mut bad = e.clone();
    let jpeg = &e.tensor("image").unwrap().as_bytes_list().unwrap()[0];
    bad.insert(
        "image",
        Tensor::scalar_bytes(bytes::Bytes::copy_from_slice(&jpeg[..jpeg.len() / 3])),
    );
    bad
}

#[test]
fn fused_batches_are_the_unfused_ones_bit_for_bit() {
    let records = records();
    for threads in [None, Some(1), Some(2)] {
        for (size, drop) in [(8, false), (5, false), (5, true), (40, false)] {
            let mut ops = ImageOpsSpec::new(augment_ops());
            if let Some(n) = threads {
                ops = ops.num_parallel(n);
            }
            let ds = Dataset::from_elements(records.clone())
                .image_ops(ops)
                .batch_with(BatchSpec::new(size).drop_remainder(drop));
            let r = same(&ds, ErrorPolicy::Fail);
            let expected = if drop {
                32 / size
            } else {
                32usize.div_ceil(size)
            };
            assert_eq!(r.outputs.len(), expected, "{size} {drop}");
            let first = r.outputs[0].as_ref().unwrap();
            assert_eq!(
                first.tensor("image").unwrap().shape(),
                &[size.min(32), 24, 24, 3]
            );
            assert_eq!(first.tensor("label").unwrap().shape(), &[size.min(32)]);
        }
    }
}

#[test]
fn an_output_under_another_name_keeps_the_encoded_images() {
    let ds = Dataset::from_elements(records())
        .image_ops(ImageOpsSpec {
            output: Some("pixels".into()),
            ..ImageOpsSpec::new(augment_ops())
        })
        .batch(8);
    let r = same(&ds, ErrorPolicy::Fail);
    let first = r.outputs[0].as_ref().unwrap();
    assert_eq!(names(first), ["image", "label", "pixels"]);
    assert_eq!(first.tensor("image").unwrap().shape(), &[8]);
}

#[test]
fn a_bad_image_fails_or_is_skipped_exactly_as_unfused() {
    let mut records = records();
    records[9] = damaged(&records[9]);
    records[30] = damaged(&records[30]);
    let ds = Dataset::from_elements(records)
        .image_ops(ImageOpsSpec::new(augment_ops()))
        .batch(8);
    // Fail: the first batch, then element 9's error.
    let failed = same(&ds, ErrorPolicy::Fail);
    assert_eq!(failed.outputs.len(), 2);
    let err = failed.outputs[1].as_ref().unwrap_err();
    assert!(err.contains("image_ops#1"), "{err}");
    // Skip: both dropped and counted at image_ops; the batches close up.
    let skipped = same(&ds, ErrorPolicy::Skip);
    let rows: Vec<usize> = skipped
        .outputs
        .iter()
        .map(|b| b.as_ref().unwrap().tensor("label").unwrap().len())
        .collect();
    assert_eq!(rows, [8, 8, 8, 6]);
    assert!(skipped.skipped.contains(&("image_ops".to_string(), 2)));
    // A bad image in a last batch that is dropped is still an error under fail.
    let ds = Dataset::from_elements({
        let mut r = self::records();
        r[30] = damaged(&r[30]);
        r
    })
    .image_ops(ImageOpsSpec::new(augment_ops()))
    .batch_with(BatchSpec::new(8).drop_remainder(true));
    let r = same(&ds, ErrorPolicy::Fail);
    assert!(r.outputs.last().unwrap().is_err());
}

#[test]
fn rows_of_different_shapes_are_the_batch_error_unfused_gives() {
    let mut records = records();
    // A 10x12 PNG among the 32x48 images, decoded but not cropped: the batch cannot stack.
    let mut png = Vec::new();
    image::RgbImage::from_pixel(12, 10, image::Rgb([1, 2, 3]))
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    records[3].insert("image", Tensor::scalar_bytes(png.into()));
    let ds = Dataset::from_elements(records)
        .image_ops(ImageOpsSpec::new(vec![
            ImageOp::Decode { channels: Some(3) },
            ImageOp::ToUnitF32,
        ]))
        .batch(8);
    let failed = same(&ds, ErrorPolicy::Fail);
    let err = failed.outputs[0].as_ref().unwrap_err();
    assert!(err.contains("batch#2"), "{err}");
    let skipped = same(&ds, ErrorPolicy::Skip);
    assert_eq!(skipped.outputs.len(), 3);
    assert!(skipped.skipped.contains(&("batch".to_string(), 8)));
}

#[test]
fn stats_still_show_image_ops_doing_the_work() {
    let ds = Dataset::from_elements(records())
        .image_ops(ImageOpsSpec::new(augment_ops()))
        .batch(8)
        .with_options(Options::default().with_seed(1));
    let mut it = ds.iter().unwrap();
    assert_eq!(it.by_ref().count(), 4);
    let stats = it.stats();
    let ops = stats.stages.iter().find(|s| s.name == "image_ops").unwrap();
    assert!(ops.busy_seconds > 0.0, "{stats:?}");
    assert_eq!(
        ops.elements_out, 4,
        "image_ops's output is counted in batches"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    /// Any batch size, remainder policy, error policy, worker count and set of damaged
    /// images: fused and unfused agree on every output, error and count.
    #[test]
    fn fusion_never_changes_what_a_pipeline_gives(
        size in 1usize..12,
        drop in proptest::bool::ANY,
        skip in proptest::bool::ANY,
        threads in proptest::option::of(1usize..3),
        bad in proptest::collection::vec(0usize..32, 0..4),
        n in 0usize..33,
        upstream_error in proptest::option::of(0usize..32),
    ) {
        let mut records = records();
        records.truncate(n);
        for &i in &bad {
            if i < records.len() {
                records[i] = damaged(&records[i]);
            }
        }
        let mut ops = ImageOpsSpec::new(augment_ops());
        if let Some(t) = threads {
            ops = ops.num_parallel(t);
        }
        // An error from upstream of image_ops (a map failing on one element).
        let ids: Vec<ElementId> = records.iter().map(|e| e.id()).collect();
        let failing = upstream_error.and_then(|i| ids.get(i).copied());
        let ds = Dataset::from_elements(records)
            .map(move |e| {
                if Some(e.id()) == failing {
                    Err(sluice_core::Error::user("upstream failure"))
                } else {
                    Ok(e)
                }
            })
            .image_ops(ops)
            .batch_with(BatchSpec::new(size).drop_remainder(drop));
        let policy = if skip { ErrorPolicy::Skip } else { ErrorPolicy::Fail };
        same(&ds, policy);
    }
}

#[test]
fn a_fused_pipeline_resumes_from_a_checkpoint_at_the_next_batch() {
    let build = || {
        Dataset::from_elements(records())
            .image_ops(ImageOpsSpec::new(augment_ops()))
            .batch(5)
            .with_options(Options::default().with_seed(3))
    };
    let all: Vec<Element> = build().collect().unwrap();
    assert_eq!(all.len(), 7);
    let mut it = build().iter().unwrap();
    it.by_ref().take(3).for_each(drop);
    let checkpoint = it.checkpoint().unwrap();
    drop(it);
    let tail: Vec<Element> = build()
        .resume(&checkpoint)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(tail, all[3..]);
    // Fused or not, the same checkpoint resumes to the same batches.
    let unfused: Vec<Element> = build()
        .with_options(
            Options::default()
                .with_seed(3)
                .with_map_and_batch_fusion(false),
        )
        .resume(&checkpoint)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(unfused, tail);
}

#[test]
fn images_decoded_upstream_fuse_too() {
    let mut records = records();
    records[6] = damaged(&records[6]);
    // Decoded by a map (a damaged image stays encoded, and fails in image_ops), then
    // augmented by image_ops with its own workers.
    let ds = Dataset::from_elements(records)
        .map(|mut e| {
            let bytes = e.tensor("image").unwrap().as_bytes_list().unwrap()[0].clone();
            if let Ok(img) = sluice_core::image::decode_image(&bytes, Some(3)) {
                e.insert("image", img);
            }
            Ok(e)
        })
        .image_ops(ImageOpsSpec::new(augment_ops()[1..].to_vec()).num_parallel(2))
        .batch(5);
    let r = same(&ds, ErrorPolicy::Skip);
    assert_eq!(r.outputs.len(), 7);
    let first = r.outputs[0].as_ref().unwrap();
    assert_eq!(first.tensor("image").unwrap().shape(), &[5, 24, 24, 3]);
    assert!(r.skipped.contains(&("image_ops".to_string(), 1)));
    same(&ds, ErrorPolicy::Fail);
}
