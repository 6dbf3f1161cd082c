//! [`PluginStage`]: a plugin ready to run in pipelines, a pool of its instances and the
//! chunk function core's `map_chunks` runs, one plugin call per chunk of elements.
//!
//! What crosses the boundary: the features the plugin declares as inputs (all dense
//! features when it declares none). What comes back is merged into a copy of the input
//! element it names: returned tensors replace or add features, the rest are kept.
//!
//! Two paths ([`CallPath`]): where the backend lends (a native plugin of ABI version 2) and
//! the plugin is a `map` or `filter`, a call lends the elements' tensors in place and the
//! plugin writes its outputs into buffers the host allocated, which become the output
//! tensors as they are ([`crate::lent`]); otherwise, or when an input holds byte strings or
//! the plugin declines, the call goes through the wire format (one buffer in, one out).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rand::RngCore;
use sluice_core::prelude::{ChunkFn, MapChunksSpec};
use sluice_core::rng::ElementRng;
use sluice_core::{Dataset, Element, MapChunksStage};
use sluice_sdk::wire::decode_batch;
use sluice_sdk::{Kind, PluginInfo};

use crate::backend::{Backend, Instance, Lent};
use crate::contract::check_feature;
use crate::error::{Error, Result};
use crate::lent::{LentCall, LentOutput};
use crate::wire::{encode_selected, select, to_core};

/// An idle instance and the input buffer it last used.
type Idle = (Box<dyn Instance>, Vec<u8>);

/// Which path a stage's calls take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallPath {
    /// The lent path where it applies (a backend that [lends](Backend::lends), a `map` or
    /// `filter` plugin, no byte-string inputs, the plugin does not decline), else the wire.
    /// The default.
    #[default]
    Lent,
    /// Always the wire format (to compare the paths, or measure the wire).
    Wire,
}

/// How a stage's calls went, since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallCounts {
    /// Calls that took the lent path.
    pub lent: u64,
    /// Calls that took the wire path (declined lent calls included).
    pub wire: u64,
    /// Lent calls the plugin declined (then made through the wire).
    pub declined: u64,
}

/// A plugin ready to run in pipelines: a backend, a configuration, and a pool of instances
/// (one per worker thread in use; an instance that panicked or trapped is discarded).
pub struct PluginStage {
    backend: Arc<dyn Backend>,
    config: Vec<u8>,
    path: CallPath,
    /// Idle instances, each with the input buffer it last used (kept for its memory).
    pool: Mutex<Vec<Idle>>,
    /// Lent, wire and declined calls (see [`CallCounts`]).
    counts: [AtomicU64; 3],
    /// The name of its calls' spans in a trace: `call noise (wasm)`.
    span_name: Arc<str>,
}

impl std::fmt::Debug for PluginStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginStage")
            .field("plugin", &self.backend.info().name)
            .field("source", &self.backend.source())
            .field("path", &self.path)
            .finish()
    }
}

impl PluginStage {
    /// A stage for `backend` with `config` (a JSON object; `null` means `{}`), taking the
    /// lent path where it applies ([`CallPath::Lent`]). One instance is created now, so an
    /// invalid configuration is reported before anything runs.
    pub fn new(backend: Arc<dyn Backend>, config: &serde_json::Value) -> Result<Arc<PluginStage>> {
        PluginStage::with_path(backend, config, CallPath::Lent)
    }

    /// [`PluginStage::new`] with the calls' path chosen.
    pub fn with_path(
        backend: Arc<dyn Backend>,
        config: &serde_json::Value,
        path: CallPath,
    ) -> Result<Arc<PluginStage>> {
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
        let source = backend.source();
        let host = if source.ends_with(".wasm") || source.ends_with(".wat") {
            "wasm"
        } else {
            "native"
        };
        let span_name = Arc::from(format!("call {} ({host})", backend.info().name));
        Ok(Arc::new(PluginStage {
            backend,
            config,
            path,
            pool: Mutex::new(vec![(first, Vec::new())]),
            counts: Default::default(),
            span_name,
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

    /// The path chosen for its calls.
    pub fn path(&self) -> CallPath {
        self.path
    }

    /// Whether calls take the lent path (unless an input holds byte strings or the plugin
    /// declines): [`CallPath::Lent`], a backend that lends, a `map` or `filter` plugin.
    pub fn lends(&self) -> bool {
        self.path == CallPath::Lent
            && self.backend.lends()
            && matches!(self.info().kind, Kind::Map | Kind::Filter)
    }

    /// How its calls went so far.
    pub fn calls(&self) -> CallCounts {
        let [lent, wire, declined] = &self.counts;
        CallCounts {
            lent: lent.load(Ordering::Relaxed),
            wire: wire.load(Ordering::Relaxed),
            declined: declined.load(Ordering::Relaxed),
        }
    }

    fn count(&self, which: usize) {
        self.counts[which].fetch_add(1, Ordering::Relaxed);
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
        let mut stage = MapChunksStage::new(spec, self.chunk_fn(), label)
            .with_display_name(format!("plugin:{}", self.info().name));
        if self.one_to_one() {
            stage = stage.one_to_one();
        }
        Dataset::from_stage(stage, vec![dataset.clone()])
    }

    /// Whether the plugin gives one output per input, of that input and its seed alone: a
    /// `map` plugin (ABI §7, checked on every call). A resumed run then skips the elements
    /// before its position without calling it
    /// ([`MapChunksStage::one_to_one`](sluice_core::MapChunksStage::one_to_one)).
    pub fn one_to_one(&self) -> bool {
        self.info().kind == Kind::Map
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
    /// In a traced run ([`sluice_core::observe`]) the call is a span of category `plugin`
    /// on the calling thread.
    pub fn call(
        &self,
        elements: Vec<Element>,
        rngs: &mut [ElementRng],
    ) -> Result<Vec<(usize, Element)>> {
        let Some(tracer) = sluice_core::observe::Tracer::current() else {
            return self.call_untraced(elements, rngs);
        };
        let start = std::time::Instant::now();
        let result = self.call_untraced(elements, rngs);
        tracer.span(
            "plugin",
            &self.span_name,
            None,
            start,
            std::time::Instant::now(),
        );
        result
    }

    fn call_untraced(
        &self,
        elements: Vec<Element>,
        rngs: &mut [ElementRng],
    ) -> Result<Vec<(usize, Element)>> {
        let info = self.info();
        let seeds: Vec<u64> = rngs.iter_mut().map(|r| r.next_u64()).collect();
        let ids = || chunk_ids(&elements);
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
        let selected = match select(info, &elements) {
            Ok(selected) => selected,
            Err(e) => {
                self.give_back(instance, buf);
                return Err(e);
            }
        };
        if self.lends() && !elements.is_empty() {
            let lent = LentCall::new(info.kind, &selected, &seeds).map(|mut call| {
                let result = instance.call_lent(&mut call);
                (result, call.finish())
            });
            match lent {
                Some((Ok(Lent::Done), output)) => {
                    self.give_back(instance, buf);
                    self.count(0);
                    return self.merge_lent(elements, output);
                }
                Some((Ok(Lent::Declined(_)), _)) => self.count(2),
                Some((Err(failure), output)) => {
                    if !failure.discard {
                        self.give_back(instance, buf);
                    }
                    let mut message = failure.message;
                    if let Some(reason) = output.refused {
                        message
                            .push_str(&format!(" (the host refused an output buffer: {reason})"));
                    }
                    return Err(Error::Call {
                        plugin: self.name().to_string(),
                        status: failure.status,
                        elements: ids(),
                        message,
                    });
                }
                // A byte-string input: the wire path.
                None => {}
            }
        }
        self.count(1);
        let mut decoded = None;
        // Hosts that take tensors (the component host) get the features themselves; the
        // others a batch buffer.
        let (result, input) = match instance.call_features(&selected, &seeds) {
            Some(result) => (result.map(|entries| decoded = Some(Ok(entries))), buf),
            None => {
                let input = encode_selected(&selected, buf);
                let result =
                    instance.call(&input, &seeds, &mut |out| decoded = Some(decode_batch(out)));
                (result, input)
            }
        };
        drop(selected);
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
        // A filter keeps inputs as they are, each at most once (ABI.md §7), as on the lent
        // path, where it can only set a flag per input.
        if info.kind == Kind::Filter {
            if let Some((i, _)) = entries
                .iter()
                .enumerate()
                .find(|(_, e)| e.element.as_ref().is_some_and(|el| !el.tensors.is_empty()))
            {
                return Err(broken(format!(
                    "a filter plugin must give its kept inputs unchanged (output {i} has tensors)"
                )));
            }
            if let Some(twice) = entries.windows(2).find(|w| w[0].parent == w[1].parent) {
                return Err(broken(format!(
                    "a filter plugin keeps each input at most once (input {} twice)",
                    twice[0].parent
                )));
            }
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
            self.check_outputs(&element, &broken)?;
            out.push((parent, element));
        }
        Ok(out)
    }

    /// Checks `element` (an output, merged) against the declared outputs.
    fn check_outputs(&self, element: &Element, broken: &dyn Fn(String) -> Error) -> Result<()> {
        for f in &self.info().outputs {
            check_feature(f, element).map_err(|message| {
                broken(format!(
                    "element {}: the plugin broke its output contract: {message}",
                    element.id()
                ))
            })?;
        }
        Ok(())
    }

    /// The outputs of a lent call that returned OK: a map's tensors merged into their
    /// elements (the buffers the plugin wrote, as they are), or a filter's kept elements.
    fn merge_lent(
        &self,
        elements: Vec<Element>,
        output: LentOutput,
    ) -> Result<Vec<(usize, Element)>> {
        let ids = chunk_ids(&elements);
        let broken = |message: String| Error::Call {
            plugin: self.name().to_string(),
            status: "broken output".to_string(),
            elements: ids.clone(),
            message,
        };
        if let Some(reason) = output.refused {
            return Err(broken(format!(
                "the call returned OK after the host refused an output buffer: {reason}"
            )));
        }
        let mut out = Vec::with_capacity(elements.len());
        match self.info().kind {
            Kind::Map => {
                let mut produced: Vec<Vec<(String, sluice_core::Tensor)>> =
                    elements.iter().map(|_| Vec::new()).collect();
                for (i, name, tensor) in output.tensors {
                    produced[i].push((name, tensor));
                }
                for (i, (mut element, tensors)) in elements.into_iter().zip(produced).enumerate() {
                    for (name, tensor) in tensors {
                        element.insert(&name, tensor);
                    }
                    self.check_outputs(&element, &broken)?;
                    out.push((i, element));
                }
            }
            Kind::Filter => {
                if let Some((i, k)) = output.keep.iter().enumerate().find(|(_, k)| **k > 1) {
                    return Err(broken(format!(
                        "the filter left keep[{i}] = {k} (it must set each flag to 0 or 1)"
                    )));
                }
                for (i, (element, k)) in elements.into_iter().zip(output.keep).enumerate() {
                    if k == 1 {
                        self.check_outputs(&element, &broken)?;
                        out.push((i, element));
                    }
                }
            }
            Kind::FlatMap | Kind::Batch => unreachable!("only map and filter calls are lent"),
        }
        Ok(out)
    }
}

/// The elements of a call as an error names them: their ids, the first three and a count
/// for a longer chunk (`[0:0, 0:1, 0:2, ... 64 in all]`), not every id on one line.
pub(crate) fn chunk_ids(elements: &[Element]) -> String {
    const SHOWN: usize = 3;
    let ids: Vec<String> = elements
        .iter()
        .take(SHOWN)
        .map(|e| e.id().to_string())
        .collect();
    if elements.len() <= SHOWN {
        format!("[{}]", ids.join(", "))
    } else {
        format!("[{}, ... {} in all]", ids.join(", "), elements.len())
    }
}

#[cfg(test)]
mod chunk_ids_tests {
    use super::*;
    use sluice_core::ElementId;

    #[test]
    fn a_long_chunk_is_named_by_its_first_elements_and_a_count() {
        let elements: Vec<Element> = (0..64)
            .map(|i| Element::new(ElementId::new(0, i)))
            .collect();
        assert_eq!(chunk_ids(&elements[..2]), "[0:0, 0:1]");
        assert_eq!(chunk_ids(&elements[..3]), "[0:0, 0:1, 0:2]");
        assert_eq!(chunk_ids(&elements), "[0:0, 0:1, 0:2, ... 64 in all]");
    }
}
