//! Pipeline files: a whole pipeline (source, stages, options) as a TOML file, checked before
//! anything runs. `sluice run PIPELINE.toml` runs one; Rust programs load one with
//! [`PipelineFile::load`] and get the same [`Dataset`] as the builder API would give.
//!
//! ```toml
//! name = "augment"
//!
//! [source]
//! dir = "data"
//! files = ["train.tfrecord-*"]
//!
//! [options]
//! seed = 42
//!
//! [[stage]]
//! kind = "interleave"
//! cycle_length = 4
//! num_parallel = "auto"
//!
//! [[stage]]
//! kind = "parse_example"
//! features.image = { dtype = "string" }
//! features.label = { dtype = "int64" }
//!
//! [[stage]]
//! kind = "image_ops"
//! num_parallel = "auto"
//! ops = [
//!   { op = "decode", channels = 3 },
//!   { op = "random_crop", height = 224, width = 224 },
//!   { op = "random_flip_left_right", p = 0.5 },
//! ]
//!
//! [[stage]]
//! kind = "batch"
//! batch_size = 64
//! ```
//!
//! The full reference, every key with its type and default, is `docs/pipeline-format.md`
//! in the repository; `examples/pipelines/` holds working files.
//!
//! - What the user wrote is a [`PipelineFile`] (serde: [`SourceSpec`], [`OptionsSpec`], a
//!   list of [`StageSpec`]); [`PipelineFile::build`] turns it into the [`Dataset`] that runs.
//! - Unknown keys, wrong types and impossible values (a batch size of 0, a probability
//!   outside [0, 1], a crop larger than the image an earlier resize made, ...) are
//!   [`Error::PipelineFile`] with the line and column, and for a misspelt name the closest
//!   valid one (`did you mean `batch_size`?`).
//! - `map` takes a Rust closure, so a file cannot express it (`filter` on a feature's value
//!   is the `filter` stage). Several pipelines are combined by a source of format `zip`,
//!   `concatenate`, `sample_from` or `choose_from` over named `[inputs.NAME]` pipelines
//!   ([`CombineSpec`], [`InputSpec`]). User transforms go in as `plugin`
//!   stages ([`PluginStageSpec`]: a plugin file and its config table); core cannot load
//!   plugins itself, so [`PipelineFile::build_with`] takes a [`PluginLoader`]
//!   (`sluice_plugins::Loader`, which `sluice run` uses), and [`PipelineFile::build`]
//!   refuses a plugin stage with [`Error::NoPluginLoader`].
//!
//! A runnable example, on the image fixtures beside the repository:
//!
//! ```
//! use sluice_core::pipeline_file::PipelineFile;
//!
//! # fn main() -> sluice_core::Result<()> {
//! let toml = r#"
//!     [source]
//!     files = ["images.tfrecord-*"]
//!
//!     [options]
//!     seed = 7
//!
//!     [[stage]]
//!     kind = "parse_example"
//!     features.image = { dtype = "string" }
//!     features.label = { dtype = "int64" }
//!
//!     [[stage]]
//!     kind = "image_ops"
//!     ops = [{ op = "decode", channels = 3 }, { op = "resize", height = 16, width = 16 }]
//!
//!     [[stage]]
//!     kind = "batch"
//!     batch_size = 8
//! "#;
//! let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");
//! let pipeline = PipelineFile::from_toml(toml)?.with_data_dir(fixtures);
//! let mut images = 0;
//! for batch in pipeline.build()?.iter()? {
//!     let batch = batch?;
//!     assert_eq!(batch.tensor("image").unwrap().shape(), &[8, 16, 16, 3]);
//!     images += 8;
//! }
//! assert_eq!(images, 32);
//!
//! // Mistakes are caught before anything runs, with the line and column.
//! let err = PipelineFile::from_toml("[source]\nfiles = ['x']\n[[stage]]\nkind = 'batch'\nbatchsize = 8\n")
//!     .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "<string>:5:1: stage 1 (batch): unknown field `batchsize`, expected one of \
//!      `batch_size`, `drop_remainder`, `num_parallel`, `deterministic`; did you mean `batch_size`?"
//! );
//! # Ok(())
//! # }
//! ```

mod inputs;
mod load;
mod options;
mod plugin;
mod source;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::{Error, Result};

pub use crate::registry::StageSpec;
pub use crate::stages::padded_batch::PadDim;
pub use crate::stages::parse_example::{FeatureEntry, FeatureKind};
pub use inputs::{
    ChooseFromKeys, CombineSpec, Forever, InputSpec, InputsKeys, Repeat, SampleFromKeys,
};
pub(crate) use load::closest;
pub use options::{ByteSize, OptionsSpec};
pub use plugin::{LoadedPlugin, NoPluginLoader, PluginLoader, PluginStageSpec};
pub use source::{SourceFormat, SourceSpec};

use crate::invalid::{Invalid as Problem, Key as Seg};
use crate::registry::{AppendContext, Batching};
use crate::sync::LockExt;

/// A whole pipeline as written in a pipeline file: what to read, the stages in order, and
/// the options. [`PipelineFile::build`] makes the [`Dataset`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineFile {
    /// A name for reports (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A description (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The `[source]` table.
    pub source: SourceSpec,
    /// The `[options]` table (default: every option at its default).
    #[serde(default)]
    pub options: OptionsSpec,
    /// The `[[stage]]` tables, in order.
    #[serde(default, rename = "stage")]
    pub stages: Vec<StageSpec>,
    /// The `[inputs.NAME]` tables: named pipelines that a `zip`, `concatenate`,
    /// `sample_from` or `choose_from` source combines (see [`CombineSpec`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, InputSpec>,
}

impl PipelineFile {
    /// A pipeline reading `source` with no stages and default options.
    pub fn new(source: SourceSpec) -> Self {
        PipelineFile {
            name: None,
            description: None,
            source,
            options: OptionsSpec::default(),
            stages: Vec::new(),
            inputs: BTreeMap::new(),
        }
    }

    /// Reads and checks the pipeline file at `path`. Errors name the file, line and column.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_toml_named(&text, &path.display().to_string())
    }

    /// Reads and checks a pipeline from TOML text; errors name it `<string>`.
    pub fn from_toml(text: &str) -> Result<Self> {
        Self::from_toml_named(text, "<string>")
    }

    /// Reads and checks a pipeline from TOML text; errors name it `origin`.
    pub fn from_toml_named(text: &str, origin: &str) -> Result<Self> {
        load::parse(text, origin)
    }

    /// This pipeline with the source's [`dir`](SourceSpec::dir) replaced by `dir` (what
    /// `sluice run --data DIR` does): relative file patterns are then looked up in `dir`.
    /// The sources of its `[inputs]` get the same `dir`.
    pub fn with_data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        for input in self.inputs.values_mut() {
            input.source.dir = Some(dir.clone());
        }
        self.source.dir = Some(dir);
        self
    }

    /// Every stage: those of the `[inputs]` in the order they are built, then the
    /// pipeline's own.
    fn all_stages(&self) -> impl Iterator<Item = &StageSpec> {
        self.chains().flat_map(|c| c.iter())
    }

    /// The stage lists: those of the `[inputs]` in the order they are built, then the
    /// pipeline's own.
    fn chains(&self) -> impl Iterator<Item = &[StageSpec]> {
        inputs::build_order(&self.source, &self.inputs)
            .into_iter()
            .map(|name| self.inputs[name].stages.as_slice())
            .chain(std::iter::once(self.stages.as_slice()))
    }

    /// This pipeline with every `plugin` stage's file looked up in `dir`: its `path`
    /// becomes `dir/<the path's file name>` (what `sluice run --plugin-dir DIR` does).
    pub fn with_plugin_dir(mut self, dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        let inputs = self.inputs.values_mut().flat_map(|i| i.stages.iter_mut());
        for stage in self.stages.iter_mut().chain(inputs) {
            if let Some(p) = stage.get_mut::<PluginStageSpec>()
                && let Some(name) = p.path.file_name()
            {
                p.path = dir.join(name);
            }
        }
        self
    }

    /// Whether any stage is a `plugin` stage (which needs [`PipelineFile::build_with`]).
    pub fn has_plugins(&self) -> bool {
        self.all_stages()
            .any(|s| s.get::<PluginStageSpec>().is_some())
    }

    /// Checks every value (also done by [`PipelineFile::build`]), for a pipeline made in
    /// Rust rather than read from a file. The error names the key, e.g. `stage[2].batch_size`.
    pub fn validate(&self) -> Result<()> {
        self.check().map_err(|p| Error::PipelineFile {
            origin: self
                .name
                .clone()
                .unwrap_or_else(|| "<pipeline>".to_string()),
            location: None,
            message: format!("{}: {}", p.path_display(), p.message),
        })
    }

    /// Whether the pipeline's elements are batches: the last of its `batch`,
    /// `padded_batch` and `unbatch` stages is a batch (with none, whether the first input
    /// of a combining source gives batches).
    pub fn output_is_batched(&self) -> bool {
        fn batched(
            source: &SourceSpec,
            stages: &[StageSpec],
            inputs: &BTreeMap<String, InputSpec>,
            depth: usize,
        ) -> bool {
            let own = stages.iter().rev().find_map(|s| match s.batching() {
                Batching::Batches => Some(true),
                Batching::Unbatches => Some(false),
                Batching::Keeps => None,
            });
            own.unwrap_or_else(|| {
                let first = source.combine().and_then(|c| c.inputs().first().copied());
                match first.and_then(|n| inputs.get(n)) {
                    Some(i) if depth < inputs.len() => {
                        batched(&i.source, &i.stages, inputs, depth + 1)
                    }
                    _ => false,
                }
            })
        }
        batched(&self.source, &self.stages, &self.inputs, 0)
    }

    /// Builds the [`Dataset`]: checks the values, resolves the file patterns (a pattern
    /// matching nothing is [`Error::NoMatch`]), and chains the stages in order with the
    /// options. Each `iter()` of the result runs one epoch.
    ///
    /// A `plugin` stage needs a loader: here it is [`Error::PluginStage`] wrapping
    /// [`Error::NoPluginLoader`]; use [`PipelineFile::build_with`].
    pub fn build(&self) -> Result<Dataset> {
        self.build_with(&NoPluginLoader)
    }

    /// [`PipelineFile::build`] with `loader` loading the plugins of `plugin` stages. The
    /// plugins are loaded first, in file order, before the data files are looked up: a
    /// missing file, a file that is not a plugin or a config the plugin refuses is
    /// [`Error::PluginStage`] naming the stage and file.
    pub fn build_with(&self, loader: &dyn PluginLoader) -> Result<Dataset> {
        self.validate()?;
        // Plugins first, in file order (a missing plugin or a config it refuses is
        // reported before any data file is looked up), then appended with the others.
        let preloaded = Preloaded::load(self.chains(), loader)?;
        let cx = AppendContext {
            plugins: &preloaded,
        };
        let mut built = BTreeMap::new();
        for name in inputs::build_order(&self.source, &self.inputs) {
            let input = &self.inputs[name];
            let mut dataset = inputs::source_dataset(&input.source, &built)?;
            for stage in &input.stages {
                dataset = stage.append_with(&dataset, &cx)?;
            }
            built.insert(name, dataset);
        }
        let mut dataset = inputs::source_dataset(&self.source, &built)?;
        for stage in &self.stages {
            dataset = stage.append_with(&dataset, &cx)?;
        }
        Ok(dataset.with_options(self.options.to_options()))
    }

    /// Every check, with the path of the offending key: each stage's own
    /// ([`Spec::validate`](crate::registry::Spec::validate), as every front end runs it)
    /// under `stage[i]`, and where `interleave` may stand.
    fn check(&self) -> Result<(), Problem> {
        self.options.check()?;
        for (name, input) in &self.inputs {
            let base = [Seg::name("inputs"), Seg::name(name)];
            check_chain(&input.source, &input.stages).map_err(|p| p.under(&base))?;
        }
        check_chain(&self.source, &self.stages)?;
        inputs::check_graph(&self.source, &self.inputs)
    }
}

/// The checks of one source and its stages: each stage's own
/// ([`Spec::validate`](crate::registry::Spec::validate)) under `stage[i]`, and where
/// `interleave` may stand.
fn check_chain(source: &SourceSpec, stages: &[StageSpec]) -> Result<(), Problem> {
    source.check()?;
    let mut reading_files = true;
    for (i, stage) in stages.iter().enumerate() {
        let base = [Seg::name("stage"), Seg::Index(i)];
        stage.validate().map_err(|p| p.under(&base))?;
        match stage.kind() {
            "shard" => {}
            "interleave" if matches!(source.format, SourceFormat::Tfds(_)) => {
                return Err(Problem::new(
                    base.to_vec(),
                    "interleave: a tfds source already interleaves its shards as TFDS \
                         does (16 at once, blocks of 16)",
                ));
            }
            "interleave" if source.global_shuffle => {
                return Err(Problem::new(
                    base.to_vec(),
                    "interleave: the source reads its files by global shuffle \
                         (`global_shuffle = true`), so there is nothing to interleave",
                ));
            }
            "interleave" if source.combine().is_some() => {
                return Err(Problem::new(
                    base.to_vec(),
                    format!(
                        "interleave: reads the files of a file source; this {:?} source \
                             reads pipelines (put `interleave` in the inputs that read files)",
                        source.format.name()
                    ),
                ));
            }
            "interleave" if reading_files => reading_files = false,
            "interleave" => {
                return Err(Problem::new(
                    base.to_vec(),
                    "interleave: reads the source's files, so it must come right after the \
                         source (or after `shard`), and only once",
                ));
            }
            _ => reading_files = false,
        }
    }
    Ok(())
}

/// The plugins of a pipeline's `plugin` stages, loaded in file order, handed out in that
/// order as the stages are appended.
struct Preloaded(std::sync::Mutex<std::vec::IntoIter<LoadedPlugin>>);

impl Preloaded {
    fn load<'a>(
        chains: impl Iterator<Item = &'a [StageSpec]>,
        loader: &dyn PluginLoader,
    ) -> Result<Self> {
        let mut plugins = Vec::new();
        for (i, stage) in chains.flat_map(|c| c.iter().enumerate()) {
            if let Some(p) = stage.get::<PluginStageSpec>() {
                let loaded = loader.load(p).map_err(|error| Error::PluginStage {
                    stage: i + 1,
                    path: p.path.clone(),
                    error: Box::new(error),
                })?;
                plugins.push(loaded);
            }
        }
        Ok(Preloaded(std::sync::Mutex::new(plugins.into_iter())))
    }
}

impl PluginLoader for Preloaded {
    fn load(&self, spec: &PluginStageSpec) -> Result<LoadedPlugin> {
        self.0.locked().next().ok_or_else(|| {
            Error::internal(format!("plugin {} was not loaded", spec.path.display()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallelism::NumParallel;
    use crate::stages::batch::BatchSpec;
    use crate::stages::cache::CacheSpec;
    use crate::stages::image_ops::{ImageOp, ImageOpsSpec};
    use crate::stages::interleave::InterleaveSpec;
    use crate::stages::padded_batch::PaddedBatchSpec;
    use crate::stages::parse_example::{FeatureType, ParseExampleSpec};
    use crate::stages::prefetch::{BufferSize, PrefetchSpec};

    const AUGMENT: &str = r#"
name = "augment"
description = "tfdata_baseline.py's augment pipeline"

[source]
dir = "data"
files = ["train.tfrecord-*"]
compression = "none"
shuffle_files = true

[options]
seed = 42
cpu_budget = 2
ram_budget = "1GiB"
error_policy = "skip"
map_and_batch_fusion = false

[[stage]]
kind = "interleave"
cycle_length = 4
num_parallel = "auto"

[[stage]]
kind = "parse_example"
features.image = { dtype = "string" }
features.label = { dtype = "int64", default = -1 }
features.tags = { dtype = "bytes", kind = "var_len" }

[[stage]]
kind = "image_ops"
num_parallel = 2
ops = [
  { op = "decode", channels = 3 },
  { op = "random_crop", height = 224, width = 224 },
  { op = "random_flip_left_right", p = 0.5 },
  { op = "to_unit_f32" },
  { op = "random_brightness", max_delta = 0.1 },
  { op = "random_contrast", lower = 0.75, upper = 1.5 },
  { op = "normalize", mean = [0.5, 0.5, 0.5], std = [0.25, 0.25, 0.25] },
]

[[stage]]
kind = "batch"
batch_size = 64

[[stage]]
kind = "prefetch"
"#;

    fn err(text: &str) -> (Option<(usize, usize)>, String) {
        match PipelineFile::from_toml(text).unwrap_err() {
            Error::PipelineFile {
                origin,
                location,
                message,
            } => {
                assert_eq!(origin, "<string>");
                (location, message)
            }
            other => panic!("not a pipeline file error: {other:?}"),
        }
    }

    const SRC: &str = "[source]\nfiles = ['x']\n";

    #[test]
    fn the_augment_pipeline_reads_into_specs() {
        let p = PipelineFile::from_toml(AUGMENT).unwrap();
        assert_eq!(p.name.as_deref(), Some("augment"));
        assert_eq!(p.source.patterns(), ["data/train.tfrecord-*"]);
        assert!(p.source.shuffle_files);
        let o = p.options.to_options();
        assert_eq!(o.seed, Some(42));
        assert_eq!(o.cpu_budget, 2);
        assert_eq!(o.ram_budget, 1 << 30);
        assert_eq!(o.error_policy, crate::ErrorPolicy::Skip);
        assert!(!o.map_and_batch_fusion);
        let kinds: Vec<_> = p.stages.iter().map(|s| s.kind()).collect();
        assert_eq!(
            kinds,
            [
                "interleave",
                "parse_example",
                "image_ops",
                "batch",
                "prefetch"
            ]
        );
        let i = p.stages[0].get::<InterleaveSpec>().unwrap();
        assert_eq!((i.cycle_length, i.num_parallel), (4, NumParallel::Auto));
        let pe = p.stages[1].get::<ParseExampleSpec>().unwrap();
        let tags = FeatureEntry::from(pe.features["tags"].clone());
        assert_eq!(tags.kind, FeatureKind::VarLen);
        assert_eq!(tags.dtype, FeatureType::String);
        assert_eq!(
            FeatureEntry::from(pe.features["label"].clone()).default,
            Some(vec![crate::stages::padded_batch::PadValue::Int(-1)])
        );
        let ops = p.stages[2].get::<ImageOpsSpec>().unwrap();
        assert_eq!(ops.ops.len(), 7);
        assert_eq!(ops.ops[0], ImageOp::Decode { channels: Some(3) });
        assert_eq!(ops.num_parallel, NumParallel::Fixed(2));
        assert_eq!(p.stages[3], StageSpec::new(BatchSpec::new(64)));
        assert_eq!(
            p.stages[4],
            StageSpec::new(PrefetchSpec {
                buffer_size: BufferSize::Auto
            })
        );
        assert!(p.output_is_batched());
    }

    #[test]
    fn toml_syntax_errors_have_a_line_and_column() {
        let (loc, msg) = err("[source]\nfiles = ['x'\n");
        assert_eq!(loc.map(|l| l.0), Some(2), "{msg}");
    }

    #[test]
    fn an_unknown_stage_key_names_its_line_and_the_closest_key() {
        let text = format!("{SRC}\n[[stage]]\nkind = \"batch\"\nbatch_sise = 64\n");
        let (loc, msg) = err(&text);
        assert_eq!(loc, Some((6, 1)));
        assert!(
            msg.starts_with("stage 1 (batch): unknown field `batch_sise`"),
            "{msg}"
        );
        assert!(msg.ends_with("did you mean `batch_size`?"), "{msg}");
    }

    #[test]
    fn unknown_kinds_ops_and_top_level_keys_get_suggestions() {
        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"bach\"\nbatch_size = 1\n"
        ));
        assert_eq!(loc, Some((4, 8)));
        assert!(msg.contains("unknown stage kind `bach`"), "{msg}");
        assert!(msg.ends_with("did you mean `batch`?"), "{msg}");

        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"image_ops\"\nops = [\n  {{ op = \"decode\" }},\n  {{ op = \"random_crp\", height = 2, width = 2 }},\n]\n"
        ));
        assert_eq!(loc.map(|l| l.0), Some(7), "{msg}");
        assert!(msg.contains("did you mean `random_crop`?"), "{msg}");

        let (loc, msg) = err(&format!("{SRC}[[stages]]\nkind = \"batch\"\n"));
        assert_eq!(loc, Some((3, 3)));
        assert!(msg.ends_with("did you mean `stage`?"), "{msg}");

        let (_, msg) = err("[source]\nfiles = ['x']\nshuffle = true\n");
        assert!(
            msg.starts_with("[source]: unknown field `shuffle`"),
            "{msg}"
        );
        assert!(msg.ends_with("did you mean `shuffle_files`?"), "{msg}");

        let (_, msg) = err(&format!("{SRC}[[stage]]\nkind = \"map\"\n"));
        assert!(msg.contains("Rust API"), "{msg}");
    }

    #[test]
    fn wrong_types_point_at_the_value() {
        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"batch\"\nbatch_size = \"64\"\n"
        ));
        assert_eq!(loc, Some((5, 14)), "{msg}");
        assert!(msg.contains("invalid type: string \"64\""), "{msg}");

        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"interleave\"\nnum_parallel = \"many\"\n"
        ));
        assert_eq!(loc.map(|l| l.0), Some(5), "{msg}");
        assert!(msg.contains("a number of threads or \"auto\""), "{msg}");

        let (_, msg) = err("[source]\nfiles = ['x']\n[options]\nram_budget = \"2 parsecs\"\n");
        assert!(msg.contains("unknown unit"), "{msg}");
    }

    #[test]
    fn impossible_values_point_at_their_key() {
        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"batch\"\nbatch_size = 0\n"
        ));
        assert_eq!(loc, Some((5, 14)), "{msg}");
        assert_eq!(msg, "batch: `batch_size` must be at least 1");

        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"image_ops\"\nops = [{{ op = \"random_flip_up_down\", p = 1.5 }}]\n"
        ));
        assert_eq!(loc.map(|l| l.0), Some(5), "{msg}");
        assert!(msg.contains("within [0, 1], got 1.5"), "{msg}");

        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"shard\"\nnum_shards = 2\nindex = 2\n"
        ));
        assert_eq!(loc, Some((6, 9)), "{msg}");

        let (loc, msg) = err("[source]\nfiles = ['x']\n[options]\ncpu_budget = 0\n");
        assert_eq!(loc, Some((4, 14)), "{msg}");

        let (_, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"parse_example\"\nfeatures.v = {{ dtype = \"float\", shape = [2], default = [1.0, 2.0, 3.0] }}\n"
        ));
        assert!(msg.contains("needs 1 or 2 values, got 3"), "{msg}");

        let (_, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"parse_example\"\nfeatures.v = {{ dtype = \"int64\", default = \"x\" }}\n"
        ));
        assert!(msg.contains("does not fit"), "{msg}");
    }

    #[test]
    fn interleave_must_read_the_source() {
        let (loc, msg) = err(&format!(
            "{SRC}[[stage]]\nkind = \"take\"\ncount = 1\n[[stage]]\nkind = \"interleave\"\n"
        ));
        assert_eq!(loc.map(|l| l.0), Some(6), "{msg}");
        assert!(msg.contains("right after the source"), "{msg}");
        PipelineFile::from_toml(&format!(
            "{SRC}[[stage]]\nkind = \"shard\"\nnum_shards = 2\nindex = 0\n[[stage]]\nkind = \"interleave\"\n"
        ))
        .unwrap();
    }

    #[test]
    fn missing_source_and_missing_kind_are_reported() {
        let (loc, msg) = err("[options]\nseed = 1\n");
        assert_eq!(loc, Some((1, 1)));
        assert!(msg.contains("missing the [source] table"), "{msg}");
        let (_, msg) = err(&format!("{SRC}[[stage]]\nbatch_size = 3\n"));
        assert!(msg.contains("missing `kind`"), "{msg}");
        let (_, msg) = err(&format!("{SRC}[[stage]]\nkind = \"batch\"\n"));
        assert!(msg.contains("missing field `batch_size`"), "{msg}");
    }

    #[test]
    fn padded_batch_cache_and_files_as_one_string() {
        let p = PipelineFile::from_toml(
            "[source]\nfiles = 'a.tfrecord'\n[[stage]]\nkind = 'padded_batch'\nbatch_size = 2\n\
             padded_shapes = { tokens = [8], mask = ['max', 3] }\npadding_values = { tokens = -1 }\n\
             [[stage]]\nkind = 'unbatch'\n[[stage]]\nkind = 'cache'\ndirectory = 'c'\n[[stage]]\nkind = 'cache'\n",
        )
        .unwrap();
        assert_eq!(p.source.files, ["a.tfrecord"]);
        let pb = p.stages[0].get::<PaddedBatchSpec>().unwrap();
        let spec = pb;
        assert_eq!(spec.padded_shapes["tokens"], [Some(8)]);
        assert_eq!(spec.padded_shapes["mask"], [None, Some(3)]);
        assert_eq!(
            p.stages[2],
            StageSpec::new(CacheSpec::Directory("c".into()))
        );
        assert_eq!(p.stages[3], StageSpec::new(CacheSpec::Memory));
        assert!(!p.output_is_batched());
    }

    #[test]
    fn a_pipeline_made_in_rust_is_validated_with_key_paths() {
        let mut p = PipelineFile::new(SourceSpec::new(["x"]));
        p.stages.push(StageSpec::new(BatchSpec::new(0)));
        let e = p.build().unwrap_err();
        assert_eq!(
            e.to_string(),
            "<pipeline>: stage[0].batch_size: batch: `batch_size` must be at least 1"
        );
    }

    #[test]
    fn the_specs_also_deserialize_from_other_formats() {
        let json = r#"{"source": {"files": ["x"]}, "stage": [{"kind": "batch", "batch_size": 4}]}"#;
        let p: PipelineFile = serde_json::from_str(json).unwrap();
        assert_eq!(p.stages, [StageSpec::new(BatchSpec::new(4))]);
    }

    const PLUGIN: &str = "[source]\nfiles = ['x']\n\n[[stage]]\nkind = \"plugin\"\npath = \"target/release/libsluice_example_noise.so\"\n";

    #[test]
    fn a_plugin_stage_reads_its_config_as_json() {
        let p = PipelineFile::from_toml(&format!(
            "{PLUGIN}config = {{ sigma = 0.05, p = 1, name = \"n\", on = true, sizes = [1, 2.5], nested = {{ k = \"v\" }} }}\nnum_parallel = \"auto\"\nchunk_size = 16\ndeterministic = false\nlimits = {{ memory = \"64MiB\", time_ms = 1000 }}\n"
        ))
        .unwrap();
        let s = p.stages[0].get::<PluginStageSpec>().unwrap();
        assert_eq!(p.stages[0].kind(), "plugin");
        assert_eq!(
            s.path,
            Path::new("target/release/libsluice_example_noise.so")
        );
        assert_eq!(
            s.config_json(),
            serde_json::json!({
                "sigma": 0.05, "p": 1, "name": "n", "on": true,
                "sizes": [1, 2.5], "nested": {"k": "v"}
            })
        );
        assert_eq!(
            s.map_chunks_spec(),
            crate::stages::map_chunks::MapChunksSpec::new(16)
                .num_parallel(NumParallel::Auto)
                .deterministic(false)
        );
        // The host options, as written: the WASM host interprets them (tested with it).
        assert_eq!(
            serde_json::Value::Object(s.limits.clone()),
            serde_json::json!({"memory": "64MiB", "time_ms": 1000})
        );
        assert!(p.has_plugins());

        // The defaults: no config, sequential, 64 per call, in order, no limits.
        let p = PipelineFile::from_toml(PLUGIN).unwrap();
        assert_eq!(
            p.stages[0],
            StageSpec::new(PluginStageSpec::new(
                "target/release/libsluice_example_noise.so"
            ))
        );
        let s = p.stages[0].get::<PluginStageSpec>().unwrap();
        assert_eq!(s.config_json(), serde_json::json!({}));
        assert_eq!(
            s.map_chunks_spec(),
            crate::stages::map_chunks::MapChunksSpec::default()
        );
        assert!(s.limits.is_empty());
    }

    #[test]
    fn plugin_stage_mistakes_have_a_line_column_and_suggestion() {
        // An unknown key, with the closest one.
        let (loc, msg) = err(&format!("{PLUGIN}chunk_sise = 8\n"));
        assert_eq!(loc, Some((7, 1)), "{msg}");
        assert!(
            msg.starts_with("stage 1 (plugin): unknown field `chunk_sise`"),
            "{msg}"
        );
        assert!(msg.ends_with("did you mean `chunk_size`?"), "{msg}");
        // `limits` is a table of host options (the hosts check its keys and values).
        let (loc, msg) = err(&format!("{PLUGIN}limits = 3\n"));
        assert_eq!(loc.map(|l| l.0), Some(7), "{msg}");
        assert!(
            msg.contains("`limits` must be a table, got a number"),
            "{msg}"
        );
        // A missing path.
        let (_, msg) = err("[source]\nfiles = ['x']\n[[stage]]\nkind = \"plugin\"\n");
        assert!(msg.contains("missing field `path`"), "{msg}");

        // num_parallel: a type error and an impossible value.
        let (loc, msg) = err(&format!("{PLUGIN}num_parallel = \"many\"\n"));
        assert_eq!(loc.map(|l| l.0), Some(7), "{msg}");
        assert!(msg.contains("a number of threads or \"auto\""), "{msg}");
        let (loc, msg) = err(&format!("{PLUGIN}num_parallel = 0\n"));
        assert_eq!(loc, Some((7, 16)), "{msg}");
        assert!(
            msg.starts_with("plugin: `num_parallel` must be at least 1"),
            "{msg}"
        );

        // chunk_size 0. (Limits out of range are the WASM host's to refuse: tested in
        // sluice-plugins' tests/pipeline_file.rs.)
        let (loc, msg) = err(&format!("{PLUGIN}chunk_size = 0\n"));
        assert_eq!(loc, Some((7, 14)), "{msg}");
        assert_eq!(msg, "plugin: `chunk_size` must be at least 1");
        let (_, msg) = err(&format!("{PLUGIN}path = \"\"\n")
            .replace("path = \"target/release/libsluice_example_noise.so\"\n", ""));
        assert!(msg.contains("`path` must name the plugin file"), "{msg}");
    }

    #[test]
    fn plugin_config_refuses_what_json_cannot_hold() {
        let (loc, msg) = err(&format!(
            "{PLUGIN}[stage.config]\nsigma = 0.1\nwhen = 1979-05-27T07:32:00Z\n"
        ));
        assert_eq!(loc.map(|l| l.0), Some(9), "{msg}");
        assert!(
            msg.contains("datetimes cannot be given to a plugin"),
            "{msg}"
        );
        assert!(msg.contains("\"1979-05-27T07:32:00Z\""), "{msg}");
        let (loc, msg) = err(&format!("{PLUGIN}config = {{ a = [1, inf] }}\n"));
        assert_eq!(loc.map(|l| l.0), Some(7), "{msg}");
        assert!(msg.contains("not a finite number"), "{msg}");
        let (_, msg) = err(&format!("{PLUGIN}config = 3\n"));
        assert!(msg.contains("`config` must be a table"), "{msg}");
    }

    #[test]
    fn build_without_a_loader_refuses_a_plugin_stage() {
        let p = PipelineFile::from_toml(&format!("{PLUGIN}config = {{ sigma = 0.1 }}\n")).unwrap();
        let e = p.build().unwrap_err();
        match &e {
            Error::PluginStage { stage, path, error } => {
                assert_eq!(*stage, 1);
                assert_eq!(path, Path::new("target/release/libsluice_example_noise.so"));
                assert!(matches!(**error, Error::NoPluginLoader), "{error}");
            }
            other => panic!("not a plugin error: {other:?}"),
        }
        assert!(matches!(e.root(), Error::NoPluginLoader));
        assert_eq!(
            e.to_string(),
            "stage 1 (plugin target/release/libsluice_example_noise.so): this build has no \
             plugin loader; run it with `sluice run` or PipelineFile::build_with"
        );
        assert!(matches!(
            p.stages[0].append_to(&Dataset::range(0, 1)).unwrap_err(),
            Error::NoPluginLoader
        ));
    }

    #[test]
    fn build_with_loads_plugins_before_looking_for_data() {
        struct Recording(std::sync::Mutex<Vec<PluginStageSpec>>);
        impl PluginLoader for Recording {
            fn load(&self, spec: &PluginStageSpec) -> Result<LoadedPlugin> {
                self.0.lock().unwrap().push(spec.clone());
                if spec.config.contains_key("bad") {
                    return Err(Error::invalid("unknown key \"bad\""));
                }
                Ok(LoadedPlugin {
                    name: "identity".into(),
                    fingerprint: "identity 1".into(),
                    chunk_fn: std::sync::Arc::new(|chunk, _| {
                        Ok(chunk.into_iter().enumerate().collect())
                    }),
                    one_to_one: true,
                })
            }
        }
        let loader = Recording(Default::default());
        let p = PipelineFile::from_toml(&format!(
            "{PLUGIN}config = {{ sigma = 0.1 }}\n[[stage]]\nkind = \"batch\"\nbatch_size = 2\n[[stage]]\nkind = \"plugin\"\npath = \"b.so\"\nconfig = {{ bad = 1 }}\n"
        ))
        .unwrap();
        let e = p.build_with(&loader).unwrap_err();
        assert_eq!(e.to_string(), "stage 3 (plugin b.so): unknown key \"bad\"");
        assert_eq!(loader.0.lock().unwrap().len(), 2);
        assert_eq!(
            loader.0.lock().unwrap()[0].config_json(),
            serde_json::json!({"sigma": 0.1})
        );
        // With good plugins, the next problem is the data (the plugins loaded first).
        let p = PipelineFile::from_toml(&format!("{PLUGIN}config = {{ sigma = 0.1 }}\n"))
            .unwrap()
            .with_data_dir("/nonexistent-sluice-dir");
        assert!(matches!(
            p.build_with(&loader).unwrap_err(),
            Error::NoMatch { .. }
        ));
    }

    #[test]
    fn a_plugin_dir_replaces_the_plugin_paths_directory() {
        let p = PipelineFile::from_toml(PLUGIN)
            .unwrap()
            .with_plugin_dir("target/debug/deps");
        let s = p.stages[0].get::<PluginStageSpec>().unwrap();
        assert_eq!(
            s.path,
            Path::new("target/debug/deps/libsluice_example_noise.so")
        );
        assert!(!PipelineFile::from_toml(SRC).unwrap().has_plugins());
    }
}
