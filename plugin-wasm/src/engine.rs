//! The one wasmtime [`Engine`] of the process, with epoch interruption for time limits.

use std::sync::OnceLock;

use wasmtime::{Config, Engine};

use crate::limits::TICK;

/// The process's engine: epoch interruption on (CPU-time limits), SIMD on. A background
/// thread advances the epoch every [`TICK`] for as long as the process runs.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_simd(true);
        let engine = Engine::new(&config).expect("a valid wasmtime configuration");
        let ticking = engine.clone();
        std::thread::Builder::new()
            .name("sluice-wasm-epoch".to_string())
            .spawn(move || {
                loop {
                    std::thread::sleep(TICK);
                    ticking.increment_epoch();
                }
            })
            .expect("spawn the epoch thread");
        engine
    })
}
