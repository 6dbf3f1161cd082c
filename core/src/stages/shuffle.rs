//! `shuffle`: a buffered, seeded shuffle (`tf.data.Dataset.shuffle`).

use std::sync::Arc;

use rand::Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::rng::{StreamKey, StreamRng};
use crate::run::ledger::Account;
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// Fills a buffer of `buffer_size` elements and emits a uniformly chosen one each time,
/// replacing it with the next input (`tf.data.Dataset.shuffle`). A buffer as large as the
/// dataset gives a uniform permutation; the buffer counts against the RAM budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShuffleSpec {
    /// Elements held in the buffer (≥ 1).
    #[schemars(range(min = 1))]
    pub buffer_size: usize,
    /// A seed for this stage; default: the pipeline's seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Shuffle differently each epoch (default true). With false, every epoch has the same
    /// order.
    #[serde(default = "yes")]
    pub reshuffle_each_epoch: bool,
}

fn yes() -> bool {
    true
}

impl ShuffleSpec {
    /// A shuffle buffer of `buffer_size`, reshuffling each epoch with the pipeline's seed.
    pub fn new(buffer_size: usize) -> Self {
        ShuffleSpec {
            buffer_size,
            seed: None,
            reshuffle_each_epoch: true,
        }
    }
}

impl Spec for ShuffleSpec {
    const KIND: &'static str = "shuffle";
    const SUMMARY: &'static str = "a seeded shuffle buffer";

    fn validate(&self) -> Result<(), Invalid> {
        if self.buffer_size == 0 {
            return Err(Invalid::at(
                "buffer_size",
                "shuffle: `buffer_size` must be at least 1",
            ));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(input.shuffle_with(*self))
    }
}

impl Stage for ShuffleSpec {
    fn name(&self) -> &'static str {
        "shuffle"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn validate(&self) -> Result<(), Invalid> {
        Spec::validate(self)
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "shuffle")?.open()?;
        let key = StreamKey {
            seed: self.seed.unwrap_or(ctx.seed()),
            epoch: if self.reshuffle_each_epoch {
                ctx.epoch()
            } else {
                0
            },
            stage: ctx.index() as u64,
        };
        Ok(Box::new(ShuffleStream {
            upstream: Some(upstream),
            buffer: Vec::with_capacity(self.buffer_size.min(1 << 16)),
            size: self.buffer_size,
            rng: key.rng(),
            account: ctx.account(),
            ctx: ctx.clone(),
        }))
    }
}

struct ShuffleStream {
    upstream: Option<BoxStream>,
    buffer: Vec<Element>,
    size: usize,
    rng: StreamRng,
    /// Bytes held in the buffer, in the run's byte ledger; the buffer alone may not hold
    /// more than the RAM budget (it fills on its consumer's thread: it cannot wait).
    account: Arc<Account>,
    ctx: BuildContext,
}

impl ElementStream for ShuffleStream {
    fn next(&mut self) -> Option<Result<Element>> {
        while self.buffer.len() < self.size {
            let Some(up) = self.upstream.as_mut() else {
                break;
            };
            match up.next() {
                Some(Ok(e)) => {
                    self.account.force(e.nbytes() as u64);
                    if self.account.held() > self.account.budget() {
                        self.upstream = None;
                        self.buffer.clear();
                        self.account.release_all();
                        return Some(Err(self.ctx.stream_error(Error::ram_budget(format!(
                            "the shuffle buffer of {} elements holds more than the RAM budget of {} bytes; \
                             use a smaller `buffer_size` or raise `ram_budget`",
                            self.size,
                            self.account.budget()
                        )))));
                    }
                    self.buffer.push(e);
                }
                Some(Err(e)) => return Some(Err(e)),
                None => self.upstream = None,
            }
        }
        self.ctx
            .metrics()
            .sample_buffer(self.buffer.len(), self.size);
        if self.buffer.is_empty() {
            return None;
        }
        let i = self.rng.random_range(0..self.buffer.len());
        let e = self.buffer.swap_remove(i);
        self.account.hand_out(e.nbytes() as u64);
        Some(Ok(e))
    }
}
