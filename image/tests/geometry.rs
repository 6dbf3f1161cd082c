//! Geometry ops: hand-computed values on tiny images, TF semantics, and properties.

use bytes::Bytes;
use proptest::prelude::*;
use sluice_image::geometry::{
    PadMode, ResizeMethod, center_crop, crop, cutout, flip_left_right, flip_up_down, from_chw,
    map_batch, map_batch_with_rngs, pad, random_crop, random_flip_left_right, random_flip_up_down,
    random_resized_crop, random_resized_crop_window, random_rotate, resize, rotate, to_chw,
};
use sluice_tensor::{Tensor, TensorData};

fn u8_img(h: usize, w: usize, c: usize, v: Vec<u8>) -> Tensor {
    Tensor::new(&[h, w, c], TensorData::U8(Bytes::from(v))).unwrap()
}

fn f32_img(h: usize, w: usize, c: usize, v: Vec<f32>) -> Tensor {
    Tensor::new(&[h, w, c], TensorData::F32(v.into())).unwrap()
}

fn iota_u8(h: usize, w: usize, c: usize) -> Tensor {
    u8_img(h, w, c, (0..h * w * c).map(|i| (i % 251) as u8).collect())
}

/// SplitMix64's finalizer (`sluice_core::rng::mix`).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `sluice_core::rng::combine`.
fn combine(words: &[u64]) -> u64 {
    words
        .iter()
        .fold(0x243f_6a88_85a3_08d3, |acc, &w| mix(acc ^ mix(w)))
}

type ElementRng = rand_pcg::Pcg64Mcg;

/// The generator `sluice_core` hands element `ElementId::new(0, i)` of stage 0 in epoch 0
/// under `seed` (`StreamKey { seed, epoch: 0, stage: 0 }.element_rng(..)`): the same draws.
fn rng(seed: u64, i: u64) -> ElementRng {
    let (epoch, stage, source) = (0, 0, 0);
    let hi = combine(&[seed, epoch, stage, source, i]);
    let lo = combine(&[hi, i, source, stage, epoch, seed]);
    ElementRng::new((u128::from(hi) << 64) | u128::from(lo) | 1)
}

fn u8s(t: &Tensor) -> Vec<u8> {
    t.as_u8().unwrap().to_vec()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.as_f32().unwrap().to_vec()
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-4, "{got:?} vs {want:?}");
    }
}

/// Every error of the image ops is an image error (of some kind): this is "not a panic".
fn is_image_error<T: std::fmt::Debug>(r: sluice_image::Result<T>) -> bool {
    r.is_err()
}

// ---- resize ----------------------------------------------------------------------------

#[test]
fn bilinear_2x2_to_4x4_by_hand() {
    // TF2 half-pixel centres: columns sample at -0.25, 0.25, 0.75, 1.25 (clamped), so a row
    // [0, 4] becomes [0, 1, 3, 4]; rows likewise.
    let img = u8_img(2, 2, 1, vec![0, 4, 8, 12]);
    let out = resize(&img, 4, 4, ResizeMethod::Bilinear).unwrap();
    assert_eq!(out.shape(), &[4, 4, 1]);
    assert_close(
        &f32s(&out),
        &[
            0., 1., 3., 4., 2., 3., 5., 6., 6., 7., 9., 10., 8., 9., 11., 12.,
        ],
    );
    // Same for f32 input and for several channels.
    let img = f32_img(2, 2, 2, vec![0., 0., 4., 40., 8., 80., 12., 120.]);
    let out = resize(&img, 1, 4, ResizeMethod::Bilinear).unwrap();
    // One output row samples at y = 0.5: the mean of the two rows.
    assert_close(&f32s(&out), &[4., 40., 5., 50., 7., 70., 8., 80.]);
}

#[test]
fn bilinear_downscale_samples_without_antialiasing() {
    // 4 -> 2: samples at 0.5 and 2.5 (TF2, antialias=False).
    let img = f32_img(1, 4, 1, vec![0., 1., 2., 3.]);
    let out = resize(&img, 1, 2, ResizeMethod::Bilinear).unwrap();
    assert_close(&f32s(&out), &[0.5, 2.5]);
    // 4 -> 3: scale 4/3, samples at 1/6, 3/2, 17/6.
    let out = resize(&img, 1, 3, ResizeMethod::Bilinear).unwrap();
    assert_close(&f32s(&out), &[1. / 6., 1.5, 17. / 6.]);
}

#[test]
fn area_4x4_to_2x2_by_hand() {
    let img = u8_img(4, 4, 1, (0..16).collect());
    let out = resize(&img, 2, 2, ResizeMethod::Area).unwrap();
    assert_eq!(out.dtype(), sluice_tensor::DType::F32);
    assert_close(&f32s(&out), &[2.5, 4.5, 10.5, 12.5]);
    // 3 -> 2 (scale 1.5): [a0 + a1/2, a1/2 + a2] / 1.5.
    let img = f32_img(1, 3, 1, vec![0., 3., 6.]);
    let out = resize(&img, 1, 2, ResizeMethod::Area).unwrap();
    assert_close(&f32s(&out), &[1., 5.]);
    // Upscaling by area repeats pixels.
    let img = f32_img(1, 2, 1, vec![1., 2.]);
    let out = resize(&img, 1, 4, ResizeMethod::Area).unwrap();
    assert_close(&f32s(&out), &[1., 1., 2., 2.]);
}

#[test]
fn nearest_uses_half_pixel_centres_and_keeps_u8() {
    let img = u8_img(1, 4, 1, vec![10, 11, 12, 13]);
    let out = resize(&img, 1, 2, ResizeMethod::Nearest).unwrap();
    // floor((x + 0.5) * 2) = 1, 3 (TF2), not 0, 2 (TF1).
    assert_eq!(u8s(&out), vec![11, 13]);
    let img = u8_img(2, 2, 2, vec![1, 2, 3, 4, 5, 6, 7, 8]);
    let out = resize(&img, 4, 3, ResizeMethod::Nearest).unwrap();
    // columns: floor((x + 0.5) * 2/3) = 0, 1, 1; rows: 0, 0, 1, 1.
    let r0 = [1, 2, 3, 4, 3, 4];
    let r1 = [5, 6, 7, 8, 7, 8];
    assert_eq!(u8s(&out), [r0, r0, r1, r1].concat());
}

#[test]
fn resize_rejects_bad_arguments() {
    let img = iota_u8(2, 2, 1);
    assert!(is_image_error(resize(&img, 0, 2, ResizeMethod::Bilinear)));
    let bad = Tensor::new(&[4], TensorData::U8(Bytes::from(vec![0u8; 4]))).unwrap();
    assert!(is_image_error(resize(&bad, 2, 2, ResizeMethod::Nearest)));
    let ints = Tensor::new(&[1, 1, 1], TensorData::I64(vec![1].into())).unwrap();
    assert!(is_image_error(resize(&ints, 2, 2, ResizeMethod::Nearest)));
    let empty = u8_img(0, 3, 1, vec![]);
    assert!(is_image_error(resize(&empty, 2, 2, ResizeMethod::Area)));
}

// ---- crops -----------------------------------------------------------------------------

#[test]
fn crops_by_hand() {
    let img = iota_u8(3, 4, 1); // rows [0..4], [4..8], [8..12]
    assert_eq!(u8s(&crop(&img, 1, 1, 2, 2).unwrap()), vec![5, 6, 9, 10]);
    assert_eq!(
        u8s(&crop(&img, 1, 0, 2, 4).unwrap()),
        (4..12).collect::<Vec<_>>()
    );
    assert_eq!(u8s(&center_crop(&img, 1, 2).unwrap()), vec![5, 6]);
    assert_eq!(
        u8s(&center_crop(&img, 3, 3).unwrap()),
        vec![0, 1, 2, 4, 5, 6, 8, 9, 10]
    );
    assert!(is_image_error(crop(&img, 2, 0, 2, 1)));
    assert!(is_image_error(crop(&img, 0, 0, 0, 1)));
    assert!(is_image_error(crop(&img, usize::MAX, 0, 2, 1)));
    assert!(is_image_error(center_crop(&img, 4, 1)));
    assert!(is_image_error(random_crop(&img, 1, 5, &mut rng(0, 0))));
}

#[test]
fn random_resized_crop_falls_back_to_a_clamped_central_crop() {
    // Area fraction 1 at ratio 1 on a 4x8 image needs a 6x6 window, which never fits: the
    // fallback is the central 4x4 (ratio 2 clamped to 1).
    let w = random_resized_crop_window(4, 8, (1.0, 1.0), (1.0, 1.0), &mut rng(0, 0)).unwrap();
    assert_eq!(w, (0, 2, 4, 4));
    let img = iota_u8(4, 8, 3);
    let out = random_resized_crop(&img, 2, 2, (1.0, 1.0), (1.0, 1.0), &mut rng(0, 0)).unwrap();
    let want = resize(
        &crop(&img, 0, 2, 4, 4).unwrap(),
        2,
        2,
        ResizeMethod::Bilinear,
    )
    .unwrap();
    assert_eq!(out, want);
    // The whole image when it fits the ratio range.
    let w = random_resized_crop_window(6, 6, (1.0, 1.0), (0.5, 2.0), &mut rng(0, 0)).unwrap();
    assert_eq!(w, (0, 0, 6, 6));
    assert!(is_image_error(random_resized_crop_window(
        6,
        6,
        (0.5, 0.1),
        (0.75, 1.33),
        &mut rng(0, 0)
    )));
    assert!(is_image_error(random_resized_crop_window(
        6,
        6,
        (0.1, 1.0),
        (0.0, 1.33),
        &mut rng(0, 0)
    )));
}

// ---- flips, rotation -------------------------------------------------------------------

#[test]
fn flips_by_hand() {
    let img = u8_img(2, 3, 2, (1..=12).collect());
    assert_eq!(
        u8s(&flip_left_right(&img).unwrap()),
        vec![5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8]
    );
    assert_eq!(
        u8s(&flip_up_down(&img).unwrap()),
        vec![7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6]
    );
    // p = 0 never flips, p = 1 always does.
    assert_eq!(
        random_flip_left_right(&img, 0.0, &mut rng(1, 1)).unwrap(),
        img
    );
    assert_eq!(
        random_flip_up_down(&img, 1.0, &mut rng(1, 1)).unwrap(),
        flip_up_down(&img).unwrap()
    );
    assert!(is_image_error(random_flip_left_right(
        &img,
        1.5,
        &mut rng(1, 1)
    )));
}

#[test]
fn rotate_by_hand() {
    let img = u8_img(3, 3, 1, (1..=9).collect());
    // Counter-clockwise: the right column becomes the top row.
    assert_eq!(
        u8s(&rotate(&img, 90.0, 0.0).unwrap()),
        vec![3, 6, 9, 2, 5, 8, 1, 4, 7]
    );
    assert_eq!(
        u8s(&rotate(&img, -90.0, 0.0).unwrap()),
        vec![7, 4, 1, 8, 5, 2, 9, 6, 3]
    );
    assert_eq!(rotate(&img, 0.0, 0.0).unwrap(), img);
    assert_eq!(rotate(&img, 360.0, 0.0).unwrap(), img);
    let even = u8_img(2, 2, 1, vec![1, 2, 3, 4]);
    assert_eq!(u8s(&rotate(&even, 90.0, 0.0).unwrap()), vec![2, 4, 1, 3]);
    // 180° of a non-square image is both flips.
    let wide = f32_img(2, 3, 2, (0..12).map(|v| v as f32).collect());
    assert_eq!(
        rotate(&wide, 180.0, 0.0).unwrap(),
        flip_up_down(&flip_left_right(&wide).unwrap()).unwrap()
    );
    // 90° of a 1x3 image: only the centre stays inside; the rest is fill.
    let row = f32_img(1, 3, 1, vec![1., 2., 3.]);
    assert_eq!(f32s(&rotate(&row, 90.0, -1.0).unwrap()), vec![-1., 2., -1.]);
    // 45° of a 3x3: the corners sample at distance sqrt(2) from the centre, (1 ± √2, 1),
    // bilinear between an edge pixel and the fill.
    let img = f32_img(3, 3, 1, vec![0., 0., 0., 0., 0., 0., 0., 0., 0.]);
    let out = f32s(&rotate(&img, 45.0, 10.0).unwrap());
    let corner = 10.0 * (2f32.sqrt() - 1.0);
    assert!((out[0] - corner).abs() < 1e-4, "{out:?}");
    assert_eq!(out[4], 0.0);
    assert!(is_image_error(rotate(&img, f32::NAN, 0.0)));
    assert!(is_image_error(random_rotate(
        &img,
        -1.0,
        0.0,
        &mut rng(0, 0)
    )));
}

// ---- pad, cutout, layout ---------------------------------------------------------------

#[test]
fn pad_by_hand() {
    let img = u8_img(1, 2, 1, vec![1, 2]);
    assert_eq!(
        u8s(&pad(&img, 1, PadMode::Constant(7.0)).unwrap()),
        vec![7, 7, 7, 7, 7, 1, 2, 7, 7, 7, 7, 7]
    );
    // np.pad([[1, 2, 3], [4, 5, 6]], 1, 'reflect')
    let img = u8_img(2, 3, 1, (1..=6).collect());
    let out = pad(&img, 1, PadMode::Reflect).unwrap();
    assert_eq!(out.shape(), &[4, 5, 1]);
    assert_eq!(
        u8s(&out),
        vec![5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2]
    );
    // Reflect with two channels and n = 2.
    let img = f32_img(3, 3, 2, (0..18).map(|v| v as f32).collect());
    let out = pad(&img, 2, PadMode::Reflect).unwrap();
    assert_eq!(out.shape(), &[7, 7, 2]);
    // Output row 0 is input row 2 reflected: columns 2 1 0 1 2 1 0.
    let row2: Vec<f32> = [2, 1, 0, 1, 2, 1, 0]
        .iter()
        .flat_map(|&x| [(12 + 2 * x) as f32, (13 + 2 * x) as f32])
        .collect();
    assert_eq!(&f32s(&out)[..14], &row2[..]);
    assert!(is_image_error(pad(&img, 3, PadMode::Reflect)));
    // u8 fill values saturate.
    let img = u8_img(1, 1, 1, vec![5]);
    assert_eq!(
        u8s(&pad(&img, 1, PadMode::Constant(300.0)).unwrap())[0],
        255
    );
}

#[test]
fn cutout_fills_a_clipped_square() {
    let img = u8_img(5, 5, 3, vec![1; 75]);
    // A square larger than twice the image covers it from any centre.
    let out = cutout(&img, 10, 0.0, &mut rng(3, 3)).unwrap();
    assert_eq!(u8s(&out), vec![0; 75]);
    // Size 1: exactly one pixel, all channels.
    let out = cutout(&img, 1, 9.0, &mut rng(3, 4)).unwrap();
    let filled: Vec<usize> = u8s(&out)
        .chunks(3)
        .enumerate()
        .filter(|(_, p)| p == &[9, 9, 9])
        .map(|(i, _)| i)
        .collect();
    assert_eq!(filled.len(), 1);
    assert_eq!(u8s(&out).iter().filter(|&&v| v == 9).count(), 3);
    // Size 0 changes nothing.
    assert_eq!(cutout(&img, 0, 9.0, &mut rng(3, 5)).unwrap(), img);
}

#[test]
fn chw_by_hand() {
    let img = u8_img(1, 2, 3, vec![1, 2, 3, 4, 5, 6]);
    let chw = to_chw(&img).unwrap();
    assert_eq!(chw.shape(), &[3, 1, 2]);
    assert_eq!(u8s(&chw), vec![1, 4, 2, 5, 3, 6]);
    assert_eq!(from_chw(&chw).unwrap(), img);
}

#[test]
fn map_batch_applies_per_row_in_order() {
    let rows: Vec<Tensor> = (0..5).map(|i| u8_img(4, 4, 3, vec![i as u8; 48])).collect();
    let batch = Tensor::stack(&rows.iter().collect::<Vec<_>>()).unwrap();
    let out = map_batch(&batch, |img, i| {
        random_crop(img, 2, 3, &mut rng(9, i as u64))
    })
    .unwrap();
    assert_eq!(out.shape(), &[5, 2, 3, 3]);
    for (i, row) in rows.iter().enumerate() {
        let want = random_crop(row, 2, 3, &mut rng(9, i as u64)).unwrap();
        assert_eq!(out.row(i).unwrap(), want);
    }
    let mut rngs: Vec<ElementRng> = (0..5).map(|i| rng(9, i)).collect();
    let again = map_batch_with_rngs(&batch, &mut rngs, |img, r| random_crop(img, 2, 3, r)).unwrap();
    assert_eq!(again, out);
    assert!(is_image_error(map_batch_with_rngs(
        &batch,
        &mut rngs[..2],
        |img, _| Ok(img.clone())
    )));
    // Rows of different shapes cannot be stacked.
    assert!(is_image_error(map_batch(&batch, |img, i| crop(
        img,
        0,
        0,
        1 + i % 2,
        1
    ))));
    // Errors from f come through.
    assert!(is_image_error(map_batch(&batch, |img, _| crop(
        img, 0, 0, 9, 9
    ))));
}

// ---- properties ------------------------------------------------------------------------

/// An image of dtype u8 or f32 with 1 to 12 rows and columns and 1 to 5 channels.
fn image() -> impl Strategy<Value = Tensor> {
    (
        1usize..12,
        1usize..12,
        1usize..6,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(h, w, c, float, seed)| {
            let n = h * w * c;
            let vals = (0..n).map(|i| (mix(seed ^ i as u64) % 256) as u8);
            if float {
                f32_img(h, w, c, vals.map(|v| f32::from(v) / 7.0).collect())
            } else {
                u8_img(h, w, c, vals.collect())
            }
        })
}

fn dims(t: &Tensor) -> (usize, usize, usize) {
    sluice_image::hwc(t).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    match t.data() {
        TensorData::U8(v) => v.iter().map(|&b| f32::from(b)).collect(),
        TensorData::F32(v) => v.to_vec(),
        _ => unreachable!(),
    }
}

/// The sub-block by plain indexing.
fn block(t: &Tensor, y: usize, x: usize, h: usize, w: usize) -> Vec<f32> {
    let (_, iw, c) = dims(t);
    let v = values(t);
    let mut out = vec![];
    for r in y..y + h {
        for q in x..x + w {
            out.extend_from_slice(&v[(r * iw + q) * c..(r * iw + q + 1) * c]);
        }
    }
    out
}

/// TF's bilinear formula, one output value at a time.
fn naive_bilinear(t: &Tensor, oh: usize, ow: usize) -> Vec<f32> {
    let (h, w, c) = dims(t);
    let v = values(t);
    let at = |y: usize, x: usize, ch: usize| v[(y * w + x) * c + ch];
    let tap = |o: usize, out: usize, inp: usize| {
        let s = inp as f32 / out as f32;
        let f = (o as f32 + 0.5) * s - 0.5;
        let lo = (f.floor().max(0.0) as usize).min(inp - 1);
        let hi = (f.ceil().max(0.0) as usize).min(inp - 1);
        (lo, hi, f - f.floor())
    };
    let mut out = vec![];
    for y in 0..oh {
        let (y0, y1, fy) = tap(y, oh, h);
        for x in 0..ow {
            let (x0, x1, fx) = tap(x, ow, w);
            for ch in 0..c {
                let top = at(y0, x0, ch) + (at(y0, x1, ch) - at(y0, x0, ch)) * fx;
                let bot = at(y1, x0, ch) + (at(y1, x1, ch) - at(y1, x0, ch)) * fx;
                out.push(top + (bot - top) * fy);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn flipping_twice_is_the_identity(img in image()) {
        prop_assert_eq!(&flip_left_right(&flip_left_right(&img).unwrap()).unwrap(), &img);
        prop_assert_eq!(&flip_up_down(&flip_up_down(&img).unwrap()).unwrap(), &img);
        let (h, w, c) = dims(&img);
        let f = flip_left_right(&img).unwrap();
        prop_assert_eq!(f.shape(), &[h, w, c]);
        prop_assert_eq!(block(&f, 0, w - 1, h, 1), block(&img, 0, 0, h, 1));
    }

    #[test]
    fn crops_equal_the_sub_block(img in image(), a in any::<u64>()) {
        let (h, w, _) = dims(&img);
        let (ch, cw) = (1 + a as usize % h, 1 + (a >> 8) as usize % w);
        let (y, x) = ((a >> 16) as usize % (h - ch + 1), (a >> 24) as usize % (w - cw + 1));
        let out = crop(&img, y, x, ch, cw).unwrap();
        prop_assert_eq!(out.dtype(), img.dtype());
        prop_assert_eq!(values(&out), block(&img, y, x, ch, cw));
        let cc = center_crop(&img, ch, cw).unwrap();
        prop_assert_eq!(values(&cc), block(&img, (h - ch) / 2, (w - cw) / 2, ch, cw));
        prop_assert!(is_image_error(crop(&img, y, x, h + 1, cw)));
    }

    #[test]
    fn random_crop_is_a_sub_block(img in image(), a in any::<u64>()) {
        let (h, w, c) = dims(&img);
        let (ch, cw) = (1 + a as usize % h, 1 + (a >> 8) as usize % w);
        let out = random_crop(&img, ch, cw, &mut rng(a, 0)).unwrap();
        prop_assert_eq!(out.shape(), &[ch, cw, c]);
        let v = values(&out);
        let found = (0..=h - ch).any(|y| (0..=w - cw).any(|x| block(&img, y, x, ch, cw) == v));
        prop_assert!(found);
    }

    #[test]
    fn pad_then_center_crop_is_the_identity(img in image(), n in 0usize..4, fill in 0f32..255.0) {
        let (h, w, c) = dims(&img);
        let p = pad(&img, n, PadMode::Constant(fill.round())).unwrap();
        prop_assert_eq!(p.shape(), &[h + 2 * n, w + 2 * n, c]);
        prop_assert_eq!(&center_crop(&p, h, w).unwrap(), &img);
        if n < h && n < w {
            let p = pad(&img, n, PadMode::Reflect).unwrap();
            prop_assert_eq!(&center_crop(&p, h, w).unwrap(), &img);
            // Reflection is symmetric about the edge pixel.
            if n > 0 {
                prop_assert_eq!(block(&p, 0, 0, h + 2 * n, 1), block(&p, 0, 2 * n, h + 2 * n, 1));
            }
        } else {
            prop_assert!(is_image_error(pad(&img, n, PadMode::Reflect)));
        }
    }

    #[test]
    fn chw_round_trips(img in image()) {
        let (h, w, c) = dims(&img);
        let chw = to_chw(&img).unwrap();
        prop_assert_eq!(chw.shape(), &[c, h, w]);
        let v = values(&chw);
        let src = values(&img);
        prop_assert_eq!(v[(c - 1) * h * w + h * w - 1], src[src.len() - 1]);
        prop_assert_eq!(&from_chw(&chw).unwrap(), &img);
    }

    #[test]
    fn resize_contracts(img in image(), oh in 1usize..14, ow in 1usize..14) {
        let (h, w, c) = dims(&img);
        let src = values(&img);
        let (lo, hi) = src.iter().fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        for m in [ResizeMethod::Nearest, ResizeMethod::Bilinear, ResizeMethod::Area] {
            let out = resize(&img, oh, ow, m).unwrap();
            prop_assert_eq!(out.shape(), &[oh, ow, c]);
            let v = values(&out);
            prop_assert!(v.iter().all(|&x| x >= lo - 1e-3 && x <= hi + 1e-3), "{:?}", m);
            if m == ResizeMethod::Nearest {
                prop_assert_eq!(out.dtype(), img.dtype());
                prop_assert!(v.iter().all(|x| src.contains(x)));
            } else {
                prop_assert_eq!(out.dtype(), sluice_tensor::DType::F32);
            }
        }
        // Same size is the identity for every method.
        for m in [ResizeMethod::Nearest, ResizeMethod::Bilinear, ResizeMethod::Area] {
            let v = values(&resize(&img, h, w, m).unwrap());
            prop_assert!(v.iter().zip(&src).all(|(a, b)| (a - b).abs() < 1e-3));
        }
        let got = values(&resize(&img, oh, ow, ResizeMethod::Bilinear).unwrap());
        prop_assert_eq!(got, naive_bilinear(&img, oh, ow));
    }

    #[test]
    fn rotation_keeps_shape_and_dtype(img in image(), deg in -360f32..360.0) {
        let out = rotate(&img, deg, 0.0).unwrap();
        prop_assert_eq!(out.shape(), img.shape());
        prop_assert_eq!(out.dtype(), img.dtype());
        let (h, w, _) = dims(&img);
        if h == w {
            // Four quarter turns of a square image are the identity.
            let mut r = img.clone();
            for _ in 0..4 {
                r = rotate(&r, 90.0, 0.0).unwrap();
            }
            prop_assert_eq!(&r, &img);
        }
    }

    #[test]
    fn random_ops_are_reproducible(img in image(), seed in any::<u64>(), i in 0u64..1000) {
        let (h, w, _) = dims(&img);
        let run = |seed: u64| -> Vec<Tensor> {
            let mut r = rng(seed, i);
            vec![
                random_crop(&img, h.div_ceil(2), w.div_ceil(2), &mut r).unwrap(),
                random_flip_left_right(&img, 0.5, &mut r).unwrap(),
                random_flip_up_down(&img, 0.5, &mut r).unwrap(),
                random_resized_crop(&img, 5, 4, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut r).unwrap(),
                random_rotate(&img, 30.0, 0.0, &mut r).unwrap(),
                cutout(&img, 3, 0.0, &mut r).unwrap(),
            ]
        };
        prop_assert_eq!(run(seed), run(seed));
    }

    #[test]
    fn random_resized_crop_windows_fit(h in 1usize..300, w in 1usize..300, seed in any::<u64>()) {
        let (y, x, ch, cw) = random_resized_crop_window(
            h, w, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut rng(seed, 0)).unwrap();
        prop_assert!(ch >= 1 && cw >= 1 && y + ch <= h && x + cw <= w);
    }

    #[test]
    fn cutout_changes_at_most_the_square(img in image(), size in 0usize..6, seed in any::<u64>()) {
        let (h, w, c) = dims(&img);
        let out = cutout(&img, size, -1.0, &mut rng(seed, 0)).unwrap();
        prop_assert_eq!(out.shape(), img.shape());
        let changed: Vec<usize> = values(&out)
            .chunks(c)
            .enumerate()
            .filter(|(_, p)| img.dtype() == sluice_tensor::DType::F32 && p.iter().all(|&v| v == -1.0))
            .map(|(i, _)| i)
            .collect();
        if img.dtype() == sluice_tensor::DType::F32 {
            prop_assert!(changed.len() <= size * size);
            if let (Some(&a), Some(&b)) = (changed.first(), changed.last()) {
                prop_assert!(b / w - a / w < size && (b % w).abs_diff(a % w) < size);
            }
            prop_assert!(size == 0 || !changed.is_empty());
            let _ = h;
        }
    }
}

#[test]
fn absurd_output_sizes_are_errors_not_panics() {
    let img = iota_u8(2, 2, 3);
    assert!(is_image_error(resize(
        &img,
        usize::MAX / 2,
        3,
        ResizeMethod::Nearest
    )));
    assert!(is_image_error(resize(
        &img,
        1 << 40,
        1 << 40,
        ResizeMethod::Bilinear
    )));
    assert!(is_image_error(pad(
        &img,
        usize::MAX / 2 + 1,
        PadMode::Constant(0.0)
    )));
    assert!(is_image_error(pad(&img, 1 << 40, PadMode::Constant(0.0))));
}
