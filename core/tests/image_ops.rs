//! The `image_ops` stage: decoding and augmenting in a pipeline, reproducibly.

use sluice_core::image::{decode, geometry};
use sluice_core::prelude::*;
use sluice_core::rng::StreamKey;

fn shards() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/tfrecord/images.tfrecord-*"
    )
    .to_string()
}

fn spec() -> ParseExampleSpec {
    ParseExampleSpec::new([
        ("image", FeatureSpec::scalar(FeatureType::String)),
        ("label", FeatureSpec::scalar(FeatureType::Int64)),
    ])
}

fn augment(threads: usize, seed: u64, batched: bool) -> Vec<Element> {
    let ops = vec![
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
    ];
    let mut spec_ops = ImageOpsSpec::new(ops);
    if threads > 0 {
        spec_ops = spec_ops.num_parallel(threads);
    }
    let base = Dataset::tfrecord([shards()]).unwrap().parse_example(spec());
    let ds = if batched {
        base.batch(8).image_ops(spec_ops)
    } else {
        base.image_ops(spec_ops).batch(8)
    };
    ds.with_options(Options::default().with_seed(seed).with_cpu_budget(4))
        .collect()
        .unwrap()
}

fn bits(batches: &[Element]) -> Vec<u32> {
    batches
        .iter()
        .flat_map(|b| {
            b.tensor("image")
                .unwrap()
                .as_f32()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
        })
        .collect()
}

#[test]
fn augmentation_is_bit_identical_at_any_parallelism_and_differs_by_seed() {
    let one = augment(0, 7, false);
    assert_eq!(one.len(), 4);
    assert_eq!(one[0].tensor("image").unwrap().shape(), &[8, 24, 24, 3]);
    for threads in [1, 2, 4] {
        assert_eq!(
            bits(&augment(threads, 7, false)),
            bits(&one),
            "{threads} threads"
        );
    }
    assert_ne!(bits(&augment(2, 8, false)), bits(&one));
    // Augmenting batches (rows in parallel) is reproducible too.
    let batched = augment(0, 7, true);
    assert_eq!(bits(&augment(2, 7, true)), bits(&batched));
}

#[test]
fn decode_then_random_crop_decodes_only_the_window_with_the_same_pixels() {
    let records = Dataset::tfrecord([shards()])
        .unwrap()
        .parse_example(spec())
        .collect()
        .unwrap();
    let key = StreamKey {
        seed: 3,
        epoch: 0,
        stage: 1,
    };
    let fused = ImageOpsSpec::new(vec![
        ImageOp::Decode { channels: Some(3) },
        ImageOp::RandomCrop {
            height: 20,
            width: 30,
        },
    ]);
    for e in &records {
        let img = e.tensor("image").unwrap();
        let got = fused.run(img, &mut key.element_rng(e.id())).unwrap();
        let full = decode::decode_image(&img.as_bytes_list().unwrap()[0], Some(3)).unwrap();
        let want = geometry::random_crop(&full, 20, 30, &mut key.element_rng(e.id())).unwrap();
        assert_eq!(got, want, "element {}", e.id());
    }
}

#[test]
fn a_bad_image_is_an_image_error_with_provenance_and_skip_counts_it() {
    let bad = Element::new(ElementId::new(0, 0)).with(
        "image",
        Tensor::scalar_bytes(bytes::Bytes::from_static(b"\xff\xd8\xffnot really")),
    );
    let ds = Dataset::from_elements(vec![bad.clone()])
        .image_ops(ImageOpsSpec::new(vec![ImageOp::Decode { channels: None }]));
    let err = ds.collect().unwrap_err();
    assert!(matches!(err.root(), sluice_core::Error::Image(_)), "{err}");
    assert!(
        err.to_string().contains("image_ops#1: element 0:0"),
        "{err}"
    );
    let skipping = ds.with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    let mut it = skipping.iter().unwrap();
    assert_eq!(it.by_ref().count(), 0);
    assert_eq!(it.stats().skipped, 1);
}

#[test]
fn the_spec_reads_from_toml_like_json() {
    let spec: ImageOpsSpec = serde_json::from_str(
        r#"{"ops": [{"op": "decode", "channels": 3}, {"op": "random_crop", "height": 224, "width": 224},
                    {"op": "random_flip_left_right"}, {"op": "normalize", "mean": [0.5], "std": [0.25]}],
            "num_parallel": "auto"}"#,
    )
    .unwrap();
    assert_eq!(spec.ops.len(), 4);
    assert_eq!(spec.ops[2], ImageOp::RandomFlipLeftRight { p: 0.5 });
    assert_eq!(spec.num_parallel, NumParallel::Auto);
    let err = serde_json::from_str::<ImageOpsSpec>(r#"{"ops": [{"op": "sharpen"}]}"#).unwrap_err();
    assert!(err.to_string().contains("sharpen"), "{err}");
}

#[test]
fn fused_brightness_and_contrast_equal_the_two_ops() {
    let key = StreamKey {
        seed: 9,
        epoch: 0,
        stage: 2,
    };
    let spec = ImageOpsSpec::new(vec![
        ImageOp::ToUnitF32,
        ImageOp::RandomBrightness { max_delta: 0.2 },
        ImageOp::RandomContrast {
            lower: 0.5,
            upper: 1.5,
        },
    ]);
    for (i, dtype) in [DType::U8, DType::F32].into_iter().enumerate() {
        let pixels: Vec<u8> = (0..16 * 12 * 3).map(|v| (v * 37 % 251) as u8).collect();
        let img = Tensor::new(&[16, 12, 3], TensorData::U8(bytes::Bytes::from(pixels))).unwrap();
        let img = sluice_core::image::color::cast(&img, dtype).unwrap();
        let id = ElementId::new(0, i as u64);
        let fused = spec.run(&img, &mut key.element_rng(id)).unwrap();
        let mut rng = key.element_rng(id);
        let mut step = img.clone();
        for op in &spec.ops {
            step = op.apply(&step, &mut rng).unwrap();
        }
        let (a, b) = (fused.as_f32().unwrap(), step.as_f32().unwrap());
        assert!(
            a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{dtype}"
        );
    }
}
