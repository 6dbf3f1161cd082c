//! A WASM plugin: a compiled module, pre-linked with no imports, whose instances each live
//! in their own store with a memory cap and a time limit per call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use sluice_plugin_host::{Backend, CallFailure, Error, Instance, Result, abi, metadata};
use sluice_sdk::PluginInfo;
use sluice_sdk::abi::{status, symbols};
use wasmtime::{InstancePre, Linker, Memory, Module, Store, Trap, TypedFunc};

use crate::cache::{CacheOutcome, compile, compile_component, default_cache_dir};
use crate::component::{ComponentInstance, ComponentPre, World, is_component};
use crate::engine::engine;
use crate::limits::{Limiter, WasmLimits};

/// Most bytes of an error message read from a guest.
const MAX_MESSAGE: usize = 64 << 10;

/// How to load a WASM plugin.
#[derive(Debug, Clone, Default)]
pub struct WasmOptions {
    /// The sandbox's limits.
    pub limits: WasmLimits,
    /// Where compiled modules are cached: `None` uses [`default_cache_dir`]; `Some(None)`
    /// disables the cache.
    pub cache_dir: Option<Option<PathBuf>>,
}

/// A loaded WASM plugin: a core module of the ABI (`sdk/ABI.md`) or a component of the
/// Sluice worlds (`sdk/WIT.md`), told apart by the file's header.
pub struct WasmPlugin {
    path: PathBuf,
    info: PluginInfo,
    pre: Pre,
    limits: WasmLimits,
    cache: CacheOutcome,
    compile_seconds: f64,
}

/// What a plugin's instances are made from.
enum Pre {
    /// A core module, pre-linked with no imports.
    Module(InstancePre<Limiter>),
    /// A component, pre-linked with no imports.
    Component(ComponentPre),
}

/// Which kind of WASM binary a plugin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WasmFormat {
    /// A core module speaking the C ABI of `sdk/ABI.md`.
    CoreModule,
    /// A component of the `map-transform` world (`sdk/wit/sluice.wit`).
    MapComponent,
    /// A component of the `filter-transform` world.
    FilterComponent,
    /// A component of the `batch-transform` world.
    BatchComponent,
}

impl std::fmt::Display for WasmFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WasmFormat::CoreModule => "core module (ABI 1)",
            WasmFormat::MapComponent => "component (sluice:plugin@1.0.0 map-transform)",
            WasmFormat::FilterComponent => "component (sluice:plugin@1.0.0 filter-transform)",
            WasmFormat::BatchComponent => "component (sluice:plugin@1.0.0 batch-transform)",
        })
    }
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("path", &self.path)
            .field("info", &self.info)
            .field("limits", &self.limits)
            .finish()
    }
}

/// The guest's entry points, typed.
#[derive(Clone)]
struct Api {
    alloc: TypedFunc<i32, i32>,
    free: TypedFunc<(i32, i32), ()>,
    init: TypedFunc<(i32, i32), i32>,
    process: TypedFunc<(i32, i32, i32, i32, i32), i32>,
    output_ptr: TypedFunc<i32, i32>,
    output_len: TypedFunc<i32, i32>,
    error_ptr: TypedFunc<i32, i32>,
    error_len: TypedFunc<i32, i32>,
    destroy: TypedFunc<i32, ()>,
    info_ptr: TypedFunc<(), i32>,
    info_len: TypedFunc<(), i32>,
}

/// A running instance: its own store, memory and guest handle.
struct Guest {
    store: Store<Limiter>,
    memory: Memory,
    api: Api,
    limits: WasmLimits,
}

/// Why a guest call failed.
pub(crate) fn classify(
    e: &wasmtime::Error,
    store: &Store<Limiter>,
    limits: &WasmLimits,
) -> CallFailure {
    let (status, message) = if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        (
            "timeout",
            format!("the call ran past its time limit of {:?}", limits.time),
        )
    } else if store.data().refused {
        (
            "memory limit",
            format!(
                "the plugin trapped after its memory reached the limit of {} bytes",
                limits.memory_bytes
            ),
        )
    } else {
        let cause = match e.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => format!("{e:#}"),
        };
        ("trap", format!("the plugin trapped: {cause}"))
    };
    CallFailure {
        status: status.to_string(),
        message,
        discard: true,
    }
}

pub(crate) fn broken(message: String) -> CallFailure {
    CallFailure {
        status: "broken output".to_string(),
        message,
        discard: true,
    }
}

impl Guest {
    fn new(pre: &InstancePre<Limiter>, limits: WasmLimits) -> wasmtime::Result<Guest> {
        let mut store = Store::new(pre.module().engine(), Limiter::new(limits, 1));
        store.limiter(|l| l);
        store.set_epoch_deadline(limits.ticks());
        let instance = pre.instantiate(&mut store)?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| wasmtime::Error::msg("the module exports no memory named `memory`"))?;
        let f = |store: &mut Store<Limiter>, name: &str| {
            instance
                .get_func(&mut *store, name)
                .ok_or_else(|| wasmtime::Error::msg(format!("missing export `{name}`")))
        };
        macro_rules! typed {
            ($name:expr) => {
                f(&mut store, $name)?.typed(&store).map_err(|e| {
                    wasmtime::Error::msg(format!("export `{}` has the wrong type: {e}", $name))
                })?
            };
        }
        let api = Api {
            alloc: typed!(symbols::ALLOC),
            free: typed!(symbols::FREE),
            init: typed!(symbols::INIT),
            process: typed!(symbols::PROCESS),
            output_ptr: typed!(symbols::OUTPUT_PTR),
            output_len: typed!(symbols::OUTPUT_LEN),
            error_ptr: typed!(symbols::ERROR_PTR),
            error_len: typed!(symbols::ERROR_LEN),
            destroy: typed!(symbols::DESTROY),
            info_ptr: typed!(symbols::INFO_PTR),
            info_len: typed!(symbols::INFO_LEN),
        };
        Ok(Guest {
            store,
            memory,
            api,
            limits,
        })
    }

    /// Arms the time limit for the next call.
    fn arm(&mut self) {
        self.store.set_epoch_deadline(self.limits.ticks());
    }

    /// `len` bytes of guest memory at `ptr`, or why not.
    fn read(&self, ptr: i32, len: i32, what: &str) -> std::result::Result<&[u8], String> {
        let (p, n) = (ptr as u32 as usize, len as u32 as usize);
        self.memory
            .data(&self.store)
            .get(p..p.saturating_add(n))
            .ok_or_else(|| {
                format!(
                    "{what} at {p} of {n} bytes is outside the plugin's memory ({} bytes)",
                    self.memory.data_size(&self.store)
                )
            })
    }

    /// Copies `data` into fresh guest memory (`sluice_alloc`); returns the address.
    fn put(&mut self, data: &[u8]) -> std::result::Result<i32, CallFailure> {
        self.arm();
        let len = i32::try_from(data.len().max(1))
            .map_err(|_| broken(format!("{} bytes do not fit a wasm32 plugin", data.len())))?;
        let ptr = self
            .api
            .alloc
            .call(&mut self.store, len)
            .map_err(|e| classify(&e, &self.store, &self.limits))?;
        if ptr == 0 {
            return Err(CallFailure {
                status: "memory limit".to_string(),
                message: format!(
                    "the plugin could not allocate {len} bytes (limit {} bytes)",
                    self.limits.memory_bytes
                ),
                discard: true,
            });
        }
        let start = ptr as u32 as usize;
        let mem = self.memory.data_mut(&mut self.store);
        let dst = mem
            .get_mut(start..start + data.len())
            .ok_or_else(|| broken(format!("sluice_alloc returned {start}, outside its memory")))?;
        dst.copy_from_slice(data);
        Ok(ptr)
    }

    fn message(&mut self, handle: i32) -> String {
        self.arm();
        let ptr = self.api.error_ptr.call(&mut self.store, handle);
        let len = self.api.error_len.call(&mut self.store, handle);
        match (ptr, len) {
            (Ok(p), Ok(n)) => {
                match self.read(p, n.clamp(0, MAX_MESSAGE as i32), "the error message") {
                    Ok(bytes) => sluice_plugin_host::plugin_message(bytes),
                    Err(e) => format!("(unreadable error message: {e})"),
                }
            }
            _ => "(no error message: the plugin trapped while giving it)".to_string(),
        }
    }
}

impl WasmPlugin {
    /// Loads a `.wasm` or `.wat` file (a core module or a component) with default options.
    pub fn load(path: impl AsRef<Path>) -> Result<Arc<WasmPlugin>> {
        WasmPlugin::load_with(path, &WasmOptions::default())
    }

    /// Loads a `.wasm` or `.wat` file: compiles it (or takes it from the cache), refuses
    /// imports, checks the ABI version (a core module) or the world (a component) before
    /// anything else, then reads the metadata. Its header says which it is: a core module
    /// (`sdk/ABI.md`) or a component (`sdk/WIT.md`).
    pub fn load_with(path: impl AsRef<Path>, options: &WasmOptions) -> Result<Arc<WasmPlugin>> {
        let path = path.as_ref().to_path_buf();
        let load = |message: String| Error::Load {
            path: path.clone(),
            message,
        };
        let bytes = std::fs::read(&path).map_err(|e| load(e.to_string()))?;
        let cache_dir = match &options.cache_dir {
            Some(dir) => dir.clone(),
            None => default_cache_dir(),
        };
        let binary = wat::parse_bytes(&bytes).map_err(|e| load(format!("{e:#}")))?;
        let started = Instant::now();
        if is_component(&binary) {
            let (component, cache) = compile_component(engine(), &binary, cache_dir.as_deref())
                .map_err(|e| load(format!("{e:#}")))?;
            let compile_seconds = started.elapsed().as_secs_f64();
            let (pre, info) = ComponentPre::new(&path, &component, options.limits)?;
            return Ok(Arc::new(WasmPlugin {
                path,
                info,
                pre: Pre::Component(pre),
                limits: options.limits,
                cache,
                compile_seconds,
            }));
        }
        let (module, cache) =
            compile(engine(), &bytes, cache_dir.as_deref()).map_err(|e| load(format!("{e:#}")))?;
        let compile_seconds = started.elapsed().as_secs_f64();
        WasmPlugin::from_module(path, module, cache, compile_seconds, options.limits)
    }

    fn from_module(
        path: PathBuf,
        module: Module,
        cache: CacheOutcome,
        compile_seconds: f64,
        limits: WasmLimits,
    ) -> Result<Arc<WasmPlugin>> {
        let load = |message: String| Error::Load {
            path: path.clone(),
            message,
        };
        if let Some(import) = module.imports().next() {
            return Err(load(format!(
                "the module imports `{}::{}`; plugins get no imports (no WASI: no files, \
                 network, clock or environment)",
                import.module(),
                import.name()
            )));
        }
        let exports: Vec<String> = module.exports().map(|e| e.name().to_string()).collect();
        let has = |name: &str| exports.iter().any(|e| e == name);
        if !has(symbols::ABI_VERSION) {
            return Err(abi::missing_symbol(&path, symbols::ABI_VERSION));
        }
        let linker = Linker::<Limiter>::new(module.engine());
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| load(format!("{e:#}")))?;
        // A probe instance: the version first, then every symbol, then the metadata.
        let mut store = Store::new(module.engine(), Limiter::new(limits, 1));
        store.limiter(|l| l);
        store.set_epoch_deadline(limits.ticks());
        let instance = pre
            .instantiate(&mut store)
            .map_err(|e| load(format!("cannot instantiate: {e:#}")))?;
        let version = instance
            .get_typed_func::<(), i32>(&mut store, symbols::ABI_VERSION)
            .map_err(|e| load(format!("`{}`: {e:#}", symbols::ABI_VERSION)))?
            .call(&mut store, ())
            .map_err(|e| load(format!("`{}` trapped: {e:#}", symbols::ABI_VERSION)))?;
        abi::check_version(&path, version as u32)?;
        abi::check_symbols(&path, has)?;
        drop(store);
        let mut guest = Guest::new(&pre, limits).map_err(|e| load(format!("{e:#}")))?;
        guest.arm();
        let ptr = guest.api.info_ptr.call(&mut guest.store, ());
        let len = guest.api.info_len.call(&mut guest.store, ());
        let (ptr, len) = match (ptr, len) {
            (Ok(p), Ok(n)) => (p, n),
            (Err(e), _) | (_, Err(e)) => {
                return Err(load(format!("the metadata call trapped: {e:#}")));
            }
        };
        let json = guest
            .read(ptr, len, "the metadata")
            .map_err(|e| Error::Info {
                path: path.clone(),
                message: e,
            })?
            .to_vec();
        let info = metadata::read_info(&path, &json, "module")?;
        Ok(Arc::new(WasmPlugin {
            path,
            info,
            pre: Pre::Module(pre),
            limits,
            cache,
            compile_seconds,
        }))
    }

    /// The plugin's metadata.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which kind of binary it is: a core module or a component, and of which world.
    pub fn format(&self) -> WasmFormat {
        match &self.pre {
            Pre::Module(_) => WasmFormat::CoreModule,
            Pre::Component(c) => match c.world() {
                World::Map => WasmFormat::MapComponent,
                World::Filter => WasmFormat::FilterComponent,
                World::Batch => WasmFormat::BatchComponent,
            },
        }
    }

    /// The limits its instances run under.
    pub fn limits(&self) -> WasmLimits {
        self.limits
    }

    /// Whether the compiled code came from the cache.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.cache
    }

    /// Seconds spent compiling (or loading from the cache).
    pub fn compile_seconds(&self) -> f64 {
        self.compile_seconds
    }
}

impl Backend for WasmPlugin {
    fn info(&self) -> &PluginInfo {
        &self.info
    }

    fn source(&self) -> String {
        self.path.display().to_string()
    }

    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>> {
        let init = |message: String| Error::Init {
            plugin: self.info.name.clone(),
            message,
        };
        let pre = match &self.pre {
            Pre::Module(pre) => pre,
            Pre::Component(c) => {
                let instance = c.instantiate(config, self.limits).map_err(init)?;
                return Ok(Box::new(ComponentPlugin(instance)));
            }
        };
        let mut guest = Guest::new(pre, self.limits).map_err(|e| init(format!("{e:#}")))?;
        let ptr = guest.put(config).map_err(|f| init(f.message))?;
        guest.arm();
        let handle = guest
            .api
            .init
            .call(&mut guest.store, (ptr, config.len() as i32))
            .map_err(|e| init(classify(&e, &guest.store, &guest.limits).message))?;
        guest.arm();
        let _ = guest
            .api
            .free
            .call(&mut guest.store, (ptr, config.len().max(1) as i32));
        if handle == 0 {
            return Err(init(guest.message(0)));
        }
        Ok(Box::new(WasmInstance {
            guest,
            handle,
            buffer: None,
        }))
    }
}

/// One instance of a component plugin.
struct ComponentPlugin(ComponentInstance);

impl Instance for ComponentPlugin {
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure> {
        self.0.call_buffer(input, seeds, output)
    }

    fn call_features(
        &mut self,
        inputs: &[Vec<(&str, &sluice_core::Tensor)>],
        seeds: &[u64],
    ) -> Option<std::result::Result<Vec<sluice_sdk::Entry>, CallFailure>> {
        Some(self.0.call_features(inputs, seeds))
    }
}

/// One instance of a WASM plugin, with the input buffer it keeps in guest memory.
struct WasmInstance {
    guest: Guest,
    handle: i32,
    /// (address, capacity) of the guest buffer inputs are written to, reused while it fits.
    buffer: Option<(i32, usize)>,
}

impl Instance for WasmInstance {
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure> {
        // The input, then the seeds at the next 8-byte offset, in one guest buffer.
        let seeds_at = input.len().next_multiple_of(8);
        let total = seeds_at + 8 * seeds.len();
        let g = &mut self.guest;
        let ptr = match self.buffer {
            Some((ptr, cap)) if cap >= total => ptr,
            old => {
                if let Some((ptr, cap)) = old {
                    g.arm();
                    g.api
                        .free
                        .call(&mut g.store, (ptr, cap as i32))
                        .map_err(|e| classify(&e, &g.store, &g.limits))?;
                    self.buffer = None;
                }
                let cap = total.next_power_of_two().max(4096);
                let len = i32::try_from(cap)
                    .map_err(|_| broken(format!("{cap} bytes do not fit a wasm32 plugin")))?;
                g.arm();
                let ptr = g
                    .api
                    .alloc
                    .call(&mut g.store, len)
                    .map_err(|e| classify(&e, &g.store, &g.limits))?;
                if ptr == 0 {
                    return Err(CallFailure {
                        status: "memory limit".to_string(),
                        message: format!(
                            "the plugin could not allocate {cap} bytes for the input (limit {} bytes)",
                            g.limits.memory_bytes
                        ),
                        discard: true,
                    });
                }
                self.buffer = Some((ptr, cap));
                ptr
            }
        };
        let start = ptr as u32 as usize;
        {
            let mem = g.memory.data_mut(&mut g.store);
            let dst = mem.get_mut(start..start + total).ok_or_else(|| {
                broken(format!("sluice_alloc returned {start}, outside its memory"))
            })?;
            dst[..input.len()].copy_from_slice(input);
            for (i, s) in seeds.iter().enumerate() {
                dst[seeds_at + 8 * i..seeds_at + 8 * i + 8].copy_from_slice(&s.to_le_bytes());
            }
        }
        g.arm();
        let code = g
            .api
            .process
            .call(
                &mut g.store,
                (
                    self.handle,
                    ptr,
                    input.len() as i32,
                    (ptr as u32).wrapping_add(seeds_at as u32) as i32,
                    seeds.len() as i32,
                ),
            )
            .map_err(|e| classify(&e, &g.store, &g.limits))?;
        if code != status::OK {
            let message = g.message(self.handle);
            return Err(CallFailure::from_status(code, message));
        }
        g.arm();
        let out_ptr = g
            .api
            .output_ptr
            .call(&mut g.store, self.handle)
            .map_err(|e| classify(&e, &g.store, &g.limits))?;
        let out_len = g
            .api
            .output_len
            .call(&mut g.store, self.handle)
            .map_err(|e| classify(&e, &g.store, &g.limits))?;
        let bytes = g.read(out_ptr, out_len, "the output").map_err(broken)?;
        output(bytes);
        Ok(())
    }
}

impl Drop for WasmInstance {
    fn drop(&mut self) {
        let g = &mut self.guest;
        g.arm();
        // A guest that traps here is dropped with its store all the same.
        let _ = g.api.destroy.call(&mut g.store, self.handle);
    }
}
