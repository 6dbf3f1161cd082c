//! `shard`: keep one of every `num_shards` elements.

use serde::{Deserialize, Serialize};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// Keeps the elements at positions `index`, `index + num_shards`, ... Applied to a TFRecord
/// source (before its records are read) it shards the file list instead, so each worker
/// reads only its files; the builder does that rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardSpec {
    /// Number of shards (≥ 1).
    pub num_shards: u64,
    /// This shard (< `num_shards`).
    pub index: u64,
}

impl Stage for ShardSpec {
    fn name(&self) -> &'static str {
        "shard"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        if self.num_shards == 0 || self.index >= self.num_shards {
            return Err(Error::invalid(format!(
                "shard: index {} must be below num_shards {}",
                self.index, self.num_shards
            )));
        }
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
