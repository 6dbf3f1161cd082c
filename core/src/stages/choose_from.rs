//! `choose_from`: take each element from the input a choice stream names
//! (`tf.data.Dataset.choose_from_datasets`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::plan::PlanNode;
use crate::run::{BuildContext, Input};
use crate::stage::{Arity, Stage};
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::TensorData;

/// Its first input is the choice stream: each of its elements holds the integer scalar
/// `feature` (`int64` as TensorFlow's, or `int32`/`uint8`), the index (from 0) of the data input the next element comes from; the other
/// inputs are the data. tf.data's `choose_from_datasets(datasets, choice_dataset,
/// stop_on_empty_dataset)`, with its semantics:
///
/// - the stage ends when the choice stream ends;
/// - a choice outside `[0, number of data inputs)` is an error (TensorFlow's `Selector
///   index out of range`), carried in the stream;
/// - when the chosen input is exhausted, `stop_on_empty` (TensorFlow's default, `true`)
///   ends the stage; otherwise that input is dropped, later choices of it are skipped, and
///   the stage ends when every data input is exhausted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChooseFromSpec {
    /// The choice element's feature holding the index (default `value`, what
    /// [`Dataset::range`](crate::Dataset::range) writes).
    pub feature: String,
    /// End when a chosen input is exhausted (default true, as TensorFlow).
    pub stop_on_empty: bool,
}

impl Default for ChooseFromSpec {
    fn default() -> Self {
        ChooseFromSpec {
            feature: "value".to_string(),
            stop_on_empty: true,
        }
    }
}

impl Stage for ChooseFromSpec {
    fn name(&self) -> &'static str {
        "choose_from"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn arity(&self) -> Arity {
        Arity::AtLeast(2)
    }

    fn check_inputs(&self, inputs: &[Arc<PlanNode>]) -> std::result::Result<(), String> {
        if inputs.len() < 2 {
            return Err(format!(
                "choose_from: needs a choice input and at least one data input, got {} input(s)",
                inputs.len()
            ));
        }
        Ok(())
    }

    fn build(&self, inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        let (choice, data) = inputs
            .split_first()
            .ok_or_else(|| Error::internal("choose_from: no inputs"))?;
        Ok(Box::new(ChooseStream {
            choice: Some(choice.open()?),
            data: data
                .iter()
                .map(|i| i.open().map(Some))
                .collect::<Result<_>>()?,
            active: data.len(),
            feature: self.feature.clone(),
            stop_on_empty: self.stop_on_empty,
            chosen: 0,
        }))
    }
}

struct ChooseStream {
    /// `None` once the stage has ended.
    choice: Option<BoxStream>,
    data: Vec<Option<BoxStream>>,
    active: usize,
    feature: String,
    stop_on_empty: bool,
    /// Choices read so far (for error context).
    chosen: u64,
}

impl ChooseStream {
    fn end(&mut self) -> Option<Result<Element>> {
        self.choice = None;
        None
    }

    /// The index the choice element names.
    fn index(&self, choice: &Element) -> Result<usize> {
        let t = choice
            .tensor(&self.feature)
            .ok_or_else(|| Error::InvalidData {
                message: format!(
                    "choose_from: choice {} has no feature `{}` (it has: {})",
                    self.chosen,
                    self.feature,
                    choice
                        .names()
                        .iter()
                        .map(|n| n.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                feature: Some(self.feature.clone()),
            })?;
        let value = match (t.data(), t.shape().is_empty()) {
            (TensorData::I64(v), true) => v[0],
            (TensorData::I32(v), true) => i64::from(v[0]),
            (TensorData::U8(v), true) => i64::from(v[0]),
            _ => {
                return Err(Error::InvalidData {
                    message: format!(
                        "choose_from: choice {}: `{}` must be an integer scalar, found {} of shape {:?}",
                        self.chosen,
                        self.feature,
                        t.dtype(),
                        t.shape()
                    ),
                    feature: Some(self.feature.clone()),
                });
            }
        };
        usize::try_from(value)
            .ok()
            .filter(|&i| i < self.data.len())
            .ok_or_else(|| Error::InvalidData {
                message: format!(
                    "choose_from: choice {}: selector index out of range: {value} is not in [0, {})",
                    self.chosen,
                    self.data.len()
                ),
                feature: Some(self.feature.clone()),
            })
    }
}

impl ElementStream for ChooseStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let choice = match self.choice.as_mut()?.next() {
                None => return self.end(),
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(c)) => c,
            };
            let index = self.index(&choice);
            self.chosen += 1;
            let i = match index {
                Ok(i) => i,
                Err(e) => return Some(Err(e)),
            };
            let Some(input) = self.data[i].as_mut() else {
                continue;
            };
            match input.next() {
                Some(item) => return Some(item),
                None if self.stop_on_empty => return self.end(),
                None => {
                    self.data[i] = None;
                    self.active -= 1;
                    if self.active == 0 {
                        return self.end();
                    }
                }
            }
        }
    }
}
