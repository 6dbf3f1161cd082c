//! [`Loader`]: the plugin loader for pipeline files that knows both hosts: `.wasm` and
//! `.wat` stages run here under their `limits`; everything else goes to
//! [`sluice_plugins::Loader`] (native libraries).

use std::sync::Arc;
use std::time::Duration;

use sluice_core::pipeline_file::{LoadedPlugin, PluginLoader, PluginStageSpec};
use sluice_plugins::Backend;

use crate::limits::WasmLimits;
use crate::plugin::{WasmOptions, WasmPlugin};

/// Loads pipeline files' plugin stages: WASM modules sandboxed with the stage's `limits`
/// (defaults: [`WasmLimits::default`]), native libraries through
/// [`sluice_plugins::Loader`]. What `sluice run` uses.
///
/// ```no_run
/// use sluice_core::pipeline_file::PipelineFile;
///
/// # fn main() -> sluice_core::Result<()> {
/// let pipeline = PipelineFile::load("examples/pipelines/plugin_noise.toml")?;
/// let dataset = pipeline.build_with(&sluice_plugin_wasm::Loader::default())?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Loader {
    /// Where compiled modules are cached (`None`: [`crate::default_cache_dir`]).
    pub cache_dir: Option<Option<std::path::PathBuf>>,
}

impl Loader {
    /// The WASM options for `spec`: its limits over the defaults.
    pub fn options(&self, spec: &PluginStageSpec) -> WasmOptions {
        let mut limits = WasmLimits::default();
        if let Some(memory) = spec.limits.memory {
            limits = limits.memory_bytes(memory.0);
        }
        if let Some(ms) = spec.limits.time_ms {
            limits = limits.time(Duration::from_millis(ms));
        }
        WasmOptions {
            limits,
            cache_dir: self.cache_dir.clone(),
        }
    }

    /// The backend for `spec`'s plugin file.
    pub fn backend(&self, spec: &PluginStageSpec) -> sluice_plugins::Result<Arc<dyn Backend>> {
        let extension = spec
            .path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match extension.as_deref() {
            Some("wasm" | "wat") => Ok(WasmPlugin::load_with(&spec.path, &self.options(spec))?),
            _ => sluice_plugins::Loader.backend(spec),
        }
    }
}

impl PluginLoader for Loader {
    fn load(&self, spec: &PluginStageSpec) -> sluice_core::Result<LoadedPlugin> {
        sluice_plugins::loaded(self.backend(spec)?, spec)
    }
}
