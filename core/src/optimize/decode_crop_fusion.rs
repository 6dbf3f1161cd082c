//! [`DecodeCropFusion`]: an `image_ops` that decodes then crops decodes only the window.

use std::sync::Arc;

use crate::error::Result;
use crate::options::Options;
use crate::plan::PlanNode;
use crate::stages::image_ops::ImageOpsSpec;

use super::Rule;

/// An `image_ops` whose ops start with `decode`, then `random_crop` or `center_crop`, then
/// optionally `random_flip_left_right`, runs those as one
/// [`ImageOp::DecodeWindow`](crate::stages::image_ops::ImageOp::DecodeWindow)
/// ([`ImageOpsSpec::fused`]): a JPEG is decoded only where the crop needs it (no IDCT or
/// colour conversion outside the window, nothing below its last MCU row) and mirrored in
/// the same copy. The pixels and the random draws are those of the ops one by one; with the
/// colour ops after it, the colour pass then reads the window in place from the decoded
/// rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecodeCropFusion;

impl Rule for DecodeCropFusion {
    fn name(&self) -> &'static str {
        "decode_crop_fusion"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, _: &Options) -> Result<Option<Arc<PlanNode>>> {
        let Some(fused) = node
            .stage_as::<ImageOpsSpec>()
            .and_then(ImageOpsSpec::fused)
        else {
            return Ok(None);
        };
        Ok(Some(
            node.rewritten(Arc::new(fused), node.inputs().to_vec()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::Optimizer;
    use crate::prelude::*;

    fn optimized(ops: Vec<ImageOp>) -> (Vec<ImageOp>, usize) {
        let d = Dataset::range(0, 1).image_ops(ImageOpsSpec::new(ops));
        let o = Optimizer::new(vec![Box::new(DecodeCropFusion)])
            .optimize(d.plan(), &Options::default())
            .unwrap();
        let spec = o.plan.stage_as::<ImageOpsSpec>().unwrap().clone();
        (spec.ops, o.applied.len())
    }

    #[test]
    fn decode_crop_and_flip_become_one_window_decode() {
        let (ops, applied) = optimized(vec![
            ImageOp::Decode { channels: Some(3) },
            ImageOp::CenterCrop {
                height: 4,
                width: 5,
            },
            ImageOp::RandomFlipLeftRight { p: 0.5 },
            ImageOp::ToUnitF32,
        ]);
        assert_eq!(applied, 1);
        assert_eq!(
            ops,
            [
                ImageOp::DecodeWindow {
                    channels: Some(3),
                    height: 4,
                    width: 5,
                    random: false,
                    flip: Some(0.5)
                },
                ImageOp::ToUnitF32
            ]
        );
        let (ops, _) = optimized(vec![
            ImageOp::Decode { channels: None },
            ImageOp::RandomCrop {
                height: 4,
                width: 5,
            },
        ]);
        assert_eq!(ops.len(), 1);
    }

    #[test]
    fn other_op_lists_are_left_as_written() {
        for ops in [
            vec![ImageOp::Decode { channels: Some(3) }, ImageOp::ToUnitF32],
            vec![
                ImageOp::Decode { channels: Some(3) },
                ImageOp::Resize {
                    height: 4,
                    width: 4,
                    method: Resample::Bilinear,
                },
                ImageOp::RandomCrop {
                    height: 2,
                    width: 2,
                },
            ],
        ] {
            let (got, applied) = optimized(ops.clone());
            assert_eq!((got, applied), (ops, 0));
        }
    }
}
