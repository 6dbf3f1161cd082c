//! `shard`: keep one of every `num_shards` elements.

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

/// Keeps shard `index` of `num_shards`: the elements at positions `index`, `index +
/// num_shards`, ... (record level). Right after a file source or `interleave`, when there are
/// enough files (each shard gets at least one and no shard more than 1.25× another's count),
/// it shards the **file list** instead, so each worker reads only its files (file level). On
/// a global shuffle it takes positions `index`, `index + num_shards`, ... of the one global
/// permutation, the same on every worker for a seed. Every record is in exactly one shard;
/// `explain` shows which level was chosen (the `shard_pushdown` rule).
///
/// ```toml
/// [[stage]]
/// kind = "shard"
/// num_shards = 8
/// index = 3
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShardSpec {
    /// Number of shards (≥ 1).
    #[schemars(range(min = 1))]
    pub num_shards: u64,
    /// This shard (< `num_shards`).
    pub index: u64,
}

impl Spec for ShardSpec {
    const KIND: &'static str = "shard";
    const SUMMARY: &'static str =
        "keep one shard of the files (right after the source) or of the elements";

    fn validate(&self) -> Result<(), Invalid> {
        if self.num_shards == 0 {
            return Err(Invalid::at(
                "num_shards",
                "shard: `num_shards` must be at least 1",
            ));
        }
        if self.index >= self.num_shards {
            return Err(Invalid::at(
                "index",
                format!(
                    "shard: `index` {} must be below `num_shards` {}",
                    self.index, self.num_shards
                ),
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(input.shard(self.num_shards, self.index))
    }
}

impl Stage for ShardSpec {
    fn name(&self) -> &'static str {
        "shard"
    }

    fn validate(&self) -> Result<(), Invalid> {
        Spec::validate(self)
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(ShardStream {
            upstream: crate::stages::single_input(inputs, "shard")?.open()?,
            position: 0,
            spec: *self,
        }))
    }
}

struct ShardStream {
    upstream: BoxStream,
    position: u64,
    spec: ShardSpec,
}

impl ElementStream for ShardStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let item = self.upstream.next()?;
            if item.is_err() {
                return Some(item);
            }
            let keep = self.position % self.spec.num_shards == self.spec.index;
            self.position += 1;
            if keep {
                return Some(item);
            }
        }
    }
}
