//! `enumerate`: number the elements (`tf.data.Dataset.enumerate`).

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
use crate::tensor::Tensor;

/// Adds to each element its position in the stream, from `start`, as the `int64` scalar
/// `output` (default `index`): tf.data's `enumerate(start)`, whose `(index, element)` pairs
/// are the element with one more feature here. A resumed run goes on counting where the
/// checkpoint was. Numbers depend on the elements before, so an epoch started on N hosts
/// cannot be resumed elastically on M with `enumerate` after its unit points.
///
/// ```toml
/// [[stage]]
/// kind = "enumerate"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnumerateSpec {
    /// The first number (default 0).
    #[serde(default)]
    pub start: i64,
    /// The feature written (default `index`).
    #[serde(default = "index")]
    pub output: String,
}

fn index() -> String {
    "index".to_string()
}

impl Default for EnumerateSpec {
    fn default() -> Self {
        EnumerateSpec {
            start: 0,
            output: index(),
        }
    }
}

impl Spec for EnumerateSpec {
    const KIND: &'static str = "enumerate";
    const SUMMARY: &'static str = "number the elements from `start` (`tf.data`'s `enumerate`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.output.is_empty() {
            return Err(Invalid::at(
                "output",
                "enumerate: `output` names no feature",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(Dataset::from_stage(self.clone(), vec![input.clone()]))
    }
}

impl Stage for EnumerateSpec {
    fn name(&self) -> &'static str {
        "enumerate"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "enumerate")?.open()?;
        Ok(Box::new(Numbered {
            upstream,
            next: self.start,
            output: self.output.clone(),
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        _ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // One output per input: the first `skip` are skipped upstream, and counting goes
        // on from there.
        let input = crate::stages::single_input(inputs, "enumerate")?.skipping(skip);
        let upstream = input.open()?;
        let skipped = input.skipped();
        Ok((
            Box::new(Numbered {
                upstream,
                next: self.start.saturating_add(skipped as i64),
                output: self.output.clone(),
            }),
            skipped,
        ))
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "`enumerate` numbers elements by their position in this host's stream, which an elastic resume on another number of hosts changes",
        ))
    }
}

struct Numbered {
    upstream: BoxStream,
    next: i64,
    output: String,
}

impl ElementStream for Numbered {
    fn next(&mut self) -> Option<Result<Element>> {
        let item = self.upstream.next()?;
        Some(item.map(|mut e| {
            e.insert(&self.output, Tensor::scalar_i64(self.next));
            self.next = self.next.saturating_add(1);
            e
        }))
    }
}
