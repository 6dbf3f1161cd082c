//! `batch`: combine consecutive elements along a new leading dimension.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::elastic::Units;
use crate::element::{Element, batch_values};
use crate::error::{Error, Result};
use crate::executor::parallel::{ParallelStream, Source, WorkFn};
use crate::invalid::Invalid;
use crate::options::ErrorPolicy;
use crate::parallelism::{NumParallel, check_num_parallel};
use crate::params::Params;
use crate::registry::{AppendContext, Batching, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// Stacks `batch_size` consecutive elements along a new leading dimension. Values of equal
/// shape become dense tensors `[batch_size, ...]`; values whose first dimension differs (VarLen
/// features) become ragged (values + row splits). The batch has the id and provenance of its
/// first element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchSpec {
    /// Elements per batch (≥ 1).
    #[schemars(range(min = 1))]
    pub batch_size: usize,
    /// Drop a last, smaller batch (default false).
    #[serde(default)]
    pub drop_remainder: bool,
    /// Threads assembling batches (copying values into the batch tensors), as tf.data's
    /// `batch(num_parallel_calls=...)`: sequential by default.
    #[serde(default)]
    pub num_parallel: NumParallel,
    /// With threads, keep the batches in order (default true).
    #[serde(default = "yes")]
    pub deterministic: bool,
}

fn yes() -> bool {
    true
}

impl BatchSpec {
    /// Batches of `batch_size`, keeping a smaller last batch, assembled sequentially.
    pub fn new(batch_size: usize) -> Self {
        BatchSpec {
            batch_size,
            drop_remainder: false,
            num_parallel: NumParallel::Sequential,
            deterministic: true,
        }
    }

    /// This spec with `drop_remainder`.
    pub fn drop_remainder(mut self, drop: bool) -> Self {
        self.drop_remainder = drop;
        self
    }

    /// This spec with `num_parallel` threads assembling batches.
    pub fn num_parallel(mut self, n: impl Into<NumParallel>) -> Self {
        self.num_parallel = n.into();
        self
    }
}

impl Spec for BatchSpec {
    const KIND: &'static str = "batch";
    const SUMMARY: &'static str = "stack `batch_size` consecutive elements";

    fn validate(&self) -> Result<(), Invalid> {
        if self.batch_size == 0 {
            return Err(Invalid::at(
                "batch_size",
                "batch: `batch_size` must be at least 1",
            ));
        }
        check_num_parallel("batch", self.num_parallel)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(input.batch_with(*self))
    }

    fn batching(&self) -> Batching {
        Batching::Batches
    }
}

impl Stage for BatchSpec {
    fn name(&self) -> &'static str {
        "batch"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "batch")?.open()?;
        let groups = Groups {
            upstream,
            size: self.batch_size,
            drop_remainder: self.drop_remainder,
            ctx: ctx.clone(),
        };
        let workers = ctx.parallelism(self.num_parallel);
        if workers.0 > 0 {
            let f: WorkFn<Vec<Element>> =
                Arc::new(|items: Vec<Element>| combine_dense(&items).map(Some));
            return Ok(Box::new(ParallelStream::start(
                groups,
                f,
                workers,
                self.deterministic,
                ctx,
            )));
        }
        Ok(Box::new(BatchStream {
            groups,
            combine: Box::new(combine_dense),
            ctx: ctx.clone(),
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        batch_from(
            self,
            self.batch_size,
            self.drop_remainder,
            inputs,
            ctx,
            skip,
        )
    }

    fn order_deterministic(&self) -> bool {
        self.deterministic || self.num_parallel == NumParallel::Sequential
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn runs_inline(&self) -> bool {
        self.num_parallel == NumParallel::Sequential
    }
}

/// [`Stage::build_from`] of a stage that batches `size` elements of its input (`batch`,
/// `padded_batch`, a fused batch): `skip` batches are `skip × size` inputs, skipped
/// unread, not assembled (under the fail policy; under skip, a failed batch changes the
/// count, so it replays).
pub(crate) fn batch_from(
    stage: &dyn Stage,
    size: usize,
    drop_remainder: bool,
    inputs: &[Input],
    ctx: &BuildContext,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    if ctx.error_policy() != ErrorPolicy::Fail || size == 0 {
        let mut stream = stage.build(inputs, ctx)?;
        let skipped = crate::run::discard(&mut stream, skip)?;
        return Ok((stream, skipped));
    }
    let size = size as u64;
    let input =
        crate::stages::single_input(inputs, stage.name())?.skipping(skip.saturating_mul(size));
    let stream = stage.build(std::slice::from_ref(&input), ctx)?;
    let k = input.skipped();
    // Short of the mark only at the end: a last partial batch was one more output.
    let skipped = if drop_remainder {
        k / size
    } else {
        k.div_ceil(size)
    };
    Ok((stream, skipped.min(skip)))
}

/// Groups of `size` consecutive elements (the last one smaller unless `drop_remainder`).
pub(crate) struct Groups {
    pub(crate) upstream: BoxStream,
    pub(crate) size: usize,
    pub(crate) drop_remainder: bool,
    /// The batching stage's context (a remainder left out is reported dropped).
    pub(crate) ctx: BuildContext,
}

impl Source<Vec<Element>> for Groups {
    fn next_item(&mut self) -> Option<Result<Vec<Element>>> {
        let upstream = &mut self.upstream;
        // The bytes of the group's elements taken out of a buffer upstream stay counted
        // and go on together into the parallel stage's work in flight (the run's ledger).
        crate::run::ledger::gathering(|| {
            group(
                || upstream.next(),
                self.size,
                self.drop_remainder,
                &self.ctx,
            )
        })
    }
}

/// The next group of `size` elements from `pull` (smaller at the end unless
/// `drop_remainder`: then the remainder's records are reported dropped); an error from
/// `pull` ends the group and is returned instead.
pub(crate) fn group(
    mut pull: impl FnMut() -> Option<Result<Element>>,
    size: usize,
    drop_remainder: bool,
    ctx: &BuildContext,
) -> Option<Result<Vec<Element>>> {
    let mut items = Vec::with_capacity(size);
    while items.len() < size {
        match pull() {
            Some(Ok(e)) => items.push(e),
            Some(Err(e)) => return Some(Err(e)),
            None => break,
        }
    }
    if items.is_empty() {
        return None;
    }
    if drop_remainder && items.len() < size {
        ctx.dropped(&units_of(&items));
        return None;
    }
    Some(Ok(items))
}

/// The records of `items`, in order (a batch's).
pub(crate) fn units_of(items: &[Element]) -> Units {
    Units::concat(items.iter().map(Element::units))
}

/// The next batch of the elements `pull` gives: a [`group`] combined by `combine`; a batch
/// that cannot be combined goes through `ctx`'s error policy (all its elements counted).
pub(crate) fn next_batch(
    mut pull: impl FnMut() -> Option<Result<Element>>,
    size: usize,
    drop_remainder: bool,
    combine: impl Fn(&[Element]) -> Result<Element>,
    ctx: &BuildContext,
) -> Option<Result<Element>> {
    loop {
        let items = match group(&mut pull, size, drop_remainder, ctx)? {
            Ok(items) => items,
            Err(e) => return Some(Err(e)),
        };
        match combine(&items) {
            Ok(b) => return Some(Ok(b)),
            Err(e) => {
                let e = ctx.element_error(&items[0], e);
                match ctx.on_error_dropping(e, items.len() as u64) {
                    Some(e) => return Some(Err(e)),
                    None => ctx.skipped(&units_of(&items)),
                }
            }
        }
    }
}

/// Combines one batch's elements into the batch element.
pub(crate) type Combine = Box<dyn Fn(&[Element]) -> Result<Element> + Send>;

/// Batches assembled on the consumer's thread.
pub(crate) struct BatchStream {
    pub(crate) groups: Groups,
    pub(crate) combine: Combine,
    pub(crate) ctx: BuildContext,
}

impl ElementStream for BatchStream {
    fn next(&mut self) -> Option<Result<Element>> {
        let Groups {
            upstream,
            size,
            drop_remainder,
            ..
        } = &mut self.groups;
        // The elements of the batch being assembled are in the run's byte ledger (a batch
        // that cannot fit in the budget fails as soon as it is seen not to); the batch
        // made of them is handed on in their place.
        let account = self.ctx.account();
        let ctx = &self.ctx;
        let out = next_batch(
            || {
                let item = upstream.next();
                if let Some(Ok(e)) = &item {
                    account.force(e.nbytes() as u64);
                    if account.held() > account.budget() {
                        let error = Error::ram_budget(format!(
                            "the batch being assembled holds more than the RAM budget of {} \
                             bytes; use smaller batches or raise `ram_budget`",
                            account.budget()
                        ));
                        return Some(Err(ctx.element_error(e, error)));
                    }
                }
                item
            },
            *size,
            *drop_remainder,
            &self.combine,
            &self.ctx,
        );
        if let Some(Ok(b)) = &out {
            // The batch takes its elements' place: handed on as they would have been.
            let n = b.nbytes() as u64;
            account.force(n);
            account.hand_out(n);
        }
        out
    }
}

/// Checks that every element has the same names and returns them.
pub(crate) fn common_names(items: &[Element]) -> Result<Vec<std::sync::Arc<str>>> {
    let names = items[0].names();
    for e in &items[1..] {
        if e.has_names_in_order(&names) {
            continue;
        }
        if e.len() != names.len() || names.iter().any(|n| e.get(n).is_none()) {
            return Err(Error::data(format!(
                "cannot batch elements with different values: {:?} and {:?}",
                names,
                e.names()
            )));
        }
    }
    Ok(names)
}

pub(crate) fn combine_dense(items: &[Element]) -> Result<Element> {
    let names = common_names(items)?;
    let mut out = Element::new(items[0].id());
    out.set_provenance(items[0].provenance().cloned());
    out.set_units(units_of(items));
    // Elements from one source usually hold their values in the same order: then each
    // value is found by position rather than by name.
    let aligned = items.iter().all(|e| e.has_names_in_order(&names));
    for (k, name) in names.into_iter().enumerate() {
        let values: Vec<_> = items
            .iter()
            .map(|e| match aligned {
                true => e.value_at(k).expect("checked").1,
                false => e.get(&name).expect("checked"),
            })
            .collect();
        let v = batch_values(&values).map_err(|e| Error::data_of(&name, format!("{name}: {e}")))?;
        out.insert(&name, v);
    }
    Ok(out)
}
