//! The on-disk cache of compiled modules, keyed by the module's SHA-256 and the engine's
//! compatibility hash, with a checksum of the compiled code.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

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
    let Some(dir) = cache_dir else {
        return Ok((Module::new(engine, bytes)?, CacheOutcome::Uncached));
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
            // SAFETY: `deserialize` runs the given native code. These bytes were written by
            // `Module::serialize` of this same engine configuration (the file name carries its
            // compatibility hash), their checksum matches the one stored beside them, and
            // wasmtime itself checks the header's version and settings. The cache directory
            // is trusted like the program (see the function docs).
            let loaded = unsafe { Module::deserialize(engine, &code) };
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
    let module = Module::new(engine, bytes)?;
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
