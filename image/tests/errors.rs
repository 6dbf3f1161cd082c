//! Errors by kind: each failure is the variant (and decode kind) a caller would match on,
//! with the message it always had.

use rand::SeedableRng;
use sluice_image::decode::{DecodeLimits, ImageFormat, decode_image_with_limits};
use sluice_image::{
    DecodeErrorKind, Error, PointChain, cast, center_crop, decode_and_crop, decode_image,
    decode_jpeg_scaled, hwc, map_batch_with_rngs, normalize, random_crop, random_flip_left_right,
};
use sluice_tensor::{DType, Tensor, TensorData};

fn jpeg(w: u16, h: u16) -> Vec<u8> {
    let pixels: Vec<u8> = (0..usize::from(w) * usize::from(h) * 3)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 90)
        .encode(&pixels, w, h, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    out
}

fn png(w: u32, h: u32) -> Vec<u8> {
    let pixels: Vec<u8> = (0..w * h * 3).map(|i| (i * 5 % 251) as u8).collect();
    let mut out = Vec::new();
    image::write_buffer_with_format(
        &mut std::io::Cursor::new(&mut out),
        &pixels,
        w,
        h,
        image::ExtendedColorType::Rgb8,
        image::ImageFormat::Png,
    )
    .unwrap();
    out
}

fn u8_image(h: usize, w: usize, c: usize) -> Tensor {
    Tensor::new(&[h, w, c], TensorData::U8(vec![7; h * w * c].into())).unwrap()
}

fn decode_kind(err: &Error) -> Option<(ImageFormat, DecodeErrorKind)> {
    match err {
        Error::Decode { format, kind, .. } => Some((*format, *kind)),
        _ => None,
    }
}

#[test]
fn bad_data_is_told_apart() {
    let err = decode_image(b"GIF89a\x01\x00\x01\x00", None).unwrap_err();
    assert!(
        matches!(&err, Error::UnknownFormat { seen } if seen == "a GIF image"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "unknown image format (only JPEG and PNG are decoded): a GIF image"
    );

    let data = jpeg(32, 24);
    let err = decode_image(&data[..data.len() - 2], None).unwrap_err();
    assert_eq!(
        decode_kind(&err),
        Some((ImageFormat::Jpeg, DecodeErrorKind::Truncated)),
        "{err}"
    );
    assert!(err.to_string().starts_with("invalid JPEG data: truncated"));

    let data = png(8, 6);
    let err = decode_image(&data[..data.len() - 4], None).unwrap_err();
    assert_eq!(
        decode_kind(&err),
        Some((ImageFormat::Png, DecodeErrorKind::Truncated)),
        "{err}"
    );
    // Damage inside IDAT: the CRC catches it.
    let mut bad = data.clone();
    let idat = bad.windows(4).position(|m| m == b"IDAT").unwrap();
    bad[idat + 10] ^= 0x55;
    let err = decode_image(&bad, None).unwrap_err();
    assert_eq!(
        decode_kind(&err),
        Some((ImageFormat::Png, DecodeErrorKind::Corrupt)),
        "{err}"
    );
    assert!(err.to_string().starts_with("invalid PNG data: "), "{err}");

    // A PNG is valid data that decode_jpeg_scaled does not take.
    let err = decode_jpeg_scaled(&data, 1, 1).unwrap_err();
    assert_eq!(
        decode_kind(&err),
        Some((ImageFormat::Png, DecodeErrorKind::Unsupported))
    );
    assert_eq!(
        err.to_string(),
        "decode_jpeg_scaled takes a JPEG image, got a PNG"
    );
}

#[test]
fn sizes_over_the_limit_and_zero_sizes() {
    let err = decode_image_with_limits(&png(40, 30), None, &DecodeLimits::with_max_pixels(1000))
        .unwrap_err();
    assert_eq!(
        err,
        Error::TooLarge {
            format: ImageFormat::Png,
            height: 30,
            width: 40,
            limit: 1000
        }
    );
    assert_eq!(
        err.to_string(),
        "PNG image is 40x30 = 1200 pixels, over the limit of 1000 pixels"
    );

    // Zero height in the JPEG frame header.
    let mut data = jpeg(16, 16);
    let sof = data.windows(2).position(|m| m == [0xff, 0xc0]).unwrap();
    data[sof + 5..sof + 7].copy_from_slice(&[0, 0]);
    let err = decode_image(&data, None).unwrap_err();
    assert_eq!(
        decode_kind(&err),
        Some((ImageFormat::Jpeg, DecodeErrorKind::ZeroSize)),
        "{err}"
    );
}

#[test]
fn bad_arguments_name_their_op() {
    let data = jpeg(32, 24);
    let err = decode_and_crop(&data, (20, 0, 8, 8), None).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                op: "decode_and_crop",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "crop window (y 20, x 0, height 8, width 8) is empty or not inside the 32x24 image"
    );
    let err = decode_image(&data, Some(2)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { op: "decode", .. }));

    let img = u8_image(4, 6, 3);
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0);
    let err = random_flip_left_right(&img, 1.5, &mut rng).unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidArgument {
            op: "random_flip_left_right",
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "random_flip_left_right: probability must be in [0, 1], got 1.5"
    );
    let err = center_crop(&img, 5, 5).unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidArgument {
            op: "center_crop",
            ..
        }
    ));
    let err = random_crop(&img, 2, 7, &mut rng).unwrap_err();
    assert_eq!(
        err.to_string(),
        "random_crop of 2x7 is larger than the 4x6 image"
    );
    let err = normalize(&img, &[0.5, 0.5], &[1.0], 1.0).unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidArgument {
            op: "normalize",
            ..
        }
    ));
    let mut rngs = vec![rand_pcg::Pcg64Mcg::seed_from_u64(1)];
    let batch = Tensor::stack(&[&img, &img]).unwrap();
    let err =
        map_batch_with_rngs(&batch, &mut rngs, |row, _| Ok::<_, Error>(row.clone())).unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidArgument {
            op: "map_batch_with_rngs",
            ..
        }
    ));
}

#[test]
fn inputs_an_op_does_not_take() {
    let flat = Tensor::new(&[4], TensorData::U8(vec![1, 2, 3, 4].into())).unwrap();
    let err = hwc(&flat).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "hwc", .. }));
    assert_eq!(
        err.to_string(),
        "expected an image of shape [height, width, channels], got [4]"
    );
    let ints = Tensor::new(&[1, 1, 1], TensorData::I64(vec![1].into())).unwrap();
    let err = cast(&ints, DType::F32).unwrap_err();
    assert!(
        matches!(
            err,
            Error::DType {
                op: "cast",
                found: DType::I64,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "cast: expected a u8 or f32 image, got i64");
    let err = PointChain::to_unit(vec![]).apply(&flat).unwrap_err();
    assert!(matches!(
        err,
        Error::Shape {
            op: "point chain",
            ..
        }
    ));
}

#[test]
fn caller_errors_pass_through_batch_maps() {
    #[derive(Debug, PartialEq)]
    enum Mine {
        Image(String),
        Refused(usize),
    }
    impl From<Error> for Mine {
        fn from(e: Error) -> Self {
            Mine::Image(e.to_string())
        }
    }
    let batch = Tensor::stack(&[&u8_image(2, 2, 1), &u8_image(2, 2, 1)]).unwrap();
    let mut rngs: Vec<_> = (0..2).map(rand_pcg::Pcg64Mcg::seed_from_u64).collect();
    let out = map_batch_with_rngs(&batch, &mut rngs, |row, _| {
        if row.shape() == [2, 2, 1] {
            Err(Mine::Refused(7))
        } else {
            Ok(row.clone())
        }
    });
    assert_eq!(out, Err(Mine::Refused(7)));
    let out = map_batch_with_rngs(&batch, &mut rngs[..1], |row, _| Ok::<_, Mine>(row.clone()));
    assert_eq!(
        out,
        Err(Mine::Image(
            "map_batch_with_rngs: 1 RNGs for a batch of 2".into()
        ))
    );
}
