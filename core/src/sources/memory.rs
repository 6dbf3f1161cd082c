//! In-memory sources: a list of elements, and `range`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::element::{Element, ElementId};
use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::run::{BuildContext, Input};
use crate::stage::{Arity, Stage};
use crate::stream::{BoxStream, IterStream};
use crate::tensor::Tensor;

/// A source of elements held in memory. Ids are their positions (source 0), unless the
/// elements already carry ids (`keep_ids`).
#[derive(Debug, Clone)]
pub(crate) struct FromElements {
    elements: Arc<Vec<Element>>,
    keep_ids: bool,
}

impl FromElements {
    /// A source yielding `elements` in order, with ids `0:0`, `0:1`, ...
    pub(crate) fn new(elements: Vec<Element>) -> Self {
        FromElements {
            elements: Arc::new(elements),
            keep_ids: false,
        }
    }
}

impl Stage for FromElements {
    fn name(&self) -> &'static str {
        "from_elements"
    }

    fn params(&self) -> Params {
        // Elements are data, not definition: their count, total size and the digests of
        // the first and last (ids and values) identify them, without hashing all the data.
        let sum: usize = self.elements.iter().map(|e| e.nbytes()).sum();
        let ends = [self.elements.first(), self.elements.last()];
        let digest: Vec<String> = ends
            .into_iter()
            .flatten()
            .map(crate::checkpoint::element_digest)
            .collect();
        Params::new()
            .with("elements", self.elements.len())
            .with("bytes", sum)
            .with("digest", digest)
            .with("keep_ids", self.keep_ids)
    }

    fn arity(&self) -> Arity {
        Arity::None
    }

    fn build(&self, _inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        let elements = Arc::clone(&self.elements);
        let keep = self.keep_ids;
        Ok(Box::new(IterStream((0..elements.len()).map(move |i| {
            let mut e = elements[i].clone();
            if !keep {
                e.set_id(ElementId::new(0, i as u64));
            }
            Ok(e)
        }))))
    }

    fn build_from(
        &self,
        _inputs: &[Input],
        _ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        let elements = Arc::clone(&self.elements);
        let keep = self.keep_ids;
        let from = (skip as usize).min(elements.len());
        let stream = Box::new(IterStream((from..elements.len()).map(move |i| {
            let mut e = elements[i].clone();
            if !keep {
                e.set_id(ElementId::new(0, i as u64));
            }
            Ok(e)
        })));
        Ok((stream, from as u64))
    }
}

/// `range(start, end, step)`: elements with one scalar `i64` named `value`
/// (`tf.data.Dataset.range`). The id of each is its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeSpec {
    /// First value.
    pub start: i64,
    /// End (exclusive).
    pub end: i64,
    /// Step (non-zero; negative counts down).
    #[serde(default = "one")]
    pub step: i64,
}

fn one() -> i64 {
    1
}

/// The name of the value `range` yields.
pub(crate) const RANGE_VALUE: &str = "value";

impl Stage for RangeSpec {
    fn name(&self) -> &'static str {
        "range"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn arity(&self) -> Arity {
        Arity::None
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.step == 0 {
            return Err(Invalid::at("step", "range: `step` must not be 0"));
        }
        Ok(())
    }

    fn build(&self, _inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        let RangeSpec { start, end, step } = *self;
        let n = if (step > 0 && end > start) || (step < 0 && end < start) {
            ((end - start).unsigned_abs() - 1) / step.unsigned_abs() + 1
        } else {
            0
        };
        Ok(Box::new(IterStream((0..n).map(move |i| {
            let v = start + i as i64 * step;
            Ok(Element::new(ElementId::new(0, i)).with(RANGE_VALUE, Tensor::scalar_i64(v)))
        }))))
    }

    fn build_from(
        &self,
        _inputs: &[Input],
        _ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        let RangeSpec { start, end, step } = *self;
        let n = if (step > 0 && end > start) || (step < 0 && end < start) {
            ((end - start).unsigned_abs() - 1) / step.unsigned_abs() + 1
        } else {
            0
        };
        let from = skip.min(n);
        let stream = Box::new(IterStream((from..n).map(move |i| {
            let v = start + i as i64 * step;
            Ok(Element::new(ElementId::new(0, i)).with(RANGE_VALUE, Tensor::scalar_i64(v)))
        })));
        Ok((stream, from))
    }
}
