//! [`Input`]: an input of a stage, opened (and re-opened) by the stage as it needs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::plan::PlanNode;
use crate::stage::Stage;
use crate::stream::BoxStream;

use super::{BuildContext, RunShared, build_nested, build_node, build_node_with};

/// An input of a stage: a node of the running plan that can be opened (and, by `repeat`,
/// re-opened).
#[derive(Debug, Clone)]
pub struct Input {
    pub(crate) node: Arc<PlanNode>,
    pub(crate) shared: Arc<RunShared>,
    pub(crate) epoch: u64,
    /// Outputs to fast-forward past when opened (see [`Stage::build_from`]).
    pub(crate) skip: u64,
    /// How many were skipped at the last open.
    pub(crate) skipped: Arc<AtomicU64>,
    /// Inside a sub-dataset ([`BuildContext::open_dataset`]): the context of the stage
    /// running it, which its nodes are built with.
    pub(crate) nested: Option<BuildContext>,
}

impl Input {
    /// Opens the input for the current epoch.
    pub fn open(&self) -> Result<BoxStream> {
        self.open_epoch(self.epoch)
    }

    /// Opens the input for another epoch key (used by `repeat` for each repetition).
    pub fn open_epoch(&self, epoch: u64) -> Result<BoxStream> {
        let (stream, skipped) = match &self.nested {
            Some(ctx) => build_nested(&self.node, ctx, epoch, self.skip)?,
            None => build_node(&self.node, &self.shared, epoch, self.skip)?,
        };
        self.skipped.store(skipped, Ordering::Relaxed);
        Ok(stream)
    }

    /// Opens the input's node built by `build` instead of by its stage: `build` gets the
    /// node's inputs, its context (number, metrics, RNG key: the node's own) and the
    /// outputs to skip, and returns the stream and how many it skipped. Stats see the node
    /// as usual, its work timed on the consumer's thread. For fusions: a fused `batch`
    /// runs the `image_ops` before it on whole batches.
    pub(crate) fn open_with(
        &self,
        build: impl FnOnce(&[Input], &BuildContext, u64) -> Result<(BoxStream, u64)>,
    ) -> Result<BoxStream> {
        let (stream, skipped) = match &self.nested {
            Some(ctx) => {
                let inputs = super::nested_inputs(&self.node, ctx, self.epoch);
                build(&inputs, ctx, self.skip)?
            }
            None => build_node_with(&self.node, &self.shared, self.epoch, self.skip, true, build)?,
        };
        self.skipped.store(skipped, Ordering::Relaxed);
        Ok(stream)
    }

    /// This input, opening after its first `n` outputs (for [`Stage::build_from`]).
    pub fn skipping(&self, n: u64) -> Input {
        Input {
            skip: n,
            skipped: Arc::default(),
            ..self.clone()
        }
    }

    /// How many outputs the last open skipped (fewer than asked only if the input ended).
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// The input's stage.
    pub fn stage(&self) -> &Arc<dyn Stage> {
        self.node.stage()
    }

    /// The input's node in the running plan.
    pub fn node(&self) -> &Arc<PlanNode> {
        &self.node
    }

    /// The fingerprint of the plan up to this input, as written (see
    /// [`PlanNode::fingerprint`]); disk caches are named by it.
    pub fn fingerprint(&self) -> String {
        self.node.fingerprint()
    }

    /// The epoch this input opens with by default.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}
