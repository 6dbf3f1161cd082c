//! `window`: overlapping or strided groups of consecutive elements (`tf.data`'s `window`,
//! each window batched).

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Batching, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::batch::combine_dense;
use crate::stream::{BoxStream, ElementStream};

/// Windows of `size` elements, a new one every `shift` elements, taking every `stride`-th
/// element (`tf.data.Dataset.window(size, shift, stride, drop_remainder)`, each window then
/// batched as `flat_map(lambda w: w.batch(size))` does): `range(7)` with `size = 3,
/// shift = 2` gives `[0 1 2] [2 3 4] [4 5 6] [6]`. Windows at the end are shorter unless
/// `drop_remainder`. An element may be in several windows, so an epoch with `window`
/// after its unit points cannot be resumed elastically on another number of hosts.
///
/// ```toml
/// [[stage]]
/// kind = "window"
/// size = 8
/// shift = 4
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// Elements per window (≥ 1).
    pub size: usize,
    /// Elements between the starts of two windows (default `size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<usize>,
    /// Elements between two elements of a window (default 1).
    #[serde(default = "one")]
    pub stride: usize,
    /// Leave out windows shorter than `size` (default false).
    #[serde(default)]
    pub drop_remainder: bool,
}

fn one() -> usize {
    1
}

impl WindowSpec {
    /// Windows of `size`, one after the other.
    pub fn new(size: usize) -> Self {
        WindowSpec {
            size,
            shift: None,
            stride: 1,
            drop_remainder: false,
        }
    }
}

impl Spec for WindowSpec {
    const KIND: &'static str = "window";
    const SUMMARY: &'static str = "overlapping or strided windows of elements, each batched";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        for (key, v) in [
            ("size", self.size),
            ("shift", self.shift.unwrap_or(1)),
            ("stride", self.stride),
        ] {
            if v == 0 {
                return Err(Invalid::at(
                    key,
                    format!("window: `{key}` must be at least 1"),
                ));
            }
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(Dataset::from_stage(*self, vec![input.clone()]))
    }

    fn batching(&self) -> Batching {
        Batching::Batches
    }
}

impl Stage for WindowSpec {
    fn name(&self) -> &'static str {
        "window"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "window")?.open()?;
        Ok(Box::new(Windows {
            upstream,
            spec: *self,
            buffer: VecDeque::new(),
            base: 0,
            start: 0,
            ended: false,
            ctx: ctx.clone(),
        }))
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "`window` puts an element in several windows (or none), so its records cannot be followed one output each",
        ))
    }
}

struct Windows {
    upstream: BoxStream,
    spec: WindowSpec,
    /// Elements from position `base` on.
    buffer: VecDeque<Element>,
    base: usize,
    /// The next window's first position.
    start: usize,
    ended: bool,
    ctx: BuildContext,
}

impl Windows {
    /// Reads until position `pos` is in the buffer or the input ends.
    fn fill(&mut self, pos: usize) -> Result<()> {
        while !self.ended && self.base + self.buffer.len() <= pos {
            match self.upstream.next() {
                Some(Ok(e)) => self.buffer.push_back(e),
                Some(Err(e)) => return Err(e),
                None => self.ended = true,
            }
        }
        Ok(())
    }
}

impl ElementStream for Windows {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let WindowSpec { size, stride, .. } = self.spec;
            let shift = self.spec.shift.unwrap_or(size);
            let last = self.start + (size - 1) * stride;
            if let Err(e) = self.fill(last) {
                return Some(Err(e));
            }
            // Drop what no window needs any more.
            while self.base < self.start && !self.buffer.is_empty() {
                self.buffer.pop_front();
                self.base += 1;
            }
            let have = self.base + self.buffer.len();
            if self.start >= have {
                return None;
            }
            let items: Vec<Element> = (0..size)
                .map(|j| self.start + j * stride)
                .take_while(|&p| p < have)
                .map(|p| self.buffer[p - self.base].clone())
                .collect();
            self.start += shift;
            if items.len() < size && self.spec.drop_remainder {
                // Every later window is shorter too.
                return None;
            }
            match combine_dense(&items) {
                Ok(mut w) => {
                    w.set_units(crate::elastic::Units::lost(
                        "window puts an element in several windows",
                    ));
                    return Some(Ok(w));
                }
                Err(e) => {
                    let e = self.ctx.element_error(&items[0], e);
                    if let Some(e) = self.ctx.on_error_dropping(e, items.len() as u64) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}
