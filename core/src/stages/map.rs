//! `map`: apply a Rust closure to each element, sequentially or on worker threads.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::element::Element;
use crate::error::Result;
use crate::executor::parallel::{ParallelStream, WorkFn, apply};
use crate::invalid::Invalid;
use crate::options::ErrorPolicy;
use crate::parallelism::NumParallel;
use crate::parallelism::check_num_parallel;
use crate::params::Params;
use crate::rng::ElementRng;
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// How a `map` (or `filter`) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MapSpec {
    /// Worker threads: sequential (default, on the consumer's thread), a number, or
    /// `auto` (the CPU budget).
    pub num_parallel: NumParallel,
    /// Keep the input order (default). `false` lets results out as they finish; the
    /// values are still reproducible (randomness is keyed by element id), only the order
    /// is not.
    pub deterministic: bool,
}

impl Default for MapSpec {
    fn default() -> Self {
        MapSpec {
            num_parallel: NumParallel::Sequential,
            deterministic: true,
        }
    }
}

impl MapSpec {
    /// `num_parallel` worker threads, deterministic order.
    pub fn parallel(num_parallel: impl Into<NumParallel>) -> Self {
        MapSpec {
            num_parallel: num_parallel.into(),
            deterministic: true,
        }
    }

    /// This spec with `deterministic`.
    pub fn deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }
}

/// The function of a map or filter stage. Receives the element and its RNG (keyed by
/// seed, epoch, stage and element id); `Ok(None)` drops the element.
pub(crate) type ElementFn =
    Arc<dyn Fn(Element, &mut ElementRng) -> Result<Option<Element>> + Send + Sync>;

/// A running `map` or `filter` definition: a spec and a function.
#[derive(Clone)]
pub(crate) struct MapStage {
    pub(crate) spec: MapSpec,
    pub(crate) f: ElementFn,
    pub(crate) kind: &'static str,
    pub(crate) label: String,
}

impl std::fmt::Debug for MapStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapStage")
            .field("kind", &self.kind)
            .field("spec", &self.spec)
            .field("fn", &self.label)
            .finish()
    }
}

impl MapStage {
    /// A map or filter stage.
    pub(crate) fn new(
        kind: &'static str,
        spec: MapSpec,
        f: ElementFn,
        label: impl Into<String>,
    ) -> Self {
        MapStage {
            spec,
            f,
            kind,
            label: label.into(),
        }
    }
}

impl Stage for MapStage {
    fn name(&self) -> &'static str {
        self.kind
    }

    fn params(&self) -> Params {
        // Closures cannot be inspected: their type names identify them (a changed closure
        // body keeps its name; give the stage a new label to invalidate caches).
        Params::of(&self.spec).with("fn", &self.label)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_num_parallel(self.kind, self.spec.num_parallel)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, self.kind)?.open()?;
        let key = ctx.stream_key();
        let f = Arc::clone(&self.f);
        let drops = ctx.clone();
        let work: WorkFn = Arc::new(move |mut e: Element| {
            let mut rng = key.element_rng(e.id());
            // The function's output keeps the element's records (whether it returns the
            // element or makes a new one); an element it drops has its records reported.
            let units = e.take_units();
            match f(e, &mut rng) {
                Ok(Some(mut out)) => {
                    out.set_units(units);
                    Ok(Some(out))
                }
                Ok(None) => {
                    drops.filtered(&units);
                    Ok(None)
                }
                Err(error) => {
                    if drops.error_policy() == ErrorPolicy::Skip {
                        drops.skipped(&units);
                    }
                    Err(error)
                }
            }
        });
        Ok(run_elementwise(upstream, work, self.spec, ctx))
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        if self.kind == "map" {
            // One output per input: skip inputs without calling the function.
            return crate::run::build_one_to_one(self, inputs, ctx, skip);
        }
        let mut stream = self.build(inputs, ctx)?;
        let skipped = crate::run::discard(&mut stream, skip)?;
        Ok((stream, skipped))
    }

    fn order_deterministic(&self) -> bool {
        self.spec.deterministic || self.spec.num_parallel == NumParallel::Sequential
    }

    fn runs_inline(&self) -> bool {
        self.spec.num_parallel == NumParallel::Sequential
    }

    fn computes_in_parallel(&self) -> bool {
        self.spec.num_parallel != NumParallel::Sequential
    }
}

/// Runs an element-wise function as `spec` says: on the consumer's thread (sequential) or on
/// worker threads within the CPU budget, in order when `deterministic`.
pub(crate) fn run_elementwise(
    upstream: BoxStream,
    f: WorkFn,
    spec: MapSpec,
    ctx: &BuildContext,
) -> BoxStream {
    match ctx.parallelism(spec.num_parallel) {
        (0, _) => Box::new(SequentialMap {
            upstream,
            f,
            ctx: ctx.clone(),
        }),
        workers => Box::new(ParallelStream::start(
            upstream,
            f,
            workers,
            spec.deterministic,
            ctx,
        )),
    }
}

/// Applies a function element by element on the consumer's thread, with the error policy.
struct SequentialMap {
    upstream: BoxStream,
    f: WorkFn,
    ctx: BuildContext,
}

impl ElementStream for SequentialMap {
    fn next(&mut self) -> Option<Result<Element>> {
        let upstream = &mut self.upstream;
        map_next(|| upstream.next(), &self.f, &self.ctx)
    }
}

/// The next output of `f` over the elements `pull` gives, on this thread, with `ctx`'s error
/// policy: upstream errors pass through, elements `f` drops or fails under skip are skipped.
pub(crate) fn map_next(
    mut pull: impl FnMut() -> Option<Result<Element>>,
    f: &WorkFn,
    ctx: &BuildContext,
) -> Option<Result<Element>> {
    loop {
        let element = match pull()? {
            Ok(e) => e,
            Err(e) => return Some(Err(e)),
        };
        // Under skip, a failed element's records are reported dropped.
        let units = (ctx.error_policy() == ErrorPolicy::Skip).then(|| element.units().clone());
        match apply(f, element, ctx) {
            Ok(Some(e)) => return Some(Ok(e)),
            Ok(None) => continue,
            Err(e) => match ctx.on_error(e) {
                Some(e) => return Some(Err(e)),
                None => {
                    if let Some(units) = &units {
                        ctx.skipped(units);
                    }
                    continue;
                }
            },
        }
    }
}
