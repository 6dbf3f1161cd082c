//! `sample_from`: interleave datasets by seeded random choice with weights.

use std::any::Any;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::rng::{StreamKey, StreamRng};
use crate::stage::{BuildContext, Input, Stage};
use crate::stream::{BoxStream, ElementStream};

/// Each element comes from input `i` with probability proportional to `weights[i]`
/// (`tf.data.Dataset.sample_from_datasets`). An exhausted input leaves the draw (the others'
/// weights are renormalised), unless `stop_on_empty` ends the whole stage then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleFromSpec {
    /// One non-negative weight per input, not all zero.
    pub weights: Vec<f64>,
    /// A seed for this stage; default: the pipeline's seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// End when any input is exhausted (default false).
    #[serde(default)]
    pub stop_on_empty: bool,
}

impl Stage for SampleFromSpec {
    fn name(&self) -> &'static str {
        "sample_from"
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        if inputs.len() != self.weights.len() || inputs.is_empty() {
            return Err(Error::invalid(format!(
                "sample_from: {} inputs but {} weights",
                inputs.len(),
                self.weights.len()
            )));
        }
        if self.weights.iter().any(|w| !w.is_finite() || *w < 0.0)
            || self.weights.iter().sum::<f64>() <= 0.0
        {
            return Err(Error::invalid(
                "sample_from: weights must be finite, non-negative and not all zero",
            ));
        }
        let key = StreamKey {
            seed: self.seed.unwrap_or(ctx.seed()),
            epoch: ctx.epoch(),
            stage: ctx.index() as u64,
        };
        Ok(Box::new(SampleStream {
            inputs: inputs
                .iter()
                .map(|i| i.open().map(Some))
                .collect::<Result<_>>()?,
            weights: self.weights.clone(),
            stop_on_empty: self.stop_on_empty,
            rng: key.rng(),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct SampleStream {
    inputs: Vec<Option<BoxStream>>,
    weights: Vec<f64>,
    stop_on_empty: bool,
    rng: StreamRng,
}

impl ElementStream for SampleStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let total: f64 = self
                .weights
                .iter()
                .zip(&self.inputs)
                .filter(|(_, s)| s.is_some())
                .map(|(w, _)| w)
                .sum();
            if total <= 0.0 {
                return None;
            }
            let mut x = self.rng.random::<f64>() * total;
            let mut pick = None;
            for (i, (w, s)) in self.weights.iter().zip(&self.inputs).enumerate() {
                if s.is_none() || *w == 0.0 {
                    continue;
                }
                pick = Some(i);
                if x < *w {
                    break;
                }
                x -= w;
            }
            let i = pick?;
            match self.inputs[i].as_mut().expect("live input").next() {
                Some(item) => return Some(item),
                None => {
                    if self.stop_on_empty {
                        return None;
                    }
                    self.inputs[i] = None;
                }
            }
        }
    }
}
