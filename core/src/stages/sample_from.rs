//! `sample_from`: interleave datasets by seeded random choice with weights.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::element::Element;
use crate::error::Result;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::plan::PlanNode;
use crate::rng::{StreamKey, StreamRng};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};
use std::sync::Arc;

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

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.weights.is_empty() {
            return Err(Invalid::at(
                "weights",
                "sample_from: `weights` needs one weight per input",
            ));
        }
        if self.weights.iter().any(|w| !w.is_finite() || *w < 0.0)
            || self.weights.iter().sum::<f64>() <= 0.0
        {
            return Err(Invalid::at(
                "weights",
                "sample_from: weights must be finite, non-negative and not all zero",
            ));
        }
        Ok(())
    }

    fn check_inputs(&self, inputs: &[Arc<PlanNode>]) -> std::result::Result<(), String> {
        if inputs.len() != self.weights.len() {
            return Err(format!(
                "sample_from: {} inputs but {} weights",
                inputs.len(),
                self.weights.len()
            ));
        }
        Ok(())
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
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
