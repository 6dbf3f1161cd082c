//! `parse_sequence_example`: `tf.train.SequenceExample` records → context and per-step
//! values, as `tf.io.parse_single_sequence_example` / `tf.io.parse_sequence_example` give
//! them.

use std::collections::BTreeMap;

use bytes::Bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sluice_proto::example::{Feature, feature::Kind};
use sluice_proto::{SequenceExample, TfMessage};

use super::columns::{Column, RawColumn, missing, wrong_count};
use super::composite::sequence_tensor;
use super::{
    FeatureSpec, FeatureType, check_feature, check_output_names, default_tensor, record_name,
};
use crate::dataset::Dataset;
use crate::element::{Element, Ragged, Value};
use crate::error::{Error, Result};
use crate::invalid::{Invalid, Key};
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::{DType, Shape, Tensor, TensorData};

/// Parses serialized `tf.train.SequenceExample`s (`tf.io.parse_single_sequence_example`, and
/// after `batch` `tf.io.parse_sequence_example`), replacing the `input` value by the context
/// features and the sequence features (feature lists), each under its own name (the two
/// tables must not share names).
///
/// Context features are `fixed_len` (default) or `var_len`, as in `parse_example`. Sequence
/// features are `fixed_len_sequence` (each step exactly `shape.product()` values: `[steps,
/// ...shape]`; batched `[records, longest, ...shape]` padded with zero or empty, plus
/// `<name>.lengths`, each record's steps, as TensorFlow's lengths; a missing feature list is
/// an error unless `allow_missing = true`, which gives no steps; no `default`, as TensorFlow)
/// or `var_len` (ragged over the steps; batched `<name>.flat_values`, `<name>.row_splits.0`
/// over records and `<name>.row_splits.1` over steps). A step whose `Feature` has no list is
/// empty. Errors are worded as TensorFlow words them and name the feature, the record's
/// position in its batch and the step.
///
/// ```toml
/// [[stage]]
/// kind = "parse_sequence_example"
/// context_features.length = { dtype = "int64" }
/// context_features.tags = { dtype = "string", kind = "var_len" }
/// sequence_features.tokens = { dtype = "int64", kind = "fixed_len_sequence" }
/// sequence_features.frames = { dtype = "float", kind = "fixed_len_sequence", shape = [3], allow_missing = true }
/// sequence_features.words = { dtype = "string", kind = "var_len" }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParseSequenceExampleSpec {
    /// Features of the record's `context`, by name: `fixed_len` or `var_len`.
    #[serde(default)]
    pub context_features: BTreeMap<String, FeatureSpec>,
    /// Feature lists of the record's `feature_lists`, by name: `fixed_len_sequence` or
    /// `var_len`.
    #[serde(default)]
    pub sequence_features: BTreeMap<String, FeatureSpec>,
    /// The value holding the serialized record(s). Default `record`.
    #[serde(default = "record_name")]
    pub input: String,
}

impl ParseSequenceExampleSpec {
    /// A spec for these context and sequence features, reading the `record` value.
    pub fn new(
        context: impl IntoIterator<Item = (impl Into<String>, FeatureSpec)>,
        sequence: impl IntoIterator<Item = (impl Into<String>, FeatureSpec)>,
    ) -> Self {
        ParseSequenceExampleSpec {
            context_features: context.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            sequence_features: sequence.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            input: record_name(),
        }
    }

    /// Parses one serialized SequenceExample (`tf.io.parse_single_sequence_example`): the
    /// context outputs, then the sequence ones, each in name order. `index` is the record's
    /// position in its batch, for messages.
    pub fn parse_one(&self, record: &Bytes, index: usize) -> Result<Vec<(String, Value)>> {
        self.parse(std::slice::from_ref(record), Some(index))
    }

    /// Parses a batch of serialized SequenceExamples (`tf.io.parse_sequence_example`).
    pub fn parse_batch(&self, records: &[Bytes]) -> Result<Vec<(String, Value)>> {
        self.parse(records, None)
    }

    fn parse(&self, records: &[Bytes], single: Option<usize>) -> Result<Vec<(String, Value)>> {
        let rows = records.len();
        let mut context: Vec<Acc> = self
            .context_features
            .values()
            .map(|s| Acc::new(s.dtype()))
            .collect();
        let mut sequence: Vec<SeqAcc> = self
            .sequence_features
            .values()
            .map(|s| SeqAcc::new(s.dtype()))
            .collect();
        for (r, record) in records.iter().enumerate() {
            let index = single.unwrap_or(r);
            let parsed = SequenceExample::from_bytes(record).map_err(|e| {
                Error::data(format!(
                    "Could not parse sequence example input (index {index}): Invalid protocol message input: {e}"
                ))
            })?;
            let empty = BTreeMap::new();
            let ctx = parsed
                .context
                .as_ref()
                .map(|f| &f.feature)
                .unwrap_or(&empty);
            for ((key, spec), acc) in self.context_features.iter().zip(&mut context) {
                acc.push_context(key, spec, ctx.get(key), index)?;
            }
            let empty_lists = BTreeMap::new();
            let lists = parsed
                .feature_lists
                .as_ref()
                .map(|f| &f.feature_list)
                .unwrap_or(&empty_lists);
            for ((key, spec), acc) in self.sequence_features.iter().zip(&mut sequence) {
                acc.push(key, spec, lists.get(key).map(|l| &l.feature[..]), index)?;
            }
        }
        let batched = single.is_none();
        let mut out = Vec::new();
        for ((key, spec), acc) in self.context_features.iter().zip(context) {
            let data = acc.values.into_data();
            let value = match spec {
                FeatureSpec::FixedLen { shape, .. } => {
                    let mut full = Shape::new();
                    if batched {
                        full.push(rows);
                    }
                    full.extend_from_slice(shape);
                    Value::Dense(Tensor::new(&full, data)?)
                }
                _ if !batched => Value::Dense(Tensor::vector(data)),
                _ if rows == 0 => Value::Dense(Tensor::new(&[0, 0], data)?),
                _ => Value::Ragged(Ragged {
                    values: Tensor::vector(data),
                    row_splits: acc.splits.into(),
                }),
            };
            out.push((key.clone(), value));
        }
        for ((key, spec), acc) in self.sequence_features.iter().zip(sequence) {
            acc.finish(key, spec, rows, batched, &mut out)?;
        }
        Ok(out)
    }
}

/// A context feature's values for the batch.
struct Acc {
    values: Column,
    /// Row splits over records (VarLen features).
    splits: Vec<i64>,
}

impl Acc {
    fn new(dtype: FeatureType) -> Self {
        Acc {
            values: Column::with_capacity(dtype, 0),
            splits: vec![0],
        }
    }

    fn push_context(
        &mut self,
        key: &str,
        spec: &FeatureSpec,
        feature: Option<&Feature>,
        index: usize,
    ) -> Result<()> {
        let want = spec.dtype();
        let kind = feature.and_then(|f| f.kind.as_ref());
        if let Some(k) = kind
            && kind_type(k) != want
        {
            return Err(Error::data_of(
                key,
                format!(
                    "Context feature: {key}, Index: {index}.  Data types don't match. Expected type: {}, Actual type: {}",
                    want.tf_name(),
                    kind_type(k).tf_name()
                ),
            ));
        }
        let before = self.values.len();
        if let Some(k) = kind {
            append(&mut self.values, k);
        }
        match spec {
            FeatureSpec::FixedLen {
                dtype,
                shape,
                default,
            } => {
                if feature.is_none() {
                    let Some(default) = default else {
                        return Err(context_error(missing(key, want), index));
                    };
                    let data = default_tensor(key, *dtype, shape, default)?.data().clone();
                    self.values.extend(&data)?;
                } else {
                    let count = self.values.len() - before;
                    if count != shape.iter().product::<usize>() {
                        return Err(context_error(
                            wrong_count(key, index, want, count, shape),
                            index,
                        ));
                    }
                }
            }
            _ => self.splits.push(self.values.len() as i64),
        }
        Ok(())
    }
}

/// A context feature's error as TensorFlow's sequence parser words it (`Context feature:`).
fn context_error(e: Error, index: usize) -> Error {
    let feature = e.feature().map(str::to_string);
    let message = e.to_string();
    let message = match &feature {
        Some(f) if message.starts_with("Feature: ") => {
            format!("Context feature: {f}, Index: {index}.  {message}")
        }
        Some(f) => message.replacen(&format!("Key: {f},"), &format!("Context feature: {f},"), 1),
        None => message,
    };
    match feature {
        Some(f) => Error::data_of(&f, message),
        None => Error::data(message),
    }
}

/// A sequence feature's values for the batch: values, splits over steps, steps per record.
struct SeqAcc {
    values: Column,
    /// Offsets of each step's values (`[0]` to start).
    step_splits: Vec<i64>,
    /// Offsets of each record's steps (`[0]` to start).
    record_splits: Vec<i64>,
}

impl SeqAcc {
    fn new(dtype: FeatureType) -> Self {
        SeqAcc {
            values: Column::with_capacity(dtype, 0),
            step_splits: vec![0],
            record_splits: vec![0],
        }
    }

    fn push(
        &mut self,
        key: &str,
        spec: &FeatureSpec,
        steps: Option<&[Feature]>,
        index: usize,
    ) -> Result<()> {
        let want = spec.dtype();
        let steps = match (steps, spec) {
            (Some(steps), _) => steps,
            (
                None,
                FeatureSpec::FixedLenSequence {
                    allow_missing: false,
                    ..
                },
            ) => {
                return Err(Error::data_of(
                    key,
                    format!(
                        "Feature list: {key}, Index: {index}.  Feature list '{key}' is required but could not be found.  Did you mean to include it in feature_list_dense_missing_assumed_empty or feature_list_dense_defaults?"
                    ),
                ));
            }
            (None, _) => &[],
        };
        for (step, feature) in steps.iter().enumerate() {
            let before = self.values.len();
            if let Some(k) = &feature.kind {
                if kind_type(k) != want {
                    return Err(Error::data_of(
                        key,
                        format!(
                            "Feature list: {key}, Index: {index}, Step: {step}.  Data types don't match. Expected type: {}, Actual type: {}",
                            want.tf_name(),
                            kind_type(k).tf_name()
                        ),
                    ));
                }
                append(&mut self.values, k);
            }
            if let FeatureSpec::FixedLenSequence { shape, .. } = spec {
                let count = self.values.len() - before;
                if count != shape.iter().product::<usize>() {
                    return Err(Error::data_of(
                        key,
                        format!(
                            "Key: {key}, Index: {step}, Record: {index}.  Number of values != expected.  values size: {count} but output shape: {}",
                            super::shape_str(shape)
                        ),
                    ));
                }
            }
            self.step_splits.push(self.values.len() as i64);
        }
        self.record_splits.push((self.step_splits.len() - 1) as i64);
        Ok(())
    }

    fn finish(
        self,
        key: &str,
        spec: &FeatureSpec,
        rows: usize,
        batched: bool,
        out: &mut Vec<(String, Value)>,
    ) -> Result<()> {
        let data = self.values.into_data();
        match spec {
            FeatureSpec::FixedLenSequence { dtype, shape, .. } => {
                // Each record's values, split as one FixedLenSequence column.
                let value_splits: Vec<i64> = self
                    .record_splits
                    .iter()
                    .map(|&s| self.step_splits[s as usize])
                    .collect();
                let column = RawColumn {
                    data,
                    splits: value_splits,
                };
                let tensor = sequence_tensor(key, &column, rows, *dtype, shape, None, batched)?;
                out.push((key.to_string(), Value::Dense(tensor)));
                if batched {
                    let lengths: Vec<i64> =
                        self.record_splits.windows(2).map(|w| w[1] - w[0]).collect();
                    out.push((
                        format!("{key}.lengths"),
                        Value::Dense(Tensor::vector(TensorData::I64(lengths.into()))),
                    ));
                }
            }
            _ if !batched => out.push((
                key.to_string(),
                Value::Ragged(Ragged::new(Tensor::vector(data), self.step_splits.into())?),
            )),
            _ => {
                out.push((
                    format!("{key}.flat_values"),
                    Value::Dense(Tensor::vector(data)),
                ));
                out.push((
                    format!("{key}.row_splits.0"),
                    Value::Dense(Tensor::vector(TensorData::I64(self.record_splits.into()))),
                ));
                out.push((
                    format!("{key}.row_splits.1"),
                    Value::Dense(Tensor::vector(TensorData::I64(self.step_splits.into()))),
                ));
            }
        }
        Ok(())
    }
}

fn kind_type(kind: &Kind) -> FeatureType {
    match kind {
        Kind::BytesList(_) => FeatureType::String,
        Kind::FloatList(_) => FeatureType::Float,
        Kind::Int64List(_) => FeatureType::Int64,
    }
}

/// Appends a list's values to a column of its type (checked by the caller).
fn append(column: &mut Column, kind: &Kind) {
    match (column, kind) {
        (Column::Bytes(v), Kind::BytesList(l)) => v.extend_from_slice(&l.value),
        (Column::Float(v), Kind::FloatList(l)) => v.extend_from_slice(&l.value),
        (Column::Int64(v), Kind::Int64List(l)) => v.extend_from_slice(&l.value),
        _ => {}
    }
}

impl Spec for ParseSequenceExampleSpec {
    const KIND: &'static str = "parse_sequence_example";
    const SUMMARY: &'static str =
        "`tf.train.SequenceExample` records to context and per-step tensors";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        const STAGE: &str = "parse_sequence_example";
        if self.context_features.is_empty() && self.sequence_features.is_empty() {
            return Err(Invalid::at(
                "context_features",
                "parse_sequence_example: needs at least one context or sequence feature",
            ));
        }
        if self.input.is_empty() {
            return Err(Invalid::at(
                "input",
                "parse_sequence_example: `input` must name a value",
            ));
        }
        for (table, features) in [
            ("context_features", &self.context_features),
            ("sequence_features", &self.sequence_features),
        ] {
            for (name, f) in features {
                let at = |key: &str| vec![Key::name(table), Key::name(name), Key::name(key)];
                let allowed = matches!(
                    (table, f),
                    (
                        "context_features",
                        FeatureSpec::FixedLen { .. } | FeatureSpec::VarLen { .. },
                    ) | (
                        "sequence_features",
                        FeatureSpec::FixedLenSequence { .. } | FeatureSpec::VarLen { .. },
                    )
                );
                if !allowed {
                    let kinds = if table == "context_features" {
                        "fixed_len or var_len"
                    } else {
                        "fixed_len_sequence or var_len"
                    };
                    return Err(Invalid::new(
                        at("kind"),
                        format!(
                            "{STAGE}: `{table}.{name}` is {}; {table} are {kinds}",
                            f.kind_name()
                        ),
                    ));
                }
                if let FeatureSpec::FixedLenSequence {
                    default: Some(_), ..
                } = f
                {
                    return Err(Invalid::new(
                        at("default"),
                        format!(
                            "{STAGE}: sequence feature `{name}` takes no default (TensorFlow: Value feature_list.dense_defaults[{name}] must be None); missing steps pad with zero"
                        ),
                    ));
                }
                check_feature(STAGE, name, f, at)?;
                if let FeatureSpec::FixedLen {
                    dtype,
                    shape,
                    default: Some(default),
                } = f
                {
                    default_tensor(name, *dtype, shape, default)
                        .map_err(|e| Invalid::new(at("default"), format!("{STAGE}: {e}")))?;
                }
            }
        }
        check_output_names(
            STAGE,
            self.context_features
                .iter()
                .map(|(k, s)| {
                    (
                        k.as_str(),
                        s,
                        vec![Key::name("context_features"), Key::name(k)],
                    )
                })
                .chain(self.sequence_features.iter().map(|(k, s)| {
                    (
                        k.as_str(),
                        s,
                        vec![Key::name("sequence_features"), Key::name(k)],
                    )
                })),
        )
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.parse_sequence_example(self.clone()))
    }
}

impl Stage for ParseSequenceExampleSpec {
    fn name(&self) -> &'static str {
        "parse_sequence_example"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(SequenceStream {
            upstream: crate::stages::single_input(inputs, "parse_sequence_example")?.open()?,
            spec: self.clone(),
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

struct SequenceStream {
    upstream: BoxStream,
    spec: ParseSequenceExampleSpec,
    ctx: BuildContext,
}

impl SequenceStream {
    fn parse(&self, element: &Element) -> Result<Vec<(String, Value)>> {
        let records = match element.tensor(&self.spec.input) {
            Some(t) if t.dtype() == DType::Bytes && t.rank() <= 1 => t,
            _ => {
                return Err(Error::data(format!(
                    "parse_sequence_example: value {:?} must be a scalar or a 1-D batch of serialized SequenceExamples",
                    self.spec.input
                )));
            }
        };
        let Some(list) = records.as_bytes_list() else {
            return Err(Error::internal(
                "parse_sequence_example: byte strings expected",
            ));
        };
        if records.rank() == 0 {
            self.spec.parse_one(&list[0], 0)
        } else {
            self.spec.parse_batch(list)
        }
    }
}

impl ElementStream for SequenceStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let element = match self.upstream.next()? {
                Ok(e) => e,
                Err(e) => return Some(Err(e)),
            };
            match self.parse(&element) {
                Ok(values) => {
                    let mut element = element;
                    element.remove(&self.spec.input);
                    for (k, v) in values {
                        element.insert(&k, v);
                    }
                    return Some(Ok(element));
                }
                Err(e) => {
                    if let Some(e) = self.ctx.on_element_error(&element, e) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}
