//! `repeat`: iterate the input `count` times, or forever.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::rng::combine;
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// Re-opens its input after each pass. Each pass is a new epoch for the stages before it (so
/// shuffles reshuffle). A pass that yields nothing ends the repetition (as tf.data does), so
/// `repeat` over an empty dataset does not spin forever. Without `count` the pipeline never
/// ends: use `take` or `sluice run --take N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RepeatSpec {
    /// Passes; `None` repeats forever.
    #[serde(default)]
    pub count: Option<u64>,
}

impl Spec for RepeatSpec {
    const KIND: &'static str = "repeat";
    const SUMMARY: &'static str = "`count` passes over the input, or forever";

    fn validate(&self) -> Result<(), Invalid> {
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(input.repeat(self.count))
    }
}

impl Stage for RepeatSpec {
    fn name(&self) -> &'static str {
        "repeat"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "`repeat` after the unit points reads each record several times in one epoch; iterate epochs instead (an elastic checkpoint counts records per epoch)",
        ))
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, "repeat")?.clone();
        Ok(Box::new(RepeatStream {
            input,
            current: None,
            pass: 0,
            count: self.count,
            produced_in_pass: false,
            epoch: ctx.epoch(),
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // Skip whole passes by their skipped counts, then into the pass the position is in.
        let input = crate::stages::single_input(inputs, "repeat")?;
        let mut left = skip;
        let mut pass = 0;
        loop {
            if self.count.is_some_and(|c| pass >= c) {
                break;
            }
            let epoch = if pass == 0 {
                ctx.epoch()
            } else {
                combine(&[ctx.epoch(), pass])
            };
            let skipping = input.skipping(left);
            let stream = skipping.open_epoch(epoch)?;
            let k = skipping.skipped();
            if k == left {
                return Ok((
                    Box::new(RepeatStream {
                        input: input.clone(),
                        current: Some(stream),
                        pass,
                        count: self.count,
                        produced_in_pass: k > 0,
                        epoch: ctx.epoch(),
                    }),
                    skip,
                ));
            }
            if k == 0 {
                // An empty pass ends the repetition.
                break;
            }
            left -= k;
            pass += 1;
        }
        Ok((
            Box::new(RepeatStream {
                input: input.clone(),
                current: None,
                pass,
                count: Some(0),
                produced_in_pass: false,
                epoch: ctx.epoch(),
            }),
            skip - left,
        ))
    }
}

struct RepeatStream {
    input: Input,
    current: Option<BoxStream>,
    pass: u64,
    count: Option<u64>,
    produced_in_pass: bool,
    epoch: u64,
}

impl ElementStream for RepeatStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if self.current.is_none() {
                if self.count.is_some_and(|c| self.pass >= c) {
                    return None;
                }
                let epoch = if self.pass == 0 {
                    self.epoch
                } else {
                    combine(&[self.epoch, self.pass])
                };
                match self.input.open_epoch(epoch) {
                    Ok(s) => self.current = Some(s),
                    Err(e) => {
                        self.count = Some(0);
                        return Some(Err(e));
                    }
                }
                self.produced_in_pass = false;
            }
            match self.current.as_mut().expect("opened").next() {
                Some(item) => {
                    self.produced_in_pass = true;
                    return Some(item);
                }
                None => {
                    self.current = None;
                    self.pass += 1;
                    if !self.produced_in_pass {
                        return None;
                    }
                }
            }
        }
    }
}
