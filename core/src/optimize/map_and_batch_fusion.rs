//! [`MapAndBatchFusion`]: `image_ops` then `batch` as one stage.

use std::sync::Arc;

use crate::error::Result;
use crate::options::Options;
use crate::plan::PlanNode;
use crate::stage::Stage;
use crate::stages::batch::BatchSpec;
use crate::stages::image_ops::ImageOpsSpec;
use crate::stages::image_ops_batch::FusedImageOpsBatch;

use super::Rule;

/// A `batch` whose input is an `image_ops` (with a deterministic order) becomes a
/// `FusedImageOpsBatch`: each batch's rows are decoded and augmented in parallel, straight
/// into the batch's buffer, instead of each image being made on its own and then copied
/// (tf.data's `map_and_batch_fusion`). The output is the same bits, errors and skips
/// included; stats still show both stages. Off when
/// [`Options::map_and_batch_fusion`](crate::Options::map_and_batch_fusion) is false.
#[derive(Debug, Clone, Copy, Default)]
pub struct MapAndBatchFusion;

impl Rule for MapAndBatchFusion {
    fn name(&self) -> &'static str {
        "map_and_batch_fusion"
    }

    fn rewrite(&self, node: &Arc<PlanNode>, options: &Options) -> Result<Option<Arc<PlanNode>>> {
        if !options.map_and_batch_fusion {
            return Ok(None);
        }
        let Some(batch) = node.stage_as::<BatchSpec>() else {
            return Ok(None);
        };
        let [ops] = node.inputs() else {
            return Ok(None);
        };
        match ops.stage_as::<ImageOpsSpec>() {
            Some(o) if o.order_deterministic() => {}
            _ => return Ok(None),
        }
        let fused = FusedImageOpsBatch { batch: *batch };
        Ok(Some(node.rewritten(Arc::new(fused), vec![Arc::clone(ops)])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::Optimizer;
    use crate::prelude::*;

    fn ops(deterministic: bool) -> ImageOpsSpec {
        let mut spec =
            ImageOpsSpec::new(vec![ImageOp::Decode { channels: Some(3) }]).num_parallel(2);
        spec.deterministic = deterministic;
        spec
    }

    fn rule_applies(d: &Dataset, options: &Options) -> bool {
        let o = Optimizer::new(vec![Box::new(MapAndBatchFusion)])
            .optimize(d.plan(), options)
            .unwrap();
        o.plan.stage_as::<FusedImageOpsBatch>().is_some()
    }

    #[test]
    fn batch_after_image_ops_is_fused_unless_turned_off_or_unordered() {
        let src = Dataset::range(0, 4);
        let on = Options::default();
        let off = Options::default().with_map_and_batch_fusion(false);
        assert!(rule_applies(&src.image_ops(ops(true)).batch(2), &on));
        assert!(!rule_applies(&src.image_ops(ops(true)).batch(2), &off));
        assert!(!rule_applies(&src.image_ops(ops(false)).batch(2), &on));
        assert!(!rule_applies(&src.batch(2), &on));
        // The fused stage keeps image_ops as its input (stats show both) and stands for
        // the batch as written.
        let d = src.image_ops(ops(true)).batch(2);
        let o = Optimizer::default().optimize(d.plan(), &on).unwrap();
        assert_eq!(o.plan.inputs()[0].stage().name(), "image_ops");
        assert_eq!(o.plan.fingerprint(), d.plan().fingerprint());
    }
}
