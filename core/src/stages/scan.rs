//! `scan`: a function carrying a state from element to element (`tf.data.Dataset.scan`),
//! and the built-in stateful ops pipeline files name (`count`, `cumsum`, `running_mean`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::checkpoint::element_digest;
use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::parallel::panic_message;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::{DType, Tensor, TensorData};

/// The function of a `scan` stage: the state (an [`Element`], changed in place) and the
/// next element in; the output out (`None` drops the element; the state still changes).
pub type ScanFn = Arc<dyn Fn(&mut Element, Element) -> Result<Option<Element>> + Send + Sync>;

/// A running `scan`: the initial state, the function, and the label naming the function
/// in fingerprints.
#[derive(Clone)]
pub(crate) struct ScanStage {
    initial: Element,
    f: ScanFn,
    label: String,
    /// The built-in op it runs, checked with the pipeline.
    op: Option<ScanSpec>,
}

impl std::fmt::Debug for ScanStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanStage")
            .field("initial", &self.initial)
            .field("fn", &self.label)
            .finish()
    }
}

impl ScanStage {
    /// A scan from `initial` with `f`, labelled `label`.
    pub(crate) fn new(initial: Element, f: ScanFn, label: impl Into<String>) -> Self {
        ScanStage {
            initial,
            f,
            label: label.into(),
            op: None,
        }
    }
}

impl Stage for ScanStage {
    fn name(&self) -> &'static str {
        "scan"
    }

    fn params(&self) -> Params {
        // Closures cannot be inspected: their type name (or the built-in op as written)
        // and a digest of the initial state identify them.
        Params::new()
            .with("fn", &self.label)
            .with("initial_state", element_digest(&self.initial))
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        self.op.as_ref().map_or(Ok(()), Spec::validate)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "scan")?.open()?;
        Ok(Box::new(Scanned {
            upstream,
            state: self.initial.clone(),
            f: Arc::clone(&self.f),
            ctx: ctx.clone(),
        }))
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "`scan` carries a state through this host's stream, which an elastic resume on another number of hosts changes",
        ))
    }
}

/// The scan of one epoch: the state starts afresh from the initial one. A resumed run
/// replays the input up to the checkpoint, re-deriving the state.
struct Scanned {
    upstream: BoxStream,
    state: Element,
    f: ScanFn,
    ctx: BuildContext,
}

impl ElementStream for Scanned {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let mut e = match self.upstream.next()? {
                Ok(e) => e,
                Err(err) => return Some(Err(err)),
            };
            let (id, provenance, units) = (e.id(), e.provenance().cloned(), e.take_units());
            let state = &mut self.state;
            let f = &self.f;
            let result = match catch_unwind(AssertUnwindSafe(|| f(state, e))) {
                Ok(r) => r,
                Err(panic) => Err(Error::Panic {
                    stage: self.ctx.stage_label(),
                    message: panic_message(panic.as_ref()),
                }),
            };
            match result {
                Ok(Some(mut out)) => {
                    out.set_units(units);
                    return Some(Ok(out));
                }
                Ok(None) => self.ctx.filtered(&units),
                Err(err) => {
                    let err = Error::Stage {
                        stage: self.ctx.stage_label(),
                        element: Some(id),
                        provenance,
                        error: Box::new(err),
                    };
                    match self.ctx.on_error(err) {
                        Some(err) => return Some(Err(err)),
                        None => self.ctx.skipped(&units),
                    }
                }
            }
        }
    }
}

/// A built-in stateful op of a pipeline file's `scan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScanOp {
    /// The number of elements so far, this one included (1, 2, 3, ...), as an `int64`
    /// scalar. Reads no `input`.
    Count,
    /// The cumulative sum of `input`, value by value: `float` (float32) for float32
    /// values, `double` for float64, `int64` for integers (an overflow is an error).
    Cumsum,
    /// The mean of `input` so far, value by value: the sum in float64 divided by the
    /// count, as float32 (float64 for float64 values).
    RunningMean,
}

/// A stateful op over the stream (`tf.data`'s `scan` with a function tf.data users
/// often write): `count` numbers the elements from 1, `cumsum` sums `input` from element
/// to element, `running_mean` averages it; each writes `output` (default: `count` for
/// `count`, else replaces `input`). `input` must keep its dtype and shape from element to
/// element (an error names the feature and what was expected and found). The state lives
/// in the stage: a checkpoint resumes exactly (its state re-derived by replaying the input
/// up to it), and an epoch with `scan` after its unit points cannot be resumed
/// elastically on another number of hosts. A function of one's own is
/// `Dataset::scan` in Rust or `Pipeline.scan` in Python.
///
/// ```toml
/// [[stage]]
/// kind = "scan"
/// op = "cumsum"
/// input = "reward"
/// output = "return"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScanSpec {
    /// The op: `count`, `cumsum` or `running_mean`.
    pub op: ScanOp,
    /// The feature read (`cumsum`, `running_mean`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// The feature written (default: `count`, or `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl ScanSpec {
    /// `op` over `input` (`None` for `count`), replacing it.
    pub fn new(op: ScanOp, input: Option<&str>) -> Self {
        ScanSpec {
            op,
            input: input.map(str::to_string),
            output: None,
        }
    }

    /// This spec writing `output`.
    pub fn output(mut self, output: impl Into<String>) -> Self {
        self.output = Some(output.into());
        self
    }

    /// The feature written.
    fn output_name(&self) -> String {
        match (&self.output, &self.input) {
            (Some(out), _) => out.clone(),
            (None, Some(input)) => input.clone(),
            (None, None) => "count".to_string(),
        }
    }

    /// The running stage of the op: a scan labelled by the op as written (fingerprints,
    /// `explain`), from an empty state.
    pub(crate) fn stage(&self) -> ScanStage {
        let label = serde_json::to_string(self).unwrap_or_else(|_| format!("{self:?}"));
        ScanStage {
            op: Some(self.clone()),
            ..ScanStage::new(empty_state(), self.function(), label)
        }
    }

    /// The scan function of the op.
    pub(crate) fn function(&self) -> ScanFn {
        let op = self.op;
        let input = self.input.clone().unwrap_or_default();
        let output = self.output_name();
        Arc::new(move |state: &mut Element, mut e: Element| {
            let out = match op {
                ScanOp::Count => count(state),
                ScanOp::Cumsum => cumsum(state, &input, &e)?,
                ScanOp::RunningMean => running_mean(state, &input, &e)?,
            };
            e.insert(&output, out);
            Ok(Some(e))
        })
    }
}

impl Spec for ScanSpec {
    const KIND: &'static str = "scan";
    const SUMMARY: &'static str =
        "a running count, cumulative sum or running mean (`tf.data`'s `scan`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        match (self.op, &self.input) {
            (ScanOp::Count, Some(_)) => {
                return Err(Invalid::at(
                    "input",
                    "scan: `count` counts elements and reads no `input`",
                ));
            }
            (ScanOp::Cumsum | ScanOp::RunningMean, None) => {
                return Err(Invalid::at(
                    "input",
                    "scan: `cumsum` and `running_mean` need an `input` feature",
                ));
            }
            (_, Some(input)) if input.is_empty() => {
                return Err(Invalid::at("input", "scan: `input` names no feature"));
            }
            _ => {}
        }
        if self.output.as_deref() == Some("") {
            return Err(Invalid::at("output", "scan: `output` names no feature"));
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(Dataset::from_stage(self.stage(), vec![input.clone()]))
    }
}

/// The empty state the built-in scan ops start from.
fn empty_state() -> Element {
    Element::new(crate::element::ElementId::new(0, 0))
}

/// The state's `count` feature, plus one.
fn next_count(state: &mut Element) -> i64 {
    let n = state
        .tensor("count")
        .and_then(|t| t.as_i64())
        .map_or(0, |v| v[0])
        .saturating_add(1);
    state.insert("count", Tensor::scalar_i64(n));
    n
}

fn count(state: &mut Element) -> Tensor {
    Tensor::scalar_i64(next_count(state))
}

/// The dense `input` of `e`, of the dtype and shape the state recorded from the first
/// element (recorded now for the first).
fn read_input<'a>(state: &mut Element, input: &str, e: &'a Element) -> Result<&'a Tensor> {
    let x = e.tensor(input).ok_or_else(|| {
        Error::data_of(
            input,
            format!("scan: no feature `{input}` (or it is ragged)"),
        )
    })?;
    if x.dtype() == DType::Bytes {
        return Err(Error::data_of(
            input,
            format!("scan: feature `{input}` is string, expected a number"),
        ));
    }
    match state.tensor("dtype").and_then(|t| t.as_bytes_list()) {
        Some(names) => {
            let expected = String::from_utf8_lossy(&names[0]).into_owned();
            if expected != x.dtype().tf_name() {
                return Err(Error::data_of(
                    input,
                    format!(
                        "scan: feature `{input}` is {}, expected {expected} as in the first element",
                        x.dtype().tf_name()
                    ),
                ));
            }
        }
        None => state.insert(
            "dtype",
            Tensor::scalar_bytes(bytes::Bytes::from_static(x.dtype().tf_name().as_bytes())),
        ),
    }
    if let Some(sum) = state.tensor("sum")
        && sum.shape() != x.shape()
    {
        return Err(Error::data_of(
            input,
            format!(
                "scan: feature `{input}` has shape {:?}, expected {:?} as in the first element",
                x.shape(),
                sum.shape()
            ),
        ));
    }
    Ok(x)
}

/// A numeric tensor's values as float64 (strings were refused by `read_input`).
fn as_f64(x: &Tensor) -> Result<Vec<f64>> {
    Ok(match x.data() {
        TensorData::U8(v) => v.iter().map(|&a| f64::from(a)).collect(),
        TensorData::I32(v) => v.iter().map(|&a| f64::from(a)).collect(),
        TensorData::I64(v) => v.iter().map(|&a| a as f64).collect(),
        TensorData::F32(v) => v.iter().map(|&a| f64::from(a)).collect(),
        TensorData::F64(v) => v.to_vec(),
        TensorData::Bytes(_) => return Err(Error::internal("scan: a string input was summed")),
    })
}

/// An integer tensor's values as int64.
fn as_i64(x: &Tensor) -> Result<Vec<i64>> {
    Ok(match x.data() {
        TensorData::U8(v) => v.iter().map(|&a| i64::from(a)).collect(),
        TensorData::I32(v) => v.iter().map(|&a| i64::from(a)).collect(),
        TensorData::I64(v) => v.to_vec(),
        other => {
            return Err(Error::internal(format!(
                "scan: {} values summed as integers",
                other.dtype().tf_name()
            )));
        }
    })
}

fn cumsum(state: &mut Element, input: &str, e: &Element) -> Result<Tensor> {
    let x = read_input(state, input, e)?;
    let shape = x.shape().to_vec();
    let data = match (state.tensor("sum").map(Tensor::data), x.data()) {
        (None, TensorData::F32(v)) => TensorData::F32(v.to_vec().into()),
        (None, TensorData::F64(v)) => TensorData::F64(v.to_vec().into()),
        (None, _) => TensorData::I64(as_i64(x)?.into()),
        (Some(TensorData::F32(s)), TensorData::F32(v)) => TensorData::F32(
            s.iter()
                .zip(v.iter())
                .map(|(a, b)| a + b)
                .collect::<Vec<_>>()
                .into(),
        ),
        (Some(TensorData::F64(s)), TensorData::F64(v)) => TensorData::F64(
            s.iter()
                .zip(v.iter())
                .map(|(a, b)| a + b)
                .collect::<Vec<_>>()
                .into(),
        ),
        (Some(TensorData::I64(s)), _) => {
            let sum: Option<Vec<i64>> = s
                .iter()
                .zip(as_i64(x)?)
                .map(|(a, b)| a.checked_add(b))
                .collect();
            let sum = sum.ok_or_else(|| {
                Error::data_of(
                    input,
                    format!("scan: the cumulative sum of `{input}` overflows int64"),
                )
            })?;
            TensorData::I64(sum.into())
        }
        (Some(_), _) => {
            return Err(Error::internal(
                "scan: the state's sum and the input's dtype disagree",
            ));
        }
    };
    let sum = Tensor::new(&shape, data).map_err(|e| Error::internal(e.to_string()))?;
    state.insert("sum", sum.clone());
    Ok(sum)
}

fn running_mean(state: &mut Element, input: &str, e: &Element) -> Result<Tensor> {
    let x = read_input(state, input, e)?;
    let shape = x.shape().to_vec();
    let values = as_f64(x)?;
    let sum: Vec<f64> = match state.tensor("sum").map(Tensor::data) {
        Some(TensorData::F64(s)) => s.iter().zip(&values).map(|(a, b)| a + b).collect(),
        _ => values,
    };
    let n = next_count(state) as f64;
    let data = if x.dtype() == DType::F64 {
        TensorData::F64(sum.iter().map(|s| s / n).collect::<Vec<_>>().into())
    } else {
        TensorData::F32(
            sum.iter()
                .map(|s| (s / n) as f32)
                .collect::<Vec<_>>()
                .into(),
        )
    };
    let sum = Tensor::new(&shape, TensorData::F64(sum.into()))
        .map_err(|e| Error::internal(e.to_string()))?;
    state.insert("sum", sum);
    Tensor::new(&shape, data).map_err(|e| Error::internal(e.to_string()))
}
