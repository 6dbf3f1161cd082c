//! `skip`: drop the first `count` elements.

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

/// Drops the first `count` elements (errors among them still travel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkipSpec {
    /// How many elements.
    pub count: u64,
}

impl Spec for SkipSpec {
    const KIND: &'static str = "skip";
    const SUMMARY: &'static str = "all but the first `count` elements";

    fn validate(&self) -> Result<(), Invalid> {
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(input.skip(self.count))
    }
}

impl Stage for SkipSpec {
    fn name(&self) -> &'static str {
        "skip"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "`skip` after the unit points makes an epoch depend on the number of hosts; put it right after the source",
        ))
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(SkipStream {
            upstream: crate::stages::single_input(inputs, "skip")?.open()?,
            left: self.count,
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        _ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        let input =
            crate::stages::single_input(inputs, "skip")?.skipping(self.count.saturating_add(skip));
        let upstream = input.open()?;
        let skipped = input.skipped().saturating_sub(self.count);
        Ok((Box::new(SkipStream { upstream, left: 0 }), skipped))
    }
}

struct SkipStream {
    upstream: BoxStream,
    left: u64,
}

impl ElementStream for SkipStream {
    fn next(&mut self) -> Option<Result<Element>> {
        while self.left > 0 {
            match self.upstream.next()? {
                Ok(_) => self.left -= 1,
                Err(e) => return Some(Err(e)),
            }
        }
        self.upstream.next()
    }
}
