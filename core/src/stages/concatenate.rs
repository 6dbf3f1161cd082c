//! `concatenate`: the elements of one dataset, then another's.

use serde::{Deserialize, Serialize};

use crate::element::Element;
use crate::error::Result;
use crate::params::Params;
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};

/// Yields every element of each input in turn. Inputs are opened only when reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ConcatenateSpec {}

impl Stage for ConcatenateSpec {
    fn name(&self) -> &'static str {
        "concatenate"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn build(&self, inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(ConcatStream {
            inputs: inputs.to_vec(),
            next_input: 0,
            current: None,
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        _ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // Skip through whole inputs, then into the one the position falls in.
        let mut left = skip;
        for (i, input) in inputs.iter().enumerate() {
            let input = input.skipping(left);
            let stream = input.open()?;
            left -= input.skipped();
            if left == 0 {
                return Ok((
                    Box::new(ConcatStream {
                        inputs: inputs.to_vec(),
                        next_input: i + 1,
                        current: Some(stream),
                    }),
                    skip,
                ));
            }
        }
        Ok((
            Box::new(ConcatStream {
                inputs: vec![],
                next_input: 0,
                current: None,
            }),
            skip - left,
        ))
    }
}

struct ConcatStream {
    inputs: Vec<Input>,
    next_input: usize,
    current: Option<BoxStream>,
}

impl ElementStream for ConcatStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if let Some(s) = self.current.as_mut() {
                if let Some(item) = s.next() {
                    return Some(item);
                }
                self.current = None;
            }
            let input = self.inputs.get(self.next_input)?;
            self.next_input += 1;
            match input.open() {
                Ok(s) => self.current = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
