//! One registry of the stage kinds every front end can name.
//!
//! Each kind is a serde spec implementing [`Spec`] (its kind name, a one-line summary,
//! its checks and how it is appended to a dataset), listed once in [`STAGES`]. From that
//! one registration:
//! - pipeline files read `[[stage]] kind = "..."` tables ([`StageSpec`]), with the list
//!   of kinds and the closest one for a misspelt kind in errors;
//! - every front end (pipeline files, the Rust API, and the Python package) checks
//!   parameters with the same [`Spec::validate`], in the same words;
//! - the reference of `docs/pipeline-format.md` is generated ([`reference_markdown`]) from
//!   the specs' JSON schemas (doc comments, types, defaults), and a test keeps it current.
//!
//! Adding a stage kind: its spec and stage in one file under `stages/`, `impl Spec` there,
//! one line in [`STAGES`], and its tests.
//!
//! ```
//! use sluice_core::registry::{self, StageSpec};
//! use sluice_core::prelude::*;
//!
//! # fn main() -> sluice_core::Result<()> {
//! assert!(registry::kinds().any(|k| k == "batch"));
//! // A stage as any front end writes it: a kind and its parameters.
//! let spec = StageSpec::from_json(serde_json::json!({"kind": "batch", "batch_size": 4}))?;
//! let batches = spec.append_to(&Dataset::range(0, 10))?.collect()?;
//! assert_eq!(batches.len(), 3);
//! // The same checks, in the same words, whoever wrote it.
//! let err = StageSpec::from_json(serde_json::json!({"kind": "batch", "batch_size": 0}))?
//!     .validate()
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "batch_size: batch: `batch_size` must be at least 1");
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::pipeline_file::{NoPluginLoader, PluginLoader, PluginStageSpec};
use crate::stages::batch::BatchSpec;
use crate::stages::bucket_by_sequence_length::BucketBySequenceLengthSpec;
use crate::stages::cache::CacheSpec;
use crate::stages::enumerate::EnumerateSpec;
use crate::stages::filter::FilterSpec;
use crate::stages::group_by_window::GroupByWindowSpec;
use crate::stages::image_ops::ImageOpsSpec;
use crate::stages::interleave::InterleaveSpec;
use crate::stages::padded_batch::PaddedBatchSpec;
use crate::stages::parse_example::ParseExampleSpec;
use crate::stages::parse_example::ParseSequenceExampleSpec;
use crate::stages::prefetch::PrefetchSpec;
use crate::stages::preprocessing::{
    CategoryEncodingSpec, ClipSpec, DecodeRawSpec, DiscretizationSpec, HashedCrossingSpec,
    HashingSpec, IntegerLookupSpec, Log1pSpec, NormalizationSpec, RegexReplaceSpec,
    StringLookupSpec, TextVectorizationSpec,
};
use crate::stages::rejection_resample::RejectionResampleSpec;
use crate::stages::repeat::RepeatSpec;
use crate::stages::scan::ScanSpec;
use crate::stages::shard::ShardSpec;
use crate::stages::shuffle::ShuffleSpec;
use crate::stages::skip::SkipSpec;
use crate::stages::take::TakeSpec;
use crate::stages::unbatch::UnbatchSpec;
use crate::stages::window::WindowSpec;

/// Every stage kind a pipeline file can name, in the order of the reference.
pub static STAGES: &[StageKind] = &[
    StageKind::of::<ShardSpec>(),
    StageKind::of::<InterleaveSpec>(),
    StageKind::of::<ParseExampleSpec>(),
    StageKind::of::<ParseSequenceExampleSpec>(),
    StageKind::of::<FilterSpec>(),
    StageKind::of::<ShuffleSpec>(),
    StageKind::of::<RepeatSpec>(),
    StageKind::of::<TakeSpec>(),
    StageKind::of::<EnumerateSpec>(),
    StageKind::of::<ScanSpec>(),
    StageKind::of::<RejectionResampleSpec>(),
    StageKind::of::<SkipSpec>(),
    StageKind::of::<BatchSpec>(),
    StageKind::of::<PaddedBatchSpec>(),
    StageKind::of::<UnbatchSpec>(),
    StageKind::of::<WindowSpec>(),
    StageKind::of::<GroupByWindowSpec>(),
    StageKind::of::<BucketBySequenceLengthSpec>(),
    StageKind::of::<CacheSpec>(),
    StageKind::of::<PrefetchSpec>(),
    StageKind::of::<ImageOpsSpec>(),
    StageKind::of::<PluginStageSpec>(),
    StageKind::of::<NormalizationSpec>(),
    StageKind::of::<DiscretizationSpec>(),
    StageKind::of::<ClipSpec>(),
    StageKind::of::<Log1pSpec>(),
    StageKind::of::<HashingSpec>(),
    StageKind::of::<StringLookupSpec>(),
    StageKind::of::<IntegerLookupSpec>(),
    StageKind::of::<CategoryEncodingSpec>(),
    StageKind::of::<HashedCrossingSpec>(),
    StageKind::of::<TextVectorizationSpec>(),
    StageKind::of::<DecodeRawSpec>(),
    StageKind::of::<RegexReplaceSpec>(),
];

/// A stage as a front end writes it: a serde spec with its kind.
pub trait Spec:
    Serialize + DeserializeOwned + JsonSchema + Clone + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// The kind, as written: `kind = "batch"`.
    const KIND: &'static str;

    /// What the stage does, in one line (the reference's list of kinds).
    const SUMMARY: &'static str;

    /// Checks the parameters; the problem names its key relative to the stage
    /// (`batch_size`, `ops[2].height`).
    fn validate(&self) -> Result<(), Invalid>;

    /// `input` followed by this stage. `cx` gives what some kinds need to be made (a
    /// plugin loader for `plugin`).
    fn append(&self, input: &Dataset, cx: &AppendContext<'_>) -> Result<Dataset>;

    /// Whether the stage's output is batches, not batches, or as its input's.
    fn batching(&self) -> Batching {
        Batching::Keeps
    }
}

/// What a stage does to batching (see [`Spec::batching`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batching {
    /// Its elements are batches (`batch`, `padded_batch`).
    Batches,
    /// Its elements are not batches (`unbatch`).
    Unbatches,
    /// As its input's.
    Keeps,
}

/// What appending some stage kinds needs.
pub struct AppendContext<'a> {
    /// Loads the plugins of `plugin` stages.
    pub plugins: &'a dyn PluginLoader,
}

impl Default for AppendContext<'_> {
    fn default() -> Self {
        AppendContext {
            plugins: &NoPluginLoader,
        }
    }
}

/// One registered kind: its name, summary, and the functions that read and describe its
/// spec.
pub struct StageKind {
    /// The kind, as written.
    pub kind: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    from_toml: for<'a> fn(toml::de::ValueDeserializer<'a>) -> Result<StageSpec, toml::de::Error>,
    from_json: fn(Value) -> Result<StageSpec, serde_json::Error>,
    schema: fn(&mut SchemaGenerator) -> Schema,
}

impl fmt::Debug for StageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StageKind")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl StageKind {
    /// The registration of the spec `S`.
    pub const fn of<S: Spec>() -> StageKind {
        StageKind {
            kind: S::KIND,
            summary: S::SUMMARY,
            from_toml: from_toml::<S>,
            from_json: |v| serde_json::from_value::<S>(v).map(StageSpec::new),
            schema: S::json_schema,
        }
    }

    /// Reads the kind's parameters from a TOML value (a `[[stage]]` table without its
    /// `kind`), keeping the value's spans in errors.
    pub fn from_toml(
        &self,
        value: toml::de::ValueDeserializer<'_>,
    ) -> Result<StageSpec, toml::de::Error> {
        (self.from_toml)(value)
    }

    /// Reads the kind's parameters from a JSON object (without `kind`).
    pub fn from_json(&self, value: Value) -> Result<StageSpec, serde_json::Error> {
        (self.from_json)(value)
    }

    /// The JSON schema of the kind's parameters.
    pub fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        (self.schema)(generator)
    }
}

fn from_toml<S: Spec>(
    value: toml::de::ValueDeserializer<'_>,
) -> Result<StageSpec, toml::de::Error> {
    S::deserialize(value).map(StageSpec::new)
}

/// The registered kind named `kind`.
pub fn lookup(kind: &str) -> Option<&'static StageKind> {
    STAGES.iter().find(|k| k.kind == kind)
}

/// The registered kinds' names, in the order of the reference.
pub fn kinds() -> impl Iterator<Item = &'static str> {
    STAGES.iter().map(|k| k.kind)
}

/// The registered kind closest to a misspelt `kind`, if one is close enough to be what
/// was meant.
pub fn suggest(kind: &str) -> Option<&'static str> {
    crate::pipeline_file::closest(kind, kinds())
}

/// A stage as written: one registered [`Spec`] (a `[[stage]]` table of a pipeline file,
/// a stage given to the Python package). Serialized as its parameters with `kind`.
#[derive(Clone)]
pub struct StageSpec(Arc<dyn AnySpec>);

impl StageSpec {
    /// The stage `spec`.
    pub fn new<S: Spec>(spec: S) -> Self {
        StageSpec(Arc::new(spec))
    }

    /// A stage from a JSON object with its `kind` and parameters: how front ends that
    /// are not TOML (the Python package) write stages. An unknown kind is an error
    /// naming the closest one.
    pub fn from_json(value: Value) -> Result<Self> {
        let Value::Object(mut map) = value else {
            return Err(Error::invalid("a stage is an object with a `kind`"));
        };
        let kind = match map.remove("kind") {
            Some(Value::String(k)) => k,
            Some(_) => return Err(Error::invalid("a stage's `kind` must be a string")),
            None => {
                return Err(Error::invalid(format!(
                    "a stage needs a `kind`, one of {}",
                    quoted(kinds())
                )));
            }
        };
        let registered = lookup(&kind).ok_or_else(|| Error::invalid(unknown_kind(&kind)))?;
        registered
            .from_json(Value::Object(map))
            .map_err(|e| Error::invalid(format!("{kind}: {e}")))
    }

    /// The stage's kind.
    pub fn kind(&self) -> &'static str {
        self.0.kind()
    }

    /// The spec, if it is an `S`.
    pub fn get<S: Spec>(&self) -> Option<&S> {
        let any: &dyn std::any::Any = self.0.as_any();
        any.downcast_ref::<S>()
    }

    /// The spec, if it is an `S`, to change (e.g. a plugin stage's `path`).
    pub fn get_mut<S: Spec>(&mut self) -> Option<&mut S> {
        self.get::<S>()?;
        if Arc::get_mut(&mut self.0).is_none() {
            self.0 = self.0.clone_arc();
        }
        let spec = Arc::get_mut(&mut self.0)?;
        let any: &mut dyn std::any::Any = spec.as_any_mut();
        any.downcast_mut::<S>()
    }

    /// Checks the parameters ([`Spec::validate`]).
    pub fn validate(&self) -> Result<(), Invalid> {
        self.0.validate()
    }

    /// `input` followed by this stage ([`Spec::append`]); a `plugin` stage needs
    /// [`StageSpec::append_with`].
    pub fn append_to(&self, input: &Dataset) -> Result<Dataset> {
        self.append_with(input, &AppendContext::default())
    }

    /// `input` followed by this stage, made with `cx`.
    pub fn append_with(&self, input: &Dataset, cx: &AppendContext<'_>) -> Result<Dataset> {
        self.0.append(input, cx)
    }

    /// What the stage does to batching.
    pub fn batching(&self) -> Batching {
        self.0.batching()
    }

    /// The parameters with `kind`, as a JSON object.
    pub fn to_json(&self) -> Value {
        let mut value = self.0.to_json();
        if let Value::Object(map) = &mut value {
            map.insert("kind".into(), Value::String(self.kind().into()));
        }
        value
    }
}

impl fmt::Debug for StageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for StageSpec {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_dyn(other.0.as_any())
    }
}

impl Serialize for StageSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for StageSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StageSpec::from_json(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// [`Spec`] as a trait object.
trait AnySpec: fmt::Debug + Send + Sync {
    fn kind(&self) -> &'static str;
    fn validate(&self) -> Result<(), Invalid>;
    fn append(&self, input: &Dataset, cx: &AppendContext<'_>) -> Result<Dataset>;
    fn batching(&self) -> Batching;
    fn to_json(&self) -> Value;
    fn as_any(&self) -> &dyn std::any::Any;
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
    fn clone_arc(&self) -> Arc<dyn AnySpec>;
    fn eq_dyn(&self, other: &dyn std::any::Any) -> bool;
}

impl<S: Spec> AnySpec for S {
    fn kind(&self) -> &'static str {
        S::KIND
    }

    fn validate(&self) -> Result<(), Invalid> {
        Spec::validate(self)
    }

    fn append(&self, input: &Dataset, cx: &AppendContext<'_>) -> Result<Dataset> {
        Spec::append(self, input, cx)
    }

    fn batching(&self) -> Batching {
        Spec::batching(self)
    }

    fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| Value::String(e.to_string()))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn clone_arc(&self) -> Arc<dyn AnySpec> {
        Arc::new(self.clone())
    }

    fn eq_dyn(&self, other: &dyn std::any::Any) -> bool {
        other.downcast_ref::<S>() == Some(self)
    }
}

/// The message for an unknown kind: the kinds there are and the closest one.
pub(crate) fn unknown_kind(kind: &str) -> String {
    let mut message = format!(
        "unknown stage kind `{kind}`, expected one of {}",
        quoted(kinds())
    );
    if let Some(s) = suggest(kind) {
        message.push_str(&format!("; did you mean `{s}`?"));
    }
    if matches!(kind, "map" | "filter") {
        message.push_str(" (map and filter take Rust code: build them with the Rust API)");
    }
    message
}

pub(crate) fn quoted<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

mod reference;

pub use reference::reference_markdown;
