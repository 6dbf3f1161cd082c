//! Plans: the graph of stages a [`Dataset`](crate::Dataset) is.
//!
//! Builder methods and pipeline files only append [`PlanNode`]s: the plan *as written*.
//! The [optimizer](crate::optimize) rewrites it with named rules into the plan that runs
//! (each rewritten node remembers the node it came from, its [`origin`](PlanNode::origin)),
//! and the [runner](crate::PipelineIter) starts one stream per node of that plan.
//!
//! Stages are numbered in the plan that runs, inputs before the stages that consume them:
//! the number names the stage in stats, errors and `explain` (`batch#5`), and keys its
//! random streams.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use sha2::Digest;

use crate::stage::Stage;
use crate::stages::shard::ShardSpec;

/// One node of a plan: a stage and its inputs. Immutable and shared: plans that differ
/// only above a node share it.
#[derive(Debug)]
pub struct PlanNode {
    stage: Arc<dyn Stage>,
    inputs: Vec<Arc<PlanNode>>,
    /// The node of the plan as written that this one was rewritten from (`None`: written
    /// so, or made by a rewrite without a counterpart).
    origin: Option<Arc<PlanNode>>,
}

impl PlanNode {
    /// A node running `stage` over `inputs`.
    pub fn new(stage: Arc<dyn Stage>, inputs: Vec<Arc<PlanNode>>) -> Arc<PlanNode> {
        Arc::new(PlanNode {
            stage,
            inputs,
            origin: None,
        })
    }

    /// A node that replaces `self` in a rewrite: `stage` over `inputs`, remembering the
    /// node as written that `self` stands for.
    pub fn rewritten(
        self: &Arc<Self>,
        stage: Arc<dyn Stage>,
        inputs: Vec<Arc<PlanNode>>,
    ) -> Arc<PlanNode> {
        Arc::new(PlanNode {
            stage,
            inputs,
            origin: Some(self.written()),
        })
    }

    /// This node over other inputs (same stage and origin).
    pub fn with_inputs(self: &Arc<Self>, inputs: Vec<Arc<PlanNode>>) -> Arc<PlanNode> {
        Arc::new(PlanNode {
            stage: Arc::clone(&self.stage),
            inputs,
            origin: self.origin.clone(),
        })
    }

    /// The stage.
    pub fn stage(&self) -> &Arc<dyn Stage> {
        &self.stage
    }

    /// The stage as a `T`, if it is one.
    pub fn stage_as<T: Stage>(&self) -> Option<&T> {
        let any: &dyn std::any::Any = self.stage.as_ref();
        any.downcast_ref::<T>()
    }

    /// The inputs.
    pub fn inputs(&self) -> &[Arc<PlanNode>] {
        &self.inputs
    }

    /// The node as written this one was rewritten from, if it was.
    pub fn origin(&self) -> Option<&Arc<PlanNode>> {
        self.origin.as_ref()
    }

    /// The node as written this one stands for: its origin, or itself.
    pub fn written(self: &Arc<Self>) -> Arc<PlanNode> {
        self.origin.clone().unwrap_or_else(|| Arc::clone(self))
    }

    /// Identity of the node (plans share nodes; a shared node is one stage).
    pub(crate) fn key(&self) -> usize {
        self as *const PlanNode as usize
    }

    /// A fingerprint of the plan up to this node as written: changes whenever a stage
    /// or parameter changes (SHA-256 over each stage's kind and [`Params`], inputs
    /// included). Disk caches are keyed by it.
    ///
    /// [`Params`]: crate::Params
    pub fn fingerprint(self: &Arc<Self>) -> String {
        fingerprint(&self.written(), Hashed::All, &mut sha2::Sha256::new())
    }

    /// [`PlanNode::fingerprint`] without the settings that do not change a deterministic
    /// stage's elements ([`Stage::tuning_params`]: thread counts, buffer sizes), so a
    /// checkpoint can be resumed with other ones.
    pub fn resume_fingerprint(self: &Arc<Self>) -> String {
        fingerprint(&self.written(), Hashed::Resume, &mut sha2::Sha256::new())
    }
}

/// What a fingerprint hashes of each stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hashed {
    /// Every parameter.
    All,
    /// Without tuning parameters ([`Stage::tuning_params`]).
    Resume,
    /// Without tuning parameters, `shard` stages and a global shuffle's folded shard: what
    /// the hosts of a job share whatever their number (elastic checkpoints).
    WithoutShards,
}

/// The fingerprint of the plan up to `node` as written (inputs through their origins), as
/// `hashed` says, hashed into `h` (which may hold a prefix of its own).
pub(crate) fn fingerprint(node: &PlanNode, hashed: Hashed, h: &mut sha2::Sha256) -> String {
    fn walk(node: &PlanNode, hashed: Hashed, h: &mut sha2::Sha256) {
        if hashed == Hashed::WithoutShards
            && node.stage_as::<ShardSpec>().is_some()
            && let [input] = node.inputs()
        {
            return walk(
                input.origin().map_or(input.as_ref(), |o| o.as_ref()),
                hashed,
                h,
            );
        }
        let stage = node.stage();
        let params = match hashed {
            Hashed::All => stage.params(),
            Hashed::Resume => stage.params().without(stage.tuning_params()),
            Hashed::WithoutShards => stage
                .params()
                .without(stage.tuning_params())
                .without(&["shard"]),
        };
        h.update(stage.name().as_bytes());
        h.update([0]);
        h.update(params.canonical().as_bytes());
        h.update([0]);
        for input in node.inputs() {
            h.update(b"(");
            walk(
                input.origin().map_or(input.as_ref(), |o| o.as_ref()),
                hashed,
                h,
            );
            h.update(b")");
        }
    }
    walk(node, hashed, h);
    h.clone()
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `node`'s elements name files (a file list, possibly sharded, shuffled, taken
/// from, skipped into or repeated): what a file reader needs as its input.
pub fn yields_file_names(node: &PlanNode) -> bool {
    match node.stage().name() {
        "files" => true,
        "shard" | "shuffle" | "take" | "skip" | "repeat" => {
            node.inputs().first().is_some_and(|i| yields_file_names(i))
        }
        _ => false,
    }
}

/// The check of a stage that reads the files its input names (see [`yields_file_names`]).
pub(crate) fn check_file_list_input(kind: &str, inputs: &[Arc<PlanNode>]) -> Result<(), String> {
    match inputs {
        [input] if yields_file_names(input) => Ok(()),
        [input] => Err(format!(
            "{kind} reads the files its input names (a file list, such as Dataset::files); \
             its input here is `{}`",
            input.stage().display_name()
        )),
        _ => Err(format!(
            "{kind} takes one input, a file list, got {}",
            inputs.len()
        )),
    }
}

/// Stage numbers: inputs before the stages that consume them (post-order), a shared node
/// once. Keyed by [`PlanNode::key`].
pub(crate) fn number(root: &Arc<PlanNode>) -> HashMap<usize, usize> {
    fn walk(node: &PlanNode, out: &mut HashMap<usize, usize>) {
        if out.contains_key(&node.key()) {
            return;
        }
        for input in node.inputs() {
            walk(input, out);
        }
        let next = out.len();
        out.insert(node.key(), next);
    }
    let mut out = HashMap::new();
    walk(root, &mut out);
    out
}

/// Every node of the plan, each once, inputs first.
pub(crate) fn nodes(root: &Arc<PlanNode>) -> Vec<Arc<PlanNode>> {
    fn walk(node: &Arc<PlanNode>, seen: &mut HashMap<usize, ()>, out: &mut Vec<Arc<PlanNode>>) {
        if seen.insert(node.key(), ()).is_some() {
            return;
        }
        for input in node.inputs() {
            walk(input, seen, out);
        }
        out.push(Arc::clone(node));
    }
    let mut out = Vec::new();
    walk(root, &mut HashMap::new(), &mut out);
    out
}

/// The plan as a tree, one stage per line, the output at the top:
///
/// ```text
/// #3 batch  batch_size=8 deterministic=true drop_remainder=false num_parallel="sequential"
/// └─ #2 parse_example  features={...} input="record"
///    └─ ...
/// ```
///
/// With `numbers`, each stage is prefixed with its number (as stats and errors name it).
pub(crate) fn render(root: &Arc<PlanNode>, numbers: Option<&HashMap<usize, usize>>) -> String {
    fn walk(
        node: &PlanNode,
        numbers: Option<&HashMap<usize, usize>>,
        prefix: &str,
        branch: &str,
        out: &mut String,
    ) {
        let _ = write!(out, "{prefix}{branch}");
        if let Some(n) = numbers.and_then(|m| m.get(&node.key())) {
            let _ = write!(out, "#{n} ");
        }
        let stage = node.stage();
        let _ = write!(out, "{}", stage.display_name());
        let params = stage.params();
        if params.iter().next().is_some() {
            let _ = write!(out, "  {params}");
        }
        out.push('\n');
        let child_prefix = match branch {
            "" => prefix.to_string(),
            "└─ " => format!("{prefix}   "),
            _ => format!("{prefix}│  "),
        };
        let n = node.inputs().len();
        for (i, input) in node.inputs().iter().enumerate() {
            let branch = if i + 1 == n { "└─ " } else { "├─ " };
            walk(input, numbers, &child_prefix, branch, out);
        }
    }
    let mut out = String::new();
    walk(root, numbers, "", "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn a_file_reader_over_something_else_is_refused_when_built() {
        let d = Dataset::range(0, 3).read_tfrecord(TfRecordSpec::default());
        let err = d.iter().unwrap_err().to_string();
        assert!(
            err.contains("tfrecord#1") && err.contains("its input here is `range`"),
            "{err}"
        );
        // A sharded, shuffled file list is still a file list.
        let files = Dataset::file_list(vec!["a".into(), "b".into()]);
        let ok = files
            .shard(2, 0)
            .shuffle(2)
            .read_tfrecord(TfRecordSpec::default());
        assert!(ok.explain().is_ok());
    }

    #[test]
    fn fingerprints_follow_parameters_not_tuning() {
        let a = Dataset::range(0, 8).batch_with(BatchSpec::new(2).num_parallel(2));
        let b = Dataset::range(0, 8).batch_with(BatchSpec::new(2).num_parallel(1));
        let c = Dataset::range(0, 8).batch(4);
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.resume_fingerprint(), b.resume_fingerprint());
        assert_ne!(a.resume_fingerprint(), c.resume_fingerprint());
        // Built the same way twice: the same fingerprint (structure, not addresses).
        let again = Dataset::range(0, 8).batch_with(BatchSpec::new(2).num_parallel(2));
        assert_eq!(a.fingerprint(), again.fingerprint());
    }
}
