//! `group_by_window`: batches of elements that share a key (`tf.data`'s `group_by_window`
//! with a `batch` or `padded_batch` of each window), and the grouping machinery
//! `bucket_by_sequence_length` shares.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::{Element, Value};
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::options::ErrorPolicy;
use crate::params::Params;
use crate::registry::{AppendContext, Batching, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::batch::{combine_dense, units_of};
use crate::stages::padded_batch::{
    PadDim, PadValue, PaddedBatchSpec, check_padded_shapes, pad_and_stack, pad_dims,
};
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::DType;

/// Groups elements by the `int64` scalar feature `key` and batches each group's windows of
/// `window_size` elements (`tf.data.Dataset.group_by_window(key_func, reduce_func,
/// window_size)` with `reduce_func = lambda k, w: w.batch(window_size)`, or
/// `w.padded_batch(...)` with `padded = true`). A group's batch is yielded as soon as its
/// window is full; when the input ends, the groups still open are yielded (or, with
/// `drop_remainder`, left out) in ascending key order, as tf.data flushes them. Without
/// `padded`, values of different lengths batch as `batch` does (ragged, where tf.data's
/// `batch` fails); with it, as `padded_batch` (`padded_shapes`, `padding_values`).
///
/// The open groups are the stage's state: a resumed run rebuilds them by replaying its
/// input (no batch is assembled for the outputs it skips). A missing, non-`int64` or
/// non-scalar key is an error naming the feature and the element.
///
/// ```toml
/// [[stage]]
/// kind = "group_by_window"
/// key = "language"
/// window_size = 32
/// padded = true
/// padding_values = { tokens = -1 }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupByWindowSpec {
    /// The `int64` scalar feature whose value is the element's group.
    pub key: String,
    /// Elements per window (≥ 1): a group's batch is yielded when it has this many.
    #[schemars(range(min = 1))]
    pub window_size: usize,
    /// Leave out the groups left smaller than `window_size` at the end (default false).
    #[serde(default)]
    pub drop_remainder: bool,
    /// Pad the values of a window to a common shape, as `padded_batch` (default false).
    #[serde(default)]
    pub padded: bool,
    /// With `padded`: the padded shape per value name, sizes or `"max"` per dimension, as
    /// `padded_batch`'s.
    #[serde(default, with = "pad_dims")]
    #[schemars(with = "BTreeMap<String, Vec<PadDim>>")]
    pub padded_shapes: BTreeMap<String, Vec<Option<usize>>>,
    /// With `padded`: the padding value per value name (default 0 or `""`).
    #[serde(default)]
    pub padding_values: BTreeMap<String, PadValue>,
}

impl GroupByWindowSpec {
    /// Windows of `window_size` elements grouped by the feature `key`, batched without
    /// padding, partial groups kept.
    pub fn new(key: impl Into<String>, window_size: usize) -> Self {
        GroupByWindowSpec {
            key: key.into(),
            window_size,
            drop_remainder: false,
            padded: false,
            padded_shapes: BTreeMap::new(),
            padding_values: BTreeMap::new(),
        }
    }

    /// This spec with each window padded (`padded_batch`) rather than batched.
    pub fn padded(mut self, padded: bool) -> Self {
        self.padded = padded;
        self
    }

    /// This spec with `drop_remainder`.
    pub fn drop_remainder(mut self, drop: bool) -> Self {
        self.drop_remainder = drop;
        self
    }

    /// The `padded_batch` each window is padded with.
    fn padding(&self) -> PaddedBatchSpec {
        PaddedBatchSpec {
            batch_size: self.window_size,
            drop_remainder: self.drop_remainder,
            padded_shapes: self.padded_shapes.clone(),
            padding_values: self.padding_values.clone(),
        }
    }
}

impl Spec for GroupByWindowSpec {
    const KIND: &'static str = "group_by_window";
    const SUMMARY: &'static str =
        "batch windows of elements sharing an `int64` key (`tf.data`'s `group_by_window`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.key.is_empty() {
            return Err(Invalid::at(
                "key",
                "group_by_window: `key` names no feature",
            ));
        }
        if self.window_size == 0 {
            return Err(Invalid::at(
                "window_size",
                "group_by_window: `window_size` must be at least 1",
            ));
        }
        if !self.padded {
            for (key, given) in [
                ("padded_shapes", !self.padded_shapes.is_empty()),
                ("padding_values", !self.padding_values.is_empty()),
            ] {
                if given {
                    return Err(Invalid::at(
                        key,
                        format!("group_by_window: `{key}` needs `padded = true`"),
                    ));
                }
            }
        }
        check_padded_shapes(Self::KIND, &self.padded_shapes)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.group_by_window(self.clone()))
    }

    fn batching(&self) -> Batching {
        Batching::Batches
    }
}

impl GroupByWindowSpec {
    fn stream(&self, inputs: &[Input], ctx: &BuildContext) -> Result<GroupStream<ByKey>> {
        let grouping = ByKey {
            key: self.key.clone(),
            window_size: self.window_size,
            padding: self.padded.then(|| self.padding()),
        };
        Ok(GroupStream::new(
            crate::stages::single_input(inputs, "group_by_window")?.open()?,
            grouping,
            self.drop_remainder,
            ctx,
        ))
    }
}

impl Stage for GroupByWindowSpec {
    fn name(&self) -> &'static str {
        "group_by_window"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(self.stream(inputs, ctx)?))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        skip_groups(self.stream(inputs, ctx)?, ctx, skip)
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }
}

/// How a grouping stage keys its elements and makes each group's batch.
pub(crate) trait Grouping: Send + 'static {
    /// The element's group, or an error naming the feature it was read from.
    fn key(&self, e: &Element) -> Result<i64>;

    /// Elements in a full window of group `key` (≥ 1).
    fn window_size(&self, key: i64) -> usize;

    /// The batch of a window of group `key` (full, or what is left at the end).
    fn combine(&self, key: i64, items: &[Element]) -> Result<Element>;
}

/// `group_by_window`'s grouping: a key feature, one window size, batched or padded.
struct ByKey {
    key: String,
    window_size: usize,
    padding: Option<PaddedBatchSpec>,
}

impl Grouping for ByKey {
    fn key(&self, e: &Element) -> Result<i64> {
        scalar_key(e, &self.key)
    }

    fn window_size(&self, _: i64) -> usize {
        self.window_size
    }

    fn combine(&self, _: i64, items: &[Element]) -> Result<Element> {
        match &self.padding {
            Some(spec) => pad_and_stack(items, spec),
            None => combine_dense(items),
        }
    }
}

/// The `int64` scalar feature `name` of `e`, or an error saying what it is instead.
fn scalar_key(e: &Element, name: &str) -> Result<i64> {
    let t = match e.get(name) {
        Some(Value::Dense(t)) => t,
        Some(Value::Ragged(_)) => {
            return Err(Error::data_of(
                name,
                format!("group_by_window: key `{name}` is ragged, not an int64 scalar"),
            ));
        }
        None => {
            return Err(Error::data_of(
                name,
                format!(
                    "group_by_window: no key feature `{name}` (the element has {})",
                    feature_list(e)
                ),
            ));
        }
    };
    if t.dtype() != DType::I64 {
        return Err(Error::data_of(
            name,
            format!(
                "group_by_window: key `{name}` must be int64 (i64), found {}",
                t.dtype()
            ),
        ));
    }
    match (t.rank(), t.as_i64()) {
        (0, Some([k])) => Ok(*k),
        _ => Err(Error::data_of(
            name,
            format!(
                "group_by_window: key `{name}` must be a scalar, found shape {:?}",
                t.shape()
            ),
        )),
    }
}

/// `` `a`, `b` `` for the features of `e`.
pub(crate) fn feature_list(e: &Element) -> String {
    let names: Vec<String> = e.names().iter().map(|n| format!("`{n}`")).collect();
    match names.is_empty() {
        true => "none".to_string(),
        false => names.join(", "),
    }
}

/// The stream of a grouping stage: elements gathered per key; a group's window is batched
/// when full, and the open groups are flushed in ascending key order at the end of the
/// input (tf.data's `GroupByWindowDataset` keeps them in a `std::map`).
pub(crate) struct GroupStream<G: Grouping> {
    upstream: BoxStream,
    grouping: G,
    /// The open groups: what is held of each key's window, and its bytes.
    groups: BTreeMap<i64, Vec<Element>>,
    /// Bytes held in the open groups, in the run's byte ledger; the groups alone may not
    /// hold more than the RAM budget (they fill on the consumer's thread: they cannot wait).
    account: std::sync::Arc<crate::run::ledger::Account>,
    drop_remainder: bool,
    ended: bool,
    /// Outputs left to skip without assembling them (a resume under the fail policy).
    skipping: u64,
    ctx: BuildContext,
}

impl<G: Grouping> GroupStream<G> {
    pub(crate) fn new(
        upstream: BoxStream,
        grouping: G,
        drop_remainder: bool,
        ctx: &BuildContext,
    ) -> Self {
        GroupStream {
            upstream,
            grouping,
            groups: BTreeMap::new(),
            account: ctx.account(),
            drop_remainder,
            ended: false,
            skipping: 0,
            ctx: ctx.clone(),
        }
    }

    /// The next full window (or, once the input ended, the next open group in key order),
    /// `None` at the end; errors from the input and from keys (under the fail policy) come
    /// in its place.
    fn next_window(&mut self) -> Option<Result<(i64, Vec<Element>)>> {
        while !self.ended {
            let e = match self.upstream.next() {
                Some(Ok(e)) => e,
                Some(Err(err)) => return Some(Err(err)),
                None => {
                    self.ended = true;
                    break;
                }
            };
            let key = match self.grouping.key(&e) {
                Ok(k) => k,
                Err(err) => match self.ctx.on_element_error(&e, err) {
                    Some(err) => return Some(Err(err)),
                    None => continue,
                },
            };
            let n = e.nbytes() as u64;
            self.account.force(n);
            if self.account.held() > self.account.budget() {
                self.account.release(n);
                return Some(Err(self.ctx.element_error(
                    &e,
                    Error::ram_budget(format!(
                        "the open groups of {} keys hold more than the RAM budget of {} bytes; \
                         use a smaller window or raise `ram_budget`",
                        self.groups.len(),
                        self.account.budget()
                    )),
                )));
            }
            let size = self.grouping.window_size(key);
            let group = self.groups.entry(key).or_default();
            group.push(e);
            if group.len() >= size {
                let items = self.groups.remove(&key).unwrap_or_default();
                return Some(Ok(self.release(key, items)));
            }
        }
        loop {
            let (key, items) = self.groups.pop_first()?;
            let (key, items) = self.release(key, items);
            if self.drop_remainder && items.len() < self.grouping.window_size(key) {
                self.ctx.dropped(&units_of(&items));
                continue;
            }
            return Some(Ok((key, items)));
        }
    }

    /// `items` no longer held.
    fn release(&mut self, key: i64, items: Vec<Element>) -> (i64, Vec<Element>) {
        let n: u64 = items.iter().map(|e| e.nbytes() as u64).sum();
        self.account.hand_out(n);
        (key, items)
    }
}

impl<G: Grouping> ElementStream for GroupStream<G> {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let (key, items) = match self.next_window()? {
                Ok(w) => w,
                Err(e) => return Some(Err(e)),
            };
            if self.skipping > 0 {
                self.skipping -= 1;
                // Anything: the caller drops it unread.
                return Some(Ok(Element::new(items[0].id())));
            }
            match self.grouping.combine(key, &items) {
                Ok(batch) => return Some(Ok(batch)),
                Err(err) => {
                    let err = self.ctx.element_error(&items[0], err);
                    match self.ctx.on_error_dropping(err, items.len() as u64) {
                        Some(err) => return Some(Err(err)),
                        None => self.ctx.skipped(&units_of(&items)),
                    }
                }
            }
        }
    }
}

/// [`Stage::build_from`] of a grouping stage: the first `skip` outputs of `stream` are
/// replayed (its input read again, the open groups rebuilt) and dropped. Under the fail
/// policy their windows are formed but not assembled; under the skip policy a window
/// that fails to assemble is no output, so every batch is assembled then.
pub(crate) fn skip_groups<G: Grouping>(
    mut stream: GroupStream<G>,
    ctx: &BuildContext,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    if ctx.error_policy() == ErrorPolicy::Fail {
        stream.skipping = skip;
    }
    let mut skipped = 0;
    while skipped < skip {
        match stream.next() {
            Some(Ok(_)) => skipped += 1,
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    stream.skipping = 0;
    Ok((Box::new(stream), skipped))
}
