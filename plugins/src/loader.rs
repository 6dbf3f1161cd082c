//! [`Loader`]: the plugin loader of pipeline files (`kind = "plugin"` stages), which
//! `sluice run` passes to `PipelineFile::build_with`. It knows both hosts and picks one by
//! the plugin file's extension.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_core::pipeline_file::{LoadedPlugin, PluginLoader, PluginStageSpec};
use sluice_plugin_host::{Backend, Error, PluginStage, Result};
use sluice_plugin_native::NativePlugin;
use sluice_plugin_wasm::{WasmLimits, WasmOptions, WasmPlugin};

/// Loads the plugin of a pipeline file's `plugin` stage with the host its file extension
/// names, creates it with the stage's config (so an invalid config is reported, in the
/// plugin's words, before anything runs) and gives back its chunk function.
///
/// | Extension | Host |
/// |---|---|
/// | `.so`, `.dylib`, `.dll` | native ([`NativePlugin`]); `limits` are refused: a native plugin runs inside the host process and cannot be limited |
/// | `.wasm`, `.wat` | WASM ([`WasmPlugin`]), sandboxed with the stage's `limits` over [`WasmLimits::default`] |
/// | anything else | [`Error::UnknownExtension`] |
///
/// The stage is labelled `plugin:NAME` (the plugin's declared name) in stats; its cache
/// fingerprint holds the name, version, file and config.
///
/// ```no_run
/// use sluice_core::pipeline_file::PipelineFile;
///
/// # fn main() -> sluice_core::Result<()> {
/// let pipeline = PipelineFile::load("examples/pipelines/plugin_noise.toml")?;
/// let dataset = pipeline.build_with(&sluice_plugins::Loader::default())?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Loader {
    /// Where compiled WASM modules are cached: `None` uses
    /// [`default_cache_dir`](sluice_plugin_wasm::default_cache_dir); `Some(None)` disables
    /// the cache.
    pub cache_dir: Option<Option<PathBuf>>,
}

impl Loader {
    /// The WASM options for `spec`: its `limits` over the defaults
    /// ([`WasmLimits::from_options`], which refuses unknown keys and impossible values).
    pub fn wasm_options(&self, spec: &PluginStageSpec) -> Result<WasmOptions> {
        Ok(WasmOptions {
            limits: WasmLimits::from_options(&spec.path, &spec.limits)?,
            cache_dir: self.cache_dir.clone(),
        })
    }

    /// The backend for the plugin file of `spec`, chosen by its extension.
    pub fn backend(&self, spec: &PluginStageSpec) -> Result<Arc<dyn Backend>> {
        let path = spec.path.as_path();
        let extension = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match extension.as_deref() {
            Some("so" | "dylib" | "dll") => {
                if !spec.limits.is_empty() {
                    return Err(Error::NativeLimits {
                        path: path.to_path_buf(),
                    });
                }
                exists(path)?;
                Ok(NativePlugin::load(path)?)
            }
            Some("wasm" | "wat") => {
                let options = self.wasm_options(spec)?;
                Ok(WasmPlugin::load_with(path, &options)?)
            }
            other => Err(Error::UnknownExtension {
                path: path.to_path_buf(),
                extension: match other {
                    Some(e) => format!("the extension .{e}"),
                    None => "no extension".to_string(),
                },
            }),
        }
    }
}

/// A missing plugin file, said plainly (rather than in the dynamic loader's words).
fn exists(path: &Path) -> Result<()> {
    if path.is_file() {
        return Ok(());
    }
    Err(Error::Load {
        path: path.to_path_buf(),
        message: "no such file (a relative path is relative to the current directory; \
                  `sluice run --plugin-dir DIR` looks plugins up in DIR)"
            .to_string(),
    })
}

impl PluginLoader for Loader {
    fn load(&self, spec: &PluginStageSpec) -> sluice_core::Result<LoadedPlugin> {
        loaded(self.backend(spec)?, spec)
    }
}

/// A pipeline file's plugin stage over `backend`: the plugin created with the stage's config
/// (so a bad config fails now, in the plugin's words), named and fingerprinted. Every
/// loader ends here (this one, or one of your own for another kind of backend).
pub fn loaded(
    backend: Arc<dyn Backend>,
    spec: &PluginStageSpec,
) -> sluice_core::Result<LoadedPlugin> {
    let stage = PluginStage::new(backend, &spec.config_json())?;
    let info = stage.info();
    Ok(LoadedPlugin {
        name: info.name.clone(),
        fingerprint: format!("{} {} ({})", info.name, info.version, stage.source()),
        chunk_fn: stage.chunk_fn(),
        one_to_one: stage.one_to_one(),
    })
}
