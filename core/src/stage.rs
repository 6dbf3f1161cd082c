//! The stage trait: what every node of a pipeline implements.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::plan::PlanNode;
use crate::run::{BuildContext, Input, discard};
use crate::stream::BoxStream;

/// A stage of a pipeline: the definition (usually a serde `*Spec` of what the user wrote)
/// that [`Stage::build`] turns into a running [`BoxStream`] for one epoch.
///
/// `name`, `params` and `build` are required; the hooks have defaults. A stage kind that
/// pipeline files can name is registered once in [`crate::registry`].
pub trait Stage: Any + Send + Sync + fmt::Debug {
    /// The stage's kind, e.g. `"map"`.
    fn name(&self) -> &'static str;

    /// The name stats, errors and `explain` show for this stage. Default: [`Stage::name`];
    /// a stage running user code may name that code (e.g. `plugin:gaussian_noise`).
    fn display_name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.name())
    }

    /// The stage's parameters, as data: `explain` prints them and fingerprints (disk
    /// caches, checkpoints) hash them, so they must hold everything that changes the
    /// stage's output. For a serde spec: `Params::of(self)`.
    fn params(&self) -> Params;

    /// The parameters that tune how the stage runs without changing a deterministic
    /// stage's elements (thread counts, buffer sizes): checkpoint fingerprints leave them
    /// out so a run resumes with other ones. Default: `num_parallel`.
    fn tuning_params(&self) -> &'static [&'static str] {
        &["num_parallel"]
    }

    /// Checks the parameters (a batch size of 0, a probability outside [0, 1], ...).
    /// Every front end calls it: pipeline files before anything runs (with the line and
    /// column of the key), the Rust API when the pipeline is built.
    fn validate(&self) -> Result<(), Invalid> {
        Ok(())
    }

    /// How many inputs the stage takes, checked when the pipeline is built. Default: any
    /// number (the stage checks when it is built).
    fn arity(&self) -> Arity {
        Arity::Any
    }

    /// Checks that the stage can run on `inputs` (in the plan that runs), saying what it
    /// needs when it cannot: refused when the pipeline is built, before any element.
    fn check_inputs(&self, inputs: &[Arc<PlanNode>]) -> Result<(), String> {
        let _ = inputs;
        Ok(())
    }

    /// Starts the stage for one epoch over its inputs (opened or not, as it needs).
    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream>;

    /// True (the default) when the stage does its work inside `next` on the consumer's
    /// thread; stages with worker threads return false and record their own busy time.
    fn runs_inline(&self) -> bool {
        true
    }

    /// True when the stage's own work runs on several threads (a parallel `map`,
    /// `image_ops`'s workers or a batch's row threads): they keep the CPUs busy, so an
    /// `interleave` feeding it starts reading on the consumer's thread
    /// ([`ReadingThreadsStart`](crate::optimize::ReadingThreadsStart)). Default false.
    fn computes_in_parallel(&self) -> bool {
        false
    }

    /// Starts the stage for one epoch after its first `skip` outputs, returning the stream
    /// and how many outputs were skipped (fewer than `skip` only when the epoch ended
    /// first). Resuming from a [`Checkpoint`](crate::Checkpoint) uses it.
    ///
    /// The default builds the stage and pulls and drops `skip` outputs, which is right for
    /// every stage. Stages whose output count maps to their inputs' without running their
    /// work override it to fast-forward their inputs instead: a 1:1 map skips the same
    /// number of inputs without calling its function, a batch `skip × batch_size`, a source
    /// seeks. Inputs are fast-forwarded before the stage starts threads that pull from them.
    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        let mut stream = self.build(inputs, ctx)?;
        let skipped = discard(&mut stream, skip)?;
        Ok((stream, skipped))
    }

    /// Whether the order of the stage's output is a function of its input (true by
    /// default). A stage that hands out results as threads finish (`deterministic =
    /// false`) returns false, and a pipeline holding one cannot be checkpointed.
    fn order_deterministic(&self) -> bool {
        true
    }

    /// For elastic checkpoints ([`crate::elastic`]): `Ok` when every output of the stage
    /// carries the records of the inputs it was made of ([`Element::units`]: a 1:1 stage
    /// keeps them, a batch joins its rows', a split gives each part its share) and the
    /// records of inputs it drops are reported done ([`BuildContext::dropped`]); `Err(why)`
    /// when it changes what an epoch holds per host (`take`, `repeat`) or its outputs cannot
    /// be traced to records. Only stages above the pipeline's unit points (where records
    /// enter it) are asked. Default: `Err` (a stage must say it does).
    fn elastic(&self) -> std::result::Result<(), Cow<'static, str>> {
        Err(Cow::Borrowed(
            "it does not say that it keeps the records of its inputs on its outputs (Stage::elastic)",
        ))
    }

    /// For a stage that reads the files its input names, one after the other (a record
    /// reader over a file list): how to read one of them as a dataset of its own. Then
    /// `interleave` reads several at once ([`crate::optimize::FilesToInterleave`]).
    fn file_reader(&self) -> Option<OpenFn> {
        None
    }

    /// Whether keeping one shard of this stage's output can be done by keeping that shard
    /// of its input instead (the files of a file reader): `shard` is then pushed below it
    /// ([`crate::optimize::ShardPushdown`]), so each shard reads only its own files.
    fn shards_by_input(&self) -> bool {
        false
    }
}

/// Opens the dataset an element stands for (a file's records; in general, the
/// sub-dataset of `interleave_with`).
pub type OpenFn = Arc<dyn Fn(&Element) -> Result<Dataset> + Send + Sync>;

/// How many inputs a stage takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Any number.
    Any,
    /// None: a source.
    None,
    /// Exactly one.
    One,
    /// Exactly this many.
    Exactly(usize),
    /// At least this many.
    AtLeast(usize),
}

impl Arity {
    /// Whether `n` inputs fit.
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Any => true,
            Arity::None => n == 0,
            Arity::One => n == 1,
            Arity::Exactly(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Any => f.write_str("any number of inputs"),
            Arity::None => f.write_str("no input"),
            Arity::One => f.write_str("one input"),
            Arity::Exactly(k) => write!(f, "{k} inputs"),
            Arity::AtLeast(k) => write!(f, "at least {k} input{}", if *k == 1 { "" } else { "s" }),
        }
    }
}
