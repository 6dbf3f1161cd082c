//! The runner: checks the plan that runs and starts one stream per node for an epoch.
//!
//! [`Dataset::iter`](crate::Dataset::iter) optimizes the plan as written (once per
//! dataset), checks every stage's parameters and inputs ([`check`]), numbers the stages
//! and builds the top node, whose stage opens its [`Input`]s as it needs them. Every
//! stream is wrapped for statistics; dropping the top stream stops and joins every thread.

mod context;
mod input;
mod iter;
pub(crate) mod kept_mappings;
pub(crate) mod ledger;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use context::BuildContext;
pub use input::Input;
pub use iter::{Canceller, PipelineIter};
pub use ledger::{ByteLedger, MemoryUsage};

use crate::autotune::Autotuner;
use crate::elastic::run::{ElasticRun, FileUnits, PositionUnits};
use crate::elastic::space::PointAt;
use crate::error::{Error, Result};
use crate::executor::shutdown::Shutdown;
use crate::metrics::StatsRegistry;
use crate::options::{ErrorPolicy, Options};
use crate::plan::{self, PlanNode};
use crate::stage::Stage;
use crate::stream::{BoxStream, Instrumented};

pub(crate) use crate::plan::number;

/// What is shared by every stage of one running pipeline.
#[derive(Debug)]
pub(crate) struct RunShared {
    pub(crate) seed: u64,
    pub(crate) options: Options,
    pub(crate) shutdown: Shutdown,
    pub(crate) stats: Arc<StatsRegistry>,
    /// The run's autotuner (knobs of `auto` settings).
    pub(crate) autotune: Arc<Autotuner>,
    /// Stage number of each node, keyed by [`PlanNode::key`].
    pub(crate) indices: HashMap<usize, usize>,
    /// The threads that run the rows of a batch in parallel (`image_ops` on batches),
    /// `cpu_budget` of them, started on first use and ended with the run.
    pub(crate) rows: OnceLock<Option<Arc<rayon::ThreadPool>>>,
    /// The records of this epoch, as elastic checkpoints follow them (`None`: not followed,
    /// as in a stage's own test run).
    pub(crate) elastic: Option<Arc<ElasticRun>>,
    /// The bytes the run's buffers hold, against `options.ram_budget` (see [`ledger`]).
    pub(crate) ledger: Arc<ByteLedger>,
    /// The run's tracer, if it is traced (see [`crate::observe`]).
    pub(crate) tracer: Option<crate::observe::Tracer>,
    /// Where skips are reported.
    pub(crate) observe: crate::observe::Observe,
    /// Mapped files kept for the passes of a `repeat` (`None`: the plan reads each once).
    pub(crate) kept_mappings: Option<kept_mappings::KeptMappings>,
}

impl RunShared {
    /// The run's pool for a batch's rows ([`RunShared::rows`]); `None` if its threads could
    /// not be started (the rows then run on rayon's global pool).
    pub(crate) fn row_pool(&self) -> Option<Arc<rayon::ThreadPool>> {
        self.rows
            .get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(self.options.cpu_budget.max(1))
                    .thread_name(|i| format!("sluice-rows-{i}"))
                    .build()
                    .map_err(|e| tracing::warn!(%e, "no pool for batch rows"))
                    .ok()
                    .map(Arc::new)
            })
            .clone()
    }
}

/// Checks the plan that runs before anything starts: every stage's parameters
/// ([`Stage::validate`]), its number of inputs ([`Stage::arity`]) and what it needs of them
/// ([`Stage::check_inputs`]). The error names the stage as stats and errors do.
pub(crate) fn check(root: &Arc<PlanNode>, numbers: &HashMap<usize, usize>) -> Result<()> {
    for node in plan::nodes(root) {
        let stage = node.stage();
        let label = || format!("{}#{}", stage.display_name(), numbers[&node.key()]);
        if let Err(invalid) = stage.validate() {
            return Err(Error::Stage {
                stage: label(),
                element: None,
                provenance: None,
                error: Box::new(Error::invalid(invalid.to_string())),
            });
        }
        let n = node.inputs().len();
        if !stage.arity().accepts(n) {
            return Err(Error::Stage {
                stage: label(),
                element: None,
                provenance: None,
                error: Box::new(Error::invalid(format!(
                    "{} takes {}, got {n}",
                    stage.name(),
                    stage.arity()
                ))),
            });
        }
        if let Err(message) = stage.check_inputs(node.inputs()) {
            return Err(Error::Stage {
                stage: label(),
                element: None,
                provenance: None,
                error: Box::new(Error::invalid(message)),
            });
        }
    }
    Ok(())
}

/// Builds `node` for one epoch after its first `skip` outputs (see [`Stage::build_from`]).
pub(crate) fn build_node(
    node: &Arc<PlanNode>,
    shared: &Arc<RunShared>,
    epoch: u64,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    let stage = node.stage();
    build_node_with(
        node,
        shared,
        epoch,
        skip,
        stage.runs_inline(),
        |inputs, ctx, skip| build_stage(stage.as_ref(), inputs, ctx, skip),
    )
}

/// `stage` built after its first `skip` outputs.
fn build_stage(
    stage: &dyn Stage,
    inputs: &[Input],
    ctx: &BuildContext,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    if skip == 0 {
        Ok((stage.build(inputs, ctx)?, 0))
    } else {
        stage.build_from(inputs, ctx, skip)
    }
}

/// [`build_node`] with the stream made by `build` (see [`Input::open_with`]); `inline`: the
/// stream does its work inside `next` on the consumer's thread.
fn build_node_with(
    node: &Arc<PlanNode>,
    shared: &Arc<RunShared>,
    epoch: u64,
    skip: u64,
    inline: bool,
    build: impl FnOnce(&[Input], &BuildContext, u64) -> Result<(BoxStream, u64)>,
) -> Result<(BoxStream, u64)> {
    let stage = node.stage();
    let index = *shared.indices.get(&node.key()).ok_or_else(|| {
        Error::internal(format!(
            "stage {} is not in the running plan",
            stage.display_name()
        ))
    })?;
    let input_indices = node
        .inputs()
        .iter()
        .filter_map(|d| shared.indices.get(&d.key()).copied())
        .collect();
    let name: Arc<str> = Arc::from(stage.display_name().as_ref());
    let metrics = shared.stats.register(index, &name, input_indices);
    let tracking = shared.elastic.as_ref().and_then(|e| e.tracking());
    let point = tracking.and_then(|t| t.point(node.key())).cloned();
    let ctx = BuildContext {
        shared: Arc::clone(shared),
        epoch,
        index,
        name,
        metrics: Arc::clone(&metrics),
        point: point.clone(),
    };
    let inputs: Vec<Input> = node
        .inputs()
        .iter()
        .map(|d| Input {
            node: Arc::clone(d),
            shared: Arc::clone(shared),
            epoch,
            skip: 0,
            skipped: Arc::default(),
            nested: None,
        })
        .collect();
    // The file list of a space of files is read whole here: a new epoch's files are this
    // host's lanes; a resumed one reads the files it holds records of.
    if let Some(space) = tracking.and_then(|t| t.list_space(node.key())) {
        let t = tracking.expect("a list space is tracked");
        let stream = t.read_list(space, node, |n| {
            if Arc::ptr_eq(n, node) {
                build(&inputs, &ctx, 0).map(|(s, _)| s)
            } else {
                build_node(n, shared, epoch, 0).map(|(s, _)| s)
            }
        })?;
        let mut stream: BoxStream = stream;
        let skipped = discard(&mut stream, skip)?;
        return Ok((
            Box::new(Instrumented::new(
                stream,
                metrics,
                inline,
                ctx.stage_tracer(),
            )),
            skipped,
        ));
    }
    let (inner, skipped) = match &point {
        None => build(&inputs, &ctx, skip)?,
        Some(point) => {
            let run = Arc::clone(shared.elastic.as_ref().expect("a point is tracked"));
            match &point.at {
                PointAt::GlobalShuffle => build(&inputs, &ctx, skip)?,
                PointAt::Files { .. } => {
                    let (s, skipped) = build(&inputs, &ctx, skip)?;
                    let s: BoxStream = Box::new(FileUnits {
                        upstream: s,
                        point: Arc::clone(point),
                        run,
                    });
                    (s, skipped)
                }
                PointAt::Shard => {
                    // The shard's own rule gives way to the lanes: its input's positions
                    // are counted here, from the first one this host reads.
                    let input = crate::stages::single_input(&inputs, "shard")?;
                    let first = point.first_position();
                    let opened = if first > 0 {
                        input.skipping(first)
                    } else {
                        input.clone()
                    };
                    let upstream = opened.open()?;
                    let mut s: BoxStream = Box::new(PositionUnits {
                        upstream,
                        next: opened.skipped(),
                        point: Arc::clone(point),
                        run,
                        ended: false,
                    });
                    let skipped = discard(&mut s, skip)?;
                    (s, skipped)
                }
                PointAt::Source => {
                    let first = point.first_position();
                    let (upstream, at) = if first > 0 {
                        build(&inputs, &ctx, first)?
                    } else {
                        (build(&inputs, &ctx, 0)?.0, 0)
                    };
                    let mut s: BoxStream = Box::new(PositionUnits {
                        upstream,
                        next: at,
                        point: Arc::clone(point),
                        run,
                        ended: false,
                    });
                    let skipped = discard(&mut s, skip)?;
                    (s, skipped)
                }
            }
        }
    };
    Ok((
        Box::new(Instrumented::new(
            inner,
            metrics,
            inline,
            ctx.stage_tracer(),
        )),
        skipped,
    ))
}

/// The inputs of a node of a sub-dataset run inside the stage of `ctx`.
fn nested_inputs(node: &Arc<PlanNode>, ctx: &BuildContext, epoch: u64) -> Vec<Input> {
    node.inputs()
        .iter()
        .map(|d| Input {
            node: Arc::clone(d),
            shared: Arc::clone(&ctx.shared),
            epoch,
            skip: 0,
            skipped: Arc::default(),
            nested: Some(ctx.clone()),
        })
        .collect()
}

/// Builds a node of a sub-dataset inside the stage of `ctx` (see
/// [`BuildContext::open_dataset`]): with that stage's context, not instrumented on its
/// own (its work is the running stage's).
fn build_nested(
    node: &Arc<PlanNode>,
    ctx: &BuildContext,
    epoch: u64,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    let ctx = BuildContext {
        epoch,
        point: None,
        ..ctx.clone()
    };
    let inputs = nested_inputs(node, &ctx, epoch);
    build_stage(node.stage().as_ref(), &inputs, &ctx, skip)
}

/// Pulls and drops up to `n` elements; returns how many there were. An error is returned:
/// an uninterrupted run would have ended with it before the position being skipped to.
pub(crate) fn discard(stream: &mut BoxStream, n: u64) -> Result<u64> {
    let mut k = 0;
    while k < n {
        match stream.next() {
            Some(Ok(_)) => {
                ledger::settle();
                k += 1
            }
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    Ok(k)
}

/// [`Stage::build_from`] for a stage with one output per input (under the fail policy):
/// its inputs skip `skip` elements, unread, and the stage is built over them.
pub(crate) fn build_one_to_one(
    stage: &dyn Stage,
    inputs: &[Input],
    ctx: &BuildContext,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    if ctx.error_policy() != ErrorPolicy::Fail {
        // Skipped failures change the count: replay.
        let mut stream = stage.build(inputs, ctx)?;
        let skipped = discard(&mut stream, skip)?;
        return Ok((stream, skipped));
    }
    let skipping: Vec<Input> = inputs.iter().map(|i| i.skipping(skip)).collect();
    let stream = stage.build(&skipping, ctx)?;
    let skipped = skipping.iter().map(Input::skipped).min().unwrap_or(0);
    Ok((stream, skipped))
}
