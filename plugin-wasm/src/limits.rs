//! The sandbox's limits: memory per instance and CPU time per call, and how a pipeline
//! file's `limits` table sets them.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};
use sluice_core::pipeline_file::ByteSize;
use sluice_plugin_host::{Error, Result};

/// Limits of one WASM plugin's instances, set per plugin in the pipeline (`limits = {
/// memory = "256MiB", time_ms = 2000 }` in a pipeline file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WasmLimits {
    /// Most linear memory one instance may have, in bytes. Growing past it fails inside the
    /// guest (`memory.grow` returns -1); a guest that then traps is reported as having hit
    /// the memory limit.
    pub memory_bytes: u64,
    /// Most time one call (init, or one batch) may run before it is interrupted. Measured on
    /// the wall clock in ticks of [`TICK`], so a call may overrun by up to one tick.
    pub time: Duration,
}

/// The epoch tick: how often running calls are checked against their deadline.
pub const TICK: Duration = Duration::from_millis(5);

/// Default memory cap: 512 MiB per instance (a call of 64 `f32` 224×224×3 images holds
/// its input and output, about 80 MB, plus the plugin's own copies).
pub const DEFAULT_MEMORY_BYTES: u64 = 512 << 20;

/// Default time per call: 10 s.
pub const DEFAULT_TIME: Duration = Duration::from_secs(10);

/// The smallest memory limit a pipeline file may set: one WASM page (64 KiB).
pub const MIN_MEMORY_BYTES: u64 = 64 << 10;

/// The keys of a pipeline file's `limits` table.
const KEYS: [&str; 2] = ["memory", "time_ms"];

impl Default for WasmLimits {
    fn default() -> Self {
        WasmLimits {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            time: DEFAULT_TIME,
        }
    }
}

impl WasmLimits {
    /// With a memory cap.
    pub fn memory_bytes(mut self, bytes: u64) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// With a time limit per call.
    pub fn time(mut self, time: Duration) -> Self {
        self.time = time;
        self
    }

    /// The limits a pipeline file's `limits` table sets (the stage's host options, as core
    /// gives them) over the defaults: `memory`, a size (`"256MiB"`, or bytes) of at least
    /// 64KiB, and `time_ms`, at least 1. Anything else is [`Error::Limits`] naming the
    /// plugin file at `path` and the key.
    ///
    /// ```toml
    /// limits = { memory = "64MiB", time_ms = 1000 }
    /// ```
    pub fn from_options(path: &Path, options: &Map<String, Value>) -> Result<WasmLimits> {
        let refuse = |message: String| Error::Limits {
            path: path.to_path_buf(),
            message,
        };
        if let Some(key) = options.keys().find(|k| !KEYS.contains(&k.as_str())) {
            let mut message = format!(
                "`limits`: unknown field `{key}`, expected one of `{}`, `{}`",
                KEYS[0], KEYS[1]
            );
            if let Some(close) = closest(key) {
                message.push_str(&format!("; did you mean `{close}`?"));
            }
            return Err(refuse(message));
        }
        let mut limits = WasmLimits::default();
        if let Some(memory) = options.get("memory") {
            let memory = ByteSize::deserialize(memory)
                .map_err(|e| refuse(format!("`limits.memory`: {e}")))?;
            if memory.0 < MIN_MEMORY_BYTES {
                return Err(refuse(format!(
                    "`limits.memory` must be at least 64KiB (one WASM page), got {memory}"
                )));
            }
            limits = limits.memory_bytes(memory.0);
        }
        if let Some(ms) = options.get("time_ms") {
            let ms = u64::deserialize(ms).map_err(|e| refuse(format!("`limits.time_ms`: {e}")))?;
            if ms == 0 {
                return Err(refuse("`limits.time_ms` must be at least 1".to_string()));
            }
            limits = limits.time(Duration::from_millis(ms));
        }
        Ok(limits)
    }

    /// The deadline in epoch ticks (at least 1, plus one for the tick in progress).
    pub(crate) fn ticks(&self) -> u64 {
        (self.time.as_nanos() / TICK.as_nanos()).max(1) as u64 + 1
    }
}

/// The key of [`KEYS`] closest to the misspelt `typo` (Damerau-Levenshtein), if close
/// enough to be what was meant: the rule of pipeline files' other suggestions.
fn closest(typo: &str) -> Option<&'static str> {
    let lower = typo.to_ascii_lowercase();
    KEYS.into_iter()
        .map(|k| (strsim::damerau_levenshtein(&lower, k), k))
        .filter(|(d, k)| {
            let longest = lower.chars().count().max(k.chars().count());
            *d <= (longest / 3).max(1)
                || (lower.len() >= 3 && (k.contains(lower.as_str()) || lower.contains(k)))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The store's resource limiter: caps memory and records a refused growth, so a trap that
/// follows can be reported as the memory limit.
#[derive(Debug)]
pub(crate) struct Limiter {
    pub(crate) memory_bytes: usize,
    pub(crate) refused: bool,
    /// Most core instances in the store: 1 for a core module; a component's module and
    /// the shims wit-component adds.
    pub(crate) instances: usize,
    /// The instance's WASI, for a component that imports it (`crate::wasi`).
    pub(crate) wasi: Option<Box<crate::wasi::Sandbox>>,
}

impl Limiter {
    /// A limiter for one instance's store under `limits`.
    pub(crate) fn new(limits: WasmLimits, instances: usize) -> Limiter {
        Limiter {
            memory_bytes: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
            refused: false,
            instances,
            wasi: None,
        }
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn limits(options: Value) -> Result<WasmLimits> {
        let Value::Object(options) = options else {
            unreachable!()
        };
        WasmLimits::from_options(Path::new("p.wasm"), &options)
    }

    #[test]
    fn a_limits_table_sets_memory_and_time_over_the_defaults() {
        assert_eq!(limits(json!({})).unwrap(), WasmLimits::default());
        let l = limits(json!({"memory": "64MiB", "time_ms": 1000})).unwrap();
        assert_eq!(l.memory_bytes, 64 << 20);
        assert_eq!(l.time, Duration::from_millis(1000));
        let l = limits(json!({"memory": 65536})).unwrap();
        assert_eq!((l.memory_bytes, l.time), (65536, DEFAULT_TIME));
    }

    #[test]
    fn bad_limits_are_refused_naming_the_file_and_key() {
        let message = |options| limits(options).unwrap_err().to_string();
        assert_eq!(
            message(json!({"mem": "1MiB"})),
            "p.wasm: `limits`: unknown field `mem`, expected one of `memory`, `time_ms`; \
             did you mean `memory`?"
        );
        assert_eq!(
            message(json!({"workers": 2})),
            "p.wasm: `limits`: unknown field `workers`, expected one of `memory`, `time_ms`"
        );
        assert_eq!(
            message(json!({"memory": "1KiB"})),
            "p.wasm: `limits.memory` must be at least 64KiB (one WASM page), got 1024 bytes"
        );
        assert_eq!(
            message(json!({"time_ms": 0})),
            "p.wasm: `limits.time_ms` must be at least 1"
        );
        assert!(message(json!({"memory": "lots"})).starts_with("p.wasm: `limits.memory`: "));
        assert!(message(json!({"time_ms": -1})).starts_with("p.wasm: `limits.time_ms`: "));
    }
}
