//! `unbatch`: split batched elements back into elements.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::{Element, batch_len, unbatch_value};
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Batching, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// Splits each element along its leading dimension (dense or ragged). Every value must have
/// the same batch size. Row `i` gets the id `batch_id.child(i)` and the batch's provenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnbatchSpec {}

impl Spec for UnbatchSpec {
    const KIND: &'static str = "unbatch";
    const SUMMARY: &'static str = "split batches back into elements";

    fn validate(&self) -> Result<(), Invalid> {
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(input.unbatch())
    }

    fn batching(&self) -> Batching {
        Batching::Unbatches
    }
}

impl Stage for UnbatchSpec {
    fn name(&self) -> &'static str {
        "unbatch"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(UnbatchStream {
            upstream: crate::stages::single_input(inputs, "unbatch")?.open()?,
            pending: VecDeque::new(),
            ctx: ctx.clone(),
        }))
    }
}

struct UnbatchStream {
    upstream: BoxStream,
    pending: VecDeque<Element>,
    ctx: BuildContext,
}

fn split(batch: &Element) -> Result<Vec<Element>> {
    let mut n = None;
    for (name, v) in batch.iter() {
        let len = batch_len(v).map_err(|e| Error::data_of(name, format!("{name}: {e}")))?;
        match n {
            None => n = Some(len),
            Some(m) if m != len => {
                return Err(Error::data(format!(
                    "cannot unbatch: {name} has {len} rows, other values have {m}"
                )));
            }
            _ => {}
        }
    }
    let n = n.unwrap_or(0);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut e = Element::new(batch.id().child(i as u64));
        e.set_provenance(batch.provenance().cloned());
        for (name, v) in batch.iter() {
            e.insert(name, unbatch_value(v, i)?);
        }
        out.push(e);
    }
    Ok(out)
}

impl ElementStream for UnbatchStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(Ok(e));
            }
            let batch = match self.upstream.next()? {
                Ok(b) => b,
                Err(e) => return Some(Err(e)),
            };
            match split(&batch) {
                Ok(mut rows) => {
                    if rows.is_empty() {
                        // No rows: the batch's records are consumed with nothing to show.
                        self.ctx.dropped(batch.units());
                    }
                    let units = batch.units().split(rows.len(), &self.ctx.stage_label());
                    for (row, units) in rows.iter_mut().zip(units) {
                        row.set_units(units);
                    }
                    // A resumed epoch leaves out the parts of records delivered before.
                    rows.retain(|row| match row.units().as_slice() {
                        [unit] => !self.ctx.delivered_before(unit),
                        _ => true,
                    });
                    self.pending.extend(rows)
                }
                Err(e) => {
                    if let Some(e) = self.ctx.on_element_error(&batch, e) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}
