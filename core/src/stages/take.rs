//! `take`: the first `count` elements.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// Keeps the first `count` elements, then stops the stages before it (joining their threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeSpec {
    /// How many elements.
    pub count: u64,
}

impl Spec for TakeSpec {
    const KIND: &'static str = "take";
    const SUMMARY: &'static str = "the first `count` elements";

    fn validate(&self) -> Result<(), Invalid> {
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(input.take(self.count))
    }
}

impl Stage for TakeSpec {
    fn name(&self) -> &'static str {
        "take"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "`take` after the unit points makes an epoch depend on the number of hosts; put it right after the source, or stop the loop instead",
        ))
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, "take")?;
        Ok(Box::new(TakeStream {
            upstream: if self.count > 0 {
                Some(input.open()?)
            } else {
                None
            },
            left: self.count,
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        _ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        let skip = skip.min(self.count);
        let input = crate::stages::single_input(inputs, "take")?.skipping(skip);
        let upstream = input.open()?;
        let skipped = input.skipped();
        let left = self.count - skipped;
        Ok((
            Box::new(TakeStream {
                upstream: (left > 0 && skipped == skip).then_some(upstream),
                left,
            }),
            skipped,
        ))
    }
}

struct TakeStream {
    upstream: Option<BoxStream>,
    left: u64,
}

impl ElementStream for TakeStream {
    fn next(&mut self) -> Option<Result<Element>> {
        let up = self.upstream.as_mut()?;
        let item = up.next();
        if matches!(item, Some(Ok(_))) {
            self.left -= 1;
        }
        if self.left == 0 || item.is_none() {
            self.upstream = None;
        }
        item
    }
}
