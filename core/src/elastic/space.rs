//! Unit points: where in a plan records are counted, and the stages above them.
//!
//! Walking down from the output, inputs in order, the first node on each path that is one
//! of these is a **unit point**, and its records form a **space** (numbered in the order the
//! walk finds them):
//!
//! - a record-level `shard` (one the optimizer left above its input): positions of its
//!   input's stream;
//! - a global shuffle: positions of its permutation;
//! - a file reader over a file list (`tfrecord`, an `interleave` of files): records of
//!   files, by file and index;
//! - any other source (no inputs: `range`, in-memory elements, a generator): positions of
//!   its stream.
//!
//! Every stage above a unit point must keep the records' identities ([`Stage::elastic`]);
//! stages below it may be anything deterministic (they run again the same way).

use std::collections::HashMap;
use std::sync::Arc;

use sha2::Digest;

use crate::plan::{Hashed, PlanNode, fingerprint, yields_file_names};
use crate::sources::files::FileList;
use crate::sources::global_shuffle::GlobalShuffleStage;
use crate::stage::Stage;
use crate::stages::shard::ShardSpec;

use super::progress::SpaceKind;
use super::run::Layout;

/// Where a unit point counts.
#[derive(Debug, Clone)]
pub(crate) enum PointAt {
    /// A record-level `shard`: positions of its input.
    Shard,
    /// A global shuffle: positions of its permutation.
    GlobalShuffle,
    /// A file reader: records of the files its input (`list`) names; `files` in the
    /// resolved list.
    Files { list: Arc<PlanNode>, files: u64 },
    /// A source: positions of its output.
    Source,
}

/// A unit point of a running plan (see the [module docs](self)).
#[derive(Debug, Clone)]
pub(crate) struct UnitPoint {
    pub(crate) node: Arc<PlanNode>,
    pub(crate) space: u16,
    pub(crate) kind: SpaceKind,
    pub(crate) at: PointAt,
    /// The kind and the pipeline up to the point, without `shard` stages.
    pub(crate) signature: String,
    /// A new epoch's lane of this host: records `residue`, `residue + modulus`, ... (for
    /// files: of each of its files, modulus 1).
    pub(crate) modulus: u64,
    pub(crate) residue: u64,
}

/// The unit points of the plan that runs, or why its records cannot be followed (a stage
/// above a unit point that does not keep them, named as stats name it).
pub(crate) fn unit_points(
    root: &Arc<PlanNode>,
    numbers: &HashMap<usize, usize>,
) -> Result<Vec<UnitPoint>, String> {
    let mut points = Vec::new();
    let mut seen = HashMap::new();
    walk(root, numbers, &mut points, &mut seen)?;
    Ok(points)
}

fn label(node: &PlanNode, numbers: &HashMap<usize, usize>) -> String {
    match numbers.get(&node.key()) {
        Some(n) => format!("{}#{n}", node.stage().display_name()),
        None => node.stage().display_name().into_owned(),
    }
}

fn walk(
    node: &Arc<PlanNode>,
    numbers: &HashMap<usize, usize>,
    points: &mut Vec<UnitPoint>,
    seen: &mut HashMap<usize, ()>,
) -> Result<(), String> {
    if seen.insert(node.key(), ()).is_some() {
        return Err(format!(
            "stage {} is read by two stages, so its records would be delivered twice",
            label(node, numbers)
        ));
    }
    let space = u16::try_from(points.len()).map_err(|_| "too many sources".to_string())?;
    let point = |kind, at, modulus, residue| UnitPoint {
        node: Arc::clone(node),
        space,
        kind,
        signature: signature(kind, node, &at),
        at,
        modulus,
        residue,
    };
    if let Some(shard) = node.stage_as::<ShardSpec>() {
        points.push(point(
            SpaceKind::Positions,
            PointAt::Shard,
            shard.num_shards,
            shard.index,
        ));
        return Ok(());
    }
    if let Some(global) = node.stage_as::<GlobalShuffleStage>() {
        let (n, i) = global.shard.unwrap_or((1, 0));
        points.push(point(SpaceKind::Permutation, PointAt::GlobalShuffle, n, i));
        return Ok(());
    }
    if let [list] = node.inputs()
        && node.stage().shards_by_input()
        && yields_file_names(list)
    {
        let files = list_len(list).ok_or_else(|| {
            format!(
                "the file list under {} is not a resolved list of files",
                label(node, numbers)
            )
        })?;
        let at = PointAt::Files {
            list: Arc::clone(list),
            files,
        };
        points.push(point(SpaceKind::Files, at, 1, 0));
        return Ok(());
    }
    if node.inputs().is_empty() {
        points.push(point(SpaceKind::Positions, PointAt::Source, 1, 0));
        return Ok(());
    }
    node.stage()
        .elastic()
        .map_err(|why| format!("stage {}: {why}", label(node, numbers)))?;
    for input in node.inputs() {
        walk(input, numbers, points, seen)?;
    }
    Ok(())
}

/// The number of files of the file list a file reader's input starts from.
fn list_len(node: &Arc<PlanNode>) -> Option<u64> {
    if let Some(list) = node.stage_as::<FileList>() {
        return Some(list.len() as u64);
    }
    match node.inputs() {
        [input] => list_len(input),
        _ => None,
    }
}

/// The node a file reader's input reads its names from with every `shard` on the way
/// skipped: the whole list of a new layout's hosts.
pub(crate) fn unsharded(node: &Arc<PlanNode>) -> Arc<PlanNode> {
    if node.stage_as::<ShardSpec>().is_some()
        && let [input] = node.inputs()
    {
        return unsharded(input);
    }
    Arc::clone(node)
}

/// What a unit point counts: its kind and a hash of the plan below it (the stream being
/// counted), `shard` stages and a global shuffle's shard left out.
fn signature(kind: SpaceKind, node: &Arc<PlanNode>, at: &PointAt) -> String {
    let counted = match at {
        PointAt::Shard => node.inputs().first().unwrap_or(node),
        _ => node,
    };
    let mut h = sha2::Sha256::new();
    h.update([kind.code()]);
    fingerprint(&counted.written(), Hashed::WithoutShards, &mut h)[..24].to_string()
}

/// A new epoch's [`Layout`] for the plan as written: its fingerprint without `shard`
/// stages, their `num_shards`, and this host's place; `Err` with the reason when the shard
/// stages disagree on the host's place.
pub(crate) fn layout_of(written: &Arc<PlanNode>) -> Result<Layout, (Layout, String)> {
    let (hosts, host, why) = match host_of(written) {
        Ok((n, i)) => (n, i, None),
        Err(why) => (1, 0, Some(why)),
    };
    let layout = Layout {
        fingerprint: fingerprint_without_shards(written),
        shards: layout(written),
        generation: 0,
        hosts,
        host,
    };
    match why {
        None => Ok(layout),
        Some(why) => Err((layout, why)),
    }
}

/// The resume fingerprint of the plan as written without its `shard` stages: what the
/// checkpoints of every host of a job share whatever the number of hosts.
pub(crate) fn fingerprint_without_shards(written: &Arc<PlanNode>) -> String {
    fingerprint(
        &written.written(),
        Hashed::WithoutShards,
        &mut sha2::Sha256::new(),
    )
}

/// `num_shards` of each `shard` stage of the plan as written, outputs first (inputs in
/// order).
pub(crate) fn layout(written: &Arc<PlanNode>) -> Vec<u64> {
    let mut out = Vec::new();
    each_shard(written, &mut |s| out.push(s.num_shards));
    out
}

/// This host's place, `(hosts, rank)`, from the plan's `shard` stages (which must agree):
/// `(1, 0)` without one.
pub(crate) fn host_of(written: &Arc<PlanNode>) -> Result<(u64, u64), String> {
    let mut found: Option<(u64, u64)> = None;
    let mut clash = None;
    each_shard(written, &mut |s| {
        let this = (s.num_shards, s.index);
        match found {
            None => found = Some(this),
            Some(f) if f != this => clash = Some((f, this)),
            _ => {}
        }
    });
    if let Some((a, b)) = clash {
        return Err(format!(
            "the pipeline's shard stages disagree on this host's place ({}/{} and {}/{}): an elastic resume needs one (hosts, rank)",
            a.1, a.0, b.1, b.0
        ));
    }
    Ok(found.unwrap_or((1, 0)))
}

fn each_shard(node: &Arc<PlanNode>, f: &mut impl FnMut(&ShardSpec)) {
    let mut seen = HashMap::new();
    fn go(node: &Arc<PlanNode>, seen: &mut HashMap<usize, ()>, f: &mut impl FnMut(&ShardSpec)) {
        if seen.insert(node.key(), ()).is_some() {
            return;
        }
        if let Some(s) = node.stage_as::<ShardSpec>() {
            f(s);
        }
        for input in node.inputs() {
            go(input, seen, f);
        }
    }
    go(node, &mut seen, f);
}

/// The plan as written with its `shard` stages set as in the run that started the epoch:
/// the `k`-th `shard` (outputs first) takes `layout[k]` shards (1 past the layout's end),
/// index 0. Optimized, it has that run's shape, so its unit points are that run's.
pub(crate) fn with_layout(written: &Arc<PlanNode>, layout: &[u64]) -> Arc<PlanNode> {
    let mut k = 0usize;
    let mut done: HashMap<usize, Arc<PlanNode>> = HashMap::new();
    fn go(
        node: &Arc<PlanNode>,
        layout: &[u64],
        k: &mut usize,
        done: &mut HashMap<usize, Arc<PlanNode>>,
    ) -> Arc<PlanNode> {
        if let Some(n) = done.get(&node.key()) {
            return Arc::clone(n);
        }
        // Outputs first: this node's shard number comes before its inputs'.
        let stage: Arc<dyn Stage> = match node.stage_as::<ShardSpec>() {
            Some(_) => {
                let n = layout.get(*k).copied().unwrap_or(1);
                *k += 1;
                Arc::new(ShardSpec {
                    num_shards: n.max(1),
                    index: 0,
                })
            }
            None => Arc::clone(node.stage()),
        };
        let inputs = node
            .inputs()
            .iter()
            .map(|i| go(i, layout, k, done))
            .collect();
        let out = PlanNode::new(stage, inputs);
        done.insert(node.key(), Arc::clone(&out));
        out
    }
    go(written, layout, &mut k, &mut done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::Optimizer;
    use crate::options::Options;
    use crate::plan::number;
    use crate::prelude::*;

    fn points(d: &Dataset) -> Result<Vec<UnitPoint>, String> {
        let plan = Optimizer::default()
            .optimize(d.plan(), &Options::default())
            .unwrap()
            .plan;
        unit_points(&plan, &number(&plan))
    }

    fn fixtures() -> String {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord").to_string()
    }

    #[test]
    fn sources_shards_and_file_readers_are_unit_points() {
        let d = Dataset::range(0, 10).shuffle(3).batch(2);
        let p = points(&d).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].kind, SpaceKind::Positions);
        assert!(matches!(p[0].at, PointAt::Source));

        let d = Dataset::range(0, 10).shard(3, 1).shuffle(3);
        let p = points(&d).unwrap();
        assert!(matches!(p[0].at, PointAt::Shard));
        assert_eq!((p[0].modulus, p[0].residue), (3, 1));
        // The same stream is counted with or without the shard.
        assert_eq!(
            p[0].signature,
            points(&Dataset::range(0, 10)).unwrap()[0].signature
        );

        let files = Dataset::tfrecord([format!("{}/images.tfrecord-*", fixtures())]).unwrap();
        let p = points(&files.shard(2, 0).interleave(InterleaveSpec::new(2))).unwrap();
        assert!(matches!(p[0].at, PointAt::Files { files: 4, .. }));
        assert_eq!(
            p[0].signature,
            points(&files.interleave(InterleaveSpec::new(2))).unwrap()[0].signature
        );

        let two = Dataset::zip(vec![Dataset::range(0, 3), Dataset::range(5, 8)]);
        assert_eq!(points(&two).unwrap().len(), 2);
    }

    #[test]
    fn stages_that_change_an_epoch_per_host_are_named() {
        let err = points(&Dataset::range(0, 10).take(5)).unwrap_err();
        assert!(err.starts_with("stage take#1"), "{err}");
        let err = points(&Dataset::range(0, 10).repeat(Some(2))).unwrap_err();
        assert!(err.contains("repeat"), "{err}");
    }

    #[test]
    fn layout_and_host_come_from_the_shard_stages() {
        let d = Dataset::range(0, 10).shard(4, 3).batch(2);
        assert_eq!(layout(d.plan()), vec![4]);
        assert_eq!(host_of(d.plan()).unwrap(), (4, 3));
        assert_eq!(host_of(Dataset::range(0, 1).plan()).unwrap(), (1, 0));
        let relaid = with_layout(d.plan(), &[2]);
        let s = relaid.inputs()[0].stage_as::<ShardSpec>().unwrap();
        assert_eq!((s.num_shards, s.index), (2, 0));
    }
}
