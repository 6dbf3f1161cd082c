//! What a plugin gives back through the wire path, checked by the stage (fuzz findings of
//! `fuzz/fuzz_targets/plugin_output.rs`; their inputs are in `fuzz/regressions/plugin_output/`).

use std::sync::Arc;

use sluice_core::rng::StreamKey;
use sluice_core::{Element, ElementId, Tensor};
use sluice_plugin_host::{Backend, CallFailure, CallPath, Error, Instance, PluginStage};
use sluice_sdk::wire::{DType, Encoder};
use sluice_sdk::{Kind, PluginInfo};

/// A plugin whose every call returns `output`.
struct Fixed {
    info: PluginInfo,
    output: Vec<u8>,
}

impl Backend for Fixed {
    fn info(&self) -> &PluginInfo {
        &self.info
    }
    fn source(&self) -> String {
        "fixed".to_string()
    }
    fn instantiate(&self, _: &[u8]) -> sluice_plugin_host::Result<Box<dyn Instance>> {
        Ok(Box::new(FixedInstance(self.output.clone())))
    }
}

struct FixedInstance(Vec<u8>);

impl Instance for FixedInstance {
    fn call(
        &mut self,
        _: &[u8],
        _: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<(), CallFailure> {
        output(&self.0);
        Ok(())
    }
}

fn call(kind: Kind, output: Vec<u8>) -> sluice_plugin_host::Result<Vec<(usize, Element)>> {
    let backend = Arc::new(Fixed {
        info: PluginInfo::new("fixed", "0", kind),
        output,
    });
    let stage = PluginStage::with_path(backend, &serde_json::Value::Null, CallPath::Wire).unwrap();
    let elements: Vec<Element> = (0..3)
        .map(|i| Element::new(ElementId::new(0, i)).with("x", Tensor::scalar_i64(i as i64)))
        .collect();
    let key = StreamKey {
        seed: 1,
        epoch: 0,
        stage: 0,
    };
    let mut rngs: Vec<_> = elements.iter().map(|e| key.element_rng(e.id())).collect();
    stage.call(elements, &mut rngs)
}

fn broken(result: sluice_plugin_host::Result<Vec<(usize, Element)>>, detail: &str) {
    match result {
        Err(Error::Call {
            plugin,
            status,
            message,
            ..
        }) => {
            assert_eq!(
                (plugin.as_str(), status.as_str()),
                ("fixed", "broken output")
            );
            assert!(message.contains(detail), "{message}");
        }
        other => panic!("expected a broken output: {other:?}"),
    }
}

/// Fuzz findings `filter-kept-twice` and `filter-changed-element`: the wire path took a
/// filter's output that kept an input twice or changed it (ABI.md §7: a filter gives its
/// kept inputs unchanged, each once, as the lent path's keep flags can only say).
#[test]
fn a_filter_output_that_repeats_or_changes_an_input_is_broken() {
    let mut twice = Encoder::new(&[0, 0]);
    twice.pass_through();
    twice.pass_through();
    broken(call(Kind::Filter, twice.finish()), "input 0 twice");

    let mut changed = Encoder::new(&[1]);
    changed.element(1);
    changed.numeric("x", DType::I64, &[], &99i64.to_le_bytes());
    broken(call(Kind::Filter, changed.finish()), "output 0 has tensors");

    // What a filter may give: kept inputs once each, unchanged (or with no tensors).
    let mut kept = Encoder::new(&[0, 2]);
    kept.pass_through();
    kept.element(0);
    let out = call(Kind::Filter, kept.finish()).unwrap();
    assert_eq!(out.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [0, 2]);
    assert_eq!(out[1].1.tensor("x"), Some(&Tensor::scalar_i64(2)));

    // A flat_map may still repeat and change its inputs.
    let mut flat = Encoder::new(&[0, 0]);
    flat.pass_through();
    flat.element(1);
    flat.numeric("x", DType::I64, &[], &7i64.to_le_bytes());
    assert_eq!(call(Kind::FlatMap, flat.finish()).unwrap().len(), 2);
}
