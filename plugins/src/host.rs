//! What every plugin host shares, whatever runs the plugin's code (a native library here, a
//! WASM module in `sluice-wasm`): the [`Backend`] and [`Instance`] traits, the conversion of
//! pipeline elements to and from the wire format, the declared contracts, and the pipeline
//! stage ([`PluginStage`]) that calls a plugin once per chunk of elements.
//!
//! What crosses the boundary: the features the plugin declares as inputs (all dense
//! features when it declares none). What comes back is merged into a copy of the input
//! element it names: returned tensors replace or add features, the rest are kept.

use std::sync::{Arc, Mutex, PoisonError};

use rand::RngCore;
use sluice_core::rng::ElementRng;
use sluice_core::stages::map_chunks::{ChunkFn, MapChunksSpec, MapChunksStage};
use sluice_core::{DType as CoreDType, Dataset, Element, Tensor, TensorData, Value};
use sluice_sdk::abi::status;
use sluice_sdk::wire::{DType, Data, Encoder, decode_batch};
use sluice_sdk::{Config, Kind, Plugin, PluginInfo};

use crate::error::{Error, Result};

/// A loaded plugin: its metadata and a way to create instances.
pub trait Backend: Send + Sync + 'static {
    /// The metadata the plugin declared.
    fn info(&self) -> &PluginInfo;

    /// Where it was loaded from (for messages).
    fn source(&self) -> String;

    /// A new instance for `config` (JSON bytes), through `sluice_init`.
    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>>;
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    /// The status's name (`"plugin error"`, `"panic"`, `"timeout"`, `"trap"`, ...).
    pub status: String,
    /// The message.
    pub message: String,
    /// The instance must not be used again (it panicked or trapped).
    pub discard: bool,
}

impl CallFailure {
    /// A failure from an ABI status code and message.
    pub fn from_status(code: i32, message: String) -> CallFailure {
        CallFailure {
            status: status::name(code).to_string(),
            message,
            discard: code == status::PANIC || code == status::UNKNOWN_INSTANCE,
        }
    }
}

/// One instance of a plugin; the host never calls one instance from two threads at once.
pub trait Instance: Send {
    /// One `sluice_process` call: `input` is a batch buffer, `seeds` one per element;
    /// `output` is given the output buffer on success.
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure>;
}

/// An idle instance and the input buffer it last used.
type Idle = (Box<dyn Instance>, Vec<u8>);

/// A plugin ready to run in pipelines: a backend, a configuration, and a pool of instances
/// (one per worker thread in use; an instance that panicked or trapped is discarded).
pub struct PluginStage {
    backend: Arc<dyn Backend>,
    config: Vec<u8>,
    /// Idle instances, each with the input buffer it last used (kept for its memory).
    pool: Mutex<Vec<Idle>>,
}

impl std::fmt::Debug for PluginStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginStage")
            .field("plugin", &self.backend.info().name)
            .field("source", &self.backend.source())
            .finish()
    }
}

impl PluginStage {
    /// A stage for `backend` with `config` (a JSON object; `null` means `{}`). One
    /// instance is created now, so an invalid configuration is reported before anything
    /// runs.
    pub fn new(backend: Arc<dyn Backend>, config: &serde_json::Value) -> Result<Arc<PluginStage>> {
        let config = match config {
            serde_json::Value::Null => b"{}".to_vec(),
            serde_json::Value::Object(_) => config.to_string().into_bytes(),
            other => {
                return Err(Error::Config {
                    plugin: backend.info().name.clone(),
                    message: format!("expected a table, got {other}"),
                });
            }
        };
        let first = backend.instantiate(&config)?;
        Ok(Arc::new(PluginStage {
            backend,
            config,
            pool: Mutex::new(vec![(first, Vec::new())]),
        }))
    }

    /// The plugin's metadata.
    pub fn info(&self) -> &PluginInfo {
        self.backend.info()
    }

    /// Where the plugin was loaded from (its file, for a native plugin).
    pub fn source(&self) -> String {
        self.backend.source()
    }

    /// This plugin as a pipeline stage after `dataset`, one call per chunk of
    /// `spec.chunk_size` elements, on `spec.num_parallel` threads; stats show it as
    /// `plugin:NAME`.
    pub fn apply(self: &Arc<Self>, dataset: &Dataset, spec: MapChunksSpec) -> Dataset {
        let label = format!(
            "plugin {} {} ({}) config {}",
            self.info().name,
            self.info().version,
            self.backend.source(),
            String::from_utf8_lossy(&self.config)
        );
        Dataset::from_stage(
            MapChunksStage::new(spec, self.chunk_fn(), label)
                .with_display_name(format!("plugin:{}", self.info().name)),
            vec![dataset.clone()],
        )
    }

    /// The function `map_chunks` runs.
    pub fn chunk_fn(self: &Arc<Self>) -> ChunkFn {
        let me = Arc::clone(self);
        Arc::new(move |chunk, rngs| me.call(chunk, rngs).map_err(sluice_core::Error::from))
    }

    fn name(&self) -> &str {
        &self.info().name
    }

    fn give_back(&self, instance: Box<dyn Instance>, buf: Vec<u8>) {
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((instance, buf));
    }

    /// Runs one call on `elements` (one RNG each): the outputs with their input's index.
    pub fn call(
        &self,
        elements: Vec<Element>,
        rngs: &mut [ElementRng],
    ) -> Result<Vec<(usize, Element)>> {
        let info = self.info();
        let seeds: Vec<u64> = rngs.iter_mut().map(|r| r.next_u64()).collect();
        let ids = || {
            let ids: Vec<String> = elements.iter().map(|e| e.id().to_string()).collect();
            format!("[{}]", ids.join(", "))
        };
        let (mut instance, buf) = {
            let pooled = self
                .pool
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match pooled {
                Some(pair) => pair,
                None => (self.backend.instantiate(&self.config)?, Vec::new()),
            }
        };
        let input = match encode(info, &elements, buf) {
            Ok(input) => input,
            Err(e) => {
                self.give_back(instance, Vec::new());
                return Err(e);
            }
        };
        let mut decoded = None;
        let result = instance.call(&input, &seeds, &mut |out| decoded = Some(decode_batch(out)));
        match result {
            Ok(()) => self.give_back(instance, input),
            Err(failure) => {
                if !failure.discard {
                    self.give_back(instance, input);
                }
                return Err(Error::Call {
                    plugin: self.name().to_string(),
                    status: failure.status,
                    elements: ids(),
                    message: failure.message,
                });
            }
        }
        let broken = |message: String| Error::Call {
            plugin: self.name().to_string(),
            status: "broken output".to_string(),
            elements: ids(),
            message,
        };
        let entries = decoded
            .ok_or_else(|| broken("the call succeeded but gave no output".to_string()))?
            .map_err(|e| broken(e.to_string()))?;
        let n = elements.len();
        if let Some(bad) = entries.iter().find(|e| e.parent as usize >= n) {
            return Err(broken(format!(
                "an output names input {} of {n}",
                bad.parent
            )));
        }
        if info.kind == Kind::Map
            && (entries.len() != n
                || entries
                    .iter()
                    .enumerate()
                    .any(|(i, e)| e.parent as usize != i))
        {
            return Err(broken(format!(
                "a map plugin must give one output per input, in order ({} for {n})",
                entries.len()
            )));
        }
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let parent = entry.parent as usize;
            let mut element = elements[parent].clone();
            if let Some(produced) = entry.element {
                for t in produced.tensors {
                    let name = t.name.clone();
                    let tensor = to_core(t).map_err(|e| broken(format!("tensor {name:?}: {e}")))?;
                    element.insert(&name, tensor);
                }
            }
            for f in &info.outputs {
                check_feature(f, &element).map_err(|message| {
                    broken(format!(
                        "element {}: the plugin broke its output contract: {message}",
                        elements[parent].id()
                    ))
                })?;
            }
            out.push((parent, element));
        }
        Ok(out)
    }
}

/// A plugin compiled into the host process, run through the same wire format and
/// contracts as a loaded one: the reference a loaded build is compared with, and a way to
/// use a plugin crate directly as a stage.
pub struct InProcess<P: Plugin> {
    info: PluginInfo,
    _plugin: std::marker::PhantomData<fn() -> P>,
}

impl<P: Plugin> InProcess<P> {
    /// The backend for `P`.
    pub fn new() -> Arc<InProcess<P>> {
        Arc::new(InProcess {
            info: P::info(),
            _plugin: std::marker::PhantomData,
        })
    }
}

impl<P: Plugin> Backend for InProcess<P> {
    fn info(&self) -> &PluginInfo {
        &self.info
    }

    fn source(&self) -> String {
        format!("in-process {}", std::any::type_name::<P>())
    }

    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>> {
        let init = |message: String| Error::Init {
            plugin: self.info.name.clone(),
            message,
        };
        let config = Config::from_bytes(config).map_err(|e| init(e.to_string()))?;
        let plugin = P::new(&config).map_err(|e| init(e.to_string()))?;
        Ok(Box::new(InProcessInstance {
            plugin,
            info: self.info.clone(),
        }))
    }
}

struct InProcessInstance<P> {
    plugin: P,
    info: PluginInfo,
}

impl<P: Plugin> Instance for InProcessInstance<P> {
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure> {
        let plugin = &mut self.plugin;
        let info = &self.info;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sluice_sdk::process(plugin, info, input, seeds)
        })) {
            Ok(Ok(out)) => {
                output(&out);
                Ok(())
            }
            Ok(Err(e)) => Err(CallFailure::from_status(e.status(), e.to_string())),
            Err(_) => Err(CallFailure::from_status(
                status::PANIC,
                "panicked".to_string(),
            )),
        }
    }
}

fn sdk_dtype(d: CoreDType) -> DType {
    match d {
        CoreDType::U8 => DType::U8,
        CoreDType::I32 => DType::I32,
        CoreDType::I64 => DType::I64,
        CoreDType::F32 => DType::F32,
        CoreDType::F64 => DType::F64,
        CoreDType::Bytes => DType::Bytes,
    }
}

/// Checks a declared feature against an element: `Err` says what is wrong.
fn check_feature(f: &sluice_sdk::Feature, element: &Element) -> std::result::Result<(), String> {
    let t = match element.get(&f.name) {
        Some(Value::Dense(t)) => t,
        Some(Value::Ragged(_)) => {
            return Err(format!(
                "feature {:?} is ragged; plugins take dense tensors",
                f.name
            ));
        }
        None => {
            let names: Vec<&str> = element.iter().map(|(n, _)| n).collect();
            return Err(format!("missing feature {:?} (has {names:?})", f.name));
        }
    };
    if let Some(want) = f.dtype
        && sdk_dtype(t.dtype()) != want
    {
        return Err(format!(
            "feature {:?} is {}, expected {want}",
            f.name,
            sdk_dtype(t.dtype())
        ));
    }
    if let Some(rank) = f.rank
        && t.rank() != usize::from(rank)
    {
        return Err(format!(
            "feature {:?} has rank {} (shape {:?}), expected rank {rank}",
            f.name,
            t.rank(),
            t.shape()
        ));
    }
    Ok(())
}

/// The input batch buffer for `elements`: the declared input features (all dense features
/// when none are declared), after checking the input contract.
fn encode(info: &PluginInfo, elements: &[Element], buf: Vec<u8>) -> Result<Vec<u8>> {
    let contract = |e: &Element, message: String| Error::Contract {
        plugin: info.name.clone(),
        element: e.id().to_string(),
        message,
    };
    let mut size = 0;
    for e in elements {
        for f in &info.inputs {
            check_feature(f, e).map_err(|m| contract(e, m))?;
        }
        size += e.nbytes() + 64;
    }
    let parents: Vec<u32> = (0..elements.len() as u32).collect();
    let mut enc = Encoder::reusing(buf, &parents, size);
    for e in elements {
        let tensors: Vec<(&str, &Tensor)> = if info.inputs.is_empty() {
            let mut all = Vec::new();
            for (name, value) in e.iter() {
                match value {
                    Value::Dense(t) => all.push((name, t)),
                    Value::Ragged(_) => {
                        return Err(contract(
                            e,
                            format!("feature {name:?} is ragged; plugins take dense tensors"),
                        ));
                    }
                }
            }
            all
        } else {
            info.inputs
                .iter()
                .map(|f| (f.name.as_str(), e.tensor(&f.name).expect("checked above")))
                .collect()
        };
        enc.element(tensors.len() as u32);
        for (name, t) in tensors {
            write_tensor(&mut enc, name, t);
        }
    }
    Ok(enc.finish())
}

fn write_tensor(enc: &mut Encoder, name: &str, t: &Tensor) {
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    match t.data() {
        TensorData::U8(v) => enc.numeric(name, DType::U8, &shape, v),
        TensorData::I32(v) => enc.numeric(name, DType::I32, &shape, &le_bytes(v, i32::to_le_bytes)),
        TensorData::I64(v) => enc.numeric(name, DType::I64, &shape, &le_bytes(v, i64::to_le_bytes)),
        TensorData::F32(v) => enc.numeric(name, DType::F32, &shape, &le_bytes(v, f32::to_le_bytes)),
        TensorData::F64(v) => enc.numeric(name, DType::F64, &shape, &le_bytes(v, f64::to_le_bytes)),
        TensorData::Bytes(v) => enc.bytes(name, &shape, v.iter().map(|b| b.as_ref())),
    }
}

/// The values' little-endian bytes: their own memory on little-endian machines.
fn le_bytes<T: bytemuck::Pod, const N: usize>(
    values: &[T],
    f: impl Fn(T) -> [u8; N],
) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        return std::borrow::Cow::Borrowed(bytemuck::cast_slice(values));
    }
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&f(v));
    }
    std::borrow::Cow::Owned(out)
}

/// A wire tensor as a pipeline tensor (the values move, no copy).
fn to_core(t: sluice_sdk::Tensor) -> sluice_core::Result<Tensor> {
    let shape: Vec<usize> = t
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| sluice_core::Error::invalid("a dimension does not fit in usize"))?;
    let data = match t.data {
        Data::U8(v) => TensorData::U8(v.into()),
        Data::I32(v) => TensorData::I32(v.into()),
        Data::I64(v) => TensorData::I64(v.into()),
        Data::F32(v) => TensorData::F32(v.into()),
        Data::F64(v) => TensorData::F64(v.into()),
        Data::Bytes(v) => TensorData::Bytes(
            v.into_iter()
                .map(bytes::Bytes::from)
                .collect::<Vec<_>>()
                .into(),
        ),
    };
    Ok(Tensor::new(&shape, data)?)
}
