//! `kind = "plugin"`: a user transform loaded from a file (a native library or, with the
//! WASM host, a WASM module), run over chunks of elements by `map_chunks`.
//!
//! `sluice-core` knows the stage's parameters but cannot load plugins (the hosts live in
//! `sluice-plugins`, which depends on this crate): [`PipelineFile::build_with`] takes a
//! [`PluginLoader`] that turns a [`PluginStageSpec`] into a [`LoadedPlugin`].
//!
//! [`PipelineFile::build_with`]: super::PipelineFile::build_with

use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::parallelism::NumParallel;
use crate::registry::{AppendContext, Spec};
use crate::stages::map_chunks::{ChunkFn, MapChunksSpec, MapChunksStage};

use crate::invalid::{Invalid, Key, under};
use crate::parallelism::check_num_parallel;

/// Runs a user transform built with `sluice-sdk` (see the README's Plugins section and
/// `sdk/ABI.md`): one plugin call per chunk of `chunk_size` consecutive elements, with one
/// seed per element drawn from the element's RNG (seed, epoch, stage, element id), so the
/// output is fixed by the seed at any `chunk_size` and `num_parallel`. The plugin declares
/// the features it reads (checked before every call); the features it returns replace or
/// add to the element's, the others are kept. The stage shows in stats and errors as
/// `plugin:NAME` (the name the plugin declares).
///
/// ```toml
/// [[stage]]
/// kind = "plugin"
/// path = "target/release/libsluice_example_noise.so"
/// config = { sigma = 0.05, p = 0.5 }
/// num_parallel = "auto"
/// chunk_size = 64
/// ```
///
/// `config` is given to the plugin as a JSON object: TOML tables, arrays, strings, numbers
/// and booleans map to their JSON counterparts; datetimes and `inf`/`nan`, which JSON lacks,
/// are refused with their line and column. Every plugin is loaded when the pipeline is
/// built, before any data is read: a missing file, a file that is not a plugin (or built
/// for another ABI version), or a config the plugin refuses is an error naming the stage,
/// the file and the plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginStageSpec {
    /// The plugin file, relative to the current directory (as the source's files are;
    /// `sluice run --plugin-dir DIR` looks it up in `DIR` by its file name instead). The
    /// extension picks the host: `.so`, `.dylib`, `.dll` a native library; `.wasm`, `.wat`
    /// a WASM module, run sandboxed under `limits`.
    pub path: PathBuf,
    /// The plugin's configuration (default: an empty table), checked by the plugin when it
    /// is loaded.
    #[serde(default, deserialize_with = "json_table")]
    pub config: Map<String, Value>,
    /// Worker threads: sequential (default), a number, or `"auto"`.
    #[serde(default, skip_serializing_if = "is_sequential")]
    pub num_parallel: NumParallel,
    /// Elements per plugin call (default 64, ≥ 1).
    #[serde(default = "default_chunk_size")]
    #[schemars(range(min = 1))]
    pub chunk_size: usize,
    /// Keep the input order with several threads (default true).
    #[serde(default = "yes")]
    pub deterministic: bool,
    /// The `limits` table: options for the host that runs the plugin, which core does not
    /// interpret and gives to the [`PluginLoader`] as written. The WASM host takes `memory`
    /// and `time_ms` and checks them; a native plugin runs in the host process and cannot
    /// be limited, so its loader refuses any. Values become JSON as `config`'s do.
    #[serde(
        default,
        deserialize_with = "limits_table",
        skip_serializing_if = "Map::is_empty"
    )]
    pub limits: Map<String, Value>,
}

fn default_chunk_size() -> usize {
    MapChunksSpec::default().chunk_size
}

fn yes() -> bool {
    true
}

fn is_sequential(n: &NumParallel) -> bool {
    *n == NumParallel::Sequential
}

impl PluginStageSpec {
    /// A stage running the plugin at `path` with an empty config, sequentially, 64
    /// elements per call.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        PluginStageSpec {
            path: path.into(),
            config: Map::new(),
            num_parallel: NumParallel::Sequential,
            chunk_size: default_chunk_size(),
            deterministic: true,
            limits: Map::new(),
        }
    }

    /// How the stage runs.
    pub fn map_chunks_spec(&self) -> MapChunksSpec {
        MapChunksSpec {
            chunk_size: self.chunk_size,
            num_parallel: self.num_parallel,
            deterministic: self.deterministic,
        }
    }

    /// `config` as the JSON object the plugin receives.
    pub fn config_json(&self) -> Value {
        Value::Object(self.config.clone())
    }

    /// `dataset` followed by this stage, the plugin loaded by `loader`.
    pub fn apply(&self, dataset: &Dataset, loader: &dyn PluginLoader) -> Result<Dataset> {
        Ok(self.attach(dataset, loader.load(self)?))
    }

    /// `dataset` followed by this stage running `loaded` (this stage's plugin, loaded).
    pub fn attach(&self, dataset: &Dataset, loaded: LoadedPlugin) -> Dataset {
        let label = format!(
            "plugin {} ({}) config {}",
            loaded.fingerprint,
            self.path.display(),
            self.config_json()
        );
        let mut stage = MapChunksStage::new(self.map_chunks_spec(), loaded.chunk_fn, label)
            .with_display_name(format!("plugin:{}", loaded.name));
        if loaded.one_to_one {
            stage = stage.one_to_one();
        }
        Dataset::from_stage(stage, vec![dataset.clone()])
    }

    fn check(&self) -> Result<(), Invalid> {
        let base: &[Key] = &[];
        if self.path.as_os_str().is_empty() {
            return Err(Invalid::new(
                under(base, &["path"]),
                "plugin: `path` must name the plugin file",
            ));
        }
        if self.chunk_size == 0 {
            return Err(Invalid::new(
                under(base, &["chunk_size"]),
                "plugin: `chunk_size` must be at least 1",
            ));
        }
        check_num_parallel("plugin", self.num_parallel)?;
        Ok(())
    }
}

impl Spec for PluginStageSpec {
    const KIND: &'static str = "plugin";
    const SUMMARY: &'static str =
        "a native or WASM plugin with a config table (needs a plugin loader)";

    fn validate(&self) -> Result<(), Invalid> {
        self.check()
    }

    fn append(&self, input: &Dataset, cx: &AppendContext<'_>) -> crate::Result<Dataset> {
        Ok(self.attach(input, cx.plugins.load(self)?))
    }
}

/// A plugin made ready to run by a [`PluginLoader`].
#[derive(Clone)]
pub struct LoadedPlugin {
    /// The plugin's name (stats show the stage as `plugin:NAME`).
    pub name: String,
    /// What identifies the plugin's code (e.g. name, version and file), for cache
    /// fingerprints; the path and config are added to it.
    pub fingerprint: String,
    /// The function `map_chunks` runs: one plugin call per chunk.
    pub chunk_fn: ChunkFn,
    /// The function gives one output per input, of that input alone (a `map` plugin): a
    /// resumed run skips the elements before its position without calling it
    /// ([`MapChunksStage::one_to_one`]).
    pub one_to_one: bool,
}

impl fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.name)
            .field("fingerprint", &self.fingerprint)
            .field("one_to_one", &self.one_to_one)
            .finish_non_exhaustive()
    }
}

/// Loads the plugin of a `plugin` stage: picks a host for the file, creates the plugin
/// with its config (so an invalid config is reported before anything runs) and gives
/// back the function to run. `sluice_plugins::Loader` is the loader of the plugin hosts.
pub trait PluginLoader {
    /// The plugin of `spec`, ready to run.
    fn load(&self, spec: &PluginStageSpec) -> Result<LoadedPlugin>;
}

/// The loader of [`PipelineFile::build`](super::PipelineFile::build): refuses every plugin
/// with [`Error::NoPluginLoader`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPluginLoader;

impl PluginLoader for NoPluginLoader {
    fn load(&self, _: &PluginStageSpec) -> Result<LoadedPlugin> {
        Err(Error::NoPluginLoader)
    }
}

/// `config`: a table whose values become JSON, refusing what JSON cannot hold.
fn json_table<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    table(d, "config")
}

/// `limits`: a table of host options, as JSON like `config`.
fn limits_table<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    table(d, "limits")
}

/// The table `key`, its values as JSON.
fn table<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Map<String, Value>, D::Error> {
    match Json::deserialize(d)?.0 {
        Value::Object(map) => Ok(map),
        other => Err(serde::de::Error::custom(format!(
            "`{key}` must be a table, got {}",
            json_kind(&other)
        ))),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

/// The key under which the `toml` crate hands a datetime to a deserializer.
const TOML_DATETIME: &str = "$__toml_private_datetime";

/// A JSON value deserialized from any format, refusing datetimes and non-finite floats.
struct Json(Value);

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> serde::de::Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table, array, string, number or boolean")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json(Value::Bool(v)))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json(Value::from(v)))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json(Value::from(v)))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(|n| Json(Value::Number(n)))
            .ok_or_else(|| {
                E::custom(format!(
                    "plugin config: {v} is not a finite number, which JSON cannot hold"
                ))
            })
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json(Value::String(v.to_string())))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json(Value::String(v)))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Json, E> {
        Ok(Json(Value::Null))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Json, E> {
        Ok(Json(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        Json::deserialize(d)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::new();
        while let Some(Json(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Json(Value::Array(out)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == TOML_DATETIME {
                let Json(text) = map.next_value()?;
                let text = text.as_str().unwrap_or_default().to_string();
                return Err(serde::de::Error::custom(format!(
                    "plugin config: datetimes cannot be given to a plugin (its config is JSON); \
                     write it as a string: \"{text}\""
                )));
            }
            let Json(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Json(Value::Object(out)))
    }
}
