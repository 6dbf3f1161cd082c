//! `map_chunks`: a function over chunks of consecutive elements, whose outputs each name the
//! input they come from: a map, a filter or a flat map that pays its per-call cost once per
//! chunk. Plugins run through it (one plugin call per chunk).
//!
//! Output ids: an input with exactly one output keeps its id and provenance; an input with
//! `k != 1` outputs gives them the ids `id.child(0..k)` (and its provenance). Chunks run
//! sequentially or on worker threads, in order when `deterministic`. An error fails the
//! whole chunk (under `ErrorPolicy::Skip` the chunk's elements are dropped, and each of
//! them is counted as skipped). An error from upstream ends the chunk being gathered: the inputs
//! before it are processed and their outputs come first, then the error, as with `map`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::elastic::Units;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::parallel::{ParallelStream, Source, WorkFn, apply};
use crate::invalid::Invalid;
use crate::parallelism::NumParallel;
use crate::parallelism::check_num_parallel;
use crate::params::Params;
use crate::rng::ElementRng;
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// How a `map_chunks` stage runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MapChunksSpec {
    /// Elements per call (default 64).
    pub chunk_size: usize,
    /// Worker threads: sequential (default), a number, or `auto`.
    pub num_parallel: NumParallel,
    /// Keep the input order (default).
    pub deterministic: bool,
}

impl Default for MapChunksSpec {
    fn default() -> Self {
        MapChunksSpec {
            chunk_size: 64,
            num_parallel: NumParallel::Sequential,
            deterministic: true,
        }
    }
}

impl MapChunksSpec {
    /// Chunks of `chunk_size`, sequential.
    pub fn new(chunk_size: usize) -> Self {
        MapChunksSpec {
            chunk_size,
            ..MapChunksSpec::default()
        }
    }

    /// With `num_parallel` worker threads.
    pub fn num_parallel(mut self, num_parallel: impl Into<NumParallel>) -> Self {
        self.num_parallel = num_parallel.into();
        self
    }

    /// With `deterministic`.
    pub fn deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }
}

/// The function of a `map_chunks` stage: a chunk of elements and one RNG per element (keyed
/// by seed, epoch, stage and element id) in; the outputs out, in order, each with the index
/// (in the chunk) of its input. Indices must not decrease.
pub type ChunkFn =
    Arc<dyn Fn(Vec<Element>, &mut [ElementRng]) -> Result<Vec<(usize, Element)>> + Send + Sync>;

/// A running `map_chunks` definition: a spec, a function, a label for fingerprints, and
/// optionally the name stats show for it.
#[derive(Clone)]
pub struct MapChunksStage {
    spec: MapChunksSpec,
    f: ChunkFn,
    label: String,
    display_name: Option<String>,
    /// The function gives exactly one output per input, each depending only on its input
    /// and its RNG ([`MapChunksStage::one_to_one`]).
    one_to_one: bool,
}

impl std::fmt::Debug for MapChunksStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapChunksStage")
            .field("spec", &self.spec)
            .field("label", &self.label)
            .field("display_name", &self.display_name)
            .field("one_to_one", &self.one_to_one)
            .finish()
    }
}

impl MapChunksStage {
    /// A stage running `f` as `spec` says; `label` names the function in fingerprints.
    pub fn new(spec: MapChunksSpec, f: ChunkFn, label: impl Into<String>) -> Self {
        MapChunksStage {
            spec,
            f,
            label: label.into(),
            display_name: None,
            one_to_one: false,
        }
    }

    /// Declares that the function gives exactly one output per input, in order, each a
    /// function of its input and its RNG alone (not of its neighbours in the chunk): a `map`
    /// plugin (ABI §7). A resumed run then skips the inputs before its position without
    /// calling the function (and without running the stages before it: they skip too),
    /// instead of computing and dropping them. A chunk whose outputs break the promise is an
    /// error from the function's own checks, not from this stage.
    pub fn one_to_one(mut self) -> Self {
        self.one_to_one = true;
        self
    }

    /// The same stage, shown as `name` in stats (e.g. `plugin:gaussian_noise`) instead of
    /// `map_chunks`.
    pub fn with_display_name(mut self, name: impl Into<String>) -> Self {
        self.display_name = Some(name.into());
        self
    }
}

/// Runs `f` on one chunk and gives the outputs their ids and records (an input with no
/// output has its records reported dropped; several outputs of one input are its parts).
fn run_chunk(
    f: &ChunkFn,
    mut chunk: Vec<Element>,
    key: crate::rng::StreamKey,
    ctx: &BuildContext,
) -> Result<Vec<Element>> {
    let n = chunk.len();
    let parents: Vec<_> = chunk
        .iter_mut()
        .map(|e| (e.id(), e.provenance().cloned(), e.take_units()))
        .collect();
    let mut rngs: Vec<ElementRng> = chunk.iter().map(|e| key.element_rng(e.id())).collect();
    let outputs = f(chunk, &mut rngs)?;
    let mut counts = vec![0u64; n];
    let mut last = 0;
    for (parent, _) in &outputs {
        if *parent >= n || *parent < last {
            return Err(Error::invalid(format!(
                "map_chunks: an output names input {parent} (chunk of {n}, previous {last})"
            )));
        }
        last = *parent;
        counts[*parent] += 1;
    }
    for (parent, (_, _, units)) in parents.iter().enumerate() {
        if counts[parent] == 0 {
            ctx.filtered(units);
        }
    }
    let label = ctx.stage_label();
    let mut parts: Vec<std::vec::IntoIter<Units>> = parents
        .iter()
        .zip(&counts)
        .map(|((_, _, units), count)| {
            if *count > 1 {
                units.split(*count as usize, &label).into_iter()
            } else {
                vec![units.clone()].into_iter()
            }
        })
        .collect();
    let mut seen = vec![0u64; n];
    let mut out = Vec::with_capacity(outputs.len());
    for (parent, mut e) in outputs {
        let (id, provenance, _) = &parents[parent];
        let k = seen[parent];
        seen[parent] += 1;
        e.set_id(if counts[parent] == 1 {
            *id
        } else {
            id.child(k)
        });
        e.set_provenance(provenance.clone());
        e.set_units(parts[parent].next().unwrap_or_default());
        // A resumed epoch leaves out the parts of records delivered before.
        if let [unit] = e.units().as_slice()
            && ctx.delivered_before(unit)
        {
            continue;
        }
        out.push(e);
    }
    Ok(out)
}

impl Stage for MapChunksStage {
    fn name(&self) -> &'static str {
        "map_chunks"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(&self.spec).with("fn", &self.label)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.spec.chunk_size == 0 {
            return Err(Invalid::at(
                "chunk_size",
                format!("{}: `chunk_size` must be at least 1", self.display_name()),
            ));
        }
        check_num_parallel(&self.display_name(), self.spec.num_parallel)
    }

    fn display_name(&self) -> Cow<'_, str> {
        match &self.display_name {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Borrowed(self.name()),
        }
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "map_chunks")?.open()?;
        let groups = Chunks {
            upstream,
            size: self.spec.chunk_size,
            pending: None,
        };
        let key = ctx.stream_key();
        let f = Arc::clone(&self.f);
        let chunk_ctx = ctx.clone();
        let work: WorkFn<Vec<Element>, Vec<Element>> =
            Arc::new(move |chunk: Vec<Element>| run_chunk(&f, chunk, key, &chunk_ctx));
        Ok(match ctx.parallelism(self.spec.num_parallel) {
            (0, _) => Box::new(SequentialChunks {
                groups,
                f: work,
                ctx: ctx.clone(),
                ready: VecDeque::new(),
            }),
            workers => Box::new(ParallelStream::start(
                groups,
                work,
                workers,
                self.spec.deterministic,
                ctx,
            )),
        })
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        if self.one_to_one {
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

/// Chunks of up to `size` consecutive elements. Unlike `batch`'s groups, an upstream error
/// does not discard the inputs gathered before it: they go out as a short chunk and the error
/// follows, so outputs and error arrive in input order.
struct Chunks {
    upstream: BoxStream,
    size: usize,
    pending: Option<Error>,
}

impl Source<Vec<Element>> for Chunks {
    fn next_item(&mut self) -> Option<Result<Vec<Element>>> {
        if let Some(e) = self.pending.take() {
            return Some(Err(e));
        }
        let mut items = Vec::with_capacity(self.size);
        while items.len() < self.size {
            match self.upstream.next() {
                Some(Ok(e)) => items.push(e),
                Some(Err(e)) if items.is_empty() => return Some(Err(e)),
                Some(Err(e)) => {
                    self.pending = Some(e);
                    break;
                }
                None => break,
            }
        }
        if items.is_empty() {
            return None;
        }
        Some(Ok(items))
    }
}

/// Chunks run on the consumer's thread.
struct SequentialChunks {
    groups: Chunks,
    f: WorkFn<Vec<Element>, Vec<Element>>,
    ctx: BuildContext,
    ready: VecDeque<Element>,
}

impl ElementStream for SequentialChunks {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(Ok(e));
            }
            let chunk = match self.groups.next_item()? {
                Ok(chunk) => chunk,
                Err(e) => return Some(Err(e)),
            };
            let dropped = chunk.len() as u64;
            let units = (self.ctx.error_policy() == crate::options::ErrorPolicy::Skip)
                .then(|| crate::stages::batch::units_of(&chunk));
            match apply(&self.f, chunk, &self.ctx) {
                Ok(out) => self.ready.extend(out),
                Err(e) => match self.ctx.on_error_dropping(e, dropped) {
                    Some(e) => return Some(Err(e)),
                    None => {
                        if let Some(units) = &units {
                            self.ctx.skipped(units);
                        }
                    }
                },
            }
        }
    }
}
