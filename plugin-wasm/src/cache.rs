//! The on-disk cache of compiled modules, keyed by the module's SHA-256 and the engine's
//! compatibility hash, with a checksum of the compiled code.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

/// What the cache keeps: compiled core modules and components.
trait Compiled: Sized {
    fn compile(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self>;
    fn serialize(&self) -> wasmtime::Result<Vec<u8>>;
    /// # Safety
    /// `code` must be what [`Compiled::serialize`] wrote for an engine of this
    /// configuration (see [`compile`]).
    #[allow(unsafe_code)]
    unsafe fn deserialize(engine: &Engine, code: &[u8]) -> wasmtime::Result<Self>;
}

impl Compiled for Module {
    fn compile(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self> {
        Module::new(engine, bytes)
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Module::serialize(self)
    }
    #[allow(unsafe_code)]
    unsafe fn deserialize(engine: &Engine, code: &[u8]) -> wasmtime::Result<Self> {
        // SAFETY: this function's contract is `Module::deserialize`'s.
        unsafe { Module::deserialize(engine, code) }
    }
}

impl Compiled for Component {
    fn compile(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self> {
        Component::new(engine, bytes)
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Component::serialize(self)
    }
    #[allow(unsafe_code)]
    unsafe fn deserialize(engine: &Engine, code: &[u8]) -> wasmtime::Result<Self> {
        // SAFETY: this function's contract is `Component::deserialize`'s.
        unsafe { Component::deserialize(engine, code) }
    }
}

/// Where compiled modules are kept: `$SLUICE_WASM_CACHE`, else `$XDG_CACHE_HOME/sluice/wasm`,
/// else `$HOME/.cache/sluice/wasm`; `None` when none is set (then nothing is cached).
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SLUICE_WASM_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("sluice").join("wasm"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("sluice").join("wasm"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How a module was obtained, for stats and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// No cache directory: compiled.
    Uncached,
    /// Compiled and stored in the cache.
    Compiled,
    /// Loaded from the cache.
    Hit,
    /// A cache entry was there but stale, foreign or damaged: recompiled and replaced.
    Replaced,
}

/// Compiles `bytes` (`.wasm` or `.wat`), or loads the compiled code from `cache_dir`.
///
/// Entries are keyed by the module's SHA-256 and the engine's compatibility hash (wasmtime
/// version and configuration), and stored with the SHA-256 of the compiled code beside them.
/// An entry is used only when that checksum matches and wasmtime accepts its header for this
/// engine; anything else is recompiled and replaced (written to a temporary file, then
/// renamed). The cache directory must be as trusted as the program itself: compiled code is
/// native code.
pub fn compile(
    engine: &Engine,
    bytes: &[u8],
    cache_dir: Option<&Path>,
) -> wasmtime::Result<(Module, CacheOutcome)> {
    compile_cached(engine, bytes, cache_dir)
}

/// [`compile`] for a component (the component worlds of `sdk/wit/sluice.wit`): the same
/// cache, keys and checks.
pub fn compile_component(
    engine: &Engine,
    bytes: &[u8],
    cache_dir: Option<&Path>,
) -> wasmtime::Result<(Component, CacheOutcome)> {
    compile_cached(engine, bytes, cache_dir)
}

fn compile_cached<T: Compiled>(
    engine: &Engine,
    bytes: &[u8],
    cache_dir: Option<&Path>,
) -> wasmtime::Result<(T, CacheOutcome)> {
    let Some(dir) = cache_dir else {
        return Ok((T::compile(engine, bytes)?, CacheOutcome::Uncached));
    };
    let mut compat = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut compat);
    let key = format!("{}-{:016x}", hex(&Sha256::digest(bytes)), compat.finish());
    let code_path = dir.join(format!("{key}.cwasm"));
    let sum_path = dir.join(format!("{key}.sha256"));
    let mut had_entry = false;
    if let (Ok(code), Ok(sum)) = (
        std::fs::read(&code_path),
        std::fs::read_to_string(&sum_path),
    ) {
        had_entry = true;
        if hex(&Sha256::digest(&code)) == sum.trim() {
            #[allow(unsafe_code)]
            // SAFETY: `deserialize` (a module's or a component's) runs the given native code.
            // These bytes were written by `serialize` of the same kind, for this same engine
            // configuration (the file name carries the source's SHA-256 and the engine's
            // compatibility hash), their checksum matches the one stored beside them, and
            // wasmtime itself checks the header's version and settings. The cache directory
            // is trusted like the program (see the function docs).
            let loaded = unsafe { T::deserialize(engine, &code) };
            match loaded {
                Ok(module) => return Ok((module, CacheOutcome::Hit)),
                Err(e) => {
                    tracing::warn!(path = %code_path.display(), %e, "stale WASM cache entry: recompiling")
                }
            }
        } else {
            tracing::warn!(path = %code_path.display(), "WASM cache entry fails its checksum: recompiling");
        }
    }
    let module = T::compile(engine, bytes)?;
    if let Err(e) = store(dir, &code_path, &sum_path, &module.serialize()?) {
        tracing::warn!(dir = %dir.display(), %e, "cannot write the WASM cache");
    }
    Ok((
        module,
        if had_entry {
            CacheOutcome::Replaced
        } else {
            CacheOutcome::Compiled
        },
    ))
}

fn store(dir: &Path, code_path: &Path, sum_path: &Path, code: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let unique = format!("{}.{:?}", std::process::id(), std::thread::current().id());
    let tmp_code = code_path.with_extension(format!("cwasm.tmp{unique}"));
    let tmp_sum = sum_path.with_extension(format!("sha256.tmp{unique}"));
    std::fs::write(&tmp_code, code)?;
    std::fs::write(&tmp_sum, hex(&Sha256::digest(code)))?;
    // The checksum goes in last: a reader that sees the new sum sees the new code.
    std::fs::rename(&tmp_code, code_path)?;
    std::fs::rename(&tmp_sum, sum_path)?;
    Ok(())
}
