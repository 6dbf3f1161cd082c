//! The sandboxed WASI of component plugins that import it.
//!
//! A plugin written in Python (componentize-py: CPython) or JavaScript (componentize-js:
//! StarlingMonkey) is a component that imports WASI 0.2 interfaces: its language runtime
//! needs them to start, even when the plugin's own code uses none. Such a component gets
//! WASI 0.2 (`wasmtime-wasi`), with nothing behind it:
//!
//! - **files**: no preopened directories (`wasi:filesystem/preopens` lists none), so no path
//!   opens anything;
//! - **network**: TCP, UDP and name lookup disabled, every address refused;
//! - **environment**: no variables, no arguments; stdin is closed;
//! - **stdout and stderr**: lines go to Sluice's log (`tracing`, target `sluice::plugin`, at
//!   `info` and `warn`), at most [`LOG_BUDGET`] bytes per instance, the rest discarded;
//! - **random** (`wasi:random/random` and `insecure`): a deterministic generator, seeded with
//!   a constant when the instance is made and reseeded from the element's seed before every
//!   call (from all of a chunk's seeds in the batch world). Random bytes a call reads
//!   through WASI depend on its seeds only; a language's own generator seeded once at
//!   start-up (Python's `random`, JavaScript's `Math.random`) is deterministic per
//!   instance, but depends on the calls the instance saw before: plugins draw from the
//!   seed they are given (sdk/LANGUAGES.md);
//! - **clocks**: virtual. The wall clock always reads [`WALL_CLOCK_SECONDS`] (2020-01-01);
//!   the monotonic clock advances [`MONOTONIC_STEP_NS`] per reading, and a sleep (a
//!   subscription to the monotonic clock) is ready at once and moves it forward by the
//!   time asked: a guest cannot block its worker in the host, and no output depends on
//!   the real time.
//!
//! Any other import (a WASI interface outside this set, e.g. `wasi:http`, or another
//! version of WASI) is refused at load time, naming it. The memory cap and the time limit
//! apply as to any component: the runtime's memory is the guest's linear memory, and the
//! epoch deadline interrupts its interpreter loop.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use crate::limits::Limiter;

/// The WASI packages a component may import (version 0.2.x), all provided sandboxed.
pub(crate) const PACKAGES: [&str; 6] = [
    "wasi:io",
    "wasi:clocks",
    "wasi:random",
    "wasi:cli",
    "wasi:filesystem",
    "wasi:sockets",
];

/// The WASI version this host provides (wasmtime-wasi 48's): imports of any 0.2.x match.
const PROVIDED_VERSION: &str = "0.2.12";

/// Most bytes of stdout and stderr an instance may write to the log; the rest is discarded.
pub const LOG_BUDGET: usize = 64 << 10;

/// What the wall clock reads: 2020-01-01T00:00:00Z.
pub const WALL_CLOCK_SECONDS: u64 = 1_577_836_800;

/// How far the monotonic clock moves per reading: 1 µs.
pub const MONOTONIC_STEP_NS: u64 = 1_000;

/// The random stream's state when an instance is made, before any call.
const INITIAL_SEED: u64 = 0x51ce_5eed_0000_0001;

/// The seed of `wasi:random/insecure-seed`.
const INSECURE_SEED: u128 = 0x51_1ce0_5eed;

/// Whether `name` (an import of a component, e.g. `wasi:io/poll@0.2.9`) is one of the WASI
/// interfaces this host provides.
pub(crate) fn provides(name: &str) -> bool {
    let Some((path, version)) = name.split_once('@') else {
        return false;
    };
    let Some((package, _interface)) = path.split_once('/') else {
        return false;
    };
    PACKAGES.contains(&package) && version.starts_with("0.2.")
}

/// Whether `name` looks like a WASI import at all (for the error of one not provided).
pub(crate) fn is_wasi(name: &str) -> bool {
    name.starts_with("wasi:")
}

/// The error of a component whose imports `refused` (quoted names) are neither the types
/// interface `types` nor WASI this host provides.
pub(crate) fn refused(refused: &[String], types: &str) -> String {
    let other_wasi = refused.iter().any(|n| is_wasi(n.trim_matches('`')));
    let mut message = format!(
        "the component imports {}; a plugin may import only the types of `{types}` and, \
         sandboxed, WASI 0.2's {} interfaces (no files, network or environment; \
         deterministic random and clocks: sdk/LANGUAGES.md)",
        refused.join(", "),
        PACKAGES.join(", ")
    );
    if other_wasi {
        message.push_str(
            "; other WASI interfaces and versions are not provided (build the plugin without \
             them, e.g. without HTTP)",
        );
    }
    message
}

/// The label of a plugin's log lines: its file's name.
pub(crate) fn label(path: &std::path::Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// One instance's WASI: the context (no files, network or environment; logged output;
/// deterministic random and clocks), its resource table, and the random stream's state to
/// reseed before each call.
pub(crate) struct Sandbox {
    ctx: WasiCtx,
    table: ResourceTable,
    random: Arc<AtomicU64>,
    clock: Arc<AtomicU64>,
}

impl Sandbox {
    /// The WASI of one instance of the plugin named `plugin` (its log lines say it).
    pub(crate) fn new(plugin: &str) -> Sandbox {
        let random = Arc::new(AtomicU64::new(INITIAL_SEED));
        let clock = Arc::new(AtomicU64::new(0));
        let budget = Arc::new(AtomicUsize::new(LOG_BUDGET));
        let plugin: Arc<str> = Arc::from(plugin);
        let ctx = WasiCtx::builder()
            .stdout(LogStream {
                plugin: plugin.clone(),
                stream: "stdout",
                budget: budget.clone(),
            })
            .stderr(LogStream {
                plugin,
                stream: "stderr",
                budget,
            })
            .secure_random(SeededRandom(random.clone()))
            .insecure_random(SeededRandom(random.clone()))
            .insecure_random_seed(INSECURE_SEED)
            .wall_clock(FixedWallClock)
            .monotonic_clock(VirtualClock(clock.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Sandbox {
            ctx,
            table: ResourceTable::new(),
            random,
            clock,
        }
    }
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").finish_non_exhaustive()
    }
}

impl WasiView for Limiter {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let sandbox = self
            .wasi
            .get_or_insert_with(|| Box::new(Sandbox::new("plugin")));
        WasiCtxView {
            ctx: &mut sandbox.ctx,
            table: &mut sandbox.table,
        }
    }
}

/// Reseeds the WASI random stream of the instance whose store holds `limiter` from the
/// seeds of the call about to run (nothing for a component without WASI).
pub(crate) fn reseed(limiter: &mut Limiter, seeds: &[u64]) {
    if let Some(sandbox) = &limiter.wasi {
        let mut state = 0x243f_6a88_85a3_08d3_u64;
        for &seed in seeds {
            state = splitmix(&mut (state ^ seed));
        }
        sandbox.random.store(state, Ordering::Relaxed);
    }
}

/// Adds this host's WASI 0.2 to `linker`: wasmtime-wasi's synchronous bindings, with the
/// monotonic clock's subscriptions replaced by virtual sleeps that are ready at once.
pub(crate) fn add_to_linker(linker: &mut Linker<Limiter>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    let mut clock = linker.instance(&format!("wasi:clocks/monotonic-clock@{PROVIDED_VERSION}"))?;
    clock.func_wrap(
        "subscribe-duration",
        |mut store: StoreContextMut<'_, Limiter>, (ns,): (u64,)| sleep(store.data_mut(), ns),
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |mut store: StoreContextMut<'_, Limiter>, (when,): (u64,)| {
            let limiter = store.data_mut();
            let now = limiter
                .wasi
                .as_ref()
                .map_or(0, |s| s.clock.load(Ordering::Relaxed));
            sleep(limiter, when.saturating_sub(now))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// A sleep of `ns` on the virtual monotonic clock: the clock moves forward, and the
/// pollable is ready at once.
fn sleep(limiter: &mut Limiter, ns: u64) -> wasmtime::Result<(Resource<DynPollable>,)> {
    let view = limiter.ctx();
    let ready = view.table.push(Ready)?;
    let pollable = subscribe(view.table, ready)?;
    if let Some(sandbox) = &limiter.wasi {
        sandbox.clock.fetch_add(ns, Ordering::Relaxed);
    }
    Ok((pollable,))
}

/// A pollable that is always ready.
struct Ready;

#[wasmtime_wasi::async_trait]
impl Pollable for Ready {
    async fn ready(&mut self) {}
}

/// SplitMix64's step: the next output of the stream at `state`.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// WASI's random bytes: SplitMix64 over a state shared with [`Sandbox`] (which reseeds it).
/// Deterministic, not cryptographic: a plugin has no secrets to protect, and its outputs
/// must be reproducible.
struct SeededRandom(Arc<AtomicU64>);

impl SeededRandom {
    fn next(&mut self) -> u64 {
        let mut state = self.0.load(Ordering::Relaxed);
        let out = splitmix(&mut state);
        self.0.store(state, Ordering::Relaxed);
        out
    }
}

impl rand_core::TryRng for SeededRandom {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.next() >> 32) as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.next())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Ok(())
    }
}

/// The wall clock: always [`WALL_CLOCK_SECONDS`].
struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        Duration::from_secs(WALL_CLOCK_SECONDS)
    }
}

/// The monotonic clock: [`MONOTONIC_STEP_NS`] per reading, plus the virtual sleeps.
struct VirtualClock(Arc<AtomicU64>);

impl HostMonotonicClock for VirtualClock {
    fn resolution(&self) -> u64 {
        MONOTONIC_STEP_NS
    }

    fn now(&self) -> u64 {
        self.0.fetch_add(MONOTONIC_STEP_NS, Ordering::Relaxed) + MONOTONIC_STEP_NS
    }
}

/// A guest's stdout or stderr, as lines of Sluice's log.
struct LogStream {
    plugin: Arc<str>,
    stream: &'static str,
    budget: Arc<AtomicUsize>,
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LogWriter {
            plugin: self.plugin.clone(),
            stream: self.stream,
            budget: self.budget.clone(),
            line: Vec::new(),
        })
    }
}

/// Writes whole lines to the log while the instance's budget lasts.
struct LogWriter {
    plugin: Arc<str>,
    stream: &'static str,
    budget: Arc<AtomicUsize>,
    line: Vec<u8>,
}

impl LogWriter {
    fn emit(&mut self) {
        let line = String::from_utf8_lossy(&self.line);
        let line = line.trim_end_matches(['\n', '\r']);
        let n = line.len() + 1;
        let left = self.budget.load(Ordering::Relaxed);
        if left >= n {
            self.budget.store(left - n, Ordering::Relaxed);
            if self.stream == "stderr" {
                tracing::warn!(target: "sluice::plugin", plugin = %self.plugin, stream = self.stream, "{line}");
            } else {
                tracing::info!(target: "sluice::plugin", plugin = %self.plugin, stream = self.stream, "{line}");
            }
        } else if left > 0 {
            self.budget.store(0, Ordering::Relaxed);
            tracing::warn!(
                target: "sluice::plugin",
                plugin = %self.plugin,
                "the plugin wrote more than {LOG_BUDGET} bytes to stdout and stderr: the rest is discarded"
            );
        }
        self.line.clear();
    }
}

impl tokio::io::AsyncWrite for LogWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        for &b in buf {
            me.line.push(b);
            if b == b'\n' || me.line.len() >= 4096 {
                me.emit();
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        if !me.line.is_empty() {
            me.emit();
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provided_set_is_wasi_0_2_of_six_packages() {
        assert!(provides("wasi:io/poll@0.2.9"));
        assert!(provides("wasi:sockets/tcp@0.2.0"));
        assert!(provides("wasi:cli/terminal-stdout@0.2.12"));
        assert!(!provides("wasi:http/types@0.2.9"));
        assert!(!provides("wasi:io/poll@0.3.0"));
        assert!(!provides("wasi:io/poll"));
        assert!(!provides("sluice:plugin/types@1.0.0"));
        assert!(is_wasi("wasi:http/types@0.2.9"));
    }

    #[test]
    fn reseeding_makes_the_random_stream_a_function_of_the_seeds() {
        let mut limiter = Limiter::new(crate::WasmLimits::default(), 1);
        limiter.wasi = Some(Box::new(Sandbox::new("t")));
        let draw = |limiter: &mut Limiter, seeds: &[u64]| {
            reseed(limiter, seeds);
            let random = limiter.wasi.as_ref().unwrap().random.clone();
            let mut r = SeededRandom(random);
            (r.next(), r.next())
        };
        let a = draw(&mut limiter, &[7]);
        let _ = draw(&mut limiter, &[8, 9]);
        assert_eq!(draw(&mut limiter, &[7]), a);
        assert_ne!(draw(&mut limiter, &[8]), a);
    }

    #[test]
    fn the_clocks_are_virtual() {
        let clock = VirtualClock(Arc::new(AtomicU64::new(0)));
        assert_eq!((clock.now(), clock.now()), (1_000, 2_000));
        assert_eq!(FixedWallClock.now().as_secs(), WALL_CLOCK_SECONDS);
    }
}
