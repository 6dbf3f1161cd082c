//! The checks of `image_ops` (every front end runs them before anything runs): parameter
//! ranges, `to_chw` last, one `decode`, and crops that cannot fit the size an earlier op
//! fixed. Each problem names its key (`ops[3].height`).

use crate::dataset::Dataset;
use crate::error::Result;
use crate::invalid::{Invalid, Key, under};
use crate::parallelism::check_num_parallel;
use crate::registry::{AppendContext, Spec};
use crate::stages::image_ops::{ImageOp, ImageOpsSpec, PadSpec};
use crate::tensor::DType;

type Seg = Key;
type Problem = Invalid;

impl Spec for ImageOpsSpec {
    const KIND: &'static str = "image_ops";
    const SUMMARY: &'static str = "decode and augment images with the built-in ops";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_image_ops(&[], self)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.image_ops(self.clone()))
    }
}

fn finite(base: &[Seg], key: &str, op: &str, v: f32) -> std::result::Result<(), Problem> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(Problem::new(
            under(base, &[key]),
            format!("{op}: `{key}` must be a finite number, got {v}"),
        ))
    }
}

fn at_least_one(base: &[Seg], key: &str, op: &str, v: usize) -> std::result::Result<(), Problem> {
    if v >= 1 {
        Ok(())
    } else {
        Err(Problem::new(
            under(base, &[key]),
            format!("{op}: `{key}` must be at least 1"),
        ))
    }
}

fn range(
    base: &[Seg],
    op: &str,
    lower: f32,
    upper: f32,
    min: f32,
) -> std::result::Result<(), Problem> {
    finite(base, "lower", op, lower)?;
    finite(base, "upper", op, upper)?;
    if lower < min {
        return Err(Problem::new(
            under(base, &["lower"]),
            format!("{op}: `lower` must be at least {min}, got {lower}"),
        ));
    }
    if upper < lower {
        return Err(Problem::new(
            under(base, &["upper"]),
            format!("{op}: `upper` ({upper}) must not be below `lower` ({lower})"),
        ));
    }
    Ok(())
}

fn pair(
    base: &[Seg],
    key: &str,
    op: &str,
    (lo, hi): (f32, f32),
    max: f32,
) -> std::result::Result<(), Problem> {
    let at = || under(base, &[key]);
    if !(lo.is_finite() && hi.is_finite()) || lo <= 0.0 || hi < lo || hi > max {
        let bound = if max.is_finite() {
            format!(" and at most {max}")
        } else {
            String::new()
        };
        return Err(Problem::new(
            at(),
            format!(
                "{op}: `{key}` must be [low, high] with 0 < low <= high{bound}, got [{lo}, {hi}]"
            ),
        ));
    }
    Ok(())
}

/// Checks the op list of an `image_ops` stage at `base` (the stage's path): parameter
/// ranges, `to_chw` last, one `decode`, and crops that cannot fit the size an earlier op
/// fixed.
pub(crate) fn check_image_ops(
    base: &[Seg],
    spec: &ImageOpsSpec,
) -> std::result::Result<(), Problem> {
    if spec.ops.is_empty() {
        return Err(Problem::new(
            under(base, &["ops"]),
            "image_ops: `ops` needs at least one op",
        ));
    }
    if spec.input.is_empty() {
        return Err(Problem::new(
            under(base, &["input"]),
            "image_ops: `input` must name a value",
        ));
    }
    check_num_parallel("image_ops", spec.num_parallel).map_err(|p| p.under(base))?;
    // The image size fixed by the latest resize or crop, and the op that fixed it.
    let mut known: Option<(usize, usize, usize)> = None;
    let mut decoded_at: Option<usize> = None;
    let last = spec.ops.len() - 1;
    for (i, op) in spec.ops.iter().enumerate() {
        let mut p = under(base, &["ops"]);
        p.push(Seg::Index(i));
        let p = p.as_slice();
        let name = op_name(op);
        let crop = |h: usize, w: usize, known: Option<(usize, usize, usize)>| {
            at_least_one(p, "height", name, h)?;
            at_least_one(p, "width", name, w)?;
            match known {
                Some((kh, kw, j)) if h > kh || w > kw => Err(Problem::new(
                    p.to_vec(),
                    format!(
                        "{name}: the {h}x{w} window is larger than the {kh}x{kw} image op {} ({}) produces",
                        j + 1,
                        op_name(&spec.ops[j])
                    ),
                )),
                _ => Ok(()),
            }
        };
        match op {
            ImageOp::Decode { channels } => {
                if let Some(j) = decoded_at {
                    return Err(Problem::new(
                        p.to_vec(),
                        format!(
                            "decode: the image is already decoded by op {} (decode takes encoded bytes)",
                            j + 1
                        ),
                    ));
                }
                if let Some(c) = channels
                    && ![1, 3, 4].contains(c)
                {
                    return Err(Problem::new(
                        under(p, &["channels"]),
                        format!("decode: `channels` must be 1, 3 or 4, got {c}"),
                    ));
                }
                decoded_at = Some(i);
                known = None;
            }
            ImageOp::Resize { height, width, .. } => {
                at_least_one(p, "height", name, *height)?;
                at_least_one(p, "width", name, *width)?;
                known = Some((*height, *width, i));
            }
            ImageOp::CenterCrop { height, width } | ImageOp::RandomCrop { height, width } => {
                crop(*height, *width, known)?;
                known = Some((*height, *width, i));
            }
            ImageOp::RandomResizedCrop {
                height,
                width,
                scale,
                ratio,
            } => {
                at_least_one(p, "height", name, *height)?;
                at_least_one(p, "width", name, *width)?;
                pair(p, "scale", name, *scale, 1.0)?;
                pair(p, "ratio", name, *ratio, f32::INFINITY)?;
                known = Some((*height, *width, i));
            }
            ImageOp::RandomFlipLeftRight { p: prob } | ImageOp::RandomFlipUpDown { p: prob } => {
                if !(0.0..=1.0).contains(prob) {
                    return Err(Problem::new(
                        under(p, &["p"]),
                        format!("{name}: the probability `p` must be within [0, 1], got {prob}"),
                    ));
                }
            }
            ImageOp::RandomRotate { max_degrees, fill } => {
                finite(p, "max_degrees", name, *max_degrees)?;
                finite(p, "fill", name, *fill)?;
                if *max_degrees < 0.0 {
                    return Err(Problem::new(
                        under(p, &["max_degrees"]),
                        format!("{name}: `max_degrees` must not be negative, got {max_degrees}"),
                    ));
                }
            }
            ImageOp::Pad { n, mode } => {
                if let PadSpec::Constant(v) = mode {
                    finite(p, "mode", name, *v)?;
                }
                known = known.map(|(h, w, _)| (h + 2 * n, w + 2 * n, i));
            }
            ImageOp::Cutout { size, fill } => {
                at_least_one(p, "size", name, *size)?;
                finite(p, "fill", name, *fill)?;
            }
            ImageOp::RandomBrightness { max_delta } => {
                finite(p, "max_delta", name, *max_delta)?;
                if *max_delta < 0.0 {
                    return Err(Problem::new(
                        under(p, &["max_delta"]),
                        format!("{name}: `max_delta` must not be negative, got {max_delta}"),
                    ));
                }
            }
            ImageOp::RandomContrast { lower, upper }
            | ImageOp::RandomSaturation { lower, upper } => range(p, name, *lower, *upper, 0.0)?,
            ImageOp::RandomHue { max_delta } => {
                if !(0.0..=0.5).contains(max_delta) {
                    return Err(Problem::new(
                        under(p, &["max_delta"]),
                        format!("{name}: `max_delta` must be within [0, 0.5], got {max_delta}"),
                    ));
                }
            }
            ImageOp::Cast { dtype } => {
                if !matches!(dtype, DType::U8 | DType::F32) {
                    return Err(Problem::new(
                        under(p, &["dtype"]),
                        format!("{name}: an image casts to \"u8\" or \"f32\", not \"{dtype}\""),
                    ));
                }
            }
            ImageOp::ToUnitF32 => {}
            ImageOp::Normalize { mean, std, scale } => {
                finite(p, "scale", name, *scale)?;
                if mean.is_empty() || mean.len() != std.len() {
                    return Err(Problem::new(
                        under(p, &["std"]),
                        format!(
                            "{name}: `mean` and `std` need one value per channel (the same number, at least one), got {} and {}",
                            mean.len(),
                            std.len()
                        ),
                    ));
                }
                if let Some(m) = mean.iter().find(|m| !m.is_finite()) {
                    return Err(Problem::new(
                        under(p, &["mean"]),
                        format!("{name}: `mean` values must be finite, got {m}"),
                    ));
                }
                if let Some(s) = std.iter().find(|s| !s.is_finite() || **s == 0.0) {
                    return Err(Problem::new(
                        under(p, &["std"]),
                        format!("{name}: `std` values must be finite and non-zero, got {s}"),
                    ));
                }
            }
            ImageOp::DecodeWindow {
                channels,
                height,
                width,
                flip,
                ..
            } => {
                // What the decode, crop and flip it stands for were checked as.
                if let Some(c) = channels
                    && ![1, 3, 4].contains(c)
                {
                    return Err(Problem::new(
                        under(p, &["channels"]),
                        format!("decode: `channels` must be 1, 3 or 4, got {c}"),
                    ));
                }
                at_least_one(p, "height", name, *height)?;
                at_least_one(p, "width", name, *width)?;
                if let Some(prob) = flip
                    && !(0.0..=1.0).contains(prob)
                {
                    return Err(Problem::new(
                        under(p, &["flip"]),
                        format!("{name}: the probability `flip` must be within [0, 1], got {prob}"),
                    ));
                }
                decoded_at = Some(i);
                known = Some((*height, *width, i));
            }
            ImageOp::ToChw => {
                if i != last {
                    return Err(Problem::new(
                        p.to_vec(),
                        "to_chw: must be the last op (the others work on [H, W, C] images)",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The op's name as written in a file (`random_crop`).
pub(crate) fn op_name(op: &ImageOp) -> &'static str {
    match op {
        ImageOp::Decode { .. } => "decode",
        ImageOp::Resize { .. } => "resize",
        ImageOp::CenterCrop { .. } => "center_crop",
        ImageOp::RandomCrop { .. } => "random_crop",
        ImageOp::RandomResizedCrop { .. } => "random_resized_crop",
        ImageOp::RandomFlipLeftRight { .. } => "random_flip_left_right",
        ImageOp::RandomFlipUpDown { .. } => "random_flip_up_down",
        ImageOp::RandomRotate { .. } => "random_rotate",
        ImageOp::Pad { .. } => "pad",
        ImageOp::Cutout { .. } => "cutout",
        ImageOp::RandomBrightness { .. } => "random_brightness",
        ImageOp::RandomContrast { .. } => "random_contrast",
        ImageOp::RandomSaturation { .. } => "random_saturation",
        ImageOp::RandomHue { .. } => "random_hue",
        ImageOp::Cast { .. } => "cast",
        ImageOp::ToUnitF32 => "to_unit_f32",
        ImageOp::Normalize { .. } => "normalize",
        ImageOp::ToChw => "to_chw",
        ImageOp::DecodeWindow { .. } => "decode_window",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ops: Vec<ImageOp>) -> std::result::Result<(), Problem> {
        check_image_ops(
            &[Key::name("stage"), Seg::Index(0)],
            &ImageOpsSpec::new(ops),
        )
    }

    #[test]
    fn the_augment_ops_pass() {
        check(vec![
            ImageOp::Decode { channels: Some(3) },
            ImageOp::RandomCrop {
                height: 224,
                width: 224,
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
            ImageOp::ToChw,
        ])
        .unwrap();
    }

    #[test]
    fn a_crop_larger_than_the_resized_image_is_named_with_its_op() {
        let p = check(vec![
            ImageOp::Decode { channels: None },
            ImageOp::Resize {
                height: 64,
                width: 64,
                method: Default::default(),
            },
            ImageOp::Pad {
                n: 4,
                mode: PadSpec::Reflect,
            },
            ImageOp::RandomCrop {
                height: 80,
                width: 64,
            },
        ])
        .unwrap_err();
        assert_eq!(
            p.path_display().to_string(),
            "stage[0].ops[3]",
            "{}",
            p.message
        );
        assert!(
            p.message
                .contains("80x64 window is larger than the 72x72 image op 3 (pad)"),
            "{}",
            p.message
        );
    }

    #[test]
    fn impossible_parameters_are_rejected_with_their_key() {
        let cases: Vec<(ImageOp, &str, &str)> = vec![
            (
                ImageOp::RandomFlipLeftRight { p: 1.5 },
                "stage[0].ops[0].p",
                "within [0, 1]",
            ),
            (
                ImageOp::Decode { channels: Some(2) },
                "stage[0].ops[0].channels",
                "1, 3 or 4",
            ),
            (
                ImageOp::RandomContrast {
                    lower: 1.5,
                    upper: 0.5,
                },
                "stage[0].ops[0].upper",
                "must not be below",
            ),
            (
                ImageOp::RandomHue { max_delta: 0.7 },
                "stage[0].ops[0].max_delta",
                "[0, 0.5]",
            ),
            (
                ImageOp::Normalize {
                    mean: vec![0.5; 3],
                    std: vec![0.0; 3],
                    scale: 1.0,
                },
                "stage[0].ops[0].std",
                "non-zero",
            ),
            (
                ImageOp::Cast { dtype: DType::I64 },
                "stage[0].ops[0].dtype",
                "\"u8\" or \"f32\"",
            ),
            (
                ImageOp::RandomCrop {
                    height: 0,
                    width: 3,
                },
                "stage[0].ops[0].height",
                "at least 1",
            ),
            (
                ImageOp::RandomResizedCrop {
                    height: 8,
                    width: 8,
                    scale: (0.5, 1.5),
                    ratio: (0.75, 1.33),
                },
                "stage[0].ops[0].scale",
                "at most 1",
            ),
            (
                ImageOp::RandomBrightness {
                    max_delta: f32::NAN,
                },
                "stage[0].ops[0].max_delta",
                "finite",
            ),
        ];
        for (op, path, needle) in cases {
            let p = check(vec![op.clone()]).unwrap_err();
            assert_eq!(p.path_display().to_string(), path, "{op:?}");
            assert!(p.message.contains(needle), "{op:?}: {}", p.message);
        }
        let p = check(vec![ImageOp::ToChw, ImageOp::ToUnitF32]).unwrap_err();
        assert!(p.message.contains("last op"), "{}", p.message);
        let p = check(vec![
            ImageOp::Decode { channels: None },
            ImageOp::Decode { channels: None },
        ])
        .unwrap_err();
        assert!(
            p.message.contains("already decoded by op 1"),
            "{}",
            p.message
        );
        assert!(
            check(vec![])
                .unwrap_err()
                .message
                .contains("at least one op")
        );
    }
}
