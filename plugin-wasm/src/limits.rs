//! The sandbox's limits: memory per instance and CPU time per call.

use std::time::Duration;

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

    /// The deadline in epoch ticks (at least 1, plus one for the tick in progress).
    pub(crate) fn ticks(&self) -> u64 {
        (self.time.as_nanos() / TICK.as_nanos()).max(1) as u64 + 1
    }
}

/// The store's resource limiter: caps memory and records a refused growth, so a trap that
/// follows can be reported as the memory limit.
#[derive(Debug)]
pub(crate) struct Limiter {
    pub(crate) memory_bytes: usize,
    pub(crate) refused: bool,
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
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}
