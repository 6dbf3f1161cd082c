//! The component host: plugins built as WebAssembly components of the Sluice transform
//! worlds (`sdk/wit/sluice.wit`, `sdk/WIT.md`), next to the core-module ABI. The same
//! engine, compiled-code cache, memory and time limits, and errors as core modules; a
//! [`WasmPlugin`](crate::WasmPlugin) holds either.
//!
//! Tensors cross as typed lists. Inputs are lowered from the pipeline's own tensors (one
//! copy, into the guest's memory: no batch buffer is encoded); outputs are lifted into
//! `Vec`s that become the output tensors (one copy, out of it). The host types below mirror
//! the WIT types; wasmtime checks them against the component's exports at load time.

use std::path::Path;

use sluice_core::TensorData as CoreData;
use sluice_plugin_host::{CallFailure, Error, Result};
use sluice_sdk::abi::status;
use sluice_sdk::{Entry, PluginInfo};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentType, InstancePre, Lift, Linker, Lower, ResourceAny,
    TypedFunc,
};
use wasmtime::{Engine, Store};

use crate::limits::{Limiter, WasmLimits};
use crate::plugin::{broken, classify};

/// The package and version of the worlds this host supports: `1.0.0`, and any later `1.x.y`
/// (which may add interfaces and worlds but changes none; `sdk/WIT.md` §6).
pub const WORLD_PACKAGE: &str = "sluice:plugin@1.0.0";

/// The worlds' interface of shared types: a component may import it (it holds types only).
const TYPES_INTERFACE: &str = "sluice:plugin/types@1.0.0";

/// The interface named by `name` (`sluice:plugin/map-element@1.0.0`) and whether its
/// version is one this host supports (major version 1); `None` for names outside the
/// `sluice:plugin` package.
fn sluice_interface(name: &str) -> Option<(&str, bool)> {
    let (interface, version) = name.strip_prefix("sluice:plugin/")?.split_once('@')?;
    Some((interface, version.starts_with("1.")))
}

/// Whether `bytes` (a binary, after any text was parsed) is a component rather than a core
/// module: its header's version and layer (`0d 00 01 00`; a core module has `01 00 00 00`).
pub fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [0x0d, 0x00, 0x01, 0x00]
}

/// The world a component implements, by the interface it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum World {
    /// `map-transform`: `map-element`, one call per element.
    Map,
    /// `filter-transform`: `filter-element`, one call per element.
    Filter,
    /// `batch-transform`: `batch-process`, one call per chunk.
    Batch,
}

impl World {
    const ALL: [World; 3] = [World::Map, World::Filter, World::Batch];

    /// The world's name in `sluice.wit`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            World::Map => "map-transform",
            World::Filter => "filter-transform",
            World::Batch => "batch-transform",
        }
    }

    fn interface(self) -> &'static str {
        match self {
            World::Map => "map-element",
            World::Filter => "filter-element",
            World::Batch => "batch-process",
        }
    }

    /// The exported interface's full name (`sluice:plugin/map-element@1.0.0`).
    fn export(self) -> String {
        format!("sluice:plugin/{}@1.0.0", self.interface())
    }

    fn call(self) -> &'static str {
        match self {
            World::Map => "[method]instance.map",
            World::Filter => "[method]instance.keep",
            World::Batch => "[method]instance.process",
        }
    }
}

// The host's mirror of the WIT types. Inputs borrow; outputs own.

#[derive(ComponentType, Lower)]
#[component(variant)]
enum DataIn<'a> {
    #[component(name = "u8")]
    U8(&'a [u8]),
    #[component(name = "i32")]
    I32(&'a [i32]),
    #[component(name = "i64")]
    I64(&'a [i64]),
    #[component(name = "f32")]
    F32(&'a [f32]),
    #[component(name = "f64")]
    F64(&'a [f64]),
    #[component(name = "bytes")]
    Bytes(Vec<&'a [u8]>),
}

#[derive(ComponentType, Lower)]
#[component(record)]
struct TensorIn<'a> {
    name: &'a str,
    shape: Vec<u64>,
    data: DataIn<'a>,
}

#[derive(ComponentType, Lift)]
#[component(variant)]
enum DataOut {
    #[component(name = "u8")]
    U8(Vec<u8>),
    #[component(name = "i32")]
    I32(Vec<i32>),
    #[component(name = "i64")]
    I64(Vec<i64>),
    #[component(name = "f32")]
    F32(Vec<f32>),
    #[component(name = "f64")]
    F64(Vec<f64>),
    #[component(name = "bytes")]
    Bytes(Vec<Vec<u8>>),
}

#[derive(ComponentType, Lift)]
#[component(record)]
struct TensorOut {
    name: String,
    shape: Vec<u64>,
    data: DataOut,
}

#[derive(ComponentType, Lift)]
#[component(variant)]
enum ErrorOut {
    #[component(name = "invalid-input")]
    InvalidInput(String),
    #[component(name = "plugin-error")]
    PluginError(String),
    #[component(name = "invalid-config")]
    InvalidConfig(String),
}

#[derive(ComponentType, Lift)]
#[component(record)]
struct OutputOut {
    parent: u32,
    element: Option<Vec<TensorOut>>,
}

#[allow(dead_code)] // made by `Lift`
#[derive(ComponentType, Lift, Clone, Copy)]
#[component(enum)]
#[repr(u8)]
enum DtypeOut {
    #[component(name = "u8")]
    U8,
    #[component(name = "i32")]
    I32,
    #[component(name = "i64")]
    I64,
    #[component(name = "f32")]
    F32,
    #[component(name = "f64")]
    F64,
    #[component(name = "bytes")]
    Bytes,
}

#[allow(dead_code)] // made by `Lift`
#[derive(ComponentType, Lift, Clone, Copy, PartialEq, Eq)]
#[component(enum)]
#[repr(u8)]
enum KindOut {
    #[component(name = "map")]
    Map,
    #[component(name = "filter")]
    Filter,
    #[component(name = "flat-map")]
    FlatMap,
    #[component(name = "batch")]
    Batch,
}

#[derive(ComponentType, Lift)]
#[component(record)]
struct FeatureOut {
    name: String,
    dtype: Option<DtypeOut>,
    rank: Option<u8>,
}

#[derive(ComponentType, Lift)]
#[component(record)]
struct InfoOut {
    name: String,
    version: String,
    kind: KindOut,
    description: String,
    inputs: Vec<FeatureOut>,
    outputs: Vec<FeatureOut>,
}

/// The failure of an `error` the plugin returned, in the words the core ABI's SDK uses.
fn plugin_failure(e: ErrorOut) -> CallFailure {
    match e {
        ErrorOut::InvalidInput(m) => {
            CallFailure::from_status(status::INVALID_INPUT, format!("invalid input: {m}"))
        }
        ErrorOut::PluginError(m) => CallFailure::from_status(status::PLUGIN_ERROR, m),
        ErrorOut::InvalidConfig(m) => CallFailure::from_status(
            status::INVALID_CONFIG,
            format!("invalid configuration: {m}"),
        ),
    }
}

fn feature(f: FeatureOut) -> sluice_sdk::Feature {
    use sluice_sdk::DType;
    sluice_sdk::Feature {
        name: f.name,
        dtype: f.dtype.map(|d| match d {
            DtypeOut::U8 => DType::U8,
            DtypeOut::I32 => DType::I32,
            DtypeOut::I64 => DType::I64,
            DtypeOut::F32 => DType::F32,
            DtypeOut::F64 => DType::F64,
            DtypeOut::Bytes => DType::Bytes,
        }),
        rank: f.rank,
    }
}

/// The export indices of one component's world, found once at load.
#[derive(Clone, Copy)]
struct Exports {
    info: ComponentExportIndex,
    create: ComponentExportIndex,
    call: ComponentExportIndex,
}

/// A loaded component, pre-linked with no imports.
pub(crate) struct ComponentPre {
    pre: InstancePre<Limiter>,
    world: World,
    exports: Exports,
    /// For a component that imports WASI, the label of its log lines.
    wasi: Option<String>,
}

/// How many core instances a component may make (its module and the shims wit-component
/// adds).
const MAX_CORE_INSTANCES: usize = 16;

/// A store for one instance; with the sandboxed WASI of `wasi` (the plugin's label in the
/// log) for a component that imports it.
fn new_store(engine: &Engine, limits: WasmLimits, wasi: Option<&str>) -> Store<Limiter> {
    let mut limiter = Limiter::new(limits, MAX_CORE_INSTANCES);
    limiter.wasi = wasi.map(|label| Box::new(crate::wasi::Sandbox::new(label)));
    let mut store = Store::new(engine, limiter);
    store.limiter(|l| l);
    store.set_epoch_deadline(limits.ticks());
    store
}

impl ComponentPre {
    /// Checks `component` (from the file at `path`): no imports, exactly one of the worlds'
    /// interfaces exported, in this host's version, with the right types; then reads its
    /// metadata from a probe instance.
    pub(crate) fn new(
        path: &Path,
        component: &Component,
        limits: WasmLimits,
    ) -> Result<(ComponentPre, PluginInfo)> {
        let load = |message: String| Error::Load {
            path: path.to_path_buf(),
            message,
        };
        let engine = component.engine();
        let ty = component.component_type();
        // Imports allowed: the worlds' `types` interface, which holds types only (no functions
        // or resources: nothing to call), and the sandboxed WASI 0.2 of src/wasi.rs. Everything
        // else is refused.
        let mut refused = Vec::new();
        let mut wasi = false;
        for (name, item) in ty.imports(engine) {
            let types_only = match &item.ty {
                ComponentItem::ComponentInstance(instance) => instance
                    .exports(engine)
                    .all(|(_, item)| matches!(item.ty, ComponentItem::Type(_))),
                _ => false,
            };
            if types_only && sluice_interface(name) == Some(("types", true)) {
                continue;
            }
            // WASI 0.2, sandboxed (src/wasi.rs): what Python's and JavaScript's runtimes
            // import.
            if crate::wasi::provides(name) {
                wasi = true;
                continue;
            }
            refused.push(format!("`{name}`"));
        }
        if !refused.is_empty() {
            return Err(load(crate::wasi::refused(&refused, TYPES_INTERFACE)));
        }
        let exports: Vec<String> = ty
            .exports(engine)
            .map(|(name, _)| name.to_string())
            .collect();
        // Each world's interface under its name in any 1.x version (the types are checked
        // below, structurally).
        let worlds: Vec<(World, &str)> = World::ALL
            .into_iter()
            .filter_map(|w| {
                exports
                    .iter()
                    .find(|e| sluice_interface(e) == Some((w.interface(), true)))
                    .map(|e| (w, e.as_str()))
            })
            .collect();
        let (world, export) = match worlds.as_slice() {
            [one] => *one,
            [] => {
                let other = exports
                    .iter()
                    .find(|e| sluice_interface(e).is_some_and(|(_, supported)| !supported));
                return Err(load(match other {
                    Some(other) => format!(
                        "the component exports `{other}`, of another version of the Sluice \
                         worlds; this host supports {WORLD_PACKAGE} (sdk/WIT.md)"
                    ),
                    None => format!(
                        "not a Sluice component: it exports none of the interfaces of the \
                         worlds of {WORLD_PACKAGE} ({}); its exports: {exports:?}",
                        World::ALL
                            .iter()
                            .map(|w| format!("`{}` for `{}`", w.export(), w.name()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }));
            }
            many => {
                return Err(load(format!(
                    "the component exports the interfaces of several worlds ({}); a plugin \
                     implements one",
                    many.iter()
                        .map(|(w, _)| w.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        let index = |instance: Option<&ComponentExportIndex>, name: &str| {
            component.get_export_index(instance, name).ok_or_else(|| {
                load(format!(
                    "the component lacks `{name}`, which the `{}` world exports",
                    world.name()
                ))
            })
        };
        let interface = index(None, export)?;
        let exports = Exports {
            info: index(None, "info")?,
            create: index(Some(&interface), "[static]instance.create")?,
            call: index(Some(&interface), world.call())?,
        };
        let mut linker = Linker::<Limiter>::new(engine);
        for (name, _) in ty.imports(engine) {
            // The types interface (checked above): nothing to provide but its name.
            if sluice_interface(name) == Some(("types", true)) {
                linker.instance(name).map_err(|e| load(format!("{e:#}")))?;
            }
        }
        if wasi {
            crate::wasi::add_to_linker(&mut linker).map_err(|e| load(format!("{e:#}")))?;
        }
        let wasi = wasi.then(|| crate::wasi::label(path));
        let pre = linker
            .instantiate_pre(component)
            .map_err(|e| load(format!("{e:#}")))?;
        let me = ComponentPre {
            pre,
            world,
            exports,
            wasi,
        };
        // A probe instance: the types of every export, then the metadata.
        let mut store = new_store(engine, limits, me.wasi.as_deref());
        let instance = me
            .pre
            .instantiate(&mut store)
            .map_err(|e| load(format!("cannot instantiate: {e:#}")))?;
        let typed =
            |e: wasmtime::Error| load(format!("the `{}` world's types: {e:#}", world.name()));
        instance
            .get_typed_func::<(&str,), (std::result::Result<ResourceAny, ErrorOut>,)>(
                &mut store,
                &me.exports.create,
            )
            .map_err(typed)?;
        let call = instance
            .get_func(&mut store, me.exports.call)
            .ok_or_else(|| load(format!("the component lacks `{}`", world.call())))?;
        match world {
            World::Map => call.typed::<MapParams<'_>, MapResults>(&store).map(drop),
            World::Filter => call.typed::<MapParams<'_>, FilterResults>(&store).map(drop),
            World::Batch => call
                .typed::<BatchParams<'_>, BatchResults>(&store)
                .map(drop),
        }
        .map_err(typed)?;
        let info_fn = instance
            .get_typed_func::<(), (InfoOut,)>(&mut store, &me.exports.info)
            .map_err(typed)?;
        let (info,) = info_fn
            .call(&mut store, ())
            .map_err(|e| load(format!("`info` trapped: {e:#}")))?;
        let kind = match info.kind {
            KindOut::Map => sluice_sdk::Kind::Map,
            KindOut::Filter => sluice_sdk::Kind::Filter,
            KindOut::FlatMap => sluice_sdk::Kind::FlatMap,
            KindOut::Batch => sluice_sdk::Kind::Batch,
        };
        let required = match world {
            World::Map => Some(KindOut::Map),
            World::Filter => Some(KindOut::Filter),
            World::Batch => None,
        };
        if required.is_some_and(|k| k != info.kind) {
            return Err(Error::Info {
                path: path.to_path_buf(),
                message: format!(
                    "a `{}` component must declare kind {:?}, this one declares {kind:?}",
                    world.name(),
                    match world {
                        World::Map => sluice_sdk::Kind::Map,
                        _ => sluice_sdk::Kind::Filter,
                    }
                ),
            });
        }
        let info = PluginInfo {
            abi_version: sluice_sdk::abi::ABI_VERSION,
            name: info.name,
            version: info.version,
            kind,
            description: info.description,
            inputs: info.inputs.into_iter().map(feature).collect(),
            outputs: info.outputs.into_iter().map(feature).collect(),
        };
        Ok((me, info))
    }

    /// The world the component implements.
    pub(crate) fn world(&self) -> World {
        self.world
    }

    /// A new instance for `config` (JSON bytes): a store of its own with `limits`, the
    /// component instantiated, and the plugin's `create`. `Err` is the failure's message.
    pub(crate) fn instantiate(
        &self,
        config: &[u8],
        limits: WasmLimits,
    ) -> std::result::Result<ComponentInstance, String> {
        let mut store = new_store(self.pre.engine(), limits, self.wasi.as_deref());
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(&e, &store, &limits).message)?;
        let create = instance
            .get_typed_func::<(&str,), (std::result::Result<ResourceAny, ErrorOut>,)>(
                &mut store,
                &self.exports.create,
            )
            .map_err(|e| format!("{e:#}"))?;
        let call = instance
            .get_func(&mut store, self.exports.call)
            .ok_or_else(|| format!("the component lacks `{}`", self.world.call()))?;
        let config = std::str::from_utf8(config)
            .map_err(|e| format!("the configuration is not UTF-8: {e}"))?;
        store.set_epoch_deadline(limits.ticks());
        let (made,) = create
            .call(&mut store, (config,))
            .map_err(|e| classify(&e, &store, &limits).message)?;
        let handle = made.map_err(|e| plugin_failure(e).message)?;
        Ok(ComponentInstance {
            store,
            world: self.world,
            call,
            handle: Some(handle),
            limits,
        })
    }
}

type MapParams<'a> = (ResourceAny, &'a [TensorIn<'a>], u64);
type MapResults = (std::result::Result<Vec<TensorOut>, ErrorOut>,);
type FilterResults = (std::result::Result<bool, ErrorOut>,);
type BatchParams<'a> = (ResourceAny, &'a [Vec<TensorIn<'a>>], &'a [u64]);
type BatchResults = (std::result::Result<Vec<OutputOut>, ErrorOut>,);

/// One instance of a component plugin: its own store, and the resource `create` made.
pub(crate) struct ComponentInstance {
    store: Store<Limiter>,
    world: World,
    call: wasmtime::component::Func,
    handle: Option<ResourceAny>,
    limits: WasmLimits,
}

/// One tensor of the pipeline as the WIT `tensor` (borrowed: lowering copies it once).
fn core_tensor<'a>(name: &'a str, t: &'a sluice_core::Tensor) -> TensorIn<'a> {
    TensorIn {
        name,
        shape: t.shape().iter().map(|&d| d as u64).collect(),
        data: match t.data() {
            CoreData::U8(v) => DataIn::U8(v),
            CoreData::I32(v) => DataIn::I32(v),
            CoreData::I64(v) => DataIn::I64(v),
            CoreData::F32(v) => DataIn::F32(v),
            CoreData::F64(v) => DataIn::F64(v),
            CoreData::Bytes(v) => DataIn::Bytes(v.iter().map(|b| b.as_ref()).collect()),
        },
    }
}

/// One tensor of a decoded batch buffer as the WIT `tensor`.
fn sdk_tensor(t: &sluice_sdk::Tensor) -> TensorIn<'_> {
    use sluice_sdk::Data;
    TensorIn {
        name: &t.name,
        shape: t.shape.clone(),
        data: match &t.data {
            Data::U8(v) => DataIn::U8(v),
            Data::I32(v) => DataIn::I32(v),
            Data::I64(v) => DataIn::I64(v),
            Data::F32(v) => DataIn::F32(v),
            Data::F64(v) => DataIn::F64(v),
            Data::Bytes(v) => DataIn::Bytes(v.iter().map(Vec::as_slice).collect()),
        },
    }
}

/// A lifted element as the SDK's (the values move), checking each tensor's count against
/// its shape.
fn element(tensors: Vec<TensorOut>) -> std::result::Result<sluice_sdk::Element, CallFailure> {
    use sluice_sdk::Data;
    let tensors = tensors
        .into_iter()
        .map(|t| {
            let data = match t.data {
                DataOut::U8(v) => Data::U8(v),
                DataOut::I32(v) => Data::I32(v),
                DataOut::I64(v) => Data::I64(v),
                DataOut::F32(v) => Data::F32(v),
                DataOut::F64(v) => Data::F64(v),
                DataOut::Bytes(v) => Data::Bytes(v),
            };
            sluice_sdk::Tensor::new(t.name, t.shape, data).map_err(|e| broken(e.to_string()))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(sluice_sdk::Element { tensors })
}

impl ComponentInstance {
    fn trap(&self, e: &wasmtime::Error) -> CallFailure {
        classify(e, &self.store, &self.limits)
    }

    /// One call on `inputs` (each element's tensors), with one seed per element: the
    /// outputs as a decoded batch buffer would give them.
    fn run(
        &mut self,
        inputs: &[Vec<TensorIn<'_>>],
        seeds: &[u64],
    ) -> std::result::Result<Vec<Entry>, CallFailure> {
        let handle = self
            .handle
            .ok_or_else(|| broken("the instance is gone".to_string()))?;
        if inputs.len() != seeds.len() {
            return Err(CallFailure::from_status(
                status::INVALID_INPUT,
                format!(
                    "invalid input: {} elements but {} seeds",
                    inputs.len(),
                    seeds.len()
                ),
            ));
        }
        // The time limit covers the whole call: every element of a per-element world.
        self.store.set_epoch_deadline(self.limits.ticks());
        let mut entries = Vec::with_capacity(inputs.len());
        match self.world {
            World::Map => {
                let f = self
                    .call
                    .typed::<MapParams<'_>, MapResults>(&self.store)
                    .map_err(|e| broken(format!("{e:#}")))?;
                for (i, (input, &seed)) in inputs.iter().zip(seeds).enumerate() {
                    crate::wasi::reseed(self.store.data_mut(), &[seed]);
                    let (out,) = f
                        .call(&mut self.store, (handle, input, seed))
                        .map_err(|e| self.trap(&e))?;
                    let out = out.map_err(plugin_failure)?;
                    entries.push(Entry {
                        parent: i as u32,
                        element: Some(element(out)?),
                    });
                }
            }
            World::Filter => {
                let f = self
                    .call
                    .typed::<MapParams<'_>, FilterResults>(&self.store)
                    .map_err(|e| broken(format!("{e:#}")))?;
                for (i, (input, &seed)) in inputs.iter().zip(seeds).enumerate() {
                    crate::wasi::reseed(self.store.data_mut(), &[seed]);
                    let (keep,) = f
                        .call(&mut self.store, (handle, input, seed))
                        .map_err(|e| self.trap(&e))?;
                    if keep.map_err(plugin_failure)? {
                        entries.push(Entry {
                            parent: i as u32,
                            element: None,
                        });
                    }
                }
            }
            World::Batch => {
                let f: TypedFunc<BatchParams<'_>, BatchResults> = self
                    .call
                    .typed(&self.store)
                    .map_err(|e| broken(format!("{e:#}")))?;
                crate::wasi::reseed(self.store.data_mut(), seeds);
                let (outs,) = f
                    .call(&mut self.store, (handle, inputs, seeds))
                    .map_err(|e| self.trap(&e))?;
                let mut last = 0;
                for out in outs.map_err(plugin_failure)? {
                    if out.parent < last {
                        return Err(broken(format!(
                            "output parents must not decrease: {} after {last}",
                            out.parent
                        )));
                    }
                    last = out.parent;
                    entries.push(Entry {
                        parent: out.parent,
                        element: out.element.map(element).transpose()?,
                    });
                }
            }
        }
        Ok(entries)
    }

    /// A call on the pipeline's tensors ([`sluice_plugin_host::Instance::call_features`]).
    pub(crate) fn call_features(
        &mut self,
        inputs: &[Vec<(&str, &sluice_core::Tensor)>],
        seeds: &[u64],
    ) -> std::result::Result<Vec<Entry>, CallFailure> {
        let inputs: Vec<Vec<TensorIn<'_>>> = inputs
            .iter()
            .map(|e| e.iter().map(|&(name, t)| core_tensor(name, t)).collect())
            .collect();
        self.run(&inputs, seeds)
    }

    /// A call on a batch buffer ([`sluice_plugin_host::Instance::call`]): decoded here (a
    /// malformed buffer is `invalid input`, never a crash), the outputs encoded back.
    pub(crate) fn call_buffer(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure> {
        let invalid = |message: String| CallFailure::from_status(status::INVALID_INPUT, message);
        let decoded = sluice_sdk::wire::decode_batch(input).map_err(|e| invalid(e.to_string()))?;
        let mut elements = Vec::with_capacity(decoded.len());
        for (i, entry) in decoded.iter().enumerate() {
            match &entry.element {
                Some(e) => elements.push(e.tensors.iter().map(sdk_tensor).collect::<Vec<_>>()),
                None => {
                    return Err(invalid(format!(
                        "invalid input: input element {i} is a pass-through marker"
                    )));
                }
            }
        }
        let entries = self.run(&elements, seeds)?;
        let parents: Vec<u32> = entries.iter().map(|e| e.parent).collect();
        let mut enc = sluice_sdk::wire::Encoder::new(&parents);
        for e in &entries {
            match &e.element {
                Some(element) => enc.whole(element),
                None => enc.pass_through(),
            }
        }
        output(&enc.finish());
        Ok(())
    }
}

impl Drop for ComponentInstance {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.store.set_epoch_deadline(self.limits.ticks());
            // An instance that trapped cannot run its destructor: dropped with its store.
            let _ = handle.resource_drop(&mut self.store);
        }
    }
}
