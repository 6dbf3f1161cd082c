//! `prefetch`: run the upstream ahead on its own thread into a bounded buffer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::autotune::{KnobKind, MAX_BUFFER};
use crate::dataset::Dataset;
use crate::error::Result;
use crate::executor::prefetch::PrefetchStream;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::BoxStream;

/// A buffer size: a number of elements, or `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BufferSize {
    /// Exactly this many elements.
    Fixed(usize),
    /// Chosen by the runtime: it starts at two elements per CPU of the budget (at least 2,
    /// at most 16) and autotune resizes it as the run goes, within the RAM budget (see
    /// [`crate::autotune`]).
    #[serde(with = "auto")]
    Auto,
}

mod auto {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("auto")
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
        match String::deserialize(d)?.as_str() {
            "auto" => Ok(()),
            s => Err(serde::de::Error::custom(format!(
                "expected a number or \"auto\", got {s:?}"
            ))),
        }
    }
}

/// Runs the stages before it ahead on their own thread, into a buffer of `buffer_size`
/// elements, so the consumer (a training step) and the pipeline overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrefetchSpec {
    /// Elements buffered: a number, or `"auto"` (the default: two per CPU of the budget, 2
    /// to 16, then tuned within the RAM budget).
    #[serde(default = "auto_size")]
    pub buffer_size: BufferSize,
}

fn auto_size() -> BufferSize {
    BufferSize::Auto
}

impl Default for PrefetchSpec {
    fn default() -> Self {
        PrefetchSpec {
            buffer_size: BufferSize::Auto,
        }
    }
}

impl JsonSchema for BufferSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BufferSize".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number of elements, or \"auto\".",
            "oneOf": [{ "type": "integer", "minimum": 1 }, { "const": "auto" }]
        })
    }
}

impl Spec for PrefetchSpec {
    const KIND: &'static str = "prefetch";
    const SUMMARY: &'static str = "run ahead on a thread";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.buffer_size == BufferSize::Fixed(0) {
            return Err(Invalid::at(
                "buffer_size",
                "prefetch: `buffer_size` must be at least 1 or \"auto\"",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.prefetch(self.buffer_size))
    }
}

impl Stage for PrefetchSpec {
    fn name(&self) -> &'static str {
        "prefetch"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn tuning_params(&self) -> &'static [&'static str] {
        // The buffer's size never changes the elements.
        &["buffer_size"]
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let (capacity, knob) = match self.buffer_size {
            BufferSize::Fixed(n) => (n.max(1), None),
            BufferSize::Auto => {
                let initial = (2 * ctx.options().cpu_budget).clamp(2, 16);
                let knob = ctx.autotuned(KnobKind::BufferSize, initial, (1, MAX_BUFFER));
                (MAX_BUFFER, Some(knob))
            }
        };
        let upstream = crate::stages::single_input(inputs, "prefetch")?.open()?;
        ctx.metrics().set_workers(1);
        Ok(Box::new(PrefetchStream::start(
            upstream, capacity, 1, false, knob, None, ctx,
        )))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // Prefetch passes every element on: its input skips them (before its thread starts).
        let input = crate::stages::single_input(inputs, "prefetch")?.skipping(skip);
        let stream = self.build(std::slice::from_ref(&input), ctx)?;
        Ok((stream, input.skipped()))
    }

    fn runs_inline(&self) -> bool {
        false
    }
}
