//! `zip`: combine the i-th elements of several datasets.

use serde::{Deserialize, Serialize};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::run::{BuildContext, Input};
use crate::stage::{Arity, Stage};
use crate::stream::{BoxStream, ElementStream};

/// Yields one element per position holding the values of every input's element there
/// (names must not clash). Ends with the shortest input. The id and provenance are those of
/// the first input's element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ZipSpec {}

impl Stage for ZipSpec {
    fn name(&self) -> &'static str {
        "zip"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn arity(&self) -> Arity {
        Arity::AtLeast(1)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(ZipStream {
            inputs: inputs.iter().map(Input::open).collect::<Result<_>>()?,
            ctx: ctx.clone(),
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // One output per input: skip inputs without doing this stage's work.
        crate::run::build_one_to_one(self, inputs, ctx, skip)
    }
}

struct ZipStream {
    inputs: Vec<BoxStream>,
    ctx: BuildContext,
}

impl ElementStream for ZipStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let mut parts = Vec::with_capacity(self.inputs.len());
            for s in &mut self.inputs {
                match s.next()? {
                    Ok(e) => parts.push(e),
                    Err(e) => return Some(Err(e)),
                }
            }
            let mut out = parts[0].clone();
            out.set_units(crate::stages::batch::units_of(&parts));
            let mut clash = None;
            for p in &parts[1..] {
                for (name, v) in p.iter() {
                    if out.get(name).is_some() {
                        clash = Some(name.to_string());
                    }
                    out.insert(name, v.clone());
                }
            }
            match clash {
                None => return Some(Ok(out)),
                Some(name) => {
                    let e = Error::data(format!(
                        "zip: two inputs have a value named {name:?}; rename one with a map first"
                    ));
                    if let Some(e) = self.ctx.on_element_error(&out, e) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}
