//! The `image_ops` stage: decoding and augmenting in a pipeline, reproducibly.

use sluice_core::image::{decode, geometry};
use sluice_core::prelude::*;
use sluice_core::rng::StreamKey;

fn shards() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/tfrecord/images.tfrecord-*"
    )
    .to_string()
}

fn spec() -> ParseExampleSpec {
    ParseExampleSpec::new([
        ("image", FeatureSpec::scalar(FeatureType::String)),
        ("label", FeatureSpec::scalar(FeatureType::Int64)),
    ])
}

/// The fixture's image records, parsed.
fn records() -> Vec<Element> {
    Dataset::tfrecord([shards()])
        .unwrap()
        .parse_example(spec())
        .collect()
        .unwrap()
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
    let records = records();
    let key = StreamKey {
        seed: 3,
        epoch: 0,
        stage: 1,
    };
    // Fused as the decode_crop_fusion rule fuses it in a pipeline: a window decode.
    let fused = ImageOpsSpec::new(vec![
        ImageOp::Decode { channels: Some(3) },
        ImageOp::RandomCrop {
            height: 20,
            width: 30,
        },
    ])
    .fused()
    .unwrap();
    assert!(matches!(fused.ops[..], [ImageOp::DecodeWindow { .. }]));
    for e in &records {
        let img = e.tensor("image").unwrap();
        let got = fused.run(img, &mut key.element_rng(e.id())).unwrap();
        let full = decode::decode_image(&img.as_bytes_list().unwrap()[0], Some(3)).unwrap();
        let want = geometry::random_crop(&full, 20, 30, &mut key.element_rng(e.id())).unwrap();
        assert_eq!(got, want, "element {}", e.id());
    }
}

#[test]
fn decode_then_center_crop_decodes_only_the_window_with_the_same_pixels() {
    let records = records();
    let key = StreamKey {
        seed: 3,
        epoch: 0,
        stage: 1,
    };
    for (height, width) in [(20, 30), (1, 1), (32, 48), (17, 9)] {
        let fused = ImageOpsSpec::new(vec![
            ImageOp::Decode { channels: Some(3) },
            ImageOp::CenterCrop { height, width },
        ])
        .fused()
        .unwrap();
        for e in &records {
            let img = e.tensor("image").unwrap();
            let got = fused.run(img, &mut key.element_rng(e.id())).unwrap();
            let full = decode::decode_image(&img.as_bytes_list().unwrap()[0], Some(3)).unwrap();
            let want = geometry::center_crop(&full, height, width).unwrap();
            assert_eq!(got, want, "element {} {height}x{width}", e.id());
        }
    }
    // Larger than the image: the op's error.
    let too_big = ImageOpsSpec::new(vec![
        ImageOp::Decode { channels: Some(3) },
        ImageOp::CenterCrop {
            height: 33,
            width: 48,
        },
    ])
    .fused()
    .unwrap();
    let img = records[0].tensor("image").unwrap();
    let err = too_big
        .run(img, &mut key.element_rng(records[0].id()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("center_crop of 33x48 is larger than the 32x48 image"),
        "{err}"
    );
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
        let img = sluice_core::image::cast(&img, dtype).unwrap();
        let id = ElementId::new(0, i as u64);
        let fused = spec.run(&img, &mut key.element_rng(id)).unwrap();
        let mut rng = key.element_rng(id);
        let mut step = img.clone();
        for op in &spec.ops {
            step = op.apply(&step, &mut rng).unwrap();
        }
        // From `f32` the same bits; from `u8` the fused pass takes the contrast's means
        // exactly from the pixels' integer sums, so up to their rounding.
        let (a, b) = (fused.as_f32().unwrap(), step.as_f32().unwrap());
        match dtype {
            DType::F32 => assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())),
            _ => assert!(
                close(&fused, &step),
                "{dtype}: {} differ",
                diff(&fused, &step)
            ),
        }
    }
}

/// The augment op list, fused by the stage (decode + crop + flip in one copy; to-unit,
/// brightness, contrast and normalize in one pass, written straight into the batch for
/// batched input), gives the ops applied one by one, per element and per batch row: the
/// same values up to the last bits of the contrast's means, which the fused pass computes
/// exactly from the pixels' integer sums and the op from the rounded `f32` values.
#[test]
fn the_fused_stage_equals_the_ops_one_by_one_per_element_and_per_batch_row() {
    fused_equals_one_by_one(ImageOp::RandomCrop {
        height: 20,
        width: 22,
    });
}

/// The same with a centre crop (an evaluation pipeline's decode, `center_crop`, flip and
/// colour ops): also decoded as a window.
#[test]
fn the_fused_stage_with_a_center_crop_equals_the_ops_one_by_one() {
    fused_equals_one_by_one(ImageOp::CenterCrop {
        height: 20,
        width: 22,
    });
}

fn fused_equals_one_by_one(crop: ImageOp) {
    let ops = vec![
        ImageOp::Decode { channels: Some(3) },
        crop,
        ImageOp::RandomFlipLeftRight { p: 0.5 },
        ImageOp::ToUnitF32,
        ImageOp::RandomBrightness { max_delta: 0.1 },
        ImageOp::RandomContrast {
            lower: 0.75,
            upper: 1.5,
        },
        ImageOp::Normalize {
            mean: vec![0.485, 0.456, 0.406],
            std: vec![0.229, 0.224, 0.225],
            scale: 1.0,
        },
    ];
    let one_by_one = |img: &Tensor, mut rng: sluice_core::rng::ElementRng| {
        let mut t = img.clone();
        for op in &ops {
            t = op.apply(&t, &mut rng).unwrap();
        }
        t
    };
    let key = StreamKey {
        seed: 5,
        epoch: 0,
        stage: 1,
    };
    let options = Options::default().with_seed(5);
    let records = records();
    let mut flips = 0;
    // Per element.
    let out = Dataset::from_elements(records.clone())
        .image_ops(ImageOpsSpec::new(ops.clone()))
        .with_options(options.clone())
        .collect()
        .unwrap();
    assert_eq!(out.len(), records.len());
    for (got, e) in out.iter().zip(&records) {
        // `from_elements` numbers its elements itself: the RNG follows the output's id.
        let id = got.id();
        let want = one_by_one(e.tensor("image").unwrap(), key.element_rng(id));
        let got = got.tensor("image").unwrap();
        assert_eq!(got.shape(), &[20, 22, 3]);
        assert!(
            close(got, &want),
            "element {id}: {} of {} values differ by more than rounding",
            diff(got, &want),
            got.len()
        );
        // Count flips to know both branches ran: the flip's draw follows the crop's (two
        // for a random crop, none for a centre crop).
        let mut rng = key.element_rng(id);
        let img = ops[0].apply(e.tensor("image").unwrap(), &mut rng).unwrap();
        ops[1].apply(&img, &mut rng).unwrap();
        flips += usize::from(rand::Rng::random::<f32>(&mut rng) < 0.5);
    }
    assert!(flips > 0 && flips < records.len(), "{flips} flips");
    // Per batch row (batch first, then the stage on the batch of encoded images).
    let batches = Dataset::from_elements(records).batch(8).collect().unwrap();
    let out = Dataset::from_elements(batches.clone())
        .image_ops(ImageOpsSpec::new(ops.clone()).num_parallel(2))
        .with_options(options)
        .collect()
        .unwrap();
    for (got, b) in out.iter().zip(&batches) {
        let batch_id = got.id();
        let encoded = b.tensor("image").unwrap();
        let n = encoded.shape()[0];
        let got = got.tensor("image").unwrap();
        assert_eq!(got.shape(), &[n, 20, 22, 3]);
        // The batch's values start at a cache line, so rows whose size is a multiple of one
        // are streamed out from the registers.
        let start = got.as_f32().unwrap().as_ptr() as usize;
        assert_eq!(start % 64, 0, "batch buffer at {start:#x}");
        for i in 0..n {
            let want = one_by_one(
                &encoded.row(i).unwrap(),
                key.element_rng(batch_id.child(i as u64)),
            );
            let row = got.row(i).unwrap();
            assert!(
                close(&row, &want),
                "batch {batch_id} row {i}: {} values differ by more than rounding",
                diff(&row, &want)
            );
        }
    }
}

/// A batch of encoded images whose row shape the ops do not fix (`channels` unset: the
/// first row is run first to size the buffer) gives what the fixed shape gives, and a bad
/// image in a batch fails the batch with an image error, whichever way the buffer was sized.
#[test]
fn batches_sized_by_the_ops_or_by_their_first_row_agree_and_fail_on_a_bad_image() {
    let ops = |channels| {
        vec![
            ImageOp::Decode { channels },
            ImageOp::RandomCrop {
                height: 16,
                width: 16,
            },
            ImageOp::RandomFlipLeftRight { p: 0.5 },
            ImageOp::ToUnitF32,
            ImageOp::RandomContrast {
                lower: 0.5,
                upper: 1.5,
            },
        ]
    };
    let records = records();
    let batches = Dataset::from_elements(records).batch(8).collect().unwrap();
    let run = |channels| {
        Dataset::from_elements(batches.clone())
            .image_ops(ImageOpsSpec::new(ops(channels)))
            .with_options(Options::default().with_seed(3))
            .collect()
            .unwrap()
    };
    let fixed = run(Some(3));
    let by_first_row = run(None);
    assert_eq!(fixed.len(), batches.len());
    assert_eq!(bits(&fixed), bits(&by_first_row));
    assert_eq!(fixed[0].tensor("image").unwrap().shape(), &[8, 16, 16, 3]);

    // Row 5 of a batch is not a JPEG.
    let mut rows: Vec<bytes::Bytes> = batches[0]
        .tensor("image")
        .unwrap()
        .as_bytes_list()
        .unwrap()
        .to_vec();
    rows[5] = bytes::Bytes::from_static(b"\xff\xd8\xffnot really");
    let bad = Element::new(ElementId::new(0, 0)).with(
        "image",
        Tensor::new(&[rows.len()], sluice_core::TensorData::Bytes(rows.into())).unwrap(),
    );
    for channels in [Some(3), None] {
        let err = Dataset::from_elements(vec![bad.clone()])
            .image_ops(ImageOpsSpec::new(ops(channels)))
            .collect()
            .unwrap_err();
        assert!(matches!(err.root(), sluice_core::Error::Image(_)), "{err}");
    }
}

/// How far apart two values of a normalized image may be when they differ only by the
/// rounding of the contrast's means (a unit in the last place of a mean near 0.5, times
/// the contrast factor and 1/std, is about 5e-7).
const ROUNDING: f32 = 2e-6;

/// Values further apart than [`ROUNDING`] (and any difference in length).
fn diff(a: &Tensor, b: &Tensor) -> usize {
    let (a, b) = (a.as_f32().unwrap(), b.as_f32().unwrap());
    a.iter()
        .zip(b)
        .filter(|(x, y)| (*x - *y).abs() > ROUNDING)
        .count()
        + a.len().abs_diff(b.len())
}

/// Same shape, and every value within [`ROUNDING`] of the other's.
fn close(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape() && diff(a, b) == 0
}

/// Rows of a batch that come out in different shapes (no crop or resize to one size) fail
/// the batch with an error saying so.
#[test]
fn a_batch_whose_rows_differ_in_shape_is_an_error_naming_both_shapes() {
    let jpeg = |w: u16, h: u16| {
        let mut out = Vec::new();
        let pixels = vec![128u8; usize::from(w) * usize::from(h) * 3];
        jpeg_encoder::Encoder::new(&mut out, 90)
            .encode(&pixels, w, h, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        bytes::Bytes::from(out)
    };
    let rows = vec![jpeg(16, 8), jpeg(16, 8), jpeg(8, 16)];
    let batch = Element::new(ElementId::new(0, 0)).with(
        "image",
        Tensor::new(&[3], sluice_core::TensorData::Bytes(rows.into())).unwrap(),
    );
    let err = Dataset::from_elements(vec![batch])
        .image_ops(ImageOpsSpec::new(vec![
            ImageOp::Decode { channels: Some(3) },
            ImageOp::ToUnitF32,
        ]))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot batch tensors of shapes [8, 16, 3] and [16, 8, 3]"),
        "{err}"
    );
}
